//===- BlockQuantizeTest.cpp - MX and NVFP4 block quantization ------------===//

#include "runtime/numerics/BlockQuantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace tetra::numerics;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

BlockFormat mxfp4(ScaleRule rule = ScaleRule::Floor,
                  Rounding rounding = Rounding::NearestEven) {
  BlockFormat format = *blockFormatPreset("mxfp4");
  format.scaling.rule = rule;
  format.rounding = rounding;
  return format;
}

BlockFormat nvfp4(ScaleRule rule = ScaleRule::Nearest) {
  BlockFormat format = *blockFormatPreset("nvfp4");
  format.scaling.rule = rule;
  return format;
}

/// torchao's NVFP4 with a per-tensor scale (torchao/prototype/mx_formats/
/// nvfp4_tensor.py: per_tensor_amax_to_scale, then _nvfp4_quantize's
/// two-level branch), written here from its definition, apart from
/// runtime/numerics: every step an fp32 operation, the casts to
/// float8_e4m3fn and E2M1 rounding to nearest even.
struct TorchaoNVFP4 {
  float tensorScale = 0.0f;
  std::vector<uint8_t> scales, codes;
};

/// A value in [2^-6, 448] cast to float8_e4m3fn (normal: 3 mantissa bits).
uint8_t castToE4M3(float v) {
  int e;
  std::frexp(v, &e); // v = m * 2^e, m in [0.5, 1)
  const float quantum = std::ldexp(1.0f, e - 1 - 3);
  float r = std::nearbyint(v / quantum) * quantum; // ties to even
  std::frexp(r, &e);
  const int mantissa =
      static_cast<int>(std::ldexp(r, 1 - e) * 8.0f) - 8; // r = 1.m * 2^(e-1)
  return static_cast<uint8_t>(((e - 1 + 7) << 3) | mantissa);
}

float e4m3Value(uint8_t code) {
  const int exponent = code >> 3, mantissa = code & 7;
  return exponent == 0 ? std::ldexp(mantissa / 8.0f, -6)
                       : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
}

/// A value clamped to [-6, 6] cast to E2M1 (sign bit 3; the sign of -0 and
/// of values rounding to zero kept, as torchao's f32_to_f4_unpacked does).
uint8_t castToE2M1(float v) {
  const float grid[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  const float a = std::fabs(v);
  const float quantum = a < 2.0f ? 0.5f : a < 4.0f ? 1.0f : 2.0f;
  const float r = std::nearbyint(a / quantum) * quantum;
  uint8_t code = 0;
  while (grid[code] != r)
    ++code;
  return static_cast<uint8_t>((std::signbit(v) ? 8 : 0) | code);
}

TorchaoNVFP4 torchaoNVFP4(const std::vector<float> &x) {
  const float F4_E2M1_MAX = 6.0f, F8E4M3_MAX = 448.0f;
  const float E4M3_EPS = 0.015625f; // torch.finfo(float8_e4m3fn).tiny
  TorchaoNVFP4 out;
  float amax = 0.0f;
  for (float v : x)
    amax = std::max(amax, std::fabs(v));
  out.tensorScale = amax / (F8E4M3_MAX * F4_E2M1_MAX);
  for (size_t b = 0; b < x.size() / 16; ++b) {
    float maxAbs = 0.0f;
    for (int j = 0; j < 16; ++j)
      maxAbs = std::max(maxAbs, std::fabs(x[b * 16 + j]));
    const float blockScale = maxAbs / F4_E2M1_MAX;
    const float scaled = std::clamp(blockScale / out.tensorScale, E4M3_EPS,
                                    F8E4M3_MAX);
    const uint8_t scale = castToE4M3(scaled);
    out.scales.push_back(scale);
    const float total = out.tensorScale * e4m3Value(scale);
    for (int j = 0; j < 16; ++j)
      out.codes.push_back(castToE2M1(
          std::clamp(x[b * 16 + j] / total, -F4_E2M1_MAX, F4_E2M1_MAX)));
  }
  return out;
}

/// Deterministic values in [-1, 1) from Philox.
std::vector<float> randomValues(int64_t count, uint64_t seed) {
  std::vector<float> values(count);
  const RandomStream stream{seed, 0, 2};
  for (int64_t i = 0; i < count; ++i)
    values[i] = (randomBits(stream, i) >> 8) * std::ldexp(1.0f, -23) - 1.0f;
  return values;
}

float nextBelow(float x) { return std::nextafter(x, 0.0f); }

} // namespace

