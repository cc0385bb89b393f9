//===- Optimizer.cpp - Gradient norm, clipping and AdamW ------------------===//

#include "runtime/kernels/Optimizer.h"

#include "runtime/kernels/LaunchArguments.h"
#include "runtime/kernels/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <vector>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

namespace {

/// Elements per piece of the norm's sum, and per chunk of elementwise work.
constexpr int64_t kPiece = 65536;
constexpr int64_t kGrain = 32768;

} // namespace

double globalNorm(ThreadPool &pool, ArrayView<const float *> tensors,
                  ArrayView<int64_t> counts) {
  struct Piece {
    const float *data;
    int64_t size;
  };
  std::vector<Piece> pieces;
  for (size_t t = 0; t < tensors.size(); ++t)
    for (int64_t begin = 0; begin < counts[t]; begin += kPiece)
      pieces.push_back(
          {tensors[t] + begin, std::min(kPiece, counts[t] - begin)});
  std::vector<double> partial(pieces.size());
  pool.parallelFor(0, static_cast<int64_t>(pieces.size()), 1,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t p = begin; p < end; ++p)
                       partial[p] =
                           sumOfSquaresF64(pieces[p].data, pieces[p].size);
                   });
  double sum = 0.0;
  for (double value : partial)
    sum += value;
  return std::sqrt(sum);
}

double clipFactor(double norm, double maxNorm) {
  const double factor = maxNorm / (norm + 1e-6);
  return factor < 1.0 ? factor : 1.0;
}

io::Status clipByGlobalNorm(ThreadPool &pool, ArrayView<float *> tensors,
                            ArrayView<int64_t> counts, float norm,
                            double maxNorm) {
  if (!std::isfinite(norm))
    return io::Error(fmt::format(
        "the gradient norm is {}; refusing to clip (and train on) it", norm));
  const double factor = clipFactor(norm, maxNorm);
  if (factor >= 1.0)
    return io::success();
  const float f = static_cast<float>(factor);
  for (size_t t = 0; t < tensors.size(); ++t) {
    float *data = tensors[t];
    pool.parallelFor(0, counts[t], kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        data[i] *= f;
    });
  }
  return io::success();
}

void accumulateGradient(ThreadPool &pool, float *sum, const float *grad,
                        int64_t count, float scale, bool first) {
  pool.parallelFor(0, count, kGrain, [&](int64_t begin, int64_t end) {
    if (first)
      for (int64_t i = begin; i < end; ++i)
        sum[i] = scale * grad[i];
    else
      for (int64_t i = begin; i < end; ++i)
        sum[i] += scale * grad[i];
  });
}

io::Status adamw(ThreadPool &pool, float *param, const float *grad, float *m,
                 float *v, int64_t count, const AdamWConfig &config) {
  if (config.step < 1)
    return io::Error(fmt::format(
        "AdamW step {} is not positive (the first step is 1)", config.step));
  if (!(config.beta1 >= 0.0 && config.beta1 < 1.0 && config.beta2 >= 0.0 &&
        config.beta2 < 1.0))
    return io::Error("AdamW betas must be in [0, 1)");
  const double t = static_cast<double>(config.step);
  // 1 - beta in fp64 before rounding: 1.0f - 0.999f is off by 1.3e-5.
  const float beta1 = static_cast<float>(config.beta1);
  const float beta2 = static_cast<float>(config.beta2);
  const float oneMinusBeta1 = static_cast<float>(1.0 - config.beta1);
  const float oneMinusBeta2 = static_cast<float>(1.0 - config.beta2);
  const float inverseCorrection1 =
      static_cast<float>(1.0 / (1.0 - std::pow(config.beta1, t)));
  const float inverseCorrection2 =
      static_cast<float>(1.0 / (1.0 - std::pow(config.beta2, t)));
  const float lr = static_cast<float>(config.lr);
  const float eps = static_cast<float>(config.eps);
  const float decay = static_cast<float>(config.weightDecay);
  pool.parallelFor(0, count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = grad[i];
      const float mi = beta1 * m[i] + oneMinusBeta1 * g;
      const float vi = beta2 * v[i] + oneMinusBeta2 * g * g;
      const float mhat = mi * inverseCorrection1;
      const float vhat = vi * inverseCorrection2;
      const float p = param[i];
      param[i] = p - lr * (mhat / (std::sqrt(vhat) + eps) + decay * p);
      m[i] = mi;
      v[i] = vi;
    }
  });
  return io::success();
}

