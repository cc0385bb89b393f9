//===- VectorMathTest.cpp - fastExp and the lane-split reductions ---------===//

#include "runtime/kernels/VectorMath.h"

#include "KernelTestUtils.h"

#include <cmath>
#include <limits>

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

TEST(VectorMathTest, FastExpIsWithinOneUlp) {
  // Every 997th float (by bit pattern) of either sign from ln(FLT_MIN) to
  // 127.5 ln 2, against fp64 exp.
  double worst = 0.0;
  float worstAt = 0.0f;
  int64_t checked = 0;
  for (uint32_t bits = 0; bits < 0x42B10000u; bits += 997)
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint32_t pattern = bits | sign;
      float x;
      std::memcpy(&x, &pattern, sizeof(float));
      if (x < -87.33f || x > 88.37f)
        continue;
      const double exact = std::exp(static_cast<double>(x));
      const double ulp =
          std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
      const double error = std::fabs(fastExp(x) - exact) / ulp;
      if (error > worst) {
        worst = error;
        worstAt = x;
      }
      ++checked;
    }
  EXPECT_GT(checked, 2000000);
  EXPECT_LE(worst, 1.0) << "at x = " << worstAt;
}

TEST(VectorMathTest, FastExpEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fastExp(0.0f), 1.0f);
  EXPECT_EQ(fastExp(-inf), 0.0f);
  EXPECT_EQ(fastExp(-100.0f), 0.0f);
  EXPECT_EQ(fastExp(inf), inf);
  EXPECT_EQ(fastExp(100.0f), inf);
  EXPECT_TRUE(std::isnan(fastExp(std::numeric_limits<float>::quiet_NaN())));
  // e^1 and e^-1 to the last bit or one off.
  EXPECT_NEAR(fastExp(1.0f), 2.71828182845904524, 2.4e-7);
  EXPECT_NEAR(fastExp(-1.0f), 0.36787944117144233, 3.0e-8);
}

TEST(VectorMathTest, ReductionsMatchFp64) {
  for (int64_t n : {0, 1, 7, 8, 9, 1000, 4097}) {
    const std::vector<float> a = randomFloats(n, 1), b = randomFloats(n, 2);
    double dotExact = 0.0, squares = 0.0, sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      dotExact += static_cast<double>(a[i]) * b[i];
      squares += static_cast<double>(a[i]) * a[i];
      sum += a[i];
    }
    EXPECT_NEAR(dot(a.data(), b.data(), n), dotExact, 1e-6 * (1 + n / 8.0));
    EXPECT_NEAR(sumOfSquaresF64(a.data(), n), squares, 1e-12 * (1 + n));
    EXPECT_NEAR(sumF64(a.data(), n), sum, 1e-12 * (1 + n));
    if (n > 0) {
      float maximum = a[0];
      for (float value : a)
        maximum = std::max(maximum, value);
      EXPECT_EQ(maxOf(a.data(), n), maximum);
    }
  }
}
