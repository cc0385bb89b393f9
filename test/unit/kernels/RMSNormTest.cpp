//===- RMSNormTest.cpp - RMSNorm forward and backward ---------------------===//

#include "runtime/kernels/RMSNorm.h"
#include "runtime/kernels/reference/RMSNorm.h"

#include "KernelTestUtils.h"

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

struct Size {
  int64_t rows, dim;
};

const Size kSizes[] = {{1, 1}, {1, 64}, {7, 5}, {33, 67}, {300, 64}};
constexpr double kEps = 1e-5;

} // namespace

TEST(RMSNormTest, ForwardMatchesReference) {
  for (const Size &s : kSizes) {
    const std::vector<float> x = randomFloats(s.rows * s.dim, 1, -2.0f, 2.0f);
    const std::vector<float> w = randomFloats(s.dim, 2, 0.5f, 1.5f);
    std::vector<float> y(s.rows * s.dim), rstd(s.rows);
    rmsnormForward(testPool(), x.data(), w.data(), y.data(), rstd.data(),
                   s.rows, s.dim, kEps);
    std::vector<double> expected(s.rows * s.dim);
    reference::rmsnormForward(widen(x).data(), widen(w).data(), expected.data(),
                              s.rows, s.dim, kEps);
    expectClose(y, expected, 2e-6, 1e-6, "rmsnorm.forward y");
    std::vector<double> expectedRstd(s.rows);
    for (int64_t r = 0; r < s.rows; ++r) {
      double sum = 0.0;
      for (int64_t c = 0; c < s.dim; ++c)
        sum += static_cast<double>(x[r * s.dim + c]) * x[r * s.dim + c];
      expectedRstd[r] = 1.0 / std::sqrt(sum / s.dim + kEps);
    }
    expectClose(rstd, expectedRstd, 1e-6, 0.0, "rmsnorm.forward rstd");
  }
}

TEST(RMSNormTest, ReferenceBackwardMatchesFiniteDifferences) {
  for (const Size &s : {Size{1, 1}, Size{3, 5}, Size{2, 16}}) {
    const std::vector<double> x = widen(randomFloats(s.rows * s.dim, 3));
    const std::vector<double> w = widen(randomFloats(s.dim, 4, 0.5f, 1.5f));
    const std::vector<double> dy = widen(randomFloats(s.rows * s.dim, 5));
    std::vector<double> dx(s.rows * s.dim), dw(s.dim, 0.0);
    reference::rmsnormBackward(x.data(), w.data(), dy.data(), dx.data(),
                               dw.data(), s.rows, s.dim, kEps);
    auto lossOfX = [&](const std::vector<double> &input) {
      std::vector<double> y(s.rows * s.dim);
      reference::rmsnormForward(input.data(), w.data(), y.data(), s.rows, s.dim,
                                kEps);
      return weightedSum(y, dy);
    };
    auto lossOfW = [&](const std::vector<double> &weight) {
      std::vector<double> y(s.rows * s.dim);
      reference::rmsnormForward(x.data(), weight.data(), y.data(), s.rows,
                                s.dim, kEps);
      return weightedSum(y, dy);
    };
    expectClose(dx, numericalGradient(lossOfX, x), 1e-6, 1e-8, "dx");
    expectClose(dw, numericalGradient(lossOfW, w), 1e-6, 1e-8, "dweight");
  }
}

TEST(RMSNormTest, BackwardMatchesReference) {
  for (const Size &s : kSizes)
    for (bool accumulate : {false, true}) {
      const std::vector<float> x = randomFloats(s.rows * s.dim, 6, -2.0f, 2.0f);
      const std::vector<float> w = randomFloats(s.dim, 7, 0.5f, 1.5f);
      const std::vector<float> dy = randomFloats(s.rows * s.dim, 8);
      const std::vector<float> dwInitial = randomFloats(s.dim, 9);
      std::vector<float> y(s.rows * s.dim), rstd(s.rows);
      rmsnormForward(testPool(), x.data(), w.data(), y.data(), rstd.data(),
                     s.rows, s.dim, kEps);
      std::vector<float> dx(s.rows * s.dim), dw = dwInitial;
      rmsnormBackward(testPool(), x.data(), w.data(), rstd.data(), dy.data(),
                      dx.data(), dw.data(), s.rows, s.dim, accumulate);
      std::vector<double> expectedDx(s.rows * s.dim);
      std::vector<double> expectedDw =
          accumulate ? widen(dwInitial) : std::vector<double>(s.dim, 0.0);
      reference::rmsnormBackward(widen(x).data(), widen(w).data(),
                                 widen(dy).data(), expectedDx.data(),
                                 expectedDw.data(), s.rows, s.dim, kEps);
      expectClose(dx, expectedDx, 1e-5, 1e-5, "rmsnorm.backward dx");
      expectClose(dw, expectedDw, 1e-5, 1e-5 * std::sqrt(s.rows),
                  "rmsnorm.backward dweight");
    }
}

TEST(RMSNormTest, BackwardIsDeterministic) {
  const int64_t rows = 1000, dim = 130;
  const std::vector<float> x = randomFloats(rows * dim, 10);
  const std::vector<float> w = randomFloats(dim, 11);
  const std::vector<float> dy = randomFloats(rows * dim, 12);
  std::vector<float> y(rows * dim), rstd(rows);
  rmsnormForward(testPool(), x.data(), w.data(), y.data(), rstd.data(), rows,
                 dim, kEps);
  std::vector<float> dx1(rows * dim), dw1(dim), dxN(rows * dim), dwN(dim);
  rmsnormBackward(serialPool(), x.data(), w.data(), rstd.data(), dy.data(),
                  dx1.data(), dw1.data(), rows, dim, false);
  rmsnormBackward(testPool(), x.data(), w.data(), rstd.data(), dy.data(),
                  dxN.data(), dwN.data(), rows, dim, false);
  EXPECT_TRUE(sameBits(dx1, dxN));
  EXPECT_TRUE(sameBits(dw1, dwN));
}
