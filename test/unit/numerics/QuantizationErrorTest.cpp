//===- QuantizationErrorTest.cpp - Sampled SQNR of a GEMM operand ---------===//

#include "runtime/numerics/QuantizationError.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

using namespace tetra::numerics;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return count;
}

/// Deterministic values from Philox: uniform in [-1, 1), times 2^(k % 9 - 4)
/// so that blocks and fibers differ in scale.
std::vector<float> testValues(const std::vector<int64_t> &shape,
                              uint64_t seed) {
  const int64_t count = elementCount(shape);
  std::vector<float> values(count);
  const RandomStream stream{seed, 0, 2};
  for (int64_t k = 0; k < count; ++k)
    values[k] = ((randomBits(stream, k) >> 8) * std::ldexp(1.0f, -23) - 1.0f) *
                std::ldexp(1.0f, static_cast<int>((k / 5) % 9) - 4);
  return values;
}

/// Standard normal values (Box-Muller over Philox bits).
std::vector<float> gaussianValues(int64_t count, uint64_t seed) {
  std::vector<float> values(count);
  const RandomStream stream{seed, 0, 7};
  const double twoPi = 6.283185307179586;
  for (int64_t k = 0; k < count; ++k) {
    const double u1 = (randomBits(stream, 2 * k) + 1.0) / 4294967296.0;
    const double u2 = randomBits(stream, 2 * k + 1) / 4294967296.0;
    values[k] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                   std::cos(twoPi * u2));
  }
  return values;
}

OperandQuantization preset(const std::string &name,
                           Rounding rounding = Rounding::NearestEven,
                           Rotation rotation = {}) {
  OperandQuantization quantization;
  quantization.format = *blockFormatPreset(name);
  quantization.format.rounding = rounding;
  quantization.rotation = rotation;
  return quantization;
}

OperandQuantization plain(ElementFormat element, Rotation rotation = {}) {
  OperandQuantization quantization;
  quantization.format.element = element;
  quantization.rotation = rotation;
  return quantization;
}

const Rotation kHadamard32 = {RotationKind::Hadamard, 32, SignSchedule::Fixed,
                              0};
const Rotation kRandomPerStep16 = {RotationKind::RandomHadamard, 16,
                                   SignSchedule::PerStep, 11};
const Rotation kRandomPerStep64 = {RotationKind::RandomHadamard, 64,
                                   SignSchedule::PerStep, 5};

/// The whole tensor as the GEMM sees it, in the original basis, from the
/// library's whole-tensor functions: fakeQuantize() for block formats; for
/// BF16, rotate, roundTripBF16, rotate back; F32 as it is.
std::vector<float> wholeTensor(const std::vector<float> &x,
                               const std::vector<int64_t> &shape, int axis,
                               const OperandQuantization &quantization,
                               const RandomStream &stream) {
  std::vector<float> q = x;
  switch (quantization.format.element) {
  case ElementFormat::F32:
    break;
  case ElementFormat::BF16: {
    const AxisView view = viewAlong(shape, axis);
    rotate(q.data(), view, quantization.rotation, stream.step);
    roundTripBF16(q.data(), static_cast<int64_t>(q.size()));
    rotate(q.data(), view, quantization.rotation, stream.step, true);
    break;
  }
  default:
    fakeQuantize(q.data(), shape, axis, quantization, stream);
  }
  return q;
}

/// The energies of x - q over fibers 0, stride, 2 * stride, ..., summed in
/// the order quantizationError() documents.
ErrorEnergy expectedEnergy(const std::vector<float> &x,
                           const std::vector<float> &q,
                           const std::vector<int64_t> &shape, int axis,
                           int64_t stride) {
  const AxisView view = viewAlong(shape, axis);
  ErrorEnergy energy;
  for (int64_t f = 0; f < view.outer * view.inner; f += stride)
    for (int64_t e = 0; e < view.extent; ++e) {
      const int64_t k = view.index(f / view.inner, e, f % view.inner);
      const double a = x[k], b = q[k];
      if (!std::isfinite(a) || !std::isfinite(b)) {
        ++energy.nonFinite;
        continue;
      }
      ++energy.elements;
      energy.signal += a * a;
      energy.noise += (a - b) * (a - b);
    }
  return energy;
}

void expectSame(const ErrorEnergy &actual, const ErrorEnergy &expected) {
  EXPECT_EQ(actual.signal, expected.signal);
  EXPECT_EQ(actual.noise, expected.noise);
  EXPECT_EQ(actual.elements, expected.elements);
  EXPECT_EQ(actual.nonFinite, expected.nonFinite);
}

