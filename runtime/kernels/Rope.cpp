//===- Rope.cpp - Rotary position embedding -------------------------------===//

#include "runtime/kernels/Rope.h"

#include "runtime/kernels/LaunchArguments.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

namespace {

/// cos and sin of p * theta^(-2i / headDim), [seq][headDim / 2].
struct RopeTable {
  int64_t seq = 0;
  int64_t headDim = 0;
  double theta = 0.0;
  std::vector<float> cos, sin;
};

/// The table for (seq, headDim, theta): the cached one when it matches (the
/// values are the same either way, so caching cannot change a result).
std::shared_ptr<const RopeTable> ropeTable(ThreadPool &pool, int64_t seq,
                                           int64_t headDim, double theta) {
  static std::mutex mutex;
  static std::shared_ptr<const RopeTable> cached;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (cached && cached->seq == seq && cached->headDim == headDim &&
        cached->theta == theta)
      return cached;
  }
  // Computed outside the lock: the pool must never be entered while holding
  // it (another thread's chunk could be waiting for it).

  auto table = std::make_shared<RopeTable>();
  table->seq = seq;
  table->headDim = headDim;
  table->theta = theta;
  const int64_t pairs = headDim / 2;
  table->cos.resize(seq * pairs);
  table->sin.resize(seq * pairs);
  pool.parallelFor(0, seq, 64, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t i = 0; i < pairs; ++i)
        ropeCosSin(p, i, headDim, theta, table->cos[p * pairs + i],
                   table->sin[p * pairs + i]);
  });
  std::lock_guard<std::mutex> lock(mutex);
  cached = table;
  return table;
}

} // namespace

void rope(ThreadPool &pool, const float *x, float *y, int64_t batch,
          int64_t seq, int64_t heads, int64_t headDim, double theta,
          bool inverse) {
  if (batch == 0 || seq == 0 || heads == 0)
    return;
  const std::shared_ptr<const RopeTable> table =
      ropeTable(pool, seq, headDim, theta);
  const int64_t pairs = headDim / 2;
  const int64_t width = heads * headDim;
  const float sign = inverse ? -1.0f : 1.0f;
  const int64_t grain = std::max<int64_t>(1, 8192 / width);
  pool.parallelFor(0, batch * seq, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t p = row % seq;
      const float *cosines = table->cos.data() + p * pairs;
      const float *sines = table->sin.data() + p * pairs;
      for (int64_t h = 0; h < heads; ++h) {
        const float *in = x + row * width + h * headDim;
        float *out = y + row * width + h * headDim;
        for (int64_t i = 0; i < pairs; ++i) {
          const float c = cosines[i], s = sign * sines[i];
          const float x0 = in[2 * i], x1 = in[2 * i + 1];
          out[2 * i] = x0 * c - x1 * s;
          out[2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
  });
}

namespace {

template <bool Inverse>
io::Status launchRope(const CpuKernelContext &context,
                      ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t batch = args.size(0), seq = args.size(1), heads = args.size(2),
                headDim = args.size(3, 2);
  const double theta = args.real(4);
  args.require(headDim % 2 == 0, "'head_dim' must be even");
  args.require(theta > 0.0, "'theta' must be positive");
  const int64_t elements = args.product({batch, seq, heads, headDim});
  const float *x = args.input<float>(0, elements);
  float *y = args.output<float>(1, elements);
  if (!args.ok())
    return args.status();
  rope(args.pool(), x, y, batch, seq, heads, headDim, theta, Inverse);
  return io::success();
}

} // namespace

io::Status addRopeKernels(backend::CpuKernelTable &table) {
  const std::vector<backend::ScalarParam> scalars = {
      i64("batch"), i64("seq"), i64("heads"), i64("head_dim"), f64("theta")};
  if (io::Status status =
          table.add({"rope.forward", {inF32("x"), outF32("y")}, scalars},
                    launchRope<false>);
      !status)
    return status;
  return table.add({"rope.backward", {inF32("dy"), outF32("dx")}, scalars},
                   launchRope<true>);
}

} // namespace tetra::kernels