TEST(BlockQuantizeTest, NamesAndPresets) {
  for (ScaleRule rule :
       {ScaleRule::Floor, ScaleRule::Ceil, ScaleRule::Even, ScaleRule::RCeil})
    EXPECT_EQ(parseScaleRule(scaleRuleName(rule)), rule);
  EXPECT_EQ(scaleRuleName(ScaleRule::RCeil), "rceil");
  EXPECT_FALSE(parseScaleRule("round").has_value());

  const BlockFormat fp4 = *blockFormatPreset("mxfp4");
  EXPECT_EQ(fp4.element, ElementFormat::E2M1);
  EXPECT_EQ(fp4.scaling.blockSize, 32);
  EXPECT_EQ(fp4.scaling.scaleFormat, ScaleFormat::E8M0);
  EXPECT_EQ(fp4.scaling.rule, ScaleRule::Floor);
  EXPECT_EQ(fp4.rounding, Rounding::NearestEven);
  EXPECT_EQ(blockFormatPreset("mxfp8_e4m3")->element, ElementFormat::E4M3);
  EXPECT_EQ(blockFormatPreset("mxfp8_e5m2")->element, ElementFormat::E5M2);
  EXPECT_EQ(blockFormatPreset("mxfp8_e5m2")->scaling.blockSize, 32);
  const BlockFormat nv = nvfp4();
  EXPECT_EQ(nv.element, ElementFormat::E2M1);
  EXPECT_EQ(nv.scaling.blockSize, 16);
  EXPECT_EQ(nv.scaling.scaleFormat, ScaleFormat::E4M3);
  EXPECT_FALSE(blockFormatPreset("mxfp6").has_value());
}

TEST(BlockQuantizeTest, SharedExponentE2M1) {
  // E2M1: emax = 2, max = 6, one mantissa bit.
  const FormatSpec &spec = formatSpec(ElementFormat::E2M1);
  struct Case {
    float amax;
    int floor, ceil, even, rceil;
  };
  const Case cases[] = {
      {0.0f, -127, -127, -127, -127},
      {1.0f, -2, -2, -2, -2},          // power of two
      {4.0f, 0, 0, 0, 0},              // power of two
      {8.0f, 1, 1, 1, 1},              // power of two
      {3.0f, -1, 0, -1, -1},           // 1.5 * 2: representable
      {3.5f, -1, 0, 0, 0},             // 1.75 * 2: Even's tie carries
      {nextBelow(3.5f), -1, 0, -1, 0}, // just below that tie
      {5.0f, 0, 1, 0, 0},              // 1.25 * 4: tie to even, no carry
      {6.0f, 0, 1, 0, 0},              // exactly max
      {6.5f, 0, 1, 0, 1},            // clips under Floor and Even; RCeil bumps
      {7.0f, 0, 1, 1, 1},            // Even carries
      {nextBelow(8.0f), 0, 1, 1, 1}, // just below a power of two
      {nextBelow(2.0f), -2, -1, -1, -1},
      {std::ldexp(1.0f, -124), -126, -126, -126, -126},
      {std::ldexp(1.0f, -125), -127, -127, -127, -127}, // at the clamp
      {std::ldexp(1.5f, -125), -127, -126, -127, -127},
      {std::ldexp(1.0f, -126), -127, -127, -127, -127}, // clamped
      {std::ldexp(1.0f, -130), -127, -127, -127, -127}, // subnormal amax
      {std::ldexp(1.0f, -149), -127, -127, -127, -127}, // smallest subnormal
      {std::numeric_limits<float>::max(), 125, 126, 126, 126},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::Floor, spec), c.floor)
        << c.amax;
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::Ceil, spec), c.ceil) << c.amax;
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::Even, spec), c.even) << c.amax;
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::RCeil, spec), c.rceil)
        << c.amax;
  }
}

TEST(BlockQuantizeTest, SharedExponentFP8) {
  const FormatSpec &e4m3 = formatSpec(ElementFormat::E4M3);
  const FormatSpec &e5m2 = formatSpec(ElementFormat::E5M2);
  struct Case {
    const FormatSpec *spec;
    float amax;
    int floor, ceil, even, rceil;
  };
  const Case cases[] = {
      {&e4m3, 448.0f, 0, 1, 0, 0}, // 1.75 * 2^8 = max
      {&e4m3, 480.0f, 0, 1, 0, 1}, // 1.875 * 2^8: representable, clips
      {&e4m3, 496.0f, 0, 1, 1, 1}, // 1.9375 * 2^8: Even's tie carries
      {&e4m3, 256.0f, 0, 0, 0, 0},   {&e4m3, 1.0f, -8, -8, -8, -8},
      {&e5m2, 57344.0f, 0, 1, 0, 0}, // 1.75 * 2^15 = max
      {&e5m2, 59392.0f, 0, 1, 0, 1}, // 1.8125 * 2^15
      {&e5m2, 61440.0f, 0, 1, 1, 1}, // 1.875 * 2^15: tie carries
  };
  for (const Case &c : cases) {
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::Floor, *c.spec), c.floor)
        << c.amax;
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::Ceil, *c.spec), c.ceil)
        << c.amax;
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::Even, *c.spec), c.even)
        << c.amax;
    EXPECT_EQ(sharedExponent(c.amax, ScaleRule::RCeil, *c.spec), c.rceil)
        << c.amax;
  }
}