namespace {

io::Status launchGlobalNorm(const CpuKernelContext &context,
                            ArrayView<Buffer> buffers,
                            ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  float *norm = args.output<float>(0, 1);
  std::vector<const float *> tensors;
  std::vector<int64_t> counts;
  for (size_t t = 1; t < buffers.size(); ++t) {
    counts.push_back(args.size(t - 1));
    tensors.push_back(args.input<float>(t, counts.back()));
  }
  if (!args.ok())
    return args.status();
  *norm = static_cast<float>(globalNorm(args.pool(), tensors, counts));
  return io::success();
}

io::Status launchClip(const CpuKernelContext &context,
                      ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const float *norm = args.input<float>(0, 1);
  const double maxNorm = args.real(0);
  args.require(maxNorm > 0.0, "'max_norm' must be positive");
  std::vector<float *> tensors;
  std::vector<int64_t> counts;
  for (size_t t = 1; t < buffers.size(); ++t) {
    counts.push_back(args.size(t));
    tensors.push_back(args.output<float>(t, counts.back()));
  }
  if (!args.ok())
    return args.status();
  if (io::Status status =
          clipByGlobalNorm(args.pool(), tensors, counts, *norm, maxNorm);
      !status)
    return status.error().withContext(context.signature.name);
  return io::success();
}

io::Status launchAccumulateGradient(const CpuKernelContext &context,
                                    ArrayView<Buffer> buffers,
                                    ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0);
  const double scale = args.real(1);
  const int64_t microBatch = args.integer(2);
  args.require(microBatch >= 0, "'micro_batch' must not be negative");
  float *sum = args.output<float>(0, count);
  const float *grad = args.input<float>(1, count);
  if (!args.ok())
    return args.status();
  accumulateGradient(args.pool(), sum, grad, count, static_cast<float>(scale),
                     microBatch == 0);
  return io::success();
}

io::Status launchAdamW(const CpuKernelContext &context,
                       ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0);
  AdamWConfig config;
  config.lr = args.real(1);
  config.beta1 = args.real(2);
  config.beta2 = args.real(3);
  config.eps = args.real(4);
  config.weightDecay = args.real(5);
  config.step = args.integer(6);
  float *param = args.output<float>(0, count);
  const float *grad = args.input<float>(1, count);
  float *m = args.output<float>(2, count);
  float *v = args.output<float>(3, count);
  if (!args.ok())
    return args.status();
  if (io::Status status = adamw(args.pool(), param, grad, m, v, count, config);
      !status)
    return status.error().withContext(context.signature.name);
  return io::success();
}

} // namespace

io::Status addOptimizerKernels(backend::CpuKernelTable &table) {
  backend::KernelSignature norm{
      "global_norm", {outF32("norm"), inF32("tensor")}, {i64("count")}};
  norm.variadic = true;
  if (io::Status status = table.add(norm, launchGlobalNorm); !status)
    return status;
  backend::KernelSignature clip{"clip_by_global_norm",
                                {inF32("norm"), inoutF32("tensor")},
                                {f64("max_norm"), i64("count")}};
  clip.variadic = true;
  if (io::Status status = table.add(clip, launchClip); !status)
    return status;
  if (io::Status status =
          table.add({"accumulate_gradient",
                     {inoutF32("sum"), inF32("grad")},
                     {i64("count"), f64("scale"), i64("micro_batch")}},
                    launchAccumulateGradient);
      !status)
    return status;
  return table.add(
      {"adamw",
       {inoutF32("param"), inF32("grad"), inoutF32("m"), inoutF32("v")},
       {i64("count"), f64("lr"), f64("beta1"), f64("beta2"), f64("eps"),
        f64("weight_decay"), i64("step")}},
      launchAdamW);
}

} // namespace tetra::kernels
