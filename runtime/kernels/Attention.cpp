//===- Attention.cpp - Causal grouped-query attention ---------------------===//
//
// Row at a time, like llm.c's CPU attention, but with the other operand of
// every dot product transposed into a [head_dim, seq] panel first, so that a
// row of scores is built by head_dim axpys over contiguous memory (one SIMD
// lane per key) instead of seq short dot products that each end in a
// horizontal sum:
//
//   forward, pass 1 of the backward (per query row i of head h):
//     s[j]  = sum_d q_i[d] K^T[d][j],   dp[j] = sum_d dout_i[d] V^T[d][j]
//   pass 2 of the backward (per key row j of kv head g):
//     s[i]  = sum_d k_j[d] Q^T[d][i],   dp[i] = sum_d v_j[d] dOut^T[d][i]
//
// Both passes form every score and every dp from the same products added in
// the same order (d = 0, 1, ...), and P = fastExp(s * scale - lse) with the
// same lse, so the two passes agree bit for bit on P.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/Attention.h"

#include "runtime/kernels/LaunchArguments.h"
#include "runtime/kernels/VectorMath.h"
#include "runtime/numerics/BlockQuantize.h"
#include "runtime/numerics/Formats.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>
#include <vector>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

namespace {

/// Rows (query or key) per chunk.
constexpr int64_t kRowGrain = 8;

/// Offsets into the [batch, seq, heads * head_dim] layouts and the
/// [batch, heads, seq] statistics.
struct Layout {
  explicit Layout(const AttentionShape &shape)
      : seq(shape.seq), heads(shape.heads), kvHeads(shape.kvHeads),
        headDim(shape.headDim), group(shape.heads / shape.kvHeads),
        scale(1.0f / std::sqrt(static_cast<float>(shape.headDim))) {}

  /// Query head h at (b, t).
  int64_t query(int64_t b, int64_t t, int64_t h) const {
    return ((b * seq + t) * heads + h) * headDim;
  }
  /// Key/value head g at (b, t).
  int64_t keyValue(int64_t b, int64_t t, int64_t g) const {
    return ((b * seq + t) * kvHeads + g) * headDim;
  }
  /// The statistic (lse, delta) of (b, h, t).
  int64_t row(int64_t b, int64_t h, int64_t t) const {
    return (b * heads + h) * seq + t;
  }
  /// The [head_dim, seq] panel of head `head` (of `count` heads) in batch b.
  int64_t panel(int64_t b, int64_t head, int64_t count) const {
    return (b * count + head) * headDim * seq;
  }

  int64_t seq, heads, kvHeads, headDim, group;
  float scale;
};

/// An uninitialized float array (every element is written before it is
/// read).
std::unique_ptr<float[]> floats(int64_t count) {
  return std::unique_ptr<float[]>(new float[std::max<int64_t>(1, count)]);
}

/// Transposes every head of x [batch, seq, heads * headDim] into panels
/// [batch, heads, headDim, seq].
void transposeHeads(ThreadPool &pool, const float *x, float *panels,
                    int64_t batch, int64_t seq, int64_t heads,
                    int64_t headDim) {
  pool.parallelFor(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      float *panel = panels + bh * headDim * seq;
      for (int64_t t = 0; t < seq; ++t) {
        const float *row = x + ((b * seq + t) * heads + h) * headDim;
        for (int64_t d = 0; d < headDim; ++d)
          panel[d * seq + t] = row[d];
      }
    }
  });
}

/// out[0..n) = sum_d weights[d] * panel[d * stride + 0..n), d in order.
void panelProduct(const float *weights, const float *panel, int64_t stride,
                  int64_t headDim, float *out, int64_t n) {
  std::fill(out, out + n, 0.0f);
  for (int64_t d = 0; d < headDim; ++d)
    axpy(weights[d], panel + d * stride, out, n);
}

/// x rounded to BF16 (nearest even), as an fp32 value.
float bf16(float x) { return numerics::decodeBF16(numerics::encodeBF16(x)); }

