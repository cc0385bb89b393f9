//===- RMSNorm.cpp - Root-mean-square normalization -----------------------===//

#include "runtime/kernels/RMSNorm.h"

#include "runtime/kernels/LaunchArguments.h"
#include "runtime/kernels/VectorMath.h"

#include <algorithm>
#include <cmath>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

namespace {

/// Rows per chunk: about 8 K elements, from the shape alone.
int64_t rowGrain(int64_t dim) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, dim));
}

} // namespace

void rmsnormForward(ThreadPool &pool, const float *x, const float *weight,
                    float *y, float *rstd, int64_t rows, int64_t dim,
                    double eps) {
  pool.parallelFor(0, rows, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *row = x + r * dim;
      const double meanSquare =
          dim ? sumOfSquaresF64(row, dim) / static_cast<double>(dim) : 0.0;
      const float scale = static_cast<float>(1.0 / std::sqrt(meanSquare + eps));
      rstd[r] = scale;
      float *out = y + r * dim;
      for (int64_t c = 0; c < dim; ++c)
        out[c] = row[c] * scale * weight[c];
    }
  });
}

void rmsnormBackward(ThreadPool &pool, const float *x, const float *weight,
                     const float *rstd, const float *dy, float *dx,
                     float *dweight, int64_t rows, int64_t dim,
                     bool accumulate) {
  // dx = r * g - (r^3 / dim) * (g . x) * x with g = dy * weight.
  pool.parallelFor(0, rows, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *row = x + r * dim;
      const float *grad = dy + r * dim;
      float acc[kLanes] = {};
      int64_t c = 0;
      for (; c + kLanes <= dim; c += kLanes)
        for (int lane = 0; lane < kLanes; ++lane)
          acc[lane] += grad[c + lane] * weight[c + lane] * row[c + lane];
      float gx = combineLanes(acc);
      for (; c < dim; ++c)
        gx += grad[c] * weight[c] * row[c];
      const float scale = rstd[r];
      const float correction = scale * scale * scale * gx / dim;
      float *out = dx + r * dim;
      for (int64_t c = 0; c < dim; ++c)
        out[c] = scale * grad[c] * weight[c] - correction * row[c];
    }
  });
  // dweight[c] = sum_r dy[r, c] * x[r, c] * rstd[r], rows in order.
  pool.parallelFor(0, dim, 64, [&](int64_t begin, int64_t end) {
    float *out = dweight + begin;
    const int64_t width = end - begin;
    if (!accumulate)
      std::fill(out, out + width, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = x + r * dim + begin;
      const float *grad = dy + r * dim + begin;
      const float scale = rstd[r];
      for (int64_t c = 0; c < width; ++c)
        out[c] += grad[c] * row[c] * scale;
    }
  });
}

namespace {

io::Status launchForward(const CpuKernelContext &context,
                         ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t rows = args.size(0), dim = args.size(1, 1);
  const double eps = args.real(2);
  args.require(eps >= 0.0, "'eps' must be non-negative");
  const int64_t elements = args.product({rows, dim});
  const float *x = args.input<float>(0, elements);
  const float *weight = args.input<float>(1, dim);
  float *y = args.output<float>(2, elements);
  float *rstd = args.output<float>(3, rows);
  if (!args.ok())
    return args.status();
  rmsnormForward(args.pool(), x, weight, y, rstd, rows, dim, eps);
  return io::success();
}

io::Status launchBackward(const CpuKernelContext &context,
                          ArrayView<Buffer> buffers,
                          ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t rows = args.size(0), dim = args.size(1, 1);
  const bool accumulate = args.flag(2);
  const int64_t elements = args.product({rows, dim});
  const float *x = args.input<float>(0, elements);
  const float *weight = args.input<float>(1, dim);
  const float *rstd = args.input<float>(2, rows);
  const float *dy = args.input<float>(3, elements);
  float *dx = args.output<float>(4, elements);
  float *dweight = args.output<float>(5, dim);
  if (!args.ok())
    return args.status();
  rmsnormBackward(args.pool(), x, weight, rstd, dy, dx, dweight, rows, dim,
                  accumulate);
  return io::success();
}

} // namespace

io::Status addRMSNormKernels(backend::CpuKernelTable &table) {
  if (io::Status status =
          table.add({"rmsnorm.forward",
                     {inF32("x"), inF32("weight"), outF32("y"), outF32("rstd")},
                     {i64("rows"), i64("dim"), f64("eps")}},
                    launchForward);
      !status)
    return status;
  return table.add({"rmsnorm.backward",
                    {inF32("x"), inF32("weight"), inF32("rstd"), inF32("dy"),
                     outF32("dx"), inoutF32("dweight")},
                    {i64("rows"), i64("dim"), i64("accumulate")}},
                   launchBackward);
}

} // namespace tetra::kernels
