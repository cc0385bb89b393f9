//===- Rope.h - Rotary position embedding -----------------------*- C++ -*-===//
//
// x is [batch, seq, heads * headDim]; in every head the pair
// (x[2i], x[2i+1]) at position p (0 .. seq-1) is rotated by the angle
// p * theta^(-2i / headDim). A rotation is orthogonal, so the backward is the
// rotation by the negative angle. The cosines and sines are computed in fp64
// and rounded once; the table for the last (seq, headDim, theta) is kept, as
// every layer's q and k use the same one.
//
// Registered kernels (KernelABI.h calling convention):
//
//   rope.forward
//     buffers: in f32 x [batch, seq, heads * head_dim],
//              out f32 y [batch, seq, heads * head_dim]
//     scalars: i64 batch, i64 seq, i64 heads, i64 head_dim, f64 theta
//   rope.backward
//     buffers: in f32 dy [batch, seq, heads * head_dim],
//              out f32 dx [batch, seq, heads * head_dim]
//     scalars: i64 batch, i64 seq, i64 heads, i64 head_dim, f64 theta
//
// head_dim must be even and theta positive. y may be x (in place).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_ROPE_H
#define TETRA_RUNTIME_KERNELS_ROPE_H

#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cmath>
#include <cstdint>

namespace tetra::kernels {

/// The rotation by +angle (forward) or -angle (backward, `inverse`).
/// Pair `pair`'s rotation at `position`: cos and sin of position *
/// theta^(-2 pair / headDim), in fp64, rounded to fp32. The one definition
/// that the CPU kernel's table and the GPU kernels' constant tables share.
inline void ropeCosSin(int64_t position, int64_t pair, int64_t headDim,
                       double theta, float &cosine, float &sine) {
  const double frequency =
      std::pow(theta, -2.0 * pair / static_cast<double>(headDim));
  const double angle = static_cast<double>(position) * frequency;
  cosine = static_cast<float>(std::cos(angle));
  sine = static_cast<float>(std::sin(angle));
}

void rope(backend::ThreadPool &pool, const float *x, float *y, int64_t batch,
          int64_t seq, int64_t heads, int64_t headDim, double theta,
          bool inverse);

inline void ropeForward(backend::ThreadPool &pool, const float *x, float *y,
                        int64_t batch, int64_t seq, int64_t heads,
                        int64_t headDim, double theta) {
  rope(pool, x, y, batch, seq, heads, headDim, theta, /*inverse=*/false);
}

inline void ropeBackward(backend::ThreadPool &pool, const float *dy, float *dx,
                         int64_t batch, int64_t seq, int64_t heads,
                         int64_t headDim, double theta) {
  rope(pool, dy, dx, batch, seq, heads, headDim, theta, /*inverse=*/true);
}

/// Registers rope.forward and rope.backward.
io::Status addRopeKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_ROPE_H