/// The products' view of an operand: itself, or (bf16 operands) a copy
/// rounded to BF16, made in parallel.
class ProductOperand {
public:
  ProductOperand(ThreadPool &pool, const float *x, int64_t count, bool bf16)
      : view_(x) {
    if (!bf16)
      return;
    copy_.reset(new float[std::max<int64_t>(1, count)]);
    pool.parallelFor(0, count, 1 << 14, [&](int64_t begin, int64_t end) {
      std::copy(x + begin, x + end, copy_.get() + begin);
      numerics::roundTripBF16(copy_.get() + begin, end - begin);
    });
    view_ = copy_.get();
  }
  const float *get() const { return view_; }

private:
  std::unique_ptr<float[]> copy_;
  const float *view_;
};

/// Scratch that lives across chunks on one thread.
float *scratch(int which, int64_t size) {
  thread_local std::vector<float> buffers[4];
  std::vector<float> &buffer = buffers[which];
  if (static_cast<int64_t>(buffer.size()) < size)
    buffer.resize(size);
  return buffer.data();
}

} // namespace

void attentionForward(ThreadPool &pool, const float *qIn, const float *kIn,
                      const float *vIn, float *out, float *lse,
                      const AttentionShape &shape) {
  const Layout layout(shape);
  const int64_t hd = shape.headDim, seq = shape.seq;
  const int64_t kvStride = shape.kvHeads * hd;
  const bool rounded = shape.bf16Operands;
  const int64_t qSize = shape.batch * seq * shape.heads * hd;
  const int64_t kvSize = shape.batch * seq * kvStride;
  const ProductOperand qOp(pool, qIn, qSize, rounded),
      kOp(pool, kIn, kvSize, rounded), vOp(pool, vIn, kvSize, rounded);
  const float *q = qOp.get(), *k = kOp.get(), *v = vOp.get();
  std::unique_ptr<float[]> keysT = floats(shape.batch * kvStride * seq);
  transposeHeads(pool, k, keysT.get(), shape.batch, seq, shape.kvHeads, hd);

  const int64_t rows = shape.batch * shape.heads * seq;
  pool.parallelFor(0, rows, kRowGrain, [&](int64_t begin, int64_t end) {
    float *scores = scratch(0, seq);
    float *probabilities = scratch(1, seq);
    float *acc = scratch(2, hd);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t t = r % seq;
      const int64_t h = (r / seq) % shape.heads;
      const int64_t b = r / (seq * shape.heads);
      const int64_t g = h / layout.group;
      const int64_t count = t + 1;
      panelProduct(q + layout.query(b, t, h),
                   keysT.get() + layout.panel(b, g, shape.kvHeads), seq, hd,
                   scores, count);
      for (int64_t j = 0; j < count; ++j)
        probabilities[j] = scores[j] * layout.scale;
      const float maximum = maxOf(probabilities, count);
      expShifted(probabilities, maximum, probabilities, count);
      const double sum = sumF64(probabilities, count);
      const float rowLse = static_cast<float>(maximum + std::log(sum));
      float inverse = static_cast<float>(1.0 / sum);
      if (rounded) { // P as the backward recomputes it, rounded
        for (int64_t j = 0; j < count; ++j)
          probabilities[j] = bf16(fastExp(scores[j] * layout.scale - rowLse));
        inverse = 1.0f;
      }

      const float *values = v + layout.keyValue(b, 0, g);
      std::fill(acc, acc + hd, 0.0f);
      for (int64_t j = 0; j < count; ++j)
        axpy(probabilities[j], values + j * kvStride, acc, hd);
      float *oi = out + layout.query(b, t, h);
      for (int64_t d = 0; d < hd; ++d)
        oi[d] = acc[d] * inverse;
      lse[layout.row(b, h, t)] = rowLse;
    }
  });
}

