//===- Embedding.h - Token embedding lookup and its gradient ----*- C++ -*-===//
//
// Forward gathers table rows by token id; backward scatter-adds the output
// gradient into the table gradient. The scatter is parallel over the table's
// columns: each thread owns a range of columns of every row and walks the
// tokens in order, so there are no races and no atomics, and the sums happen
// in token order whatever the thread count.
//
// Registered kernels (KernelABI.h calling convention):
//
//   embedding.forward
//     buffers: in f32 table [vocab, dim], in i32 tokens [count],
//              out f32 out [count, dim]
//     scalars: i64 count, i64 vocab, i64 dim
//   embedding.backward
//     buffers: in i32 tokens [count], in f32 dout [count, dim],
//              inout f32 dtable [vocab, dim]
//     scalars: i64 count, i64 vocab, i64 dim, i64 accumulate
//     dtable = (accumulate ? dtable : 0) + scatter-add of dout by token.
//
// A token outside [0, vocab) is an error (nothing is written).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_EMBEDDING_H
#define TETRA_RUNTIME_KERNELS_EMBEDDING_H

#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cstdint>

namespace tetra::kernels {

/// out[n, :] = table[tokens[n], :].
io::Status embeddingForward(backend::ThreadPool &pool, const float *table,
                            const int32_t *tokens, float *out, int64_t count,
                            int64_t vocab, int64_t dim);

/// dtable[tokens[n], :] += dout[n, :] for n in order, after zeroing dtable
/// unless `accumulate`.
io::Status embeddingBackward(backend::ThreadPool &pool, const int32_t *tokens,
                             const float *dout, float *dtable, int64_t count,
                             int64_t vocab, int64_t dim, bool accumulate);

/// An error naming the first id outside [0, limit) and its position; `what`
/// names the ids in the message ("token", "target").
io::Status checkIds(const int32_t *ids, int64_t count, int64_t limit,
                    const char *what);

/// Registers embedding.forward and embedding.backward.
io::Status addEmbeddingKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_EMBEDDING_H