TEST(BlockQuantizeTest, RCeilIsTheSmallestExponentThatNeverClips) {
  // Against the definition, over many amax values: amax <= max * 2^e and
  // amax > max * 2^(e-1), checked in fp64.
  const FormatSpec &spec = formatSpec(ElementFormat::E2M1);
  const std::vector<float> values = randomValues(4096, 5);
  for (size_t i = 0; i < values.size(); ++i) {
    const float amax = std::ldexp(std::fabs(values[i]) + 0.001f,
                                  static_cast<int>(i % 60) - 30);
    const int e = sharedExponent(amax, ScaleRule::RCeil, spec);
    EXPECT_LE(amax, 6.0 * std::ldexp(1.0, e)) << amax;
    EXPECT_GT(amax, 6.0 * std::ldexp(1.0, e - 1)) << amax;
    const int floor = sharedExponent(amax, ScaleRule::Floor, spec);
    EXPECT_EQ(floor, std::ilogb(amax) - 2);
  }
}

TEST(BlockQuantizeTest, MXScalesAndCodes) {
  // One block of 32: amax 5 -> Floor e = 0, scale 0x7F.
  std::vector<float> x(32, 0.0f);
  x[0] = 5.0f;  // tie 4 | 6 -> 4
  x[1] = -1.3f; // -1.5
  x[2] = 0.2f;  // 0
  x[3] = 0.3f;  // 0.5
  x[4] = -0.0f;
  const QuantizedTensor q = quantize(x.data(), {32}, 0, mxfp4());
  ASSERT_EQ(q.scales.size(), 1u);
  EXPECT_EQ(q.scales[0], 0x7F);
  EXPECT_EQ(q.codes[0], 0x6);
  EXPECT_EQ(q.codes[1], 0xB);
  EXPECT_EQ(q.codes[2], 0x0);
  EXPECT_EQ(q.codes[3], 0x1);
  EXPECT_EQ(q.codes[4], 0x8);
  EXPECT_EQ(q.tensorScale, 1.0f);
  const std::vector<float> y = dequantize(q);
  EXPECT_EQ(y[0], 4.0f);
  EXPECT_EQ(y[1], -1.5f);
  EXPECT_TRUE(std::signbit(y[4]));

  // The same block scaled by 2^-40: same codes, scale 0x7F - 40.
  for (float &v : x)
    v = std::ldexp(v, -40);
  const QuantizedTensor small = quantize(x.data(), {32}, 0, mxfp4());
  EXPECT_EQ(small.scales[0], 0x7F - 40);
  EXPECT_EQ(small.codes, q.codes);
  EXPECT_EQ(dequantize(small)[1], std::ldexp(-1.5f, -40));

  // The Ceil rule takes the binade above: e = 1, 5/2 = 2.5 -> 2.
  const QuantizedTensor ceil =
      quantize(x.data(), {32}, 0, mxfp4(ScaleRule::Ceil));
  EXPECT_EQ(ceil.scales[0], 0x7F - 39);
  EXPECT_EQ(ceil.codes[0], 0x4);
}

TEST(BlockQuantizeTest, RepresentableValuesAreExact) {
  // code * 2^e for codes of E2M1 with amax 6 * 2^e: dequantizes exactly.
  for (int e : {-120, -3, 0, 17}) {
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j)
      x[j] = std::ldexp(decodeE2M1(j % 16), e);
    x[7] = std::ldexp(6.0f, e);
    const QuantizedTensor q = quantize(x.data(), {32}, 0, mxfp4());
    EXPECT_EQ(q.scales[0], encodeE8M0(e));
    EXPECT_EQ(dequantize(q), x);
  }
}

TEST(BlockQuantizeTest, AllZeroBlocks) {
  std::vector<float> x(64, 0.0f);
  x[5] = -0.0f;
  x[40] = 3.0f;
  const QuantizedTensor q = quantize(x.data(), {64}, 0, mxfp4());
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_EQ(q.scales[0], 0x00); // e = -127
  EXPECT_EQ(q.scales[1], 0x7F - 1);
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(q.codes[j], j == 5 ? 0x8 : 0x0);
  const std::vector<float> y = dequantize(q);
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(y[j], 0.0f);
  EXPECT_TRUE(std::signbit(y[5]));
  EXPECT_EQ(y[40], 3.0f);

  // NVFP4, all zeros: tensor scale 1, scales 0, codes 0.
  std::vector<float> zeros(32, 0.0f);
  const QuantizedTensor nv = quantize(zeros.data(), {32}, 0, nvfp4());
  EXPECT_EQ(nv.tensorScale, 1.0f);
  EXPECT_EQ(nv.scales, std::vector<uint8_t>(2, 0));
  EXPECT_EQ(nv.codes, std::vector<uint8_t>(32, 0));
  EXPECT_EQ(dequantize(nv), zeros);
}

