//===- AttentionTest.cpp - Causal GQA attention forward and backward ------===//

#include "runtime/kernels/Attention.h"
#include "runtime/kernels/reference/Attention.h"
#include "runtime/numerics/BlockQuantize.h"

#include "KernelTestUtils.h"

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

/// Awkward shapes: T = 1, G = 1 (multi-query), G = H (multi-head), odd head
/// dims, and the tiny model's head (16).
const AttentionShape kShapes[] = {
    {2, 5, 4, 2, 4}, {1, 1, 2, 1, 3}, {2, 7, 3, 3, 5},
    {1, 9, 4, 1, 8}, {3, 4, 2, 2, 1}, {1, 33, 4, 2, 16},
};

reference::AttentionShape toReference(const AttentionShape &s) {
  return {s.batch, s.seq, s.heads, s.kvHeads, s.headDim, s.bf16Operands};
}

int64_t querySize(const AttentionShape &s) {
  return s.batch * s.seq * s.heads * s.headDim;
}
int64_t kvSize(const AttentionShape &s) {
  return s.batch * s.seq * s.kvHeads * s.headDim;
}
int64_t rowCount(const AttentionShape &s) { return s.batch * s.heads * s.seq; }

std::string name(const AttentionShape &s) {
  return "B" + std::to_string(s.batch) + " T" + std::to_string(s.seq) + " H" +
         std::to_string(s.heads) + " G" + std::to_string(s.kvHeads) + " hd" +
         std::to_string(s.headDim);
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs randomInputs(const AttentionShape &s, uint64_t seed) {
  // Scores of a few units: softmaxes neither uniform nor one-hot.
  return {randomFloats(querySize(s), seed, -2.0f, 2.0f),
          randomFloats(kvSize(s), seed + 1, -2.0f, 2.0f),
          randomFloats(kvSize(s), seed + 2)};
}

} // namespace

TEST(AttentionTest, ForwardMatchesReference) {
  for (const AttentionShape &s : kShapes) {
    const Inputs in = randomInputs(s, 1);
    std::vector<float> out(querySize(s)), lse(rowCount(s));
    attentionForward(testPool(), in.q.data(), in.k.data(), in.v.data(),
                     out.data(), lse.data(), s);
    std::vector<double> expected(querySize(s)), expectedLse(rowCount(s));
    reference::attentionForward(widen(in.q).data(), widen(in.k).data(),
                                widen(in.v).data(), expected.data(),
                                expectedLse.data(), toReference(s));
    expectClose(out, expected, 1e-5, 1e-6, "attention out " + name(s));
    expectClose(lse, expectedLse, 1e-6, 1e-6, "attention lse " + name(s));
  }
}

TEST(AttentionTest, ReferenceBackwardMatchesFiniteDifferences) {
  for (const AttentionShape &s :
       {AttentionShape{2, 4, 4, 2, 3}, AttentionShape{1, 3, 2, 1, 2},
        AttentionShape{1, 1, 2, 2, 2}}) {
    const Inputs in = randomInputs(s, 2);
    const std::vector<double> q = widen(in.q), k = widen(in.k), v = widen(in.v);
    const std::vector<double> dout = widen(randomFloats(querySize(s), 5));
    const reference::AttentionShape r = toReference(s);
    auto forward = [&](const std::vector<double> &qq,
                       const std::vector<double> &kk,
                       const std::vector<double> &vv) {
      std::vector<double> out(querySize(s));
      reference::attentionForward(qq.data(), kk.data(), vv.data(), out.data(),
                                  static_cast<double *>(nullptr), r);
      return weightedSum(out, dout);
    };
    std::vector<double> dq(querySize(s)), dk(kvSize(s)), dv(kvSize(s));
    reference::attentionBackward(q.data(), k.data(), v.data(), dout.data(),
                                 dq.data(), dk.data(), dv.data(), r);
    expectClose(
        dq,
        numericalGradient(
            [&](const std::vector<double> &x) { return forward(x, k, v); }, q),
        1e-6, 1e-8, "dq " + name(s));
    expectClose(
        dk,
        numericalGradient(
            [&](const std::vector<double> &x) { return forward(q, x, v); }, k),
        1e-6, 1e-8, "dk " + name(s));
    expectClose(
        dv,
        numericalGradient(
            [&](const std::vector<double> &x) { return forward(q, k, x); }, v),
        1e-6, 1e-8, "dv " + name(s));
  }
}