void attentionBackward(ThreadPool &pool, const float *qIn, const float *kIn,
                       const float *vIn, const float *out, const float *lse,
                       const float *doutIn, float *dq, float *dk, float *dv,
                       float *delta, const AttentionShape &shape) {
  const Layout layout(shape);
  const int64_t hd = shape.headDim, seq = shape.seq;
  const int64_t kvStride = shape.kvHeads * hd;
  const int64_t qStride = shape.heads * hd;
  const bool rounded = shape.bf16Operands;
  const int64_t qSize = shape.batch * seq * qStride;
  const int64_t kvSize = shape.batch * seq * kvStride;
  const ProductOperand qOp(pool, qIn, qSize, rounded),
      kOp(pool, kIn, kvSize, rounded), vOp(pool, vIn, kvSize, rounded),
      doutOp(pool, doutIn, qSize, rounded);
  const float *q = qOp.get(), *k = kOp.get(), *v = vOp.get(),
              *dout = doutOp.get();
  // A product's operand (P, dS): itself, or rounded to BF16.
  auto operand = [rounded](float x) { return rounded ? bf16(x) : x; };
  std::unique_ptr<float[]> keysT = floats(shape.batch * kvStride * seq);
  std::unique_ptr<float[]> valuesT = floats(shape.batch * kvStride * seq);
  std::unique_ptr<float[]> queriesT = floats(shape.batch * qStride * seq);
  std::unique_ptr<float[]> doutT = floats(shape.batch * qStride * seq);
  transposeHeads(pool, k, keysT.get(), shape.batch, seq, shape.kvHeads, hd);
  transposeHeads(pool, v, valuesT.get(), shape.batch, seq, shape.kvHeads, hd);
  transposeHeads(pool, q, queriesT.get(), shape.batch, seq, shape.heads, hd);
  transposeHeads(pool, dout, doutT.get(), shape.batch, seq, shape.heads, hd);

  // Pass 1, per query row i: delta_i = dout_i . out_i and
  //   dq_i = scale * sum_{j <= i} P_ij (dout_i . v_j - delta_i) k_j.
  const int64_t queryRows = shape.batch * shape.heads * seq;
  pool.parallelFor(0, queryRows, kRowGrain, [&](int64_t begin, int64_t end) {
    float *p = scratch(0, seq);
    float *dp = scratch(1, seq);
    float *acc = scratch(2, hd);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = r % seq;
      const int64_t h = (r / seq) % shape.heads;
      const int64_t b = r / (seq * shape.heads);
      const int64_t g = h / layout.group;
      const int64_t count = i + 1;
      const float *doi = dout + layout.query(b, i, h);
      const float rowDelta =
          dot(doutIn + layout.query(b, i, h), out + layout.query(b, i, h), hd);
      const float rowLse = lse[layout.row(b, h, i)];
      delta[layout.row(b, h, i)] = rowDelta;

      const int64_t panel = layout.panel(b, g, shape.kvHeads);
      panelProduct(q + layout.query(b, i, h), keysT.get() + panel, seq, hd, p,
                   count);
      for (int64_t j = 0; j < count; ++j)
        p[j] = p[j] * layout.scale - rowLse;
      expShifted(p, 0.0f, p, count);
      panelProduct(doi, valuesT.get() + panel, seq, hd, dp, count);

      const float *keys = k + layout.keyValue(b, 0, g);
      std::fill(acc, acc + hd, 0.0f);
      for (int64_t j = 0; j < count; ++j)
        axpy(operand(p[j] * (dp[j] - rowDelta)), keys + j * kvStride, acc,
             hd);
      float *dqi = dq + layout.query(b, i, h);
      for (int64_t d = 0; d < hd; ++d)
        dqi[d] = acc[d] * layout.scale;
    }
  });

  // Pass 2, per key row j of kv head g: over the group's query heads h and
  // rows i >= j, in order,
  //   dv_j = sum P_ij dout_i,
  //   dk_j = scale * sum P_ij (dout_i . v_j - delta_i) q_i.
  const int64_t keyRows = shape.batch * shape.kvHeads * seq;
  pool.parallelFor(0, keyRows, kRowGrain, [&](int64_t begin, int64_t end) {
    float *p = scratch(0, seq);
    float *dp = scratch(1, seq);
    float *dkAcc = scratch(2, hd);
    float *dvAcc = scratch(3, hd);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t j = r % seq;
      const int64_t g = (r / seq) % shape.kvHeads;
      const int64_t b = r / (seq * shape.kvHeads);
      const float *kj = k + layout.keyValue(b, j, g);
      const float *vj = v + layout.keyValue(b, j, g);
      const int64_t count = seq - j;
      std::fill(dkAcc, dkAcc + hd, 0.0f);
      std::fill(dvAcc, dvAcc + hd, 0.0f);
      for (int64_t h = g * layout.group; h < (g + 1) * layout.group; ++h) {
        const int64_t panel = layout.panel(b, h, shape.heads) + j;
        // Entry n of p, dp stands for query row i = j + n.
        panelProduct(kj, queriesT.get() + panel, seq, hd, p, count);
        const float *rowLse = lse + layout.row(b, h, j);
        for (int64_t n = 0; n < count; ++n)
          p[n] = p[n] * layout.scale - rowLse[n];
        expShifted(p, 0.0f, p, count);
        panelProduct(vj, doutT.get() + panel, seq, hd, dp, count);

        const float *rowDelta = delta + layout.row(b, h, j);
        const float *queries = q + layout.query(b, j, h);
        const float *douts = dout + layout.query(b, j, h);
        for (int64_t n = 0; n < count; ++n) {
          axpy(operand(p[n]), douts + n * qStride, dvAcc, hd);
          axpy(operand(p[n] * (dp[n] - rowDelta[n])), queries + n * qStride,
               dkAcc, hd);
        }
      }
      float *dkj = dk + layout.keyValue(b, j, g);
      float *dvj = dv + layout.keyValue(b, j, g);
      for (int64_t d = 0; d < hd; ++d) {
        dkj[d] = dkAcc[d] * layout.scale;
        dvj[d] = dvAcc[d];
      }
    }
  });
}