TEST(BlockQuantizeTest, NonFiniteBlocksGetNaNScales) {
  // {2, 64} along axis 1: four blocks; NaN in block (0, 1), +Inf in (1, 0).
  std::vector<float> x = randomValues(128, 1);
  x[0 * 64 + 40] = kNaN;
  x[1 * 64 + 3] = kInf;
  for (bool negativeInfinity : {false, true}) {
    if (negativeInfinity)
      x[1 * 64 + 3] = -kInf;
    const QuantizedTensor q = quantize(x.data(), {2, 64}, 1, mxfp4());
    ASSERT_EQ(q.scales.size(), 4u);
    EXPECT_EQ(q.scales[1], kE8M0NaN);
    EXPECT_EQ(q.scales[2], kE8M0NaN);
    EXPECT_NE(q.scales[0], kE8M0NaN);
    EXPECT_NE(q.scales[3], kE8M0NaN);
    const std::vector<float> y = dequantize(q);
    for (int row = 0; row < 2; ++row)
      for (int col = 0; col < 64; ++col) {
        const int block = row * 2 + col / 32;
        const bool poisoned = block == 1 || block == 2;
        if (poisoned) {
          EXPECT_EQ(q.codes[row * 64 + col], 0);
          EXPECT_TRUE(std::isnan(y[row * 64 + col]));
        } else {
          EXPECT_TRUE(std::isfinite(y[row * 64 + col]));
          EXPECT_NEAR(y[row * 64 + col], x[row * 64 + col], 0.25f);
        }
      }
    // The healthy blocks are exactly what they are alone.
    const QuantizedTensor healthy = quantize(x.data(), {1, 32}, 1, mxfp4());
    EXPECT_EQ(healthy.scales[0], q.scales[0]);
  }

  // NVFP4: the NaN block's scale is E4M3 NaN; the tensor scale ignores it.
  std::vector<float> v(32, 1.0f);
  v[0] = 2688.0f;
  v[20] = kNaN;
  v[21] = 1e30f;
  QuantizedTensor nv = quantize(v.data(), {32}, 0, nvfp4());
  EXPECT_EQ(nv.tensorScale, 1e30f / 2688.0f);
  v[21] = 1.0f;
  nv = quantize(v.data(), {32}, 0, nvfp4());
  EXPECT_EQ(nv.tensorScale, 1.0f);
  EXPECT_EQ(nv.scales[1], 0x7F);
  EXPECT_EQ(nv.scales[0], 0x7E);
  const std::vector<float> w = dequantize(nv);
  for (int j = 0; j < 16; ++j)
    EXPECT_TRUE(std::isfinite(w[j]));
  for (int j = 16; j < 32; ++j)
    EXPECT_TRUE(std::isnan(w[j]));
  // An Inf is not finite either.
  v[20] = -kInf;
  nv = quantize(v.data(), {32}, 0, nvfp4());
  EXPECT_EQ(nv.tensorScale, 1.0f);
  EXPECT_EQ(nv.scales[1], 0x7F);
}

namespace {

/// Fills a tensor so that block (o, b, i) along `axis` holds
/// +-(j + 1)/32 * 2^k, k = its scale index - 20, for j = 0..31: amax 2^k at
/// j = 31, Floor scale exponent k - 2, codes those of +-(j + 1)/8.
void checkBlocksRunAlongAxis(const std::vector<int64_t> &shape, int axis) {
  const AxisView view = viewAlong(shape, axis);
  const int64_t blocks = view.extent / 32;
  std::vector<float> x(view.numElements());
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t i = 0; i < view.inner; ++i) {
        const int k = static_cast<int>((o * blocks + b) * view.inner + i) - 20;
        for (int j = 0; j < 32; ++j)
          x[view.index(o, b * 32 + j, i)] =
              std::ldexp((j % 2 ? -1.0f : 1.0f) * (j + 1) / 32.0f, k);
      }
  const QuantizedTensor q = quantize(x.data(), shape, axis, mxfp4());
  std::vector<int64_t> scaleShape = shape;
  scaleShape[axis] /= 32;
  int64_t scaleCount = 1;
  for (int64_t d : scaleShape)
    scaleCount *= d;
  ASSERT_EQ(static_cast<int64_t>(q.scales.size()), scaleCount);
  ASSERT_EQ(q.codes.size(), x.size());
  for (int64_t s = 0; s < scaleCount; ++s)
    EXPECT_EQ(q.scales[s], encodeE8M0(static_cast<int>(s) - 20 - 2)) << s;
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t e = 0; e < view.extent; ++e)
      for (int64_t i = 0; i < view.inner; ++i) {
        const int j = static_cast<int>(e % 32);
        EXPECT_EQ(q.codes[view.index(o, e, i)],
                  encodeE2M1((j % 2 ? -1.0f : 1.0f) * (j + 1) / 8.0f));
      }
}

} // namespace

