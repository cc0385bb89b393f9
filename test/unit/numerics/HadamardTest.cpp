//===- HadamardTest.cpp - Block Hadamard rotations ------------------------===//

#include "runtime/numerics/Hadamard.h"

#include "runtime/numerics/Formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace tetra::numerics;

namespace {

const int kBlockSizes[] = {16, 32, 64, 128};

/// Deterministic values in [-2, 2) from Philox.
std::vector<float> randomValues(int64_t count, uint64_t seed) {
  std::vector<float> values(count);
  const RandomStream stream{seed, 0, 1};
  for (int64_t i = 0; i < count; ++i)
    values[i] = (randomBits(stream, i) >> 8) * std::ldexp(1.0f, -22) - 2.0f;
  return values;
}

Rotation hadamard(int blockSize) {
  return {RotationKind::Hadamard, blockSize, SignSchedule::Fixed, 0};
}

Rotation randomHadamard(int blockSize, SignSchedule schedule,
                        uint64_t seed = 77) {
  return {RotationKind::RandomHadamard, blockSize, schedule, seed};
}

} // namespace

TEST(HadamardTest, ValidBlockSizes) {
  for (int b : kBlockSizes)
    EXPECT_TRUE(isValidRotationBlock(b));
  for (int b : {0, 1, 2, 8, 24, 256})
    EXPECT_FALSE(isValidRotationBlock(b));
}

TEST(HadamardTest, MatrixIsOrthogonal) {
  for (int b : kBlockSizes) {
    const std::vector<float> h = hadamardMatrix(b);
    ASSERT_EQ(h.size(), static_cast<size_t>(b * b));
    const double entry = 1.0 / std::sqrt(static_cast<double>(b));
    for (int i = 0; i < b; ++i)
      for (int j = 0; j < b; ++j) {
        // Symmetric, +-1/sqrt(B), first row and column positive.
        EXPECT_EQ(h[i * b + j], h[j * b + i]);
        EXPECT_NEAR(std::fabs(h[i * b + j]), entry, 1e-8);
        double dot = 0.0;
        for (int k = 0; k < b; ++k)
          dot += static_cast<double>(h[i * b + k]) * h[j * b + k];
        // Exact for 16 and 64; 1/sqrt(B) rounded to fp32 otherwise.
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, b == 16 || b == 64 ? 0.0 : 1e-7)
            << b << " " << i << " " << j;
      }
    for (int j = 0; j < b; ++j) {
      EXPECT_GT(h[j], 0.0f);
      EXPECT_GT(h[j * b], 0.0f);
    }
  }
  // Sylvester order: H_2n = [[H_n, H_n], [H_n, -H_n]].
  const std::vector<float> h = hadamardMatrix(16);
  EXPECT_EQ(h[1 * 16 + 1], -0.25f);
  EXPECT_EQ(h[8 * 16 + 8], -0.25f);
  EXPECT_EQ(h[8 * 16 + 7], 0.25f);
  EXPECT_EQ(h[3 * 16 + 3], 0.25f);
  EXPECT_EQ(floatBits(hadamardMatrix(32)[0]), 0x3E3504F3u);
  EXPECT_EQ(floatBits(hadamardMatrix(128)[0]), 0x3DB504F3u);
}

TEST(HadamardTest, RotateEqualsDenseProduct) {
  for (int b : kBlockSizes)
    for (bool random : {false, true}) {
      const Rotation rotation =
          random ? randomHadamard(b, SignSchedule::Fixed) : hadamard(b);
      const std::vector<float> h = hadamardMatrix(b);
      const std::vector<float> signs = randomHadamardSigns(rotation, 0);
      std::vector<float> x = randomValues(2 * b, b);
      std::vector<float> y = x;
      rotate(y.data(), AxisView{1, 2 * b, 1}, rotation);
      for (int block = 0; block < 2; ++block)
        for (int i = 0; i < b; ++i) {
          double expected = 0.0;
          for (int j = 0; j < b; ++j)
            expected +=
                static_cast<double>(h[i * b + j]) * signs[j] * x[block * b + j];
          EXPECT_NEAR(y[block * b + i], expected, 1e-5) << b << " " << i;
        }
    }
}