namespace {

/// Reads and checks the shape scalars and the operands' flag.
AttentionShape readShape(LaunchArguments &args) {
  AttentionShape shape;
  shape.batch = args.size(0);
  shape.seq = args.size(1);
  shape.heads = args.size(2, 1);
  shape.kvHeads = args.size(3, 1);
  shape.headDim = args.size(4, 1);
  shape.bf16Operands = args.flag(5);
  args.require(shape.heads % shape.kvHeads == 0,
               fmt::format("'heads' ({}) must be a multiple of 'kv_heads' ({})",
                           shape.heads, shape.kvHeads));
  return shape;
}

io::Status launchForward(const CpuKernelContext &context,
                         ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const AttentionShape s = readShape(args);
  const int64_t qSize = args.product({s.batch, s.seq, s.heads, s.headDim});
  const int64_t kvSize = args.product({s.batch, s.seq, s.kvHeads, s.headDim});
  const int64_t rows = args.product({s.batch, s.heads, s.seq});
  const float *q = args.input<float>(0, qSize);
  const float *k = args.input<float>(1, kvSize);
  const float *v = args.input<float>(2, kvSize);
  float *out = args.output<float>(3, qSize);
  float *lse = args.output<float>(4, rows);
  if (!args.ok())
    return args.status();
  attentionForward(args.pool(), q, k, v, out, lse, s);
  return io::success();
}

io::Status launchBackward(const CpuKernelContext &context,
                          ArrayView<Buffer> buffers,
                          ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const AttentionShape s = readShape(args);
  const int64_t qSize = args.product({s.batch, s.seq, s.heads, s.headDim});
  const int64_t kvSize = args.product({s.batch, s.seq, s.kvHeads, s.headDim});
  const int64_t rows = args.product({s.batch, s.heads, s.seq});
  const float *q = args.input<float>(0, qSize);
  const float *k = args.input<float>(1, kvSize);
  const float *v = args.input<float>(2, kvSize);
  const float *out = args.input<float>(3, qSize);
  const float *lse = args.input<float>(4, rows);
  const float *dout = args.input<float>(5, qSize);
  float *dq = args.output<float>(6, qSize);
  float *dk = args.output<float>(7, kvSize);
  float *dv = args.output<float>(8, kvSize);
  float *delta = args.output<float>(9, rows);
  if (!args.ok())
    return args.status();
  attentionBackward(args.pool(), q, k, v, out, lse, dout, dq, dk, dv, delta, s);
  return io::success();
}

} // namespace

io::Status addAttentionKernels(backend::CpuKernelTable &table) {
  const std::vector<backend::ScalarParam> scalars = {
      i64("batch"), i64("seq"), i64("heads"), i64("kv_heads"), i64("head_dim"),
      i64("bf16_operands")};
  if (io::Status status = table.add(
          {"attention.forward",
           {inF32("q"), inF32("k"), inF32("v"), outF32("out"), outF32("lse")},
           scalars},
          launchForward);
      !status)
    return status;
  return table.add({"attention.backward",
                    {inF32("q"), inF32("k"), inF32("v"), inF32("out"),
                     inF32("lse"), inF32("dout"), outF32("dq"), outF32("dk"),
                     outF32("dv"), outF32("delta")},
                    scalars},
                   launchBackward);
}

} // namespace tetra::kernels