TEST(BlockQuantizeTest, BlocksRunAlongTheAxis) {
  checkBlocksRunAlongAxis({64, 3}, 0);
  checkBlocksRunAlongAxis({3, 64}, 1);
  checkBlocksRunAlongAxis({2, 64, 3}, 1);
  checkBlocksRunAlongAxis({2, 3, 96}, 2);
  checkBlocksRunAlongAxis({96}, 0);
}

TEST(BlockQuantizeTest, AxisZeroIsAxisOneOfTheTranspose) {
  const int64_t rows = 64, cols = 5;
  const std::vector<float> x = randomValues(rows * cols, 9);
  std::vector<float> transposed(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      transposed[c * rows + r] = x[r * cols + c];
  const QuantizedTensor a = quantize(x.data(), {rows, cols}, 0, mxfp4());
  const QuantizedTensor b =
      quantize(transposed.data(), {cols, rows}, 1, mxfp4());
  ASSERT_EQ(a.scales.size(), 10u); // {2, 5}
  for (int64_t block = 0; block < 2; ++block)
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(a.scales[block * cols + c], b.scales[c * 2 + block]);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(a.codes[r * cols + c], b.codes[c * rows + r]);
}

TEST(BlockQuantizeTest, NVFP4HandChecked) {
  // Tensor amax 2688 = 448 * 6, so the tensor scale is exactly 1.
  std::vector<float> x(64, 0.0f);
  const float block0[] = {2688, 1344, 672, -224, 300, 100};
  const float block1[] = {12, 5, -7, 1, 0.4f};
  const float block2[] = {1, 0.5f, -0.25f};
  for (int j = 0; j < 6; ++j)
    x[j] = block0[j];
  for (int j = 0; j < 5; ++j)
    x[16 + j] = block1[j];
  for (int j = 0; j < 3; ++j)
    x[32 + j] = block2[j];
  x[48] = -0.0f; // block 3: all zeros
  const QuantizedTensor q = quantize(x.data(), {64}, 0, nvfp4());
  EXPECT_EQ(q.tensorScale, 1.0f);
  // Scales: 2688/6 = 448 -> 0x7E; 12/6 = 2 -> 0x40;
  // 1/6 = 0.1667 -> 1.375 * 2^-3 = 0.171875 -> 0x23; 0 -> 0x00.
  ASSERT_EQ(q.scales.size(), 4u);
  EXPECT_EQ(q.scales[0], 0x7E);
  EXPECT_EQ(q.scales[1], 0x40);
  EXPECT_EQ(q.scales[2], 0x23);
  EXPECT_EQ(q.scales[3], 0x00);
  EXPECT_EQ(decodeE4M3(0x23), 0.171875f);
  // Block 0 over 448: 6, 3, 1.5, -0.5, 0.67 -> 0.5, 0.22 -> 0.
  const uint8_t codes0[] = {0x7, 0x5, 0x3, 0x9, 0x1, 0x0};
  // Block 1 over 2: 6, 2.5 -> 2, -3.5 -> -4, 0.5, 0.2 -> 0.
  const uint8_t codes1[] = {0x7, 0x4, 0xE, 0x1, 0x0};
  // Block 2 over 0.171875: 5.82 -> 6, 2.91 -> 3, -1.45 -> -1.5.
  const uint8_t codes2[] = {0x7, 0x5, 0xB};
  for (int j = 0; j < 6; ++j)
    EXPECT_EQ(q.codes[j], codes0[j]) << j;
  for (int j = 0; j < 5; ++j)
    EXPECT_EQ(q.codes[16 + j], codes1[j]) << j;
  for (int j = 0; j < 3; ++j)
    EXPECT_EQ(q.codes[32 + j], codes2[j]) << j;
  EXPECT_EQ(q.codes[48], 0x8);
  const std::vector<float> y = dequantize(q);
  EXPECT_EQ(y[0], 2688.0f);
  EXPECT_EQ(y[4], 224.0f);
  EXPECT_EQ(y[17], 4.0f);
  EXPECT_EQ(y[18], -8.0f);
  EXPECT_EQ(y[32], 1.03125f);
  EXPECT_EQ(y[33], 0.515625f);
  EXPECT_EQ(y[34], -0.2578125f);
  EXPECT_TRUE(std::signbit(y[48]));
}

TEST(BlockQuantizeTest, NVFP4TensorScale) {
  // amax 1: tensor scale 1/2688 in fp32; the amax block's scale is 448.
  std::vector<float> x = randomValues(48, 3);
  for (float &v : x)
    v *= 0.5f;
  x[7] = -1.0f;
  x[20] = 0.001f;
  for (int j = 32; j < 48; ++j)
    x[j] = 1e-3f * x[j];
  const QuantizedTensor q = quantize(x.data(), {48}, 0, nvfp4());
  EXPECT_EQ(q.tensorScale, 1.0f / 2688.0f);
  EXPECT_EQ(q.scales[0], 0x7E);
  // Every scale and code follows the documented fp32 sequence.
  for (int b = 0; b < 3; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 16; ++j)
      amax = std::fmax(amax, std::fabs(x[b * 16 + j]));
    const uint8_t scale = encodeE4M3(amax / (q.tensorScale * 6.0f));
    EXPECT_EQ(q.scales[b], scale) << b;
    const float decoded = decodeE4M3(scale) * q.tensorScale;
    for (int j = 0; j < 16; ++j)
      EXPECT_EQ(q.codes[b * 16 + j], encodeE2M1(x[b * 16 + j] / decoded));
  }
  const std::vector<float> y = dequantize(q);
  EXPECT_NEAR(y[7], -1.0f, 1e-6f);
  for (int j = 0; j < 48; ++j)
    EXPECT_EQ(y[j], (decodeE2M1(q.codes[j]) * decodeE4M3(q.scales[j / 16])) *
                        q.tensorScale);
}

