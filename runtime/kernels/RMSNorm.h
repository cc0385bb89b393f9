//===- RMSNorm.h - Root-mean-square normalization ---------------*- C++ -*-===//
//
// y = x / sqrt(mean(x^2) + eps) * weight over the last dimension of a
// row-major [rows, dim] tensor. The forward saves rstd = 1 / sqrt(mean(x^2) +
// eps) per row for the backward. The backward's dx is parallel over rows;
// its dweight (a sum over rows) is parallel over columns, each column summed
// in row order, so it is deterministic without partial buffers.
//
// Registered kernels (KernelABI.h calling convention):
//
//   rmsnorm.forward
//     buffers: in f32 x [rows, dim], in f32 weight [dim],
//              out f32 y [rows, dim], out f32 rstd [rows]
//     scalars: i64 rows, i64 dim, f64 eps
//   rmsnorm.backward
//     buffers: in f32 x [rows, dim], in f32 weight [dim], in f32 rstd [rows],
//              in f32 dy [rows, dim], out f32 dx [rows, dim],
//              inout f32 dweight [dim]
//     scalars: i64 rows, i64 dim, i64 accumulate
//     dweight = (accumulate ? dweight : 0) + sum over rows of dy * x * rstd.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_RMSNORM_H
#define TETRA_RUNTIME_KERNELS_RMSNORM_H

#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cstdint>

namespace tetra::kernels {

/// y and rstd from x and weight.
void rmsnormForward(backend::ThreadPool &pool, const float *x,
                    const float *weight, float *y, float *rstd, int64_t rows,
                    int64_t dim, double eps);

/// dx (overwritten) and dweight (added to when `accumulate`, else
/// overwritten) from the forward's inputs, its saved rstd and dy.
void rmsnormBackward(backend::ThreadPool &pool, const float *x,
                     const float *weight, const float *rstd, const float *dy,
                     float *dx, float *dweight, int64_t rows, int64_t dim,
                     bool accumulate);

/// Registers rmsnorm.forward and rmsnorm.backward.
io::Status addRMSNormKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_RMSNORM_H