/// quantizationError() against the whole tensor's fakeQuantize() for every
/// stride in `strides`; returns the stride-1 energy.
ErrorEnergy checkAgainstWholeTensor(const std::vector<float> &x,
                                    const std::vector<int64_t> &shape, int axis,
                                    const OperandQuantization &quantization,
                                    const RandomStream &stream,
                                    const std::vector<int64_t> &strides) {
  const std::vector<float> q =
      wholeTensor(x, shape, axis, quantization, stream);
  std::vector<uint32_t> before;
  for (float v : x)
    before.push_back(floatBits(v));
  for (int64_t stride : strides) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    const ErrorEnergy actual =
        quantizationError(x.data(), shape, axis, quantization, stream, stride);
    expectSame(actual, expectedEnergy(x, q, shape, axis, stride));
  }
  std::vector<uint32_t> after;
  for (float v : x)
    after.push_back(floatBits(v));
  EXPECT_EQ(after, before); // data is not modified
  return quantizationError(x.data(), shape, axis, quantization, stream);
}

} // namespace

// Every block format, rotation and rounding, along each axis of 2-D and 3-D
// tensors: the sample's energies are the whole tensor's, restricted.
TEST(QuantizationErrorTest, MatchesFakeQuantizeOnTheWholeTensor) {
  struct Layout {
    std::vector<int64_t> shape;
    int axis;
  };
  const std::vector<Layout> layouts = {
      {{64, 96}, 1}, {{128, 24}, 0}, {{3, 128, 5}, 1}, {{2, 3, 64}, 2}};
  const std::vector<Rotation> rotations = {{}, kHadamard32, kRandomPerStep16};
  int cases = 0;
  for (const std::string name : {"mxfp4", "mxfp8_e4m3", "mxfp8_e5m2", "nvfp4"})
    for (Rounding rounding : {Rounding::NearestEven, Rounding::Stochastic})
      for (const Rotation &rotation : rotations)
        for (const Layout &layout : layouts)
          for (uint32_t step : {0u, 3u}) {
            SCOPED_TRACE(name + " rounding " +
                         std::string(roundingName(rounding)) + " rotation " +
                         std::to_string(static_cast<int>(rotation.kind)) +
                         " axis " + std::to_string(layout.axis) + " rank " +
                         std::to_string(layout.shape.size()) + " step " +
                         std::to_string(step));
            const std::vector<float> x = testValues(layout.shape, 100 + cases);
            const RandomStream stream{17 + step, step, 0x1234u + step};
            const ErrorEnergy all = checkAgainstWholeTensor(
                x, layout.shape, layout.axis, preset(name, rounding, rotation),
                stream, {1, 2, 3, 7, 1000});
            EXPECT_EQ(all.elements, elementCount(layout.shape));
            EXPECT_GT(all.noise, 0);
            ++cases;
          }
  EXPECT_EQ(cases, 4 * 2 * 3 * 4 * 2);
}

// Stochastic rounding and per-step signs really depend on the stream: other
// steps and seeds give other errors, each still the whole tensor's.
TEST(QuantizationErrorTest, StochasticRoundingAndPerStepSigns) {
  const std::vector<int64_t> shape = {96, 64};
  const std::vector<float> x = testValues(shape, 9);
  for (const Rotation &rotation : {Rotation{}, kRandomPerStep64}) {
    const OperandQuantization quantization =
        preset("mxfp4", Rounding::Stochastic, rotation);
    std::vector<double> noises;
    for (uint64_t seed : {1u, 2u})
      for (uint32_t step : {0u, 1u, 2u}) {
        const RandomStream stream{seed, step, 77};
        noises.push_back(
            checkAgainstWholeTensor(x, shape, 1, quantization, stream, {1, 5})
                .noise);
        // The element indices are the whole tensor's: row 1 quantized as a
        // tensor of its own draws other bits.
        std::vector<float> alone(x.begin() + 64, x.begin() + 128);
        fakeQuantize(alone.data(), {1, 64}, 1, quantization, stream);
        const std::vector<float> whole =
            wholeTensor(x, shape, 1, quantization, stream);
        EXPECT_NE(alone,
                  std::vector<float>(whole.begin() + 64, whole.begin() + 128));
      }
    for (size_t a = 0; a < noises.size(); ++a)
      for (size_t b = a + 1; b < noises.size(); ++b)
        EXPECT_NE(noises[a], noises[b]) << a << " " << b;
  }
}