TEST(BlockQuantizeTest, NVFP4TorchaoRuleIsTorchaos) {
  // Tensors with a wide dynamic range — block amaxes from 2^7 down to
  // 2^-56, with an all-zero block, a lone -0 and a subnormal — and plain random
  // ones: the torchao rule gives what torchao gives, code for code and
  // scale for scale. The in-test definition's own E4M3 and E2M1 casts are
  // checked against the numerics library's on the way.
  for (int value = 0; value < 0x7F; ++value) {
    const float v = e4m3Value(static_cast<uint8_t>(value));
    EXPECT_EQ(decodeE4M3(static_cast<uint8_t>(value)), v) << value;
    if (v >= 0.015625f)
      EXPECT_EQ(castToE4M3(v), value) << v;
  }
  int differ = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::vector<float> x = randomValues(64 * 16, seed);
    if (seed % 2 == 0)
      for (int b = 0; b < 64; ++b)
        for (int j = 0; j < 16; ++j)
          x[b * 16 + j] = std::ldexp(x[b * 16 + j], 7 - static_cast<int>(b));
    std::fill(x.begin() + 5 * 16, x.begin() + 6 * 16, 0.0f);
    x[5 * 16 + 3] = -0.0f;
    x[6 * 16 + 2] = std::numeric_limits<float>::denorm_min();
    const TorchaoNVFP4 expected = torchaoNVFP4(x);
    const QuantizedTensor q = quantize(x.data(), {static_cast<int64_t>(
                                                     x.size())},
                                       0, nvfp4(ScaleRule::Torchao));
    ASSERT_EQ(q.tensorScale, expected.tensorScale) << seed;
    ASSERT_EQ(q.scales, expected.scales) << seed;
    ASSERT_EQ(q.codes, expected.codes) << seed;
    const QuantizedTensor nearest = quantize(
        x.data(), {static_cast<int64_t>(x.size())}, 0, nvfp4());
    if (nearest.scales != q.scales)
      ++differ;
  }
  // The rules are not the same rule under another name.
  EXPECT_GE(differ, 10);
}

TEST(BlockQuantizeTest, NVFP4ScaleRulesOnAWideRange) {
  // Tensor amax 2688 (tensor scale 1); a block with amax 0.03 and one with
  // amax 2e-3. Nearest: 0.03 / 6 = 0.005 -> the subnormal 3 * 2^-9 =
  // 0.00586 (0x03); 2e-3 / 6 -> 0x00 (scale 0: every code is a signed zero).
  // Torchao: both clamp to 2^-6 (0x08); the codes are x / 2^-6 rounded.
  std::vector<float> x(48, 0.0f);
  x[0] = 2688.0f;
  x[16] = 0.03f;
  x[17] = -0.01f;
  x[32] = 1e-3f;
  x[33] = -2e-3f; // amax 2e-3
  const QuantizedTensor nearest = quantize(x.data(), {48}, 0, nvfp4());
  const QuantizedTensor torchao =
      quantize(x.data(), {48}, 0, nvfp4(ScaleRule::Torchao));
  EXPECT_EQ(nearest.tensorScale, 1.0f);
  EXPECT_EQ(torchao.tensorScale, 1.0f);
  EXPECT_EQ(nearest.scales, (std::vector<uint8_t>{0x7E, 0x03, 0x00}));
  EXPECT_EQ(torchao.scales, (std::vector<uint8_t>{0x7E, 0x08, 0x08}));
  // 0.03 / 2^-6 = 1.92 -> 2; -0.01 / 2^-6 = -0.64 -> -0.5; 1e-3 / 2^-6 =
  // 0.064 -> 0; -2e-3 / 2^-6 = -0.128 -> -0.
  EXPECT_EQ(torchao.codes[16], 0x4);
  EXPECT_EQ(torchao.codes[17], 0x9);
  EXPECT_EQ(torchao.codes[32], 0x0);
  EXPECT_EQ(torchao.codes[33], 0x8);
  // Nearest's scale 0 block: every code is the sign of zero.
  EXPECT_EQ(nearest.codes[32], 0x0);
  EXPECT_EQ(nearest.codes[33], 0x8);
}

