//===- Elementwise.cpp - SiLU, add, sub, mul and scale --------------------===//

#include "runtime/kernels/Elementwise.h"

#include "runtime/kernels/LaunchArguments.h"
#include "runtime/kernels/VectorMath.h"

#include <cmath>
#include <vector>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

namespace {

/// Elements per chunk: enough to amortize a chunk claim.
constexpr int64_t kGrain = 32768;

} // namespace

void siluForward(ThreadPool &pool, const float *x, float *y, int64_t count) {
  pool.parallelFor(0, count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = x[i] / (1.0f + fastExp(-x[i]));
  });
}

void siluBackward(ThreadPool &pool, const float *x, const float *dy, float *dx,
                  int64_t count) {
  pool.parallelFor(0, count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float s = 1.0f / (1.0f + fastExp(-x[i]));
      dx[i] = dy[i] * (s + x[i] * s * (1.0f - s));
    }
  });
}

void binaryForward(ThreadPool &pool, BinaryOp op, const float *a,
                   const float *b, float *out, int64_t count) {
  pool.parallelFor(0, count, kGrain, [&](int64_t begin, int64_t end) {
    switch (op) {
    case BinaryOp::Add:
      for (int64_t i = begin; i < end; ++i)
        out[i] = a[i] + b[i];
      break;
    case BinaryOp::Sub:
      for (int64_t i = begin; i < end; ++i)
        out[i] = a[i] - b[i];
      break;
    case BinaryOp::Mul:
      for (int64_t i = begin; i < end; ++i)
        out[i] = a[i] * b[i];
      break;
    }
  });
}

void binaryBackward(ThreadPool &pool, BinaryOp op, const float *a,
                    const float *b, const float *dout, float *da, float *db,
                    int64_t count) {
  pool.parallelFor(0, count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // Read everything first: da or db may alias dout, a or b.
      const float g = dout[i];
      const float ai = op == BinaryOp::Mul ? a[i] : 0.0f;
      const float bi = op == BinaryOp::Mul ? b[i] : 0.0f;
      da[i] = op == BinaryOp::Mul ? g * bi : g;
      db[i] = op == BinaryOp::Add ? g : op == BinaryOp::Sub ? -g : g * ai;
    }
  });
}

void scale(ThreadPool &pool, const float *x, float *y, int64_t count,
           float factor) {
  pool.parallelFor(0, count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = factor * x[i];
  });
}

namespace {

io::Status launchSiluForward(const CpuKernelContext &context,
                             ArrayView<Buffer> buffers,
                             ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0);
  const float *x = args.input<float>(0, count);
  float *y = args.output<float>(1, count);
  if (!args.ok())
    return args.status();
  siluForward(args.pool(), x, y, count);
  return io::success();
}

io::Status launchSiluBackward(const CpuKernelContext &context,
                              ArrayView<Buffer> buffers,
                              ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0);
  const float *x = args.input<float>(0, count);
  const float *dy = args.input<float>(1, count);
  float *dx = args.output<float>(2, count);
  if (!args.ok())
    return args.status();
  siluBackward(args.pool(), x, dy, dx, count);
  return io::success();
}

template <BinaryOp Op>
io::Status launchBinaryForward(const CpuKernelContext &context,
                               ArrayView<Buffer> buffers,
                               ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0);
  const float *a = args.input<float>(0, count);
  const float *b = args.input<float>(1, count);
  float *out = args.output<float>(2, count);
  if (!args.ok())
    return args.status();
  binaryForward(args.pool(), Op, a, b, out, count);
  return io::success();
}

template <BinaryOp Op>
io::Status launchBinaryBackward(const CpuKernelContext &context,
                                ArrayView<Buffer> buffers,
                                ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0);
  // mul.backward takes a and b first; add and sub take only dout.
  const size_t first = Op == BinaryOp::Mul ? 2 : 0;
  const float *a = Op == BinaryOp::Mul ? args.input<float>(0, count) : nullptr;
  const float *b = Op == BinaryOp::Mul ? args.input<float>(1, count) : nullptr;
  const float *dout = args.input<float>(first, count);
  float *da = args.output<float>(first + 1, count);
  float *db = args.output<float>(first + 2, count);
  if (!args.ok())
    return args.status();
  binaryBackward(args.pool(), Op, a, b, dout, da, db, count);
  return io::success();
}

io::Status launchScale(const CpuKernelContext &context,
                       ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t count = args.size(0);
  const float factor = static_cast<float>(args.real(1));
  const float *x = args.input<float>(0, count);
  float *y = args.output<float>(1, count);
  if (!args.ok())
    return args.status();
  scale(args.pool(), x, y, count, factor);
  return io::success();
}

} // namespace

io::Status addElementwiseKernels(backend::CpuKernelTable &table) {
  const std::vector<backend::ScalarParam> count = {i64("count")};
  const std::vector<backend::ScalarParam> countFactor = {i64("count"),
                                                         f64("factor")};
  struct Entry {
    backend::KernelSignature signature;
    backend::CpuKernelFn function;
  };
  const Entry entries[] = {
      {{"silu.forward", {inF32("x"), outF32("y")}, count}, launchSiluForward},
      {{"silu.backward", {inF32("x"), inF32("dy"), outF32("dx")}, count},
       launchSiluBackward},
      {{"add.forward", {inF32("a"), inF32("b"), outF32("out")}, count},
       launchBinaryForward<BinaryOp::Add>},
      {{"add.backward", {inF32("dout"), outF32("da"), outF32("db")}, count},
       launchBinaryBackward<BinaryOp::Add>},
      {{"sub.forward", {inF32("a"), inF32("b"), outF32("out")}, count},
       launchBinaryForward<BinaryOp::Sub>},
      {{"sub.backward", {inF32("dout"), outF32("da"), outF32("db")}, count},
       launchBinaryBackward<BinaryOp::Sub>},
      {{"mul.forward", {inF32("a"), inF32("b"), outF32("out")}, count},
       launchBinaryForward<BinaryOp::Mul>},
      {{"mul.backward",
        {inF32("a"), inF32("b"), inF32("dout"), outF32("da"), outF32("db")},
        count},
       launchBinaryBackward<BinaryOp::Mul>},
      {{"scale.forward", {inF32("x"), outF32("y")}, countFactor}, launchScale},
      {{"scale.backward", {inF32("dy"), outF32("dx")}, countFactor},
       launchScale},
  };
  for (const Entry &entry : entries)
    if (io::Status status = table.add(entry.signature, entry.function); !status)
      return status;
  return io::success();
}

} // namespace tetra::kernels