// Per-step random signs without stochastic rounding: the step alone changes
// the error.
TEST(QuantizationErrorTest, PerStepRandomHadamard) {
  const std::vector<int64_t> shape = {64, 128};
  const std::vector<float> x = testValues(shape, 21);
  const OperandQuantization quantization =
      preset("mxfp8_e4m3", Rounding::NearestEven, kRandomPerStep64);
  const double step0 =
      checkAgainstWholeTensor(x, shape, 1, quantization, {0, 0, 0}, {1, 4})
          .noise;
  const double step1 =
      checkAgainstWholeTensor(x, shape, 1, quantization, {0, 1, 0}, {1, 4})
          .noise;
  EXPECT_NE(step0, step1);
  // A fixed schedule ignores the step.
  OperandQuantization fixed = quantization;
  fixed.rotation.schedule = SignSchedule::Fixed;
  expectSame(quantizationError(x.data(), shape, 1, fixed, {0, 0, 0}),
             quantizationError(x.data(), shape, 1, fixed, {0, 9, 0}));
}

// NVFP4's tensor scale comes from the whole (rotated) tensor, even when the
// amax lies in a fiber the sample skips.
TEST(QuantizationErrorTest, NVFP4TensorScaleFromTheWholeTensor) {
  const std::vector<int64_t> shape = {8, 64};
  std::vector<float> x = testValues(shape, 3);
  x[64 + 5] = 3000.0f; // fiber 1: not sampled at stride 2
  for (const Rotation &rotation : {Rotation{}, kHadamard32}) {
    const OperandQuantization quantization =
        preset("nvfp4", Rounding::NearestEven, rotation);
    checkAgainstWholeTensor(x, shape, 1, quantization, {}, {1, 2, 3});
    // The sampled fibers on their own would get another tensor scale, and
    // another error.
    std::vector<float> even;
    for (int64_t row = 0; row < 8; row += 2)
      even.insert(even.end(), x.begin() + row * 64, x.begin() + row * 64 + 64);
    const std::vector<float> alone =
        wholeTensor(even, {4, 64}, 1, quantization, {});
    EXPECT_NE(expectedEnergy(even, alone, {4, 64}, 1, 1).noise,
              quantizationError(x.data(), shape, 1, quantization, {}, 2).noise);
  }
}

// BF16 is a round-to-nearest-even cast (after the rotation, undone after),
// whatever the rounding says; F32 is lossless.
TEST(QuantizationErrorTest, BF16AndF32) {
  for (int axis : {0, 1}) {
    const std::vector<int64_t> shape = {64, 96};
    const std::vector<float> x = testValues(shape, 31 + axis);
    for (const Rotation &rotation :
         {Rotation{}, kHadamard32, kRandomPerStep16}) {
      const OperandQuantization bf16 = plain(ElementFormat::BF16, rotation);
      const ErrorEnergy energy =
          checkAgainstWholeTensor(x, shape, axis, bf16, {4, 2, 9}, {1, 2, 5});
      ASSERT_TRUE(energy.sqnrDecibels());
      // 8 significant bits: about 6.02 * 8 + 4.77 dB... for uniform data,
      // well above 40 dB.
      EXPECT_GT(*energy.sqnrDecibels(), 40.0);
      OperandQuantization stochastic = bf16;
      stochastic.format.rounding = Rounding::Stochastic;
      expectSame(
          quantizationError(x.data(), shape, axis, stochastic, {4, 2, 9}),
          energy);

      const ErrorEnergy f32 = quantizationError(
          x.data(), shape, axis, plain(ElementFormat::F32, rotation));
      EXPECT_EQ(f32.noise, 0);
      EXPECT_GT(f32.signal, 0);
      EXPECT_EQ(f32.elements, elementCount(shape));
      EXPECT_FALSE(f32.sqnrDecibels());
    }
  }
  // Half-ulp ties (1 + 2^-8, 1 + 3 * 2^-8; the ulp is 2^-7): 2^-16 each.
  {
    std::vector<float> ties(32, 1.0f + std::ldexp(1.0f, -8));
    ties[7] = 1.0f + 3 * std::ldexp(1.0f, -8);
    const ErrorEnergy energy =
        quantizationError(ties.data(), {1, 32}, 1, plain(ElementFormat::BF16));
    EXPECT_EQ(energy.noise, 32 * std::ldexp(1.0, -16));
  }
  // BF16 overflow to Inf is counted, not summed.
  std::vector<float> x = testValues({2, 32}, 5);
  x[3] = std::numeric_limits<float>::max();
  const ErrorEnergy energy = quantizationError(
      x.data(), {2, 32}, 1, plain(ElementFormat::BF16), {}, 1);
  EXPECT_EQ(energy.nonFinite, 1);
  EXPECT_EQ(energy.elements, 63);
  EXPECT_TRUE(std::isfinite(energy.noise));
}

