//===- BundleGemmTest.cpp - A bundle's GEMM kernels on the GPU ------------===//
//
// Runs every GEMM kernel of an sm_90a bundle (`tetra compile`, named by
// TETRA_GPU_BUNDLE) on the GPU through the CUDA backend and checks it
// against runtime/numerics, the one definition:
//
//   - codes and scales of both operands byte for byte equal to
//     numerics::rotate + numerics::quantize of the same input (stochastic
//     rounding and random Hadamard signs included; NVFP4's fp32 tensor
//     scale bit for bit; BF16 values as numerics::encodeBF16), on fresh
//     random inputs with adversarial blocks: ties of E2M1, saturation,
//     all-zero blocks, NaN, Inf, subnormals;
//   - the product against tetra.scaled_matmul's contract evaluated on the
//     reference codes (chunks of G: the smaller scale block, or K for
//     BF16): bit for bit for MXFP4 x MXFP4 (every chunk's sum is exact),
//     within the contract's fp32 error bound otherwise, NaN exactly where
//     the contract has NaN; results poisoned (NaN) before each run, so an
//     unwritten tile cannot pass;
//   - the K = 32 worst case of E2M1: every element 6, so every product is
//     36 and every chunk sums to 1152, exactly.
//
// Skipped without TETRA_GPU_BUNDLE or without a CUDA device (CI); the GPU
// machine runs it through tools/gpu_tests.sh, where a skip is a failure.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CudaBackend.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/io/Json.h"
#include "runtime/numerics/AxisView.h"
#include "runtime/numerics/BlockQuantize.h"
#include "runtime/numerics/Formats.h"
#include "runtime/numerics/Hadamard.h"
#include "runtime/numerics/ScaleFolding.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

using namespace tetra;

namespace {

/// One operand as the manifest describes it.
struct Operand {
  int input = 0;
  std::vector<int64_t> shape;
  int axis = 0;
  std::string kind; ///< "mx", "nvfp4" or "bf16"
  numerics::BlockFormat format;
  numerics::Rotation rotation;
  uint32_t tensorId = 0;
  std::string encoding; ///< How the scratch holds codes: "code" or "e4m3".
  /// Whether the scratch codes keep the input's layout ("mn_major").
  bool mnMajor = false;

