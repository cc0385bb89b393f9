//===- Embedding.cpp - Token embedding lookup and its gradient ------------===//

#include "runtime/kernels/Embedding.h"

#include "runtime/kernels/LaunchArguments.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <string>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

io::Status checkIds(const int32_t *ids, int64_t count, int64_t limit,
                    const char *what) {
  for (int64_t n = 0; n < count; ++n)
    if (ids[n] < 0 || ids[n] >= limit)
      return io::Error(fmt::format("{} {} at position {} is outside [0, {})",
                                   what, ids[n], n, limit));
  return io::success();
}

io::Status embeddingForward(ThreadPool &pool, const float *table,
                            const int32_t *tokens, float *out, int64_t count,
                            int64_t vocab, int64_t dim) {
  if (io::Status status = checkIds(tokens, count, vocab, "token"); !status)
    return status;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, dim));
  pool.parallelFor(0, count, grain, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n)
      std::memcpy(out + n * dim, table + tokens[n] * dim, dim * sizeof(float));
  });
  return io::success();
}

io::Status embeddingBackward(ThreadPool &pool, const int32_t *tokens,
                             const float *dout, float *dtable, int64_t count,
                             int64_t vocab, int64_t dim, bool accumulate) {
  if (io::Status status = checkIds(tokens, count, vocab, "token"); !status)
    return status;
  if (!accumulate) {
    const int64_t grain =
        std::max<int64_t>(1, 65536 / std::max<int64_t>(1, dim));
    pool.parallelFor(0, vocab, grain, [&](int64_t begin, int64_t end) {
      std::memset(dtable + begin * dim, 0, (end - begin) * dim * sizeof(float));
    });
  }
  // Columns in chunks of 64 floats (a few cache lines of every touched row).
  pool.parallelFor(0, dim, 64, [&](int64_t begin, int64_t end) {
    const int64_t width = end - begin;
    for (int64_t n = 0; n < count; ++n) {
      float *row = dtable + tokens[n] * dim + begin;
      const float *grad = dout + n * dim + begin;
      for (int64_t c = 0; c < width; ++c)
        row[c] += grad[c];
    }
  });
  return io::success();
}

namespace {

io::Status launchForward(const CpuKernelContext &context,
                         ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0), vocab = args.size(1), dim = args.size(2);
  const float *table = args.input<float>(0, args.product({vocab, dim}));
  const int32_t *tokens = args.input<int32_t>(1, count);
  float *out = args.output<float>(2, args.product({count, dim}));
  if (!args.ok())
    return args.status();
  if (io::Status status =
          embeddingForward(args.pool(), table, tokens, out, count, vocab, dim);
      !status)
    return status.error().withContext(context.signature.name);
  return io::success();
}

io::Status launchBackward(const CpuKernelContext &context,
                          ArrayView<Buffer> buffers,
                          ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0), vocab = args.size(1), dim = args.size(2);
  const bool accumulate = args.flag(3);
  const int32_t *tokens = args.input<int32_t>(0, count);
  const float *dout = args.input<float>(1, args.product({count, dim}));
  float *dtable = args.output<float>(2, args.product({vocab, dim}));
  if (!args.ok())
    return args.status();
  if (io::Status status = embeddingBackward(args.pool(), tokens, dout, dtable,
                                            count, vocab, dim, accumulate);
      !status)
    return status.error().withContext(context.signature.name);
  return io::success();
}

} // namespace

io::Status addEmbeddingKernels(backend::CpuKernelTable &table) {
  if (io::Status status =
          table.add({"embedding.forward",
                     {inF32("table"), inI32("tokens"), outF32("out")},
                     {i64("count"), i64("vocab"), i64("dim")}},
                    launchForward);
      !status)
    return status;
  return table.add(
      {"embedding.backward",
       {inI32("tokens"), inF32("dout"), inoutF32("dtable")},
       {i64("count"), i64("vocab"), i64("dim"), i64("accumulate")}},
      launchBackward);
}

} // namespace tetra::kernels
