//===- CpuQuantizeTest.cpp - Generated quantizers vs numerics -------------===//
//
// JIT-compiles one tetra.quantize kernel per element format, scale rule,
// rounding and axis, and checks its codes, scales and NVFP4 tensor scale
// against numerics::quantize byte for byte, on data full of edge cases
// (KernelHarness.h) and, for stochastic rounding, under several seeds, steps
// and tensor ids.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include <array>
#include <map>

using namespace tetra;
using namespace tetra::testing;
using numerics::BlockFormat;
using numerics::ElementFormat;
using numerics::Rounding;
using numerics::ScaleFormat;
using numerics::ScaleRule;

namespace {

struct QuantCase {
  std::string preset; // mxfp4, mxfp8_e4m3, mxfp8_e5m2, nvfp4
  ScaleRule rule;
  Rounding rounding;
  int axis;
  int rank = 2;

  BlockFormat format() const {
    BlockFormat format = *numerics::blockFormatPreset(preset);
    format.scaling.rule = rule;
    format.rounding = rounding;
    return format;
  }
  bool nvfp4() const {
    return format().scaling.scaleFormat == ScaleFormat::E4M3;
  }
  /// Distinct per case, so that the streams differ between kernels too.
  uint32_t tensorId() const {
    return 0x9E3779B9u * (static_cast<uint32_t>(rule) * 3 +
                          static_cast<uint32_t>(rounding) + 1) +
           static_cast<uint32_t>(axis) * 0x1000 + preset.size() + rank;
  }
  std::string name() const {
    std::string text = preset + "_" +
                       std::string(numerics::scaleRuleName(rule)) + "_" +
                       std::string(numerics::roundingName(rounding)) + "_axis" +
                       std::to_string(axis);
    if (rank != 2)
      text += "_rank" + std::to_string(rank);
    return text;
  }
  std::string quantSyntax() const {
    return preset + " rule " + std::string(numerics::scaleRuleName(rule)) +
           " round " + std::string(numerics::roundingName(rounding));
  }
};

std::vector<QuantCase> allCases() {
  std::vector<QuantCase> cases;
  const Rounding roundings[] = {Rounding::NearestEven, Rounding::NearestAway,
                                Rounding::Stochastic};
  for (const char *preset : {"mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"})
    for (ScaleRule rule :
         {ScaleRule::Floor, ScaleRule::Ceil, ScaleRule::Even, ScaleRule::RCeil})
      for (Rounding rounding : roundings)
        for (int axis : {0, 1})
          cases.push_back({preset, rule, rounding, axis});
  for (ScaleRule rule : {ScaleRule::Nearest, ScaleRule::Torchao})
    for (Rounding rounding : roundings)
      for (int axis : {0, 1})
        cases.push_back({"nvfp4", rule, rounding, axis});
  // A middle axis, with both outer and inner extents above one.
  cases.push_back({"mxfp4", ScaleRule::Floor, Rounding::NearestEven, 1, 3});
  cases.push_back({"mxfp8_e4m3", ScaleRule::RCeil, Rounding::Stochastic, 1, 3});
  cases.push_back({"nvfp4", ScaleRule::Torchao, Rounding::Stochastic, 1, 3});
  return cases;
}

std::string codeType(const QuantCase &c) {
  std::string preset = c.preset;
  if (preset == "mxfp8_e4m3")
    return "f8E4M3FN";
  if (preset == "mxfp8_e5m2")
    return "f8E5M2";
  return "f4E2M1FN";
}

/// One kernel: (x, seed, step) -> (codes, scales[, tensor scale]), every
/// size dynamic.
std::string kernelSource(const QuantCase &c) {
  std::string dims = c.rank == 3 ? "?x?x?" : "?x?";
  std::string input = "tensor<" + dims + "xf32>";
  std::string results = "tensor<" + dims + "x" + codeType(c) + ">, tensor<" +
                        dims + "x" + (c.nvfp4() ? "f8E4M3FN" : "f8E8M0FNU") +
                        ">";
  std::string values = "%c, %s";
  if (c.nvfp4()) {
    results += ", tensor<f32>";
    values += ", %t";
  }
  std::string name = c.name();
  return "func.func @host_" + name + "(%x: " + input +
         ", %seed: i64, %step: i64) -> (" + results + ") {\n  " + values +
         " = tetra.kernel \"" + name +
         "\" (%a = %x, %sd = %seed, %st = %step) : (" + input +
         ", i64, i64) -> (" + results + ") {\n    " + values +
         " = tetra.quantize %a as #tetra.quant<" + c.quantSyntax() +
         "> along " + std::to_string(c.axis) +
         " random(%sd, %st) {tensor_id = " + std::to_string(c.tensorId()) +
         " : i64} : " + input + " -> " + results + "\n    tetra.yield " +
         values + " : " + results + "\n  }\n  return " + values + " : " +
         results + "\n}\n";
}

/// All cases' kernels in one module, compiled once per process (and loaded
/// from the cache after the first).
/// Quantize then dequantize (tetra.dequantize's lowering), and the bf16
/// round trip of arith.truncf / arith.extf.
const char *kRoundTripSource = R"mlir(
func.func @host_dequantize(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %r:2 = tetra.kernel "dequantize" (%a = %x, %b = %y) : (tensor<?x?xf32>, tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
    %c, %s = tetra.quantize %a as #tetra.quant<mxfp8_e5m2 rule ceil> along 0 : tensor<?x?xf32> -> tensor<?x?xf8E5M2>, tensor<?x?xf8E8M0FNU>
    %d = tetra.dequantize %c, %s as #tetra.quant<mxfp8_e5m2 rule ceil> along 0 : tensor<?x?xf8E5M2>, tensor<?x?xf8E8M0FNU> -> tensor<?x?xf32>
    %nc, %ns, %nt = tetra.quantize %b as #tetra.quant<nvfp4> along 1 : tensor<?x?xf32> -> tensor<?x?xf4E2M1FN>, tensor<?x?xf8E4M3FN>, tensor<f32>
    %nd = tetra.dequantize %nc, %ns, %nt as #tetra.quant<nvfp4> along 1 : tensor<?x?xf4E2M1FN>, tensor<?x?xf8E4M3FN>, tensor<f32> -> tensor<?x?xf32>
    tetra.yield %d, %nd : tensor<?x?xf32>, tensor<?x?xf32>
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?x?xf32>
}
func.func @host_bf16(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = tetra.kernel "bf16_round_trip" (%a = %x) : (tensor<?xf32>) -> tensor<?xf32> {
    %t = arith.truncf %a : tensor<?xf32> to tensor<?xbf16>
    %e = arith.extf %t : tensor<?xbf16> to tensor<?xf32>
    tetra.yield %e : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
)mlir";

const cpu::KernelLibrary *library() {
  static std::unique_ptr<cpu::KernelLibrary> compiled = [] {
    std::string source = kRoundTripSource;
    for (const QuantCase &c : allCases())
      source += kernelSource(c);
    return compileOrFail(source);
  }();
  return compiled.get();
}

struct KernelOutput {
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;
  float tensorScale = 1.0f;
};

template <int Rank>
KernelOutput runKernel(const QuantCase &c, std::vector<float> data,
                       const std::vector<int64_t> &shape,
                       const numerics::RandomStream &stream,
                       uint64_t stepHighBits) {
  std::array<int64_t, Rank> sizes;
  std::array<int64_t, Rank> scaleSizes;
  for (int d = 0; d < Rank; ++d)
    sizes[d] = scaleSizes[d] = shape[d];
  scaleSizes[c.axis] /= c.format().scaling.blockSize;
  KernelOutput out;
  out.codes.assign(data.size(), 0xAA);
  int64_t scaleCount = 1;
  for (int64_t size : scaleSizes)
    scaleCount *= size;
  out.scales.assign(scaleCount, 0xAA);

  auto x = describe<float, Rank>(data.data(), sizes);
  auto codes = describe<uint8_t, Rank>(out.codes.data(), sizes);
  auto scales = describe<uint8_t, Rank>(out.scales.data(), scaleSizes);
  auto tensorScale = describeScalar(&out.tensorScale);
  // The kernel takes the step as i64 and uses its low 32 bits.
  const int64_t step = static_cast<int64_t>(stream.step | stepHighBits);
  const int64_t seed = static_cast<int64_t>(stream.seed);
  if (c.nvfp4()) {
    auto *kernel =
        library()
            ->lookupAs<void(MemRefDescriptor<float, Rank> *, int64_t, int64_t,
                            MemRefDescriptor<uint8_t, Rank> *,
                            MemRefDescriptor<uint8_t, Rank> *,
                            MemRefDescriptor<float, 0> *)>(c.name());
    kernel(&x, seed, step, &codes, &scales, &tensorScale);
  } else {
    auto *kernel =
        library()
            ->lookupAs<void(MemRefDescriptor<float, Rank> *, int64_t, int64_t,
                            MemRefDescriptor<uint8_t, Rank> *,
                            MemRefDescriptor<uint8_t, Rank> *)>(c.name());
    kernel(&x, seed, step, &codes, &scales);
  }
  return out;
}

::testing::AssertionResult matchesNumerics(const QuantCase &c,
                                           const std::vector<float> &data,
                                           const std::vector<int64_t> &shape,
                                           const numerics::RandomStream &stream,
                                           uint64_t stepHighBits = 0) {
  const numerics::QuantizedTensor expected =
      numerics::quantize(data.data(), shape, c.axis, c.format(), stream);
  const KernelOutput actual =
      c.rank == 3 ? runKernel<3>(c, data, shape, stream, stepHighBits)
                  : runKernel<2>(c, data, shape, stream, stepHighBits);
  if (auto result = sameBytes(expected.scales, actual.scales); !result)
    return result << "\n  (scales)";
  if (auto result = sameBytes(expected.codes, actual.codes, &data); !result)
    return result << "\n  (codes)";
  if (bitsOf(expected.tensorScale) != bitsOf(actual.tensorScale))
    return ::testing::AssertionFailure()
           << "tensor scale: expected " << hex(bitsOf(expected.tensorScale))
           << ", got " << hex(bitsOf(actual.tensorScale));
  return ::testing::AssertionSuccess();
}

/// A shape with `blocks` blocks along the axis and `across` elements on
/// each other dimension.
std::vector<int64_t> shapeFor(const QuantCase &c, int64_t blocks,
                              int64_t across) {
  std::vector<int64_t> shape(c.rank, across);
  shape[c.axis] = blocks * c.format().scaling.blockSize;
  return shape;
}

class CpuQuantizeTest : public ::testing::TestWithParam<QuantCase> {};

/// gtest prints a parameter with this instead of its bytes.
void PrintTo(const QuantCase &c, std::ostream *os) { *os << c.name(); }

} // namespace

TEST_P(CpuQuantizeTest, EdgeCasesMatchNumerics) {
  const QuantCase &c = GetParam();
  ASSERT_NE(library(), nullptr);
  ASSERT_NE(library()->lookup(c.name()), nullptr) << c.name();
  const ElementFormat element = c.format().element;
  const int blockSize = c.format().scaling.blockSize;
  const std::vector<numerics::RandomStream> streams = {
      {0, 0, c.tensorId()},
      {0x0123456789ABCDEFull, 1, c.tensorId()},
      {0xFFFFFFFF00000001ull, 0xFFFFFFFFu, c.tensorId()},
  };
  for (uint64_t dataSeed = 1; dataSeed <= 4; ++dataSeed) {
    EdgeCaseData generator(element, dataSeed * 7919 + c.tensorId());
    const std::vector<int64_t> shape =
        shapeFor(c, c.rank == 3 ? 3 : 5, c.rank == 3 ? 4 : 9);
    const std::vector<float> data = generator.make(shape, c.axis, blockSize);
    for (const numerics::RandomStream &stream : streams) {
      EXPECT_TRUE(matchesNumerics(c, data, shape, stream))
          << c.name() << ", data seed " << dataSeed << ", stream seed "
          << hex(stream.seed) << " step " << stream.step;
      if (c.rounding != Rounding::Stochastic)
        break; // the random source does not matter
      // The kernel takes the step as an i64 and keys Philox with its low
      // 32 bits.
      EXPECT_TRUE(matchesNumerics(c, data, shape, stream,
                                  /*stepHighBits=*/uint64_t{3} << 32))
          << c.name() << ", data seed " << dataSeed << ", step " << stream.step
          << " + 3 * 2^32";
    }
  }
}

TEST_P(CpuQuantizeTest, WholeTensors) {
  // Tensors that are all one thing: NVFP4's tensor scale sees them whole
  // (zeros give 1; an amax below 2688 * 2^-150 underflows and gives 1).
  const QuantCase &c = GetParam();
  ASSERT_NE(library(), nullptr);
  const std::vector<int64_t> shape = shapeFor(c, 2, 3);
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  const numerics::RandomStream stream{42, 7, c.tensorId()};
  std::mt19937 rng(c.tensorId());
  auto filled = [&](auto value) {
    std::vector<float> data(count);
    for (float &x : data)
      x = value();
    return data;
  };
  const std::vector<std::vector<float>> tensors = {
      filled([] { return 0.0f; }),
      filled([] { return -0.0f; }),
      filled([&] { return numerics::bitsToFloat(rng() & 0x3FF); }),
      filled([&] { return std::ldexp(float(rng() % 1000) / 999.0f, -140); }),
      filled([&] { return std::ldexp(float(rng() % 1000) / 999.0f, 127); }),
      filled([] { return kNaN; }),
      filled([&] { return (rng() & 1) ? kInf : 2688.0f; }),
      filled([&] { return float(int(rng() % 25) - 12) * 0.25f; }),
  };
  for (size_t t = 0; t < tensors.size(); ++t)
    EXPECT_TRUE(matchesNumerics(c, tensors[t], shape, stream))
        << c.name() << ", tensor " << t;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CpuQuantizeTest,
                         ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<QuantCase> &info) {
                           return info.param.name();
                         });

TEST(CpuQuantizeHandChecked, NVFP4) {
  // numerics' NVFP4HandChecked (docs/numerics.md §5): ties and the 0x23
  // scale, through the generated kernel.
  const QuantCase c{"nvfp4", ScaleRule::Nearest, Rounding::NearestEven, 1};
  ASSERT_NE(library(), nullptr);
  std::vector<float> x(64, 0.0f);
  const float block0[] = {2688, 1344, 672, -224, 300, 100};
  const float block1[] = {12, 5, -7, 1, 0.4f};
  const float block2[] = {1, 0.5f, -0.25f};
  std::copy(std::begin(block0), std::end(block0), x.begin());
  std::copy(std::begin(block1), std::end(block1), x.begin() + 16);
  std::copy(std::begin(block2), std::end(block2), x.begin() + 32);
  x[48] = -0.0f;
  const KernelOutput out = runKernel<2>(c, x, {1, 64}, {}, 0);
  EXPECT_EQ(out.tensorScale, 1.0f);
  EXPECT_EQ(out.scales, (std::vector<uint8_t>{0x7E, 0x40, 0x23, 0x00}));
  EXPECT_EQ(out.codes[17], 0x4); // 2.5 -> 2 (tie to even)
  EXPECT_EQ(out.codes[18], 0xE); // -3.5 -> -4 (tie to even)
  EXPECT_EQ(out.codes[48], 0x8); // -0
  EXPECT_TRUE(matchesNumerics(c, x, {1, 64}, {}));
}

TEST(CpuQuantizeHandChecked, MXFP4ScaleRules) {
  // docs/numerics.md §4's table: amax 3.5 gives e = -1 under floor and 0
  // under ceil, even and rceil (scale codes 126, 127).
  ASSERT_NE(library(), nullptr);
  std::vector<float> x(32, 0.0f);
  x[0] = 3.5f;
  x[1] = 1.25f; // a tie at scale 2^-1 (2.5): to even, 2; away, 3
  const std::map<ScaleRule, uint8_t> expectedScale = {{ScaleRule::Floor, 126},
                                                      {ScaleRule::Ceil, 127},
                                                      {ScaleRule::Even, 127},
                                                      {ScaleRule::RCeil, 127}};
  for (auto [rule, scale] : expectedScale) {
    for (Rounding rounding : {Rounding::NearestEven, Rounding::NearestAway}) {
      const QuantCase c{"mxfp4", rule, rounding, 1};
      const KernelOutput out = runKernel<2>(c, x, {1, 32}, {}, 0);
      EXPECT_EQ(out.scales[0], scale) << c.name();
      if (rule == ScaleRule::Floor)
        EXPECT_EQ(out.codes[1], rounding == Rounding::NearestEven ? 0x4 : 0x5)
            << c.name();
      EXPECT_TRUE(matchesNumerics(c, x, {1, 32}, {})) << c.name();
    }
  }
}

TEST(CpuQuantizeHandChecked, NVFP4OperationOrder) {
  // The block scale is amax / (tensorScale * 6), the product first. Find
  // block amaxes for which (amax / tensorScale) / 6 would round to another
  // E4M3 code, and check that the kernel does what numerics does on them.
  ASSERT_NE(library(), nullptr);
  const QuantCase c{"nvfp4", ScaleRule::Nearest, Rounding::NearestEven, 1};
  // Candidates: block amaxes within a few ulps of q * (tensorScale * 6)
  // for q an E4M3 rounding midpoint, where one fp32 rounding decides.
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  const float midpoints[] = {1.0625f, 1.1875f, 0.5f * (3.0f + 3.25f),
                             0.5f * (240.0f + 256.0f), 0.0068359375f};
  int found = 0;
  for (int attempt = 0; attempt < 4000 && found < 16; ++attempt) {
    const float tensorAmax = std::ldexp(unit(rng), int(rng() % 40) - 20);
    const float tensorScale = tensorAmax / 2688.0f;
    float amax = midpoints[rng() % 5] * (tensorScale * 6.0f);
    for (int step = 0; step < 4; ++step)
      amax = std::nextafter(amax, 0.0f);
    for (int step = 0; step < 8; ++step, amax = std::nextafter(amax, kInf)) {
      if (numerics::encodeE4M3(amax / (tensorScale * 6.0f)) ==
          numerics::encodeE4M3((amax / tensorScale) / 6.0f))
        continue;
      ++found;
      std::vector<float> x(32, 0.0f);
      x[0] = tensorAmax;
      x[16] = -amax;
      x[17] = amax / 3.0f;
      EXPECT_TRUE(matchesNumerics(c, x, {1, 32}, {}))
          << "tensor amax " << tensorAmax << ", block amax " << amax;
    }
  }
  EXPECT_GE(found, 8) << "too few inputs where the order matters";
}

TEST(CpuRoundTrips, DequantizeMatchesNumerics) {
  // tetra.dequantize: decode(code) * 2^e for MX; (decode(code) *
  // decodeE4M3(scale)) * tensorScale for NVFP4, bit for bit.
  ASSERT_NE(library(), nullptr);
  for (uint64_t seed : {1, 2, 3}) {
    EdgeCaseData e5m2Data(ElementFormat::E5M2, seed),
        e2m1Data(ElementFormat::E2M1, seed);
    const std::vector<float> x = e5m2Data.make({96, 5}, 0, 32);
    const std::vector<float> y = e2m1Data.make({4, 64}, 1, 16);
    std::vector<float> xOut(x.size(), kNaN), yOut(y.size(), kNaN);
    std::vector<float> xIn = x, yIn = y;
    auto xd = describe<float, 2>(xIn.data(), {96, 5});
    auto yd = describe<float, 2>(yIn.data(), {4, 64});
    auto xo = describe<float, 2>(xOut.data(), {96, 5});
    auto yo = describe<float, 2>(yOut.data(), {4, 64});
    auto *kernel =
        library()
            ->lookupAs<void(
                MemRefDescriptor<float, 2> *, MemRefDescriptor<float, 2> *,
                MemRefDescriptor<float, 2> *, MemRefDescriptor<float, 2> *)>(
                "dequantize");
    ASSERT_NE(kernel, nullptr);
    kernel(&xd, &yd, &xo, &yo);
    BlockFormat e5m2 = *numerics::blockFormatPreset("mxfp8_e5m2");
    e5m2.scaling.rule = ScaleRule::Ceil;
    EXPECT_TRUE(sameFloats(
        numerics::dequantize(numerics::quantize(x.data(), {96, 5}, 0, e5m2)),
        xOut))
        << "mxfp8_e5m2, seed " << seed;
    EXPECT_TRUE(sameFloats(
        numerics::dequantize(numerics::quantize(
            y.data(), {4, 64}, 1, *numerics::blockFormatPreset("nvfp4"))),
        yOut))
        << "nvfp4, seed " << seed;
  }
}

TEST(CpuRoundTrips, BF16MatchesNumerics) {
  // arith.truncf to bf16 in a kernel is numerics' BF16 encoder: nearest
  // even, subnormals kept, overflow and Inf to Inf, NaN to 0x7FC0.
  ASSERT_NE(library(), nullptr);
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          kInf,
                          -kInf,
                          kNaN,
                          numerics::bitsToFloat(0xFFC12345),
                          numerics::bitsToFloat(0x3F808000), // tie, to even
                          numerics::bitsToFloat(0x3F818000), // tie, up
                          numerics::bitsToFloat(0x3F808001),
                          numerics::bitsToFloat(0x7F7FFFFF), // rounds to Inf
                          numerics::bitsToFloat(0x7F7F7FFF),
                          numerics::bitsToFloat(0x00000001),
                          numerics::bitsToFloat(0x00008000), // subnormal tie
                          numerics::bitsToFloat(0x80018000)};
  std::mt19937 rng(7);
  for (int k = 0; k < 4096; ++k)
    x.push_back(numerics::bitsToFloat(rng()));
  std::vector<float> expected = x, actual(x.size(), 0.0f);
  numerics::roundTripBF16(expected.data(), int64_t(expected.size()));
  auto in = describe<float, 1>(x.data(), {int64_t(x.size())});
  auto out = describe<float, 1>(actual.data(), {int64_t(x.size())});
  auto *kernel =
      library()
          ->lookupAs<void(MemRefDescriptor<float, 1> *,
                          MemRefDescriptor<float, 1> *)>("bf16_round_trip");
  ASSERT_NE(kernel, nullptr);
  kernel(&in, &out);
  // Bit for bit, NaNs included (the canonical 0x7FC00000).
  for (size_t k = 0; k < x.size(); ++k)
    EXPECT_EQ(bitsOf(actual[k]), bitsOf(expected[k]))
        << "input " << hex(bitsOf(x[k]));
}
