//===- Elementwise.h - SiLU, add, sub, mul and scale ------------*- C++ -*-===//
//
// Same-shape elementwise ops on flat fp32 arrays of `count` elements (the
// dialect's silu, add, sub, mul and scale have no broadcasting). Outputs may
// alias inputs (in place).
//
// Registered kernels (KernelABI.h calling convention); every tensor is
// [count], every kernel takes the scalar i64 count (scale also f64 factor):
//
//   silu.forward     in f32 x, out f32 y
//   silu.backward    in f32 x, in f32 dy, out f32 dx
//   add.forward      in f32 a, in f32 b, out f32 out
//   add.backward     in f32 dout, out f32 da, out f32 db
//   sub.forward      in f32 a, in f32 b, out f32 out
//   sub.backward     in f32 dout, out f32 da, out f32 db     (db = -dout)
//   mul.forward      in f32 a, in f32 b, out f32 out
//   mul.backward     in f32 a, in f32 b, in f32 dout, out f32 da, out f32 db
//   scale.forward    in f32 x, out f32 y;   i64 count, f64 factor
//   scale.backward   in f32 dy, out f32 dx; i64 count, f64 factor
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_ELEMENTWISE_H
#define TETRA_RUNTIME_KERNELS_ELEMENTWISE_H

#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cstdint>

namespace tetra::kernels {

/// y = x * sigmoid(x).
void siluForward(backend::ThreadPool &pool, const float *x, float *y,
                 int64_t count);
/// dx = dy * (s + x * s * (1 - s)), s = sigmoid(x).
void siluBackward(backend::ThreadPool &pool, const float *x, const float *dy,
                  float *dx, int64_t count);

enum class BinaryOp { Add, Sub, Mul };

/// out = a op b.
void binaryForward(backend::ThreadPool &pool, BinaryOp op, const float *a,
                   const float *b, float *out, int64_t count);
/// da, db for out = a op b. `a` and `b` are read only for Mul (may be null
/// otherwise).
void binaryBackward(backend::ThreadPool &pool, BinaryOp op, const float *a,
                    const float *b, const float *dout, float *da, float *db,
                    int64_t count);

/// y = factor * x; the backward is the same with dy and dx.
void scale(backend::ThreadPool &pool, const float *x, float *y, int64_t count,
           float factor);

/// Registers silu, add, sub, mul and scale, forward and backward.
io::Status addElementwiseKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_ELEMENTWISE_H
