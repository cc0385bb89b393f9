//===- OptimizerTest.cpp - Gradient norm, clipping and AdamW --------------===//

#include "runtime/kernels/Optimizer.h"
#include "runtime/kernels/reference/Optimizer.h"

#include "KernelTestUtils.h"

#include <limits>

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

TEST(OptimizerTest, GlobalNormMatchesReference) {
  // Tensors of awkward sizes, one empty, one spanning several 64 K pieces.
  const std::vector<int64_t> counts = {1, 0, 777, 65536, 200001};
  std::vector<std::vector<float>> tensors;
  std::vector<const float *> pointers;
  for (size_t t = 0; t < counts.size(); ++t) {
    tensors.push_back(randomFloats(counts[t], 10 + t, -3.0f, 3.0f));
    pointers.push_back(tensors.back().data());
  }
  const double norm = globalNorm(testPool(), pointers, counts);
  const double expected = reference::globalNorm(pointers, counts);
  EXPECT_NEAR(norm, expected, 1e-12 * expected);
  EXPECT_EQ(globalNorm(testPool(), {}, {}), 0.0);

  // The same bits with one thread.
  const double serial = globalNorm(serialPool(), pointers, counts);
  EXPECT_EQ(std::memcmp(&serial, &norm, sizeof(double)), 0);
}

TEST(OptimizerTest, ClipScalesOnlyAboveTheMaximum) {
  std::vector<float> a = {3.0f, 0.0f}, b = {4.0f};
  std::vector<float *> tensors = {a.data(), b.data()};
  const std::vector<int64_t> counts = {2, 1};
  const double norm = globalNorm(testPool(), {a.data(), b.data()}, counts);
  EXPECT_EQ(norm, 5.0);
  // Below the maximum: untouched.
  ASSERT_TRUE(clipByGlobalNorm(testPool(), tensors, counts, 5.0f, 10.0));
  EXPECT_EQ(a, (std::vector<float>{3.0f, 0.0f}));
  // Above: scaled by 1 / (5 + 1e-6), so the new norm is just below 1.
  ASSERT_TRUE(clipByGlobalNorm(testPool(), tensors, counts, 5.0f, 1.0));
  const float factor = static_cast<float>(1.0 / (5.0 + 1e-6));
  EXPECT_EQ(a[0], 3.0f * factor);
  EXPECT_EQ(b[0], 4.0f * factor);
  EXPECT_NEAR(globalNorm(testPool(), {a.data(), b.data()}, counts), 1.0, 1e-6);
  EXPECT_DOUBLE_EQ(clipFactor(5.0, 1.0), reference::clipFactor(5.0, 1.0));
}

TEST(OptimizerTest, AccumulateGradientOverwritesThenAdds) {
  std::vector<float> sum(70001, 123.0f); // stale values from an earlier step
  const std::vector<float> g0 = randomFloats(sum.size(), 3, -2.0f, 2.0f);
  const std::vector<float> g1 = randomFloats(sum.size(), 4, -2.0f, 2.0f);
  const std::vector<float> g2 = randomFloats(sum.size(), 5, -2.0f, 2.0f);
  const float scale = 1.0f / 3.0f;
  accumulateGradient(testPool(), sum.data(), g0.data(), sum.size(), scale,
                     /*first=*/true);
  for (size_t i = 0; i < sum.size(); ++i)
    ASSERT_EQ(sum[i], scale * g0[i]) << i;
  accumulateGradient(testPool(), sum.data(), g1.data(), sum.size(), scale,
                     /*first=*/false);
  accumulateGradient(testPool(), sum.data(), g2.data(), sum.size(), scale,
                     /*first=*/false);
  for (size_t i = 0; i < sum.size(); ++i) {
    // In this order, one fp32 rounding per product and per sum.
    float expected = scale * g0[i];
    expected = expected + scale * g1[i];
    expected = expected + scale * g2[i];
    ASSERT_EQ(sum[i], expected) << i;
  }
}