TEST(HadamardTest, ExactForSixteen) {
  // Integers through B = 16: the butterflies are exact and 1/4 is exact.
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  rotate(x.data(), AxisView{1, 16, 1}, hadamard(16));
  for (float v : x)
    EXPECT_EQ(v, 0.25f);
  std::vector<float> ramp(16);
  for (int i = 0; i < 16; ++i)
    ramp[i] = static_cast<float>(i);
  rotate(ramp.data(), AxisView{1, 16, 1}, hadamard(16));
  EXPECT_EQ(ramp[0], 30.0f); // sum 0..15 = 120, / 4
  EXPECT_EQ(ramp[1], -2.0f); // sum of (-1)^i i = -8, / 4
  EXPECT_EQ(ramp[2], -4.0f);
  EXPECT_EQ(ramp[3], 0.0f);
}

TEST(HadamardTest, InverseUndoesRotate) {
  for (int b : kBlockSizes)
    for (const Rotation &rotation :
         {hadamard(b), randomHadamard(b, SignSchedule::PerStep)}) {
      for (int axis : {0, 1, 2}) {
        std::vector<int64_t> shape = {3, 5, 7};
        shape[axis] = 2 * b;
        const AxisView view = viewAlong(shape, axis);
        const std::vector<float> x = randomValues(view.numElements(), 5 + b);
        std::vector<float> y = x;
        rotate(y.data(), view, rotation, /*step=*/9);
        double moved = 0.0;
        for (size_t k = 0; k < x.size(); ++k)
          moved += std::fabs(y[k] - x[k]);
        EXPECT_GT(moved, 1.0);
        rotate(y.data(), view, rotation, /*step=*/9, /*inverse=*/true);
        for (size_t k = 0; k < x.size(); ++k)
          ASSERT_NEAR(y[k], x[k], 2e-6f) << b << " " << k;
      }
    }
}

TEST(HadamardTest, RotatesAlongTheChosenAxis) {
  // Rotating a {2, 32, 3} tensor along axis 1 equals rotating each of its six
  // fibers (o, :, i) as a contiguous vector.
  const std::vector<int64_t> shape = {2, 32, 3};
  const AxisView view = viewAlong(shape, 1);
  EXPECT_EQ(view.outer, 2);
  EXPECT_EQ(view.extent, 32);
  EXPECT_EQ(view.inner, 3);
  const Rotation rotation = randomHadamard(16, SignSchedule::Fixed);
  const std::vector<float> x = randomValues(view.numElements(), 3);
  std::vector<float> y = x;
  rotate(y.data(), view, rotation);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 3; ++i) {
      std::vector<float> fiber(32);
      for (int64_t e = 0; e < 32; ++e)
        fiber[e] = x[view.index(o, e, i)];
      rotate(fiber.data(), AxisView{1, 32, 1}, rotation);
      for (int64_t e = 0; e < 32; ++e)
        EXPECT_EQ(floatBits(y[view.index(o, e, i)]), floatBits(fiber[e]));
    }
  // Axis 0 of a {32, 4} matrix: the columns.
  const std::vector<float> m = randomValues(32 * 4, 4);
  std::vector<float> rotated = m;
  rotate(rotated.data(), viewAlong({32, 4}, 0), hadamard(32));
  for (int64_t c = 0; c < 4; ++c) {
    std::vector<float> column(32);
    for (int64_t r = 0; r < 32; ++r)
      column[r] = m[r * 4 + c];
    rotate(column.data(), AxisView{1, 32, 1}, hadamard(32));
    for (int64_t r = 0; r < 32; ++r)
      EXPECT_EQ(floatBits(rotated[r * 4 + c]), floatBits(column[r]));
  }
}

TEST(HadamardTest, NoneLeavesDataAlone) {
  std::vector<float> x = randomValues(64, 1);
  const std::vector<float> copy = x;
  rotate(x.data(), AxisView{1, 64, 1}, Rotation{});
  EXPECT_EQ(x, copy);
}

