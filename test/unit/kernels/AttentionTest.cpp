//===- AttentionTest.cpp - Causal GQA attention forward and backward ------===//

#include "runtime/kernels/Attention.h"
#include "runtime/kernels/reference/Attention.h"

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
  return {s.batch, s.seq, s.heads, s.kvHeads, s.headDim};
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
