//===- CrossEntropy.cpp - Mean softmax cross-entropy ----------------------===//

#include "runtime/kernels/CrossEntropy.h"

#include "runtime/kernels/Embedding.h"
#include "runtime/kernels/LaunchArguments.h"
#include "runtime/kernels/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

namespace {

/// Rows per chunk: about 16 K logits.
int64_t rowGrain(int64_t vocab) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, vocab));
}

/// log(sum(exp(row))) with the maximum subtracted: exponentials in blocks
/// (a loop that vectorizes), each block summed in fp64.
double logSumExp(const float *row, int64_t vocab) {
  constexpr int64_t kBlock = 256;
  float exps[kBlock];
  const float maximum = maxOf(row, vocab);
  double sum = 0.0;
  for (int64_t c = 0; c < vocab; c += kBlock) {
    const int64_t width = std::min(kBlock, vocab - c);
    expShifted(row + c, maximum, exps, width);
    sum += sumF64(exps, width);
  }
  return maximum + std::log(sum);
}

} // namespace

io::Status crossEntropyForward(ThreadPool &pool, const float *logits,
                               const int32_t *targets, float *loss, float *lse,
                               int64_t rows, int64_t vocab) {
  if (rows < 1 || vocab < 1)
    return io::Error("cross-entropy needs at least one row and one class");
  if (io::Status status = checkIds(targets, rows, vocab, "target"); !status)
    return status;
  std::vector<double> rowLoss(rows);
  pool.parallelFor(0, rows, rowGrain(vocab), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *row = logits + r * vocab;
      const double rowLse = logSumExp(row, vocab);
      lse[r] = static_cast<float>(rowLse);
      rowLoss[r] = rowLse - row[targets[r]];
    }
  });
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    total += rowLoss[r];
  *loss = static_cast<float>(total / static_cast<double>(rows));
  return io::success();
}

io::Status crossEntropyBackward(ThreadPool &pool, const float *logits,
                                const int32_t *targets, const float *lse,
                                float dloss, float *dlogits, int64_t rows,
                                int64_t vocab) {
  if (io::Status status = checkIds(targets, rows, vocab, "target"); !status)
    return status;
  const float factor = static_cast<float>(static_cast<double>(dloss) /
                                          static_cast<double>(rows));
  pool.parallelFor(0, rows, rowGrain(vocab), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *row = logits + r * vocab;
      float *out = dlogits + r * vocab;
      const float rowLse = lse[r];
      for (int64_t c = 0; c < vocab; ++c)
        out[c] = fastExp(row[c] - rowLse) * factor;
      out[targets[r]] -= factor;
    }
  });
  return io::success();
}

namespace {

io::Status launchForward(const CpuKernelContext &context,
                         ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t rows = args.size(0, 1), vocab = args.size(1, 1);
  const float *logits = args.input<float>(0, args.product({rows, vocab}));
  const int32_t *targets = args.input<int32_t>(1, rows);
  float *loss = args.output<float>(2, 1);
  float *lse = args.output<float>(3, rows);
  if (!args.ok())
    return args.status();
  if (io::Status status = crossEntropyForward(args.pool(), logits, targets,
                                              loss, lse, rows, vocab);
      !status)
    return status.error().withContext(context.signature.name);
  return io::success();
}

io::Status launchBackward(const CpuKernelContext &context,
                          ArrayView<Buffer> buffers,
                          ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t rows = args.size(0, 1), vocab = args.size(1, 1);
  const int64_t elements = args.product({rows, vocab});
  const float *logits = args.input<float>(0, elements);
  const int32_t *targets = args.input<int32_t>(1, rows);
  const float *lse = args.input<float>(2, rows);
  const float *dloss = args.input<float>(3, 1);
  float *dlogits = args.output<float>(4, elements);
  if (!args.ok())
    return args.status();
  if (io::Status status = crossEntropyBackward(
          args.pool(), logits, targets, lse, *dloss, dlogits, rows, vocab);
      !status)
    return status.error().withContext(context.signature.name);
  return io::success();
}

} // namespace

io::Status addCrossEntropyKernels(backend::CpuKernelTable &table) {
  if (io::Status status = table.add(
          {"cross_entropy.forward",
           {inF32("logits"), inI32("targets"), outF32("loss"), outF32("lse")},
           {i64("rows"), i64("vocab")}},
          launchForward);
      !status)
    return status;
  return table.add({"cross_entropy.backward",
                    {inF32("logits"), inI32("targets"), inF32("lse"),
                     inF32("dloss"), outF32("dlogits")},
                    {i64("rows"), i64("vocab")}},
                   launchBackward);
}

} // namespace tetra::kernels