TEST(HadamardTest, RandomSigns) {
  const Rotation fixed = randomHadamard(128, SignSchedule::Fixed);
  const Rotation perStep = randomHadamard(128, SignSchedule::PerStep);
  // Reproducible.
  EXPECT_EQ(randomHadamardSigns(fixed, 3), randomHadamardSigns(fixed, 3));
  EXPECT_EQ(randomHadamardSigns(perStep, 3), randomHadamardSigns(perStep, 3));
  // Fixed ignores the step; PerStep does not.
  EXPECT_EQ(randomHadamardSigns(fixed, 1), randomHadamardSigns(fixed, 2));
  EXPECT_NE(randomHadamardSigns(perStep, 1), randomHadamardSigns(perStep, 2));
  // PerStep at step 0 is Fixed.
  EXPECT_EQ(randomHadamardSigns(perStep, 0), randomHadamardSigns(fixed, 5));
  // Another seed, other signs.
  EXPECT_NE(
      randomHadamardSigns(fixed, 0),
      randomHadamardSigns(randomHadamard(128, SignSchedule::Fixed, 78), 0));
  // The documented formula, and both signs occur.
  const std::vector<float> signs = randomHadamardSigns(perStep, 6);
  int negatives = 0;
  for (int j = 0; j < 128; ++j) {
    const bool negative =
        randomBits({perStep.seed, 6, kRotationSignsTensorId}, j) & 1;
    EXPECT_EQ(signs[j], negative ? -1.0f : 1.0f);
    negatives += negative;
  }
  EXPECT_GT(negatives, 32);
  EXPECT_LT(negatives, 96);
  // A deterministic Hadamard has no signs to draw.
  EXPECT_EQ(randomHadamardSigns(hadamard(16), 4), std::vector<float>(16, 1.0f));
  // Per-step signs rotate differently on different steps.
  std::vector<float> a = randomValues(128, 2), b = a;
  rotate(a.data(), AxisView{1, 128, 1}, perStep, 1);
  rotate(b.data(), AxisView{1, 128, 1}, perStep, 2);
  EXPECT_NE(a, b);
}

TEST(HadamardTest, RotatingBothOperandsKeepsTheProduct) {
  const int64_t m = 4, n = 3, k = 256;
  for (const Rotation &rotation : {hadamard(32), hadamard(128),
                                   randomHadamard(64, SignSchedule::PerStep)}) {
    std::vector<float> a = randomValues(m * k, 10), b = randomValues(n * k, 11);
    std::vector<double> before(m * n, 0.0), after(m * n, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t r = 0; r < k; ++r)
          before[i * n + j] += static_cast<double>(a[i * k + r]) * b[j * k + r];
    rotate(a.data(), viewAlong({m, k}, 1), rotation, 3);
    rotate(b.data(), viewAlong({n, k}, 1), rotation, 3);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t r = 0; r < k; ++r)
          after[i * n + j] += static_cast<double>(a[i * k + r]) * b[j * k + r];
    // Each rotated value carries a few fp32 roundings (relative ~1e-7 times
    // the block norm); over K = 256 terms of size ~1 that is well below 1e-4.
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_NEAR(after[i], before[i], 1e-4) << i;
  }
}

TEST(HadamardTest, ArithmeticOrderIsPinned) {
  // The documented order, written out independently: signs, butterflies with
  // strides 1, 2, ..., B/2 on pairs (i, i + h), then one fp32 multiply by
  // 1/sqrt(B). The result must match bit for bit; a different stride order
  // is the same matrix in exact arithmetic but rounds differently.
  for (int b : kBlockSizes) {
    const Rotation rotation = randomHadamard(b, SignSchedule::Fixed, 5);
    const std::vector<float> signs = randomHadamardSigns(rotation, 0);
    const float scale = hadamardMatrix(b)[0];
    const std::vector<float> x = randomValues(b, 100 + b);
    std::vector<float> expected = x, reversed = x;
    for (int j = 0; j < b; ++j) {
      expected[j] *= signs[j];
      reversed[j] *= signs[j];
    }
    for (int h = 1; h < b; h *= 2)
      for (int i = 0; i < b; ++i)
        if (!(i & h)) {
          const float p = expected[i], q = expected[i + h];
          expected[i] = p + q;
          expected[i + h] = p - q;
        }
    for (int h = b / 2; h >= 1; h /= 2)
      for (int i = 0; i < b; ++i)
        if (!(i & h)) {
          const float p = reversed[i], q = reversed[i + h];
          reversed[i] = p + q;
          reversed[i + h] = p - q;
        }
    for (int j = 0; j < b; ++j) {
      expected[j] *= scale;
      reversed[j] *= scale;
    }
    std::vector<float> y = x;
    rotate(y.data(), AxisView{1, b, 1}, rotation);
    int differences = 0;
    for (int j = 0; j < b; ++j) {
      EXPECT_EQ(floatBits(y[j]), floatBits(expected[j])) << b << " " << j;
      differences += floatBits(y[j]) != floatBits(reversed[j]);
    }
    EXPECT_GT(differences, 0) << b;
  }
}
