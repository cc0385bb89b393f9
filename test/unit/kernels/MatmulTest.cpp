//===- MatmulTest.cpp - The blocked fp32 GEMM -----------------------------===//

#include "runtime/kernels/Matmul.h"
#include "runtime/kernels/reference/Matmul.h"

#include "KernelTestUtils.h"

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

struct Size {
  int64_t m, n, k;
};

/// Edges of every block size (MR, NR, MC, NC, KC), tiny and odd shapes, and
/// shapes of the tiny model's GEMMs.
const Size kSizes[] = {{1, 1, 1},      {7, 5, 3},      {13, 37, 300},
                       {100, 300, 17}, {200, 9, 513},  {97, 257, 64},
                       {1024, 64, 64}, {64, 64, 1024}, {3, 600, 1}};

/// The product's worst-case fp32 error bound per element:
/// 2 k u sum_k |a| |b| with u = 2^-24, plus the accumulated C.
std::vector<double> errorBound(const std::vector<float> &a,
                               const std::vector<float> &b,
                               const std::vector<float> &c, const Size &s,
                               bool transA, bool transB, bool accumulate) {
  std::vector<double> absA(a.size()), absB(b.size()), absC(c.size());
  for (size_t i = 0; i < a.size(); ++i)
    absA[i] = std::fabs(a[i]);
  for (size_t i = 0; i < b.size(); ++i)
    absB[i] = std::fabs(b[i]);
  for (size_t i = 0; i < c.size(); ++i)
    absC[i] = std::fabs(c[i]);
  reference::matmul(absA.data(), absB.data(), absC.data(), s.m, s.n, s.k,
                    transA, transB, accumulate);
  for (double &bound : absC)
    bound *= 2.0 * (s.k + 1) * 0x1p-24;
  return absC;
}

void checkAgainstReference(tetra::backend::ThreadPool &pool, const Size &s,
                           bool transA, bool transB, bool accumulate) {
  const std::vector<float> a = randomFloats(s.m * s.k, 1);
  const std::vector<float> b = randomFloats(s.k * s.n, 2);
  const std::vector<float> initial = randomFloats(s.m * s.n, 3);
  std::vector<float> c = initial;
  matmul(pool, a.data(), b.data(), c.data(), s.m, s.n, s.k, transA, transB,
         accumulate);
  std::vector<double> expected = widen(initial);
  reference::matmul(widen(a).data(), widen(b).data(), expected.data(), s.m, s.n,
                    s.k, transA, transB, accumulate);
  const std::vector<double> bound =
      errorBound(a, b, initial, s, transA, transB, accumulate);
  int failures = 0;
  for (size_t i = 0; i < c.size(); ++i)
    if (!(std::fabs(c[i] - expected[i]) <= bound[i] + 1e-30) && failures++ < 5)
      ADD_FAILURE() << "m" << s.m << " n" << s.n << " k" << s.k << " transA "
                    << transA << " transB " << transB << " accumulate "
                    << accumulate << " [" << i << "]: " << c[i] << " vs "
                    << expected[i];
}

} // namespace

TEST(MatmulTest, MatchesReference) {
  for (const Size &s : kSizes)
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (bool accumulate : {false, true})
          checkAgainstReference(testPool(), s, transA, transB, accumulate);
}

TEST(MatmulTest, EmptyReduction) {
  std::vector<float> c(6, 5.0f);
  matmul(testPool(), nullptr, nullptr, c.data(), 2, 3, 0, false, false, true);
  EXPECT_EQ(c, std::vector<float>(6, 5.0f));
  matmul(testPool(), nullptr, nullptr, c.data(), 2, 3, 0, false, false, false);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

TEST(MatmulTest, LinearLayerGradientsMatchFiniteDifferences) {
  // y = x w^T: Fprop (trans_b), Dgrad dx = dy w, Wgrad dw = dy^T x
  // (trans_a, k = tokens), checked against differences of the fp64
  // reference forward.
  const int64_t tokens = 6, in = 5, out = 4;
  const std::vector<float> x = randomFloats(tokens * in, 4);
  const std::vector<float> w = randomFloats(out * in, 5);
  const std::vector<float> dy = randomFloats(tokens * out, 6);
  auto loss = [&](const std::vector<double> &xx,
                  const std::vector<double> &ww) {
    std::vector<double> y(tokens * out);
    reference::matmul(xx.data(), ww.data(), y.data(), tokens, out, in, false,
                      true, false);
    return weightedSum(y, widen(dy));
  };
  std::vector<float> dx(tokens * in), dw(out * in);
  matmul(testPool(), dy.data(), w.data(), dx.data(), tokens, in, out, false,
         false, false);
  matmul(testPool(), dy.data(), x.data(), dw.data(), out, in, tokens, true,
         false, false);
  expectClose(
      dx,
      numericalGradient(
          [&](const std::vector<double> &v) { return loss(v, widen(w)); },
          widen(x)),
      1e-5, 1e-6, "dgrad");
  expectClose(
      dw,
      numericalGradient(
          [&](const std::vector<double> &v) { return loss(widen(x), v); },
          widen(w)),
      1e-5, 1e-6, "wgrad");
}

TEST(MatmulTest, IsDeterministic) {
  const Size s{300, 520, 700};
  const std::vector<float> a = randomFloats(s.m * s.k, 7);
  const std::vector<float> b = randomFloats(s.k * s.n, 8);
  std::vector<float> c1(s.m * s.n), cN(s.m * s.n);
  matmul(serialPool(), a.data(), b.data(), c1.data(), s.m, s.n, s.k, true,
         false, false);
  matmul(testPool(), a.data(), b.data(), cN.data(), s.m, s.n, s.k, true, false,
         false);
  EXPECT_TRUE(sameBits(c1, cN));
}
