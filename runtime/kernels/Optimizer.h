//===- Optimizer.h - Gradient norm, clipping and AdamW ----------*- C++ -*-===//
//
// The end of a training step: the global gradient norm over every parameter
// gradient, clipping by that norm, and the AdamW update of fp32 master
// weights.
//
// The norm sums squares in fp64 over fixed pieces of 64 K elements (a piece
// never spans two tensors), then adds the pieces in order: the same bits
// with any thread count. Clipping reads the norm from device memory, so the
// host never waits for it between the two launches. A non-finite norm is an
// error: the trainer reports it (step, tensors) instead of training on it.
//
// AdamW, with t = step starting at 1, decoupled weight decay and bias
// correction:
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p)
//
// Registered kernels (KernelABI.h calling convention); these are variadic,
// the last buffer and the last scalar repeat together, once per tensor:
//
//   global_norm
//     buffers: out f32 norm [1], in f32 tensor [count]...
//     scalars: i64 count...
//   clip_by_global_norm
//     buffers: in f32 norm [1], inout f32 tensor [count]...
//     scalars: f64 max_norm, i64 count...
//     every tensor *= max_norm / (norm + 1e-6) when that is below 1.
//
// and one tensor per launch:
//
//   accumulate_gradient
//     buffers: inout f32 sum [count], in f32 grad [count]
//     scalars: i64 count, f64 scale, i64 micro_batch
//     sum = scale * grad for micro-batch 0, sum + scale * grad after it
//     (fp32, one rounding each): a step's gradient over its micro-batches,
//     with scale = 1 / micro-batches.
//   adamw
//     buffers: inout f32 param [count], in f32 grad [count],
//              inout f32 m [count], inout f32 v [count]
//     scalars: i64 count, f64 lr, f64 beta1, f64 beta2, f64 eps,
//              f64 weight_decay, i64 step
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_OPTIMIZER_H
#define TETRA_RUNTIME_KERNELS_OPTIMIZER_H

#include "runtime/backend/ArrayView.h"
#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cstdint>

namespace tetra::kernels {

/// sqrt(sum over tensors t, elements i < counts[t] of tensors[t][i]^2).
double globalNorm(backend::ThreadPool &pool,
                  backend::ArrayView<const float *> tensors,
                  backend::ArrayView<int64_t> counts);

/// min(1, maxNorm / (norm + 1e-6)) (PyTorch's clip_grad_norm_).
double clipFactor(double norm, double maxNorm);

/// Multiplies every tensor by clipFactor(norm, maxNorm) when it is below 1;
/// an error if `norm` is not finite.
io::Status clipByGlobalNorm(backend::ThreadPool &pool,
                            backend::ArrayView<float *> tensors,
                            backend::ArrayView<int64_t> counts, float norm,
                            double maxNorm);

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  /// 1 for the first update.
  int64_t step = 1;
};

/// One AdamW update of `count` parameters; an error for a step below 1 or
/// betas outside [0, 1).
io::Status adamw(backend::ThreadPool &pool, float *param, const float *grad,
                 float *m, float *v, int64_t count, const AdamWConfig &config);

/// sum = scale * grad when `first`, else sum + scale * grad.
void accumulateGradient(backend::ThreadPool &pool, float *sum,
                        const float *grad, int64_t count, float scale,
                        bool first);

/// Registers global_norm, clip_by_global_norm, accumulate_gradient and
/// adamw.
io::Status addOptimizerKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_OPTIMIZER_H
