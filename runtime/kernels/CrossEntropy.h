//===- CrossEntropy.h - Mean softmax cross-entropy --------------*- C++ -*-===//
//
// loss = mean over rows of logsumexp(logits[r]) - logits[r][targets[r]], for
// logits [rows, vocab] and int32 targets [rows]. The forward saves each row's
// log-sum-exp, from which the backward rebuilds the softmax:
//   dlogits = (exp(logits - lse) - onehot(targets)) * dloss / rows.
// Exponential sums and the mean are fp64 (the mean sums rows in order, so
// the loss has the same bits with any thread count).
//
// Registered kernels (KernelABI.h calling convention):
//
//   cross_entropy.forward
//     buffers: in f32 logits [rows, vocab], in i32 targets [rows],
//              out f32 loss [1], out f32 lse [rows]
//     scalars: i64 rows, i64 vocab
//   cross_entropy.backward
//     buffers: in f32 logits [rows, vocab], in i32 targets [rows],
//              in f32 lse [rows], in f32 dloss [1],
//              out f32 dlogits [rows, vocab]
//     scalars: i64 rows, i64 vocab
//
// rows and vocab must be positive. A target outside [0, vocab) is an error
// that names its position; nothing is written then. dlogits may alias logits.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_CROSSENTROPY_H
#define TETRA_RUNTIME_KERNELS_CROSSENTROPY_H

#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cstdint>

namespace tetra::kernels {

/// *loss and lse from logits and targets.
io::Status crossEntropyForward(backend::ThreadPool &pool, const float *logits,
                               const int32_t *targets, float *loss, float *lse,
                               int64_t rows, int64_t vocab);

/// dlogits from the forward's inputs, its lse, and the loss's gradient.
io::Status crossEntropyBackward(backend::ThreadPool &pool, const float *logits,
                                const int32_t *targets, const float *lse,
                                float dloss, float *dlogits, int64_t rows,
                                int64_t vocab);

/// Registers cross_entropy.forward and cross_entropy.backward.
io::Status addCrossEntropyKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_CROSSENTROPY_H