TEST(OptimizerTest, ClipRejectsNonFiniteNorms) {
  std::vector<float> a = {1.0f};
  std::vector<float *> tensors = {a.data()};
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    tetra::io::Status status =
        clipByGlobalNorm(testPool(), tensors, {1}, bad, 1.0);
    ASSERT_FALSE(status);
    EXPECT_NE(status.error().message().find("refusing to clip"),
              std::string::npos);
    EXPECT_EQ(a[0], 1.0f);
  }
}

TEST(OptimizerTest, AdamWTwoStepsByHand) {
  // One parameter p = 1 with lr 0.1, betas (0.9, 0.999), eps 1e-8, weight
  // decay 0.01, gradients 0.5 then -0.25.
  //
  // Step 1: m = 0.1 * 0.5 = 0.05, v = 0.001 * 0.25 = 0.00025,
  //   mhat = 0.05 / 0.1 = 0.5, vhat = 0.00025 / 0.001 = 0.25,
  //   p = 1 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.01 * 1) = 0.899000002.
  // Step 2: m = 0.9 * 0.05 + 0.1 * -0.25 = 0.02,
  //   v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225,
  //   mhat = 0.02 / (1 - 0.81) = 0.105263158,
  //   vhat = 0.00031225 / (1 - 0.998001) = 0.156203102,
  //   p = 0.899000002 - 0.1 * (0.105263158 / (0.395225381 + 1e-8)
  //                            + 0.01 * 0.899000002)
  //     = 0.899000002 - 0.1 * (0.266337040 + 0.008990000) = 0.871467299.
  AdamWConfig config;
  config.lr = 0.1;
  config.beta1 = 0.9;
  config.beta2 = 0.999;
  config.eps = 1e-8;
  config.weightDecay = 0.01;
  float p = 1.0f, m = 0.0f, v = 0.0f;
  const float g1 = 0.5f, g2 = -0.25f;
  config.step = 1;
  ASSERT_TRUE(adamw(testPool(), &p, &g1, &m, &v, 1, config));
  EXPECT_NEAR(m, 0.05f, 1e-8);
  EXPECT_NEAR(v, 0.00025f, 1e-10);
  EXPECT_NEAR(p, 0.899000002, 1e-7);
  config.step = 2;
  ASSERT_TRUE(adamw(testPool(), &p, &g2, &m, &v, 1, config));
  EXPECT_NEAR(m, 0.02f, 1e-8);
  EXPECT_NEAR(v, 0.00031225f, 1e-10);
  EXPECT_NEAR(p, 0.871467299, 2e-7);
}

TEST(OptimizerTest, AdamWMatchesReference) {
  const int64_t n = 70001;
  std::vector<float> p = randomFloats(n, 20), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> pRef = widen(p), mRef(n, 0.0), vRef(n, 0.0);
  AdamWConfig config;
  config.lr = 3e-3;
  config.beta1 = 0.9;
  config.beta2 = 0.95;
  config.eps = 1e-8;
  config.weightDecay = 0.1;
  for (int64_t step = 1; step <= 5; ++step) {
    const std::vector<float> g = randomFloats(n, 30 + step, -0.01f, 0.01f);
    config.step = step;
    ASSERT_TRUE(
        adamw(testPool(), p.data(), g.data(), m.data(), v.data(), n, config));
    reference::adamw(pRef.data(), widen(g).data(), mRef.data(), vRef.data(), n,
                     config.lr, config.beta1, config.beta2, config.eps,
                     config.weightDecay, step);
  }
  expectClose(p, pRef, 1e-6, 1e-6, "param");
  // m and v are sums of terms of about 1e-3 and 1e-6 that partly cancel:
  // absolute tolerances at fp32's resolution of those terms.
  expectClose(m, mRef, 1e-5, 1e-9, "m");
  expectClose(v, vRef, 1e-5, 1e-12, "v");
}

TEST(OptimizerTest, AdamWRejectsBadSteps) {
  float p = 1.0f, g = 1.0f, m = 0.0f, v = 0.0f;
  AdamWConfig config;
  config.step = 0;
  EXPECT_FALSE(adamw(testPool(), &p, &g, &m, &v, 1, config));
  config.step = 1;
  config.beta2 = 1.0;
  EXPECT_FALSE(adamw(testPool(), &p, &g, &m, &v, 1, config));
  EXPECT_EQ(p, 1.0f);
}