TEST(AttentionTest, BackwardMatchesReference) {
  for (const AttentionShape &s : kShapes) {
    const Inputs in = randomInputs(s, 3);
    const std::vector<float> dout = randomFloats(querySize(s), 6);
    std::vector<float> out(querySize(s)), lse(rowCount(s));
    attentionForward(testPool(), in.q.data(), in.k.data(), in.v.data(),
                     out.data(), lse.data(), s);
    std::vector<float> dq(querySize(s)), dk(kvSize(s)), dv(kvSize(s)),
        delta(rowCount(s));
    attentionBackward(testPool(), in.q.data(), in.k.data(), in.v.data(),
                      out.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                      dv.data(), delta.data(), s);
    std::vector<double> expectedDq(querySize(s)), expectedDk(kvSize(s)),
        expectedDv(kvSize(s));
    reference::attentionBackward(widen(in.q).data(), widen(in.k).data(),
                                 widen(in.v).data(), widen(dout).data(),
                                 expectedDq.data(), expectedDk.data(),
                                 expectedDv.data(), toReference(s));
    // Gradients sum up to seq * heads/kv_heads terms of fp32 products.
    expectClose(dq, expectedDq, 1e-4, 2e-5, "dq " + name(s));
    expectClose(dk, expectedDk, 1e-4, 2e-5, "dk " + name(s));
    expectClose(dv, expectedDv, 1e-4, 2e-5, "dv " + name(s));
    // delta is dout . out per row.
    std::vector<double> expectedDelta(rowCount(s));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t t = 0; t < s.seq; ++t) {
          double sum = 0.0;
          for (int64_t d = 0; d < s.headDim; ++d) {
            const int64_t at = ((b * s.seq + t) * s.heads + h) * s.headDim + d;
            sum += static_cast<double>(dout[at]) * out[at];
          }
          expectedDelta[(b * s.heads + h) * s.seq + t] = sum;
        }
    expectClose(delta, expectedDelta, 1e-5, 1e-6, "delta " + name(s));
  }
}

TEST(AttentionTest, IsCausal) {
  // Changing q, k and v at position p changes no output before p.
  const AttentionShape s{2, 8, 4, 2, 4};
  const Inputs in = randomInputs(s, 4);
  std::vector<float> out(querySize(s)), lse(rowCount(s));
  attentionForward(testPool(), in.q.data(), in.k.data(), in.v.data(),
                   out.data(), lse.data(), s);
  for (int64_t p = 0; p < s.seq; ++p) {
    Inputs changed = in;
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t c = 0; c < s.heads * s.headDim; ++c)
        changed.q[(b * s.seq + p) * s.heads * s.headDim + c] += 1.5f;
      for (int64_t c = 0; c < s.kvHeads * s.headDim; ++c) {
        changed.k[(b * s.seq + p) * s.kvHeads * s.headDim + c] -= 0.75f;
        changed.v[(b * s.seq + p) * s.kvHeads * s.headDim + c] += 3.0f;
      }
    }
    std::vector<float> out2(querySize(s)), lse2(rowCount(s));
    attentionForward(testPool(), changed.q.data(), changed.k.data(),
                     changed.v.data(), out2.data(), lse2.data(), s);
    const int64_t rowWidth = s.heads * s.headDim;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t t = 0; t < s.seq; ++t) {
        const float *before = out.data() + (b * s.seq + t) * rowWidth;
        const float *after = out2.data() + (b * s.seq + t) * rowWidth;
        const bool same =
            std::memcmp(before, after, rowWidth * sizeof(float)) == 0;
        EXPECT_EQ(same, t < p) << "position " << t << " after changing " << p;
      }
  }
}

TEST(AttentionTest, IsDeterministic) {
  const AttentionShape s{2, 64, 4, 2, 16};
  const Inputs in = randomInputs(s, 7);
  const std::vector<float> dout = randomFloats(querySize(s), 8);
  auto run = [&](tetra::backend::ThreadPool &pool) {
    std::vector<float> out(querySize(s)), lse(rowCount(s)), dq(querySize(s)),
        dk(kvSize(s)), dv(kvSize(s)), delta(rowCount(s));
    attentionForward(pool, in.q.data(), in.k.data(), in.v.data(), out.data(),
                     lse.data(), s);
    attentionBackward(pool, in.q.data(), in.k.data(), in.v.data(), out.data(),
                      lse.data(), dout.data(), dq.data(), dk.data(), dv.data(),
                      delta.data(), s);
    std::vector<float> all;
    for (const std::vector<float> *part : {&out, &lse, &dq, &dk, &dv, &delta})
      all.insert(all.end(), part->begin(), part->end());
    return all;
  };
  EXPECT_TRUE(sameBits(run(serialPool()), run(testPool())));
}

//===----------------------------------------------------------------------===//
// BF16 operands (the policy's `attention = bf16`)
//===----------------------------------------------------------------------===//