TEST(BlockQuantizeTest, ScaleRulesBelongToAScaleFormat) {
  for (ScaleRule rule : scaleRules()) {
    EXPECT_EQ(parseScaleRule(scaleRuleName(rule)), rule);
    const bool e4m3 = rule == ScaleRule::Nearest || rule == ScaleRule::Torchao;
    EXPECT_EQ(scaleFormatOf(rule),
              e4m3 ? ScaleFormat::E4M3 : ScaleFormat::E8M0);
  }
  EXPECT_EQ(defaultScaleRule(ScaleFormat::E8M0), ScaleRule::Floor);
  EXPECT_EQ(defaultScaleRule(ScaleFormat::E4M3), ScaleRule::Nearest);
  EXPECT_EQ(nvfp4().scaling.rule, ScaleRule::Nearest);
  EXPECT_EQ(scaleFormatName(ScaleFormat::E4M3), "e4m3");
}

TEST(BlockQuantizeTest, MXFP4ErrorBound) {
  // Per element, |dequant - x| <= 0.25 * max(|x|, 2^e): half an E2M1 ulp is
  // a quarter of the binade in [1, 6] * 2^e, 0.25 * 2^e among the subnormals
  // below, and clipping (Floor, Even) loses less than |x| / 4 above 6 * 2^e.
  std::vector<float> x = randomValues(64 * 64, 21);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::ldexp(x[i], static_cast<int>((i / 32) % 41) - 20);
  for (ScaleRule rule :
       {ScaleRule::Floor, ScaleRule::Ceil, ScaleRule::Even, ScaleRule::RCeil}) {
    const QuantizedTensor q = quantize(x.data(), {64, 64}, 1, mxfp4(rule));
    const std::vector<float> y = dequantize(q);
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double unit = std::ldexp(1.0, e8m0Exponent(q.scales[i / 32]));
      const double bound = 0.25 * std::fmax(std::fabs(x[i]), unit);
      const double error = std::fabs(static_cast<double>(y[i]) - x[i]);
      EXPECT_LE(error, bound) << i;
      worst = std::fmax(worst, error / bound);
    }
    EXPECT_GT(worst, 0.9); // the bound is tight, not vacuous
  }
}

TEST(BlockQuantizeTest, MXFP8ErrorBound) {
  // E4M3 under RCeil never clips: |error| <= 2^-4 |x| for normals, and
  // <= 2^-10 * 2^e among the subnormals (below 2^-6 * 2^e).
  std::vector<float> x = randomValues(32 * 64, 22);
  BlockFormat format = *blockFormatPreset("mxfp8_e4m3");
  format.scaling.rule = ScaleRule::RCeil;
  const QuantizedTensor q = quantize(x.data(), {32 * 64}, 0, format);
  const std::vector<float> y = dequantize(q);
  for (size_t i = 0; i < x.size(); ++i) {
    const double unit = std::ldexp(1.0, e8m0Exponent(q.scales[i / 32]));
    const double bound =
        std::fmax(std::ldexp(std::fabs(x[i]), -4), std::ldexp(unit, -10));
    EXPECT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << i;
  }
}

TEST(BlockQuantizeTest, StochasticRoundingUsesRowMajorIndex) {
  const std::vector<int64_t> shape = {64, 4};
  const std::vector<float> x = randomValues(256, 31);
  const RandomStream stream{5, 6, 7};
  const BlockFormat format = mxfp4(ScaleRule::Floor, Rounding::Stochastic);
  const QuantizedTensor q = quantize(x.data(), shape, 0, format, stream);
  const FormatSpec &spec = formatSpec(ElementFormat::E2M1);
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t c = 0; c < 4; ++c) {
      const int64_t index = r * 4 + c;
      const int e = e8m0Exponent(q.scales[(r / 32) * 4 + c]);
      EXPECT_EQ(q.codes[index], encode(x[index], e, spec, Rounding::Stochastic,
                                       randomBits(stream, index)));
    }
  // Reproducible; another step draws other bits.
  EXPECT_EQ(quantize(x.data(), shape, 0, format, stream).codes, q.codes);
  const QuantizedTensor other = quantize(x.data(), shape, 0, format, {5, 7, 7});
  EXPECT_NE(other.codes, q.codes);
  EXPECT_EQ(other.scales, q.scales); // scales do not depend on rounding
}