  static Operand parse(const io::JsonValue &json) {
    Operand operand;
    operand.input = static_cast<int>(json.get("input").asInt64());
    for (const io::JsonValue &d : json.get("shape").items())
      operand.shape.push_back(d.asInt64());
    operand.axis = static_cast<int>(json.get("axis").asInt64());
    operand.kind = json.get("kind").asString();
    operand.format.element =
        *numerics::parseElementFormat(json.get("format").asString());
    operand.format.scaling.blockSize = static_cast<int>(json.get("block").asInt64());
    operand.format.scaling.scaleFormat = operand.kind == "nvfp4"
                                             ? numerics::ScaleFormat::E4M3
                                             : numerics::ScaleFormat::E8M0;
    if (operand.kind != "bf16")
      operand.format.scaling.rule =
          *numerics::parseScaleRule(json.get("rule").asString());
    operand.format.rounding =
        *numerics::parseRounding(json.get("rounding").asString());
    operand.tensorId = static_cast<uint32_t>(json.get("tensor_id").asInt64());
    operand.mnMajor = json.get("scratch_layout").asString() == "mn_major";
    // Only an unrotated BF16 operand reduced along its rows keeps its own
    // layout; everything else is K-major.
    if (operand.mnMajor)
      EXPECT_TRUE(operand.kind == "bf16" && operand.axis == 0);
    else
      EXPECT_EQ(json.get("scratch_layout").asString(), "k_major");
    operand.encoding = json.get("scratch_encoding").asString();
    const io::JsonValue &rotation = json.get("rotation");
    std::string kind = rotation.get("kind").asString();
    if (kind != "none") {
      operand.rotation.kind = kind == "hadamard"
                                  ? numerics::RotationKind::Hadamard
                                  : numerics::RotationKind::RandomHadamard;
      operand.rotation.blockSize = static_cast<int>(rotation.get("block").asInt64());
      operand.rotation.schedule =
          rotation.get("schedule").asString() == "per_step"
              ? numerics::SignSchedule::PerStep
              : numerics::SignSchedule::Fixed;
      operand.rotation.seed = static_cast<uint64_t>(rotation.get("seed").asInt64());
    }
    return operand;
  }
  int64_t count() const { return shape[0] * shape[1]; }
  bool bf16() const { return kind == "bf16"; }
};

/// The inputs each kernel runs on: plain random values; the same with
/// adversarial blocks (whose saturating values also make NVFP4's tensor
/// scale so large that most of its blocks quantize to zero, hence the plain
/// run); and E2M1's K = 32 worst case.
enum class Inputs { Plain, Adversarial, WorstCase };

/// Random values with a spread of magnitudes, then (Adversarial) blocks
/// along the quantization axis.
std::vector<float> makeInput(const Operand &operand, std::mt19937_64 &random,
                             Inputs kind) {
  std::vector<float> data(operand.count());
  if (kind == Inputs::WorstCase) {
    std::fill(data.begin(), data.end(), 6.0f);
    return data;
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (float &x : data)
    x = normal(random) * std::ldexp(1.0f, exponent(random) / 4);
  if (kind == Inputs::Plain)
    return data;
  numerics::AxisView view = numerics::viewAlong(operand.shape, operand.axis);
  const int64_t blocks = view.extent / 32;
  std::uniform_int_distribution<int64_t> pickOuter(0, view.outer - 1),
      pickBlock(0, blocks - 1), pickInner(0, view.inner - 1);
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (int pattern = 0; pattern < 7; ++pattern)
    for (int repeat = 0; repeat < 3; ++repeat) {
      int64_t o = pickOuter(random), b = pickBlock(random),
              i = pickInner(random);
      for (int64_t j = 0; j < 32; ++j) {
        float &x = data[view.index(o, b * 32 + j, i)];
        switch (pattern) {
        case 0: x = 0.0f; break;                                   // zeros
        case 1: x = j == 5 ? NAN : x; break;                       // NaN
        case 2: x = j == 9 ? -INFINITY : x; break;                 // Inf
        case 3: x = (j % 2 ? -1 : 1) * 1e-40f * (j + 1); break;    // subnormal
        case 4: x = (j % 3 ? 3.0e38f : -3.3e38f); break;           // saturation
        case 5: x = j == 0 ? 6.0f : (j % 2 ? -1 : 1) * ties[j % 7]; break;
        case 6: x = j == 0 ? 448.0f : (j % 2 ? -1 : 1) * 17.0f * (j + 1); break;
        }
      }
    }
  return data;
}

/// What numerics computes for the operand: rotated along K, then quantized
/// (codes, scales, NVFP4's tensor scale) or rounded to BF16 (the codes are
/// then the values' little-endian bf16 bytes); `values` dequantized.
struct Reference {
  std::vector<uint8_t> codes, scales;
  float tensorScale = 1.0f;
  std::vector<float> values;
};

Reference reference(const Operand &operand, std::vector<float> data,
                    uint64_t seed, uint32_t step) {
  if (operand.rotation.kind != numerics::RotationKind::None)
    numerics::rotate(data.data(), numerics::viewAlong(operand.shape, operand.axis),
                     operand.rotation, step);
  Reference result;
  if (operand.bf16()) {
    for (float x : data) {
      uint16_t code = numerics::encodeBF16(x);
      result.codes.push_back(static_cast<uint8_t>(code & 0xFF));
      result.codes.push_back(static_cast<uint8_t>(code >> 8));
      result.values.push_back(numerics::decodeBF16(code));
    }
    return result;
  }
  numerics::QuantizedTensor quantized =
      numerics::quantize(data.data(), operand.shape, operand.axis,
                         operand.format, {seed, step, operand.tensorId});
  result.values = numerics::dequantize(quantized);
  result.codes = std::move(quantized.codes);
  result.scales = std::move(quantized.scales);
  result.tensorScale = quantized.tensorScale;
  return result;
}

/// `bytes` of an operand of `shape` quantized along `axis` (`width` bytes
/// per element, `block` elements per entry along the axis) as the scratch
/// buffers hold them: K-major, [the other dimension][K / block].
std::vector<uint8_t> kMajor(const std::vector<uint8_t> &bytes,
                            const std::vector<int64_t> &shape, int axis,
                            int64_t block, int64_t width) {
  if (axis == 1)
    return bytes;
  const int64_t along = shape[0] / block, other = shape[1];
  std::vector<uint8_t> out(bytes.size());
  for (int64_t a = 0; a < along; ++a)
    for (int64_t o = 0; o < other; ++o)
      std::memcpy(&out[(o * along + a) * width], &bytes[(a * other + o) * width],
                  width);
  return out;
}

struct Outcome {
  bool codesEqual = true, scalesEqual = true, bitExact = true;
  int64_t nanMismatches = 0, boundViolations = 0, overflowing = 0;
  int64_t exactPairs = 0; ///< Results the contract sums exactly.
  /// The largest error relative to the sum of |products| (the quantity
  /// the contract bounds by gamma; relative to |exact| it is unbounded
  /// where terms cancel).
  double maxNormalized = 0;
};

class BundleGemm : public testing::Test {
protected:
  void SetUp() override {
    const char *path = std::getenv("TETRA_GPU_BUNDLE");
    if (!path)
      GTEST_SKIP() << "TETRA_GPU_BUNDLE names no bundle";
    io::Expected<std::unique_ptr<backend::CudaBackend>> created =
        backend::CudaBackend::create();
    if (!created)
      GTEST_SKIP() << "no CUDA device here: " << created.error().message();
    gpu = std::move(*created);
    io::Expected<bundle::Bundle> opened = bundle::Bundle::open(path);
    ASSERT_TRUE(static_cast<bool>(opened)) << opened.error().message();
    compiled = std::move(*opened);
  }

  std::unique_ptr<backend::CudaBackend> gpu;
  bundle::Bundle compiled;
};

TEST_F(BundleGemm, EveryKernelAgreesWithNumerics) {
  ASSERT_EQ(compiled.target, "sm_90a");
  uint64_t runSeed = std::random_device{}();
  std::printf("inputs drawn with seed %llu\n",
              static_cast<unsigned long long>(runSeed));
  std::mt19937_64 random(runSeed);
  std::printf("%-28s %-6s %-6s %-6s %-22s %-6s %-6s %-11s %-6s %s\n", "kernel",
              "role", "lhs", "rhs", "rotation (lhs/rhs)", "codes", "scales",
              "err/sum|ab|", "exact%", "GEMM");
  int kernels = 0;
  for (const bundle::Kernel &kernel : compiled.kernels) {
    ++kernels;
    const std::string &name = kernel.name;
    const io::JsonValue &computes = kernel.computes;
    Operand lhs = Operand::parse(computes.get("lhs"));
    Operand rhs = Operand::parse(computes.get("rhs"));
    const int64_t m = computes.get("m").asInt64(), n = computes.get("n").asInt64(),
                  k = computes.get("k").asInt64();
    const bool transposeLhs = computes.get("transpose_lhs").asBool();
    const bool transposeRhs = computes.get("transpose_rhs").asBool();

    io::Expected<std::string> code = compiled.code(kernel);
    ASSERT_TRUE(static_cast<bool>(code)) << code.error().message();
    const std::string &ptx = *code;
    io::Expected<backend::Module> module =
        gpu->loadModule(backend::CodeObject::binary(
            backend::CodeObjectFormat::Ptx,
            {reinterpret_cast<const uint8_t *>(ptx.data()), ptx.size()}, name));
    ASSERT_TRUE(static_cast<bool>(module)) << module.error().message();

    for (Inputs kind : {Inputs::Plain, Inputs::Adversarial, Inputs::WorstCase}) {
      const bool worstCase = kind == Inputs::WorstCase;
      if (worstCase && (lhs.kind != "mx" || rhs.kind != "mx" ||
                        lhs.format.element != numerics::ElementFormat::E2M1 ||
                        rhs.format.element != numerics::ElementFormat::E2M1 ||
                        lhs.rotation.kind != numerics::RotationKind::None ||
                        rhs.rotation.kind != numerics::RotationKind::None))
        continue;
      std::vector<float> inputs[2] = {makeInput(lhs, random, kind),
                                      makeInput(rhs, random, kind)};
      const uint64_t seed = random();
      const uint32_t step = 1 + static_cast<uint32_t>(random() % 1000);

      std::map<std::string, backend::Buffer> buffers;
      auto allocate = [&](const std::string &key, size_t bytes, uint8_t poison) {
        io::Expected<backend::Buffer> buffer = gpu->allocate(bytes);
        EXPECT_TRUE(static_cast<bool>(buffer));
        buffers[key] = *buffer;
        EXPECT_TRUE(static_cast<bool>(gpu->fill(*buffer, poison)));
      };
      for (const Operand *operand : {&lhs, &rhs}) {
        std::string key = "input:" + std::to_string(operand->input);
        allocate(key, operand->count() * 4, 0);
        ASSERT_TRUE(static_cast<bool>(gpu->copyToDevice(
            buffers[key], inputs[operand == &rhs].data(), operand->count() * 4)));
      }
      for (const auto &[key, bytes] : kernel.scratch)
        allocate(key, bytes, 0xAB);
      allocate("result:0", m * n * 4, 0xFF); // NaN until written

      for (const bundle::Launch &launch : kernel.launches) {
        io::Expected<backend::Kernel> function =
            gpu->getKernel(*module, launch.function);
        ASSERT_TRUE(static_cast<bool>(function)) << function.error().message();
        std::vector<backend::Buffer> args;
        std::vector<backend::Scalar> scalars;
        io::Status bound = launch.bind(buffers, static_cast<int64_t>(seed),
                                       step, args, scalars);
        ASSERT_TRUE(static_cast<bool>(bound)) << bound.error().message();
        ASSERT_TRUE(static_cast<bool>(gpu->launch(*function, launch.config, args, scalars)));
      }
      ASSERT_TRUE(static_cast<bool>(gpu->synchronize()));

      auto download = [&](const std::string &key, size_t bytes) {
        std::vector<uint8_t> host(bytes);
        EXPECT_TRUE(static_cast<bool>(gpu->copyToHost(host.data(), buffers.at(key), bytes)));
        return host;
      };
      Outcome outcome;
      // Per side, whether each fiber sums exactly (empty: none does).
      std::vector<bool> exactFiber[2];
      Reference expected[2] = {reference(lhs, inputs[0], seed, step),
                               reference(rhs, inputs[1], seed, step)};
      const char *sides[2] = {"lhs", "rhs"};
      for (int side = 0; side < 2; ++side) {
        const Operand &operand = side == 0 ? lhs : rhs;
        std::string scratch = std::string("scratch:") + sides[side];
        std::vector<uint8_t> codes =
            download(scratch + ".codes", expected[side].codes.size());
        std::vector<uint8_t> expectedCodes =
            operand.mnMajor
                ? expected[side].codes
                : kMajor(expected[side].codes, operand.shape, operand.axis, 1,
                         operand.bf16() ? 2 : 1);
        // E2M1 codes held as the E4M3 bytes of their values (sm_90a).
        if (operand.encoding == "e4m3")
          for (uint8_t &code : expectedCodes)
            code = numerics::encodeE4M3(numerics::decodeE2M1(code));
        else
          EXPECT_EQ(operand.encoding, "code") << name;
        outcome.codesEqual &= codes == expectedCodes;
        EXPECT_EQ(codes, expectedCodes) << name << " " << sides[side] << " codes";
        if (operand.bf16())
          continue;
        std::vector<uint8_t> scales =
            download(scratch + ".scales", expected[side].scales.size());
        std::vector<uint8_t> expectedScales =
            kMajor(expected[side].scales, operand.shape, operand.axis,
                   operand.format.scaling.blockSize, 1);
        outcome.scalesEqual &= scales == expectedScales;
        EXPECT_EQ(scales, expectedScales) << name << " " << sides[side] << " scales";
        if (kernel.scratch.count(scratch + ".fold_refs")) {
          // The fold launches (sm_90a's scale folding): each fiber's
          // reference code (numerics::fiberFolds) or -1, and its codes'
          // values times 2^(code - ref) as E4M3 where it folds.
          const int64_t fibers = operand.count() / k, perFiber = k / 32;
          std::vector<uint8_t> refBytes = download(scratch + ".fold_refs", 4 * fibers);
          std::vector<int32_t> refs(fibers), expectedRefs(fibers);
          std::memcpy(refs.data(), refBytes.data(), refBytes.size());
          std::vector<uint8_t> expectedFolded = expectedCodes;
          for (int64_t f = 0; f < fibers; ++f) {
            int largest = 0, smallest = 0xFF;
            for (int64_t c = 0; c < perFiber; ++c) {
              largest = std::max<int>(largest, expectedScales[f * perFiber + c]);
              smallest = std::min<int>(smallest, expectedScales[f * perFiber + c]);
            }
            const bool folds = numerics::fiberFolds(largest, smallest);
            expectedRefs[f] = folds ? largest - numerics::kFoldAbove : -1;
            for (int64_t j = 0; folds && j < k; ++j) {
              uint8_t &code = expectedFolded[f * k + j];
              const int offset = expectedScales[f * perFiber + j / 32] - expectedRefs[f];
              code = numerics::encodeE4M3(std::ldexp(numerics::decodeE4M3(code), offset));
            }
          }
          EXPECT_EQ(refs, expectedRefs) << name << " " << sides[side] << " fold references";
          EXPECT_EQ(download(scratch + ".folded", expectedFolded.size()), expectedFolded)
              << name << " " << sides[side] << " folded codes";
          outcome.codesEqual &= refs == expectedRefs;
        }
        // Exact sums (numerics::fiberSumsExactly): each fiber's exact
        // reference or -1, and, where the exact pass copies them, its codes
        // as the int8 bytes of their integers (numerics::exactInteger).
        if (kernel.scratch.count(scratch + ".exact_refs")) {
          const int64_t fibers = operand.count() / k, perFiber = k / 32;
          std::vector<uint8_t> refBytes = download(scratch + ".exact_refs", 4 * fibers);
          std::vector<int32_t> refs(fibers), expectedRefs(fibers);
          std::memcpy(refs.data(), refBytes.data(), refBytes.size());
          std::vector<uint8_t> expectedIntegers(expectedCodes.size(), 0);
          exactFiber[side].assign(fibers, false);
          for (int64_t f = 0; f < fibers; ++f) {
            int largest = 0, smallest = 0xFF;
            for (int64_t c = 0; c < perFiber; ++c) {
              largest = std::max<int>(largest, expectedScales[f * perFiber + c]);
              smallest = std::min<int>(smallest, expectedScales[f * perFiber + c]);
            }
            exactFiber[side][f] = numerics::fiberSumsExactly(largest, smallest);
            expectedRefs[f] = exactFiber[side][f] ? largest - numerics::kExactSpread : -1;
            const std::vector<uint8_t> &raw = expected[side].codes;
            std::vector<uint8_t> rawKMajor = kMajor(raw, operand.shape, operand.axis, 1, 1);
            for (int64_t j = 0; j < k; ++j) {
              const int offset = exactFiber[side][f]
                                     ? expectedScales[f * perFiber + j / 32] - expectedRefs[f]
                                     : 0;
              expectedIntegers[f * k + j] = static_cast<uint8_t>(
                  numerics::exactInteger(rawKMajor[f * k + j], offset));
            }
          }
          EXPECT_EQ(refs, expectedRefs) << name << " " << sides[side] << " exact references";
          outcome.codesEqual &= refs == expectedRefs;
          if (kernel.scratch.count(scratch + ".exact")) {
            std::vector<uint8_t> integers = download(scratch + ".exact", expectedIntegers.size());
            outcome.codesEqual &= integers == expectedIntegers;
            EXPECT_EQ(integers, expectedIntegers) << name << " " << sides[side] << " exact integers";
          }
        }
        if (operand.kind == "nvfp4") {
          std::vector<uint8_t> tensorScale = download(scratch + ".tensor_scale", 4);
          outcome.scalesEqual &=
              std::memcmp(tensorScale.data(), &expected[side].tensorScale, 4) == 0;
          EXPECT_EQ(std::memcmp(tensorScale.data(), &expected[side].tensorScale, 4), 0)
              << name << " " << sides[side] << " tensor scale";
        }
      }
      ASSERT_TRUE(static_cast<bool>(gpu->synchronize()));
      std::vector<uint8_t> resultBytes = download("result:0", m * n * 4);
      ASSERT_TRUE(static_cast<bool>(gpu->synchronize()));
      std::vector<float> result(m * n);
      std::memcpy(result.data(), resultBytes.data(), resultBytes.size());

      // The scaled_matmul contract on the reference codes: chunks of G,
      // fp32 products and sums in order; and the error bound against fp64.
      const std::vector<float> &a = expected[0].values, &b = expected[1].values;
      auto aAt = [&](int64_t row, int64_t kk) {
        return transposeLhs ? a[kk * m + row] : a[row * k + kk];
      };
      auto bAt = [&](int64_t kk, int64_t col) {
        return transposeRhs ? b[col * k + kk] : b[kk * n + col];
      };
      const bool exactChunks = lhs.kind == "mx" && rhs.kind == "mx" &&
                               lhs.format.element == numerics::ElementFormat::E2M1 &&
                               rhs.format.element == numerics::ElementFormat::E2M1;
      const int64_t chunk =
          lhs.bf16() ? k : std::min(lhs.format.scaling.blockSize, rhs.format.scaling.blockSize);
      EXPECT_EQ(computes.get("plan").get("chunk").asInt64(), chunk) << name;
      const double unit = std::ldexp(1.0, -24), g = chunk + k / chunk + 2;
      const double gamma = g * unit / (1 - g * unit);
      for (int64_t row = 0; row < m; ++row)
        for (int64_t col = 0; col < n; ++col) {
          float acc = 0.0f;
          double exact = 0, magnitude = 0;
          bool nanOperand = false, infiniteOperand = false;
          for (int64_t c = 0; c < k / chunk; ++c) {
            float partial = 0.0f;
            for (int64_t kk = c * chunk; kk < c * chunk + chunk; ++kk) {
              nanOperand |= std::isnan(aAt(row, kk)) || std::isnan(bAt(kk, col));
              infiniteOperand |= std::isinf(aAt(row, kk)) || std::isinf(bAt(kk, col));
              volatile float product = aAt(row, kk) * bAt(kk, col);
              partial = partial + product;
              exact += static_cast<double>(aAt(row, kk)) * bAt(kk, col);
              magnitude += std::fabs(static_cast<double>(aAt(row, kk)) * bAt(kk, col));
            }
            acc = acc + partial;
          }
          // The contract's result: exact where the pair sums exactly.
          const bool exactPair = !exactFiber[0].empty() && !exactFiber[1].empty() &&
                                 exactFiber[0][row] && exactFiber[1][col];
          if (exactPair)
            acc = static_cast<float>(exact);
          outcome.exactPairs += exactPair;
          float got = result[row * n + col];
          // A NaN block (NaN scale) makes the output NaN on every target.
          if (nanOperand) {
            if (!std::isnan(got) && outcome.nanMismatches++ < 3)
              ADD_FAILURE() << name << ": " << got << " at (" << row << ", "
                            << col << ") where a NaN block makes it NaN";
            continue;
          }
          // A value or a product reaching 2^128 overflows fp32: the
          // contract's result is Inf or NaN there, and which one depends on
          // the order of the overflowing operations (a dequantized value or
          // a per-element product on the CPU, the chunk's sum times the
          // scales on the tensor cores).
          if (infiniteOperand || magnitude > FLT_MAX) {
            ++outcome.overflowing;
            continue;
          }
          if (std::isnan(got)) {
            if (outcome.nanMismatches++ < 3)
              ADD_FAILURE() << name << ": NaN at (" << row << ", " << col
                            << ") where the contract gives " << acc
                            << " (exact " << exact << ", sum of |products| "
                            << magnitude << ")";
            continue;
          }
          if (worstCase)
            EXPECT_EQ(got, 36.0f * k) << name << " worst case (" << row << ", " << col << ")";
          if (std::memcmp(&got, &acc, 4) != 0)
            outcome.bitExact = false;
          double error = std::fabs(got - exact);
          // The contract's bound, plus what underflow adds: each product and
          // sum that lands among fp32's subnormals is off by up to 2^-150.
          const double underflow = 2.0 * (k + k / chunk + 2) * std::ldexp(1.0, -150);
          if (!(error <= gamma * magnitude + underflow))
            ++outcome.boundViolations;
          if (magnitude > 1e-30)
            outcome.maxNormalized = std::max(outcome.maxNormalized, error / magnitude);
        }
      EXPECT_EQ(outcome.nanMismatches, 0) << name;
      EXPECT_EQ(outcome.boundViolations, 0) << name;
      if (exactChunks)
        EXPECT_TRUE(outcome.bitExact) << name << ": MXFP4 x MXFP4 must match the contract bit for bit";
      auto rotationText = [](const Operand &o) {
        return o.rotation.kind == numerics::RotationKind::None ? std::string("-")
               : (o.rotation.kind == numerics::RotationKind::Hadamard ? "had" : "rhad") +
                     std::to_string(o.rotation.blockSize);
      };
      std::printf("%-28s %-6s %-6s %-6s %-22s %-6s %-6s %-11.2e %-6.1f %s%s\n",
                  (name.substr(0, 20) + (kind == Inputs::Plain         ? " plain"
                                         : kind == Inputs::Adversarial ? " advers"
                                                                       : " K32wc"))
                      .c_str(),
                  computes.get("role").asString().c_str(),
                  (lhs.kind == "nvfp4" ? std::string("nvfp4")
                                       : std::string(numerics::formatName(lhs.format.element))).c_str(),
                  (rhs.kind == "nvfp4" ? std::string("nvfp4")
                                       : std::string(numerics::formatName(rhs.format.element))).c_str(),
                  (rotationText(lhs) + "/" + rotationText(rhs) +
                   (lhs.format.rounding == numerics::Rounding::Stochastic ? " sr" : ""))
                      .c_str(),
                  outcome.codesEqual ? "same" : "DIFF", outcome.scalesEqual ? "same" : "DIFF",
                  outcome.maxNormalized, 100.0 * outcome.exactPairs / (m * n),
                  outcome.bitExact ? "bit-exact" : (outcome.boundViolations ? "OUT OF BOUND" : "within bound"),
                  outcome.overflowing
                      ? (" (" + std::to_string(outcome.overflowing) + " outputs overflow fp32)").c_str()
                      : "");
      for (auto &[key, buffer] : buffers)
        EXPECT_TRUE(static_cast<bool>(gpu->free(buffer)));
    }
    EXPECT_TRUE(static_cast<bool>(gpu->unloadModule(*module)));
  }
  EXPECT_GT(kernels, 0);
}

} // namespace