namespace {

/// Forward and backward of `s` on `in` and dout.
struct Results {
  std::vector<float> out, lse, dq, dk, dv;
};
Results runBoth(const AttentionShape &s, const Inputs &in,
                const std::vector<float> &dout) {
  Results r{std::vector<float>(querySize(s)), std::vector<float>(rowCount(s)),
            std::vector<float>(querySize(s)), std::vector<float>(kvSize(s)),
            std::vector<float>(kvSize(s))};
  std::vector<float> delta(rowCount(s));
  attentionForward(testPool(), in.q.data(), in.k.data(), in.v.data(),
                   r.out.data(), r.lse.data(), s);
  attentionBackward(testPool(), in.q.data(), in.k.data(), in.v.data(),
                    r.out.data(), r.lse.data(), dout.data(), r.dq.data(),
                    r.dk.data(), r.dv.data(), delta.data(), s);
  return r;
}

std::vector<float> roundedToBF16(std::vector<float> x) {
  tetra::numerics::roundTripBF16(x.data(), static_cast<int64_t>(x.size()));
  return x;
}

/// Close to the fp64 reference but for the rare P or dS that the kernel's
/// fp32 value rounds to the other BF16 neighbour than the exact one (about
/// one in 10^4): at most 1 % of the elements beyond `atol + rtol |e|`, none
/// beyond 2^-6 of the largest.
void expectMostlyClose(const std::vector<float> &actual,
                       const std::vector<double> &expected, double rtol,
                       double atol, const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double largest = 0.0;
  for (double e : expected)
    largest = std::max(largest, std::abs(e));
  size_t beyond = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::abs(actual[i] - expected[i]);
    beyond += error > atol + rtol * std::abs(expected[i]);
    EXPECT_LE(error, largest / 64 + atol) << what << " element " << i;
  }
  EXPECT_LE(beyond, std::max<size_t>(1, actual.size() / 100)) << what;
}

} // namespace

TEST(AttentionTest, BF16OperandsMatchReference) {
  for (AttentionShape s : kShapes) {
    s.bf16Operands = true;
    const Inputs in = randomInputs(s, 11);
    const std::vector<float> dout = randomFloats(querySize(s), 12);
    const Results r = runBoth(s, in, dout);
    const reference::AttentionShape rs = toReference(s);
    std::vector<double> out(querySize(s)), lse(rowCount(s)),
        dq(querySize(s)), dk(kvSize(s)), dv(kvSize(s));
    reference::attentionForward(widen(in.q).data(), widen(in.k).data(),
                                widen(in.v).data(), out.data(), lse.data(), rs);
    reference::attentionBackward(widen(in.q).data(), widen(in.k).data(),
                                 widen(in.v).data(), widen(dout).data(),
                                 dq.data(), dk.data(), dv.data(), rs);
    expectMostlyClose(r.out, out, 1e-5, 1e-6, "bf16 out " + name(s));
    expectClose(r.lse, lse, 1e-6, 1e-6, "bf16 lse " + name(s));
    expectMostlyClose(r.dq, dq, 1e-4, 2e-5, "bf16 dq " + name(s));
    expectMostlyClose(r.dk, dk, 1e-4, 2e-5, "bf16 dk " + name(s));
    expectMostlyClose(r.dv, dv, 1e-4, 2e-5, "bf16 dv " + name(s));
  }
}

TEST(AttentionTest, BF16OperandsRoundEveryProductOperand) {
  AttentionShape s{2, 33, 4, 2, 16};
  const Inputs in = randomInputs(s, 13);
  const std::vector<float> dout = randomFloats(querySize(s), 14);
  const Inputs rounded{roundedToBF16(in.q), roundedToBF16(in.k),
                       roundedToBF16(in.v)};
  s.bf16Operands = true;
  const Results bf16 = runBoth(s, in, dout);
  // q, k and v are rounded as read: rounding them first changes nothing.
  const Results preRounded = runBoth(s, rounded, dout);
  EXPECT_TRUE(sameBits(bf16.out, preRounded.out));
  EXPECT_TRUE(sameBits(bf16.lse, preRounded.lse));
  EXPECT_TRUE(sameBits(bf16.dq, preRounded.dq));
  EXPECT_TRUE(sameBits(bf16.dk, preRounded.dk));
  EXPECT_TRUE(sameBits(bf16.dv, preRounded.dv));
  // So is dout in its products: dV = sum P dout does not move (delta =
  // dout . out reads dout as given, so dq and dk may).
  const Results doutRounded = runBoth(s, in, roundedToBF16(dout));
  EXPECT_TRUE(sameBits(bf16.dv, doutRounded.dv));
  // P and dS are rounded too: on bf16 inputs the fp32 mode differs.
  s.bf16Operands = false;
  const Results fp32 = runBoth(s, rounded, roundedToBF16(dout));
  EXPECT_TRUE(sameBits(bf16.lse, fp32.lse)); // lse: unrounded scores
  EXPECT_FALSE(sameBits(bf16.out, fp32.out));
  EXPECT_FALSE(sameBits(bf16.dv, fp32.dv));
  EXPECT_FALSE(sameBits(bf16.dq, fp32.dq));
}
