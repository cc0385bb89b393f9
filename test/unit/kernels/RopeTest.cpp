//===- RopeTest.cpp - Rotary embedding forward and backward ---------------===//

#include "runtime/kernels/Rope.h"
#include "runtime/kernels/reference/Rope.h"

#include "KernelTestUtils.h"

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

struct Size {
  int64_t batch, seq, heads, headDim;
  double theta;
};

const Size kSizes[] = {{1, 1, 1, 2, 10000.0},
                       {2, 5, 3, 4, 10000.0},
                       {2, 17, 2, 6, 500000.0},
                       {1, 128, 4, 16, 10000.0},
                       {1, 1024, 1, 64, 10000.0}};

} // namespace

TEST(RopeTest, ForwardMatchesReference) {
  for (const Size &s : kSizes) {
    const int64_t n = s.batch * s.seq * s.heads * s.headDim;
    const std::vector<float> x = randomFloats(n, 1);
    std::vector<float> y(n);
    ropeForward(testPool(), x.data(), y.data(), s.batch, s.seq, s.heads,
                s.headDim, s.theta);
    std::vector<double> expected(n);
    reference::rope(widen(x).data(), expected.data(), s.batch, s.seq, s.heads,
                    s.headDim, s.theta);
    // cos and sin are rounded to fp32 once: an absolute error of a few ulps
    // of values in [-1, 1].
    expectClose(y, expected, 0.0, 5e-7, "rope.forward");
  }
}

TEST(RopeTest, BackwardMatchesFiniteDifferences) {
  const Size s{2, 5, 3, 4, 10000.0};
  const int64_t n = s.batch * s.seq * s.heads * s.headDim;
  const std::vector<double> dy = widen(randomFloats(n, 2));
  auto loss = [&](const std::vector<double> &x) {
    std::vector<double> y(n);
    reference::rope(x.data(), y.data(), s.batch, s.seq, s.heads, s.headDim,
                    s.theta);
    return weightedSum(y, dy);
  };
  std::vector<double> analytic(n);
  reference::rope(dy.data(), analytic.data(), s.batch, s.seq, s.heads,
                  s.headDim, s.theta, /*sign=*/-1);
  const std::vector<double> numeric =
      numericalGradient(loss, widen(randomFloats(n, 3)));
  expectClose(analytic, numeric, 1e-7, 1e-8, "reference rope backward");

  std::vector<float> dx(n);
  const std::vector<float> dyFloat(dy.begin(), dy.end());
  ropeBackward(testPool(), dyFloat.data(), dx.data(), s.batch, s.seq, s.heads,
               s.headDim, s.theta);
  expectClose(dx, numeric, 0.0, 1e-6, "rope.backward");
}

TEST(RopeTest, BackwardUndoesForwardInPlace) {
  for (const Size &s : kSizes) {
    const int64_t n = s.batch * s.seq * s.heads * s.headDim;
    const std::vector<float> x = randomFloats(n, 4);
    std::vector<float> y = x;
    ropeForward(testPool(), y.data(), y.data(), s.batch, s.seq, s.heads,
                s.headDim, s.theta);
    ropeBackward(testPool(), y.data(), y.data(), s.batch, s.seq, s.heads,
                 s.headDim, s.theta);
    expectClose(y, widen(x), 0.0, 1e-6, "backward(forward(x))");
  }
}

TEST(RopeTest, PositionZeroIsIdentity) {
  const std::vector<float> x = randomFloats(3 * 8, 5);
  std::vector<float> y(x.size());
  ropeForward(testPool(), x.data(), y.data(), 3, 1, 2, 4, 10000.0);
  EXPECT_TRUE(sameBits(x, y));
}