TEST(BlockQuantizeTest, FakeQuantize) {
  const std::vector<int64_t> shape = {4, 64};
  const std::vector<float> x = randomValues(256, 41);
  OperandQuantization plain;
  plain.format = mxfp4();
  std::vector<float> y = x;
  fakeQuantize(y.data(), shape, 1, plain);
  EXPECT_EQ(y, dequantize(quantize(x.data(), shape, 1, plain.format)));

  OperandQuantization rotated = plain;
  rotated.rotation = {RotationKind::RandomHadamard, 32, SignSchedule::PerStep,
                      3};
  const RandomStream stream{1, 2, 3};
  std::vector<float> z = x;
  fakeQuantize(z.data(), shape, 1, rotated, stream);
  std::vector<float> expected = x;
  rotate(expected.data(), viewAlong(shape, 1), rotated.rotation, 2);
  expected = dequantize(quantize(expected.data(), shape, 1, plain.format));
  rotate(expected.data(), viewAlong(shape, 1), rotated.rotation, 2, true);
  EXPECT_EQ(z, expected);
  // Another step, other signs, another result.
  std::vector<float> w = x;
  fakeQuantize(w.data(), shape, 1, rotated, {1, 3, 3});
  EXPECT_NE(w, z);
}

TEST(BlockQuantizeTest, RoundTripBF16) {
  std::vector<float> x = {1.0f + std::ldexp(1.0f, -8),
                          1.0f + 3 * std::ldexp(1.0f, -8), -2.5f, kInf};
  roundTripBF16(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(x[2], -2.5f);
  EXPECT_EQ(x[3], kInf);
}

TEST(BlockQuantizeTest, DequantizeAtTheTopOfTheRange) {
  // Under Ceil, a block of amax 1.75 * 2^127 gets e = 126; 3.5 rounds (tie)
  // to 4 and 4 * 2^126 = 2^128 is beyond fp32: Inf. Just below, 3 * 2^126.
  // Floor clips instead: 1.75 * 2^127 / 2^125 = 7 saturates to 6.
  const float top = std::ldexp(1.75f, 127);
  std::vector<float> x(32, 1.0f);
  x[0] = top;
  const QuantizedTensor ceil =
      quantize(x.data(), {32}, 0, mxfp4(ScaleRule::Ceil));
  EXPECT_EQ(ceil.scales[0], encodeE8M0(126));
  EXPECT_EQ(ceil.codes[0], 0x6);
  EXPECT_EQ(dequantize(ceil)[0], kInf);
  const QuantizedTensor floor = quantize(x.data(), {32}, 0, mxfp4());
  EXPECT_EQ(floor.scales[0], encodeE8M0(125));
  EXPECT_EQ(dequantize(floor)[0], std::ldexp(6.0f, 125));
  x[0] = nextBelow(top);
  const QuantizedTensor below =
      quantize(x.data(), {32}, 0, mxfp4(ScaleRule::Ceil));
  EXPECT_EQ(dequantize(below)[0], std::ldexp(3.0f, 126));
}

// The one list of named formats: each preset is found by its name, a
// format's first preset is its canonical name (mxfp8 is an alias of
// mxfp8_e4m3), and only block presets give a BlockFormat.
TEST(FormatPresets, OneListForEveryLanguage) {
  std::vector<std::string> names;
  for (const FormatPreset &preset : formatPresets())
    names.emplace_back(preset.name);
  EXPECT_EQ(names, (std::vector<std::string>{"mxfp4", "mxfp8_e4m3", "mxfp8",
                                             "mxfp8_e5m2", "nvfp4", "bf16",
                                             "f32"}));
  for (const FormatPreset &preset : formatPresets()) {
    ASSERT_EQ(findFormatPreset(preset.name), &preset);
    std::string_view canonical = formatPresetName(
        preset.element, preset.blockSize, preset.scaleFormat);
    EXPECT_EQ(canonical, preset.name == "mxfp8" ? "mxfp8_e4m3" : preset.name);
  }
  EXPECT_EQ(findFormatPreset("mxfp6"), nullptr);
  EXPECT_EQ(formatPresetName(ElementFormat::E2M1, 64, ScaleFormat::E8M0), "");
  std::optional<BlockFormat> alias = blockFormatPreset("mxfp8");
  ASSERT_TRUE(alias.has_value());
  EXPECT_EQ(alias->element, ElementFormat::E4M3);
  EXPECT_EQ(alias->scaling.blockSize, 32);
  std::optional<BlockFormat> nv = blockFormatPreset("nvfp4");
  ASSERT_TRUE(nv.has_value());
  EXPECT_EQ(nv->scaling.scaleFormat, ScaleFormat::E4M3);
  EXPECT_EQ(nv->scaling.blockSize, 16);
  EXPECT_FALSE(blockFormatPreset("bf16").has_value());
}