TEST(QuantizationErrorTest, ZerosHaveNoSQNR) {
  const std::vector<int64_t> shape = {4, 64};
  const std::vector<float> zeros(256, 0.0f);
  for (const std::string name : {"mxfp4", "nvfp4", "mxfp8_e5m2"}) {
    const ErrorEnergy energy =
        quantizationError(zeros.data(), shape, 1,
                          preset(name, Rounding::NearestEven, kHadamard32));
    EXPECT_EQ(energy.signal, 0);
    EXPECT_EQ(energy.noise, 0);
    EXPECT_EQ(energy.elements, 256);
    EXPECT_FALSE(energy.sqnrDecibels()) << name;
  }
  EXPECT_FALSE(ErrorEnergy{}.sqnrDecibels());
}

// A NaN or an Inf makes its block NaN: those elements are counted apart and
// the other blocks' energies stay finite and unchanged.
TEST(QuantizationErrorTest, NonFiniteBlocksAreCountedApart) {
  const std::vector<int64_t> shape = {4, 128};
  const std::vector<float> clean = testValues(shape, 12);
  std::vector<float> x = clean;
  x[1 * 128 + 40] = kNaN; // row 1, block 1 (of 32)
  x[2 * 128 + 3] = kInf;  // row 2, block 0
  x[2 * 128 + 100] = -kInf;
  for (const std::string name : {"mxfp4", "mxfp8_e4m3", "nvfp4"}) {
    SCOPED_TRACE(name);
    const OperandQuantization quantization = preset(name);
    const int blockSize = quantization.format.scaling.blockSize;
    const ErrorEnergy energy =
        checkAgainstWholeTensor(x, shape, 1, quantization, {}, {1, 2});
    EXPECT_EQ(energy.nonFinite, 3 * blockSize);
    EXPECT_EQ(energy.elements, 512 - 3 * blockSize);
    EXPECT_TRUE(std::isfinite(energy.signal));
    EXPECT_TRUE(std::isfinite(energy.noise));
    ASSERT_TRUE(energy.sqnrDecibels());
    // Rows 0 and 3 have no non-finite value: the same as in the clean tensor
    // (NVFP4 too: the tensor amax skips NaN and Inf and, here, lies elsewhere).
    for (int64_t row : {0, 3}) {
      const ErrorEnergy dirtyRow = quantizationError(
          x.data() + row * 128, {1, 128}, 1, quantization, {});
      const ErrorEnergy cleanRow = quantizationError(
          clean.data() + row * 128, {1, 128}, 1, quantization, {});
      expectSame(dirtyRow, cleanRow);
    }
  }
  // With a rotation the NaN spreads over its rotation block and back.
  const ErrorEnergy rotated = checkAgainstWholeTensor(
      x, shape, 1, preset("mxfp4", Rounding::NearestEven, kRandomPerStep64),
      {1, 1, 1}, {1});
  EXPECT_EQ(rotated.nonFinite, 3 * 64);
  EXPECT_TRUE(std::isfinite(rotated.noise));
}

TEST(QuantizationErrorTest, AddAndDecibels) {
  ErrorEnergy a{4.0, 1.0, 10, 1};
  const ErrorEnergy b{6.0, 0.0, 5, 2};
  a.add(b);
  EXPECT_EQ(a.signal, 10.0);
  EXPECT_EQ(a.noise, 1.0);
  EXPECT_EQ(a.elements, 15);
  EXPECT_EQ(a.nonFinite, 3);
  ASSERT_TRUE(a.sqnrDecibels());
  EXPECT_DOUBLE_EQ(*a.sqnrDecibels(), 10.0);
  EXPECT_DOUBLE_EQ(*ErrorEnergy({1.0, 1e-3, 1, 0}).sqnrDecibels(), 30.0);
}

