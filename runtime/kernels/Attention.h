//===- Attention.h - Causal grouped-query attention -------------*- C++ -*-===//
//
// softmax(q k^T / sqrt(head_dim), causal) v for every (batch, head), with
// grouped-query heads: query head h reads key/value head h / (heads /
// kv_heads). Scores and the softmax are fp32 with the row maximum subtracted;
// exponential sums are fp64.
//
// Saved for the backward: the forward writes, besides `out`,
//   lse [batch, heads, seq]  = log(sum_j exp(s_ij)) of each query row i's
//                              scaled scores s_ij = q_i . k_j / sqrt(head_dim),
// so the backward recomputes P_ij = exp(s_ij - lse_i) without a second
// softmax. It also needs q, k, v, out and dout, and writes
//   delta [batch, heads, seq] = dout_i . out_i (a by-product: rowsum(P * dP)).
//
// Parallel and deterministic without atomics: the forward and dq are
// parallel over query rows; dk and dv over key rows, each summing over its
// query heads and rows in order (recomputing P, which costs one more dot
// product per score but never shares an output between threads).
//
// Registered kernels (KernelABI.h calling convention):
//
//   attention.forward
//     buffers: in f32 q [batch, seq, heads * head_dim],
//              in f32 k [batch, seq, kv_heads * head_dim],
//              in f32 v [batch, seq, kv_heads * head_dim],
//              out f32 out [batch, seq, heads * head_dim],
//              out f32 lse [batch, heads, seq]
//   attention.backward
//     buffers: in f32 q, in f32 k, in f32 v, in f32 out, in f32 lse,
//              in f32 dout [batch, seq, heads * head_dim],
//              out f32 dq [batch, seq, heads * head_dim],
//              out f32 dk [batch, seq, kv_heads * head_dim],
//              out f32 dv [batch, seq, kv_heads * head_dim],
//              out f32 delta [batch, heads, seq]
//   scalars (both): i64 batch, i64 seq, i64 heads, i64 kv_heads,
//              i64 head_dim, i64 bf16_operands
//
// heads must be a multiple of kv_heads. No buffer may alias another.
//
// bf16_operands (0 or 1; the policy's `attention = bf16`) picks what the
// products see — as PyTorch's BF16 flash attention does, but with one
// definition for every target:
//   0  the fp32 values as they are (fp32 products, fp32 accumulation);
//   1  every operand of every product rounded to BF16 (nearest even), fp32
//      accumulation of the (exact) products: q, k, v and dout as read;
//      P_ij = exp(s_ij - lse_i) rounded, in the forward (out = sum_j
//      P_ij v_j, lse from the unrounded scores) and the backward alike, so
//      both see the same P whatever a target's tiling; dS_ij = P_ij (dP_ij -
//      delta_i) from the unrounded P, rounded. delta = dout . out from the
//      fp32 values in both modes.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_ATTENTION_H
#define TETRA_RUNTIME_KERNELS_ATTENTION_H

#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cstdint>

namespace tetra::kernels {

struct AttentionShape {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  /// Every product's operands rounded to BF16 (see above).
  bool bf16Operands = false;
};

/// out and lse from q, k, v.
void attentionForward(backend::ThreadPool &pool, const float *q, const float *k,
                      const float *v, float *out, float *lse,
                      const AttentionShape &shape);

/// dq, dk, dv and delta (all overwritten) from the forward's inputs, its out
/// and lse, and dout.
void attentionBackward(backend::ThreadPool &pool, const float *q,
                       const float *k, const float *v, const float *out,
                       const float *lse, const float *dout, float *dq,
                       float *dk, float *dv, float *delta,
                       const AttentionShape &shape);

/// Registers attention.forward and attention.backward.
io::Status addAttentionKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_ATTENTION_H