TEST(QuantizationErrorTest, FiberStrideFor) {
  // 100 fibers of 64.
  const std::vector<int64_t> shape = {100, 64};
  EXPECT_EQ(fiberStrideFor(shape, 1, 6400), 1);
  EXPECT_EQ(fiberStrideFor(shape, 1, 1 << 30), 1);
  EXPECT_EQ(fiberStrideFor(shape, 1, 640), 10);
  EXPECT_EQ(fiberStrideFor(shape, 1, 639), 12); // 9 fibers at most: ceil(100/9)
  EXPECT_EQ(fiberStrideFor(shape, 1, 64), 100);
  EXPECT_EQ(fiberStrideFor(shape, 1, 10), 100); // still one fiber
  EXPECT_EQ(fiberStrideFor(shape, 1, 0), 100);
  EXPECT_EQ(fiberStrideFor({0, 64}, 1, 100), 1);
  for (const auto &[dims, axis] :
       std::vector<std::pair<std::vector<int64_t>, int>>{
           {{100, 64}, 1}, {{96, 40}, 0}, {{3, 32, 7}, 1}, {{5, 6, 32}, 2}}) {
    const AxisView view = viewAlong(dims, axis);
    const int64_t fibers = view.outer * view.inner;
    for (int64_t maxElements = 0; maxElements <= elementCount(dims) + 70;
         maxElements += 13) {
      const int64_t stride = fiberStrideFor(dims, axis, maxElements);
      auto sampled = [&](int64_t s) {
        return ((fibers + s - 1) / s) * view.extent;
      };
      const int64_t bound = std::max(maxElements, view.extent);
      EXPECT_LE(sampled(stride), bound) << maxElements;
      if (stride > 1)
        EXPECT_GT(sampled(stride - 1), bound) << maxElements;
      // And quantizationError samples exactly that many.
      std::vector<float> x = testValues(dims, 1);
      EXPECT_EQ(quantizationError(x.data(), dims, axis, preset("mxfp8_e4m3"),
                                  {}, stride)
                    .elements,
                sampled(stride));
    }
  }
}

// Plausible values, measured: MXFP4 on standard normal data, and a Hadamard
// rotation helps a lot on data with outliers.
TEST(QuantizationErrorTest, SanityValues) {
  const std::vector<int64_t> shape = {256, 1024};
  const std::vector<float> gaussian = gaussianValues(256 * 1024, 1);
  auto sqnr = [&](const std::vector<float> &x,
                  const OperandQuantization &quantization) {
    return *quantizationError(x.data(), shape, 1, quantization, {}, 1)
                .sqnrDecibels();
  };
  const double mxfp4 = sqnr(gaussian, preset("mxfp4"));
  const double nvfp4 = sqnr(gaussian, preset("nvfp4"));
  const double e4m3 = sqnr(gaussian, preset("mxfp8_e4m3"));
  const double e5m2 = sqnr(gaussian, preset("mxfp8_e5m2"));
  const double bf16 = sqnr(gaussian, plain(ElementFormat::BF16));
  std::printf("gaussian: mxfp4 %.2f nvfp4 %.2f mxfp8_e4m3 %.2f mxfp8_e5m2 "
              "%.2f bf16 %.2f dB\n",
              mxfp4, nvfp4, e4m3, e5m2, bf16);
  // Measured (deterministic data): 18.81, 20.44, 30.67, 25.35, 55.56 dB.
  EXPECT_NEAR(mxfp4, 18.8, 0.5);
  EXPECT_NEAR(nvfp4, 20.4, 0.5);
  EXPECT_NEAR(e4m3, 30.7, 0.5);
  EXPECT_NEAR(e5m2, 25.4, 0.5);
  EXPECT_NEAR(bf16, 55.6, 0.5);
  EXPECT_GT(nvfp4, mxfp4);
  EXPECT_GT(e4m3, e5m2);

  // Outliers: one element in 64 is 40x larger.
  std::vector<float> outliers = gaussian;
  for (size_t k = 0; k < outliers.size(); k += 64)
    outliers[k + (k / 64) % 64] *= 40.0f;
  const double plainOutliers = sqnr(outliers, preset("mxfp4"));
  const double rotatedOutliers =
      sqnr(outliers, preset("mxfp4", Rounding::NearestEven, kHadamard32));
  std::printf("outliers: mxfp4 %.2f, with hadamard<32> %.2f dB\n",
              plainOutliers, rotatedOutliers);
  // Measured: 15.85 and 19.30 dB.
  EXPECT_NEAR(plainOutliers, 15.9, 0.5);
  EXPECT_GT(rotatedOutliers, plainOutliers + 2.0);
  EXPECT_LT(plainOutliers, mxfp4);
}
