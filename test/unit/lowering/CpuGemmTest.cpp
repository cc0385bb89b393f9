//===- CpuGemmTest.cpp - Quantized GEMM kernels vs numerics ---------------===//
//
// The three GEMMs of a linear layer, as the training step writes them
// (tetra.matmul with a role and a policy), through
// --tetra-materialize-quantization, --tetra-form-kernels and CPU code
// generation: rotate -> quantize -> scaled_matmul in one kernel each. Each
// result is checked
//   - bit for bit against the scaled matmul's defined arithmetic
//     (TetraKernelOps.td): numerics::rotate, numerics::quantize and
//     numerics::dequantize of each operand in its stored layout, then the
//     chunked fp32 summation, replicated here in C++;
//   - against numerics::referenceGemm of the same quantized operands (fp64),
//     within the documented bound γ(G + K/G + 2) · Σ|a||b|.
// Tensor ids are recomputed here from the documented scheme (FNV-1a of
// "NAME|ROLE|OPERAND"), so a change of scheme fails these tests.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include "runtime/numerics/ReferenceGemm.h"
#include "runtime/numerics/ScaleFolding.h"

#include <map>
#include <optional>

using namespace tetra;
using namespace tetra::testing;
using numerics::OperandQuantization;
using numerics::QuantizedTensor;
using numerics::RandomStream;

namespace {

// A linear layer: 64 tokens, 128 inputs, 288 outputs (two column tiles of the
// CPU GEMM: 256 and 32).
constexpr int64_t kTokens = 64, kIn = 128, kOut = 288;
constexpr uint64_t kSeed = 0x0123456789ABCDEFull;
constexpr int64_t kStep = 5;

enum class Role { Fprop, Dgrad, Wgrad };

const char *roleName(Role role) {
  switch (role) {
  case Role::Fprop:
    return "fprop";
  case Role::Dgrad:
    return "dgrad";
  case Role::Wgrad:
    return "wgrad";
  }
  return "";
}

/// One operand's quantization, in both spellings.
struct Quant {
  std::string syntax; // inside #tetra.gemm's {lhs = ..., rhs = ...}
  std::string format; // "mxfp4", "nvfp4", "mxfp8_e4m3", "bf16", "f32"
  /// Unset: the preset's rule.
  std::optional<numerics::ScaleRule> rule = std::nullopt;
  numerics::Rounding rounding = numerics::Rounding::NearestEven;
  numerics::Rotation rotation{};

  bool blockScaled() const { return format != "bf16" && format != "f32"; }
  numerics::BlockFormat blockFormat() const {
    numerics::BlockFormat block = *numerics::blockFormatPreset(format);
    if (rule)
      block.scaling.rule = *rule;
    block.rounding = rounding;
    return block;
  }
};

/// A policy: the three roles' operand quantizations.
struct Policy {
  std::string name; // prefixes the linear's name
  std::map<Role, std::pair<Quant, Quant>> roles;
};

numerics::Rotation hadamard(int blockSize) {
  return {numerics::RotationKind::Hadamard, blockSize,
          numerics::SignSchedule::Fixed, 0};
}
numerics::Rotation randomPerStep(int blockSize, uint64_t seed) {
  return {numerics::RotationKind::RandomHadamard, blockSize,
          numerics::SignSchedule::PerStep, seed};
}

const std::vector<Policy> &policies() {
  static const std::vector<Policy> all = []() -> std::vector<Policy> {
    using numerics::Rounding;
    using numerics::ScaleRule;
    Quant mxfp4{"mxfp4", "mxfp4"};
    Quant mxfp4H32{"mxfp4 rotate hadamard<32>", "mxfp4", ScaleRule::Floor,
                   Rounding::NearestEven, hadamard(32)};
    Quant mxfp4SR{"mxfp4 round stochastic", "mxfp4", ScaleRule::Floor,
                  Rounding::Stochastic};
    Quant srRandom{
        "mxfp4 round stochastic rotate random_hadamard<64, per_step, "
        "11>",
        "mxfp4", ScaleRule::Floor, Rounding::Stochastic, randomPerStep(64, 11)};
    Quant random{"mxfp4 rotate random_hadamard<64, per_step, 11>", "mxfp4",
                 ScaleRule::Floor, Rounding::NearestEven,
                 randomPerStep(64, 11)};
    Quant e4m3{"mxfp8_e4m3 rule rceil", "mxfp8_e4m3", ScaleRule::RCeil};
    Quant e5m2Even{"mxfp8_e5m2 rule even round nearest_away", "mxfp8_e5m2",
                   ScaleRule::Even, Rounding::NearestAway};
    Quant nvfp4{"nvfp4", "nvfp4"};
    Quant nvfp4H16{"nvfp4 rotate hadamard<16>", "nvfp4", ScaleRule::Nearest,
                   Rounding::NearestEven, hadamard(16)};
    Quant nvfp4SRH16{"nvfp4 rule torchao round stochastic rotate "
                     "hadamard<16>",
                     "nvfp4", ScaleRule::Torchao, Rounding::Stochastic,
                     hadamard(16)};
    Quant nvfp4Torchao{"nvfp4 rule torchao", "nvfp4", ScaleRule::Torchao};
    Quant bf16{"bf16", "bf16"};
    Quant f32{"f32", "f32"};
    return {
        // The study's fix: MXFP4 everywhere, Hadamard in Wgrad.
        {"paper",
         {{Role::Fprop, {mxfp4, mxfp4}},
          {Role::Dgrad, {mxfp4, mxfp4}},
          {Role::Wgrad, {mxfp4H32, mxfp4H32}}}},
        // Stochastic rounding and per-step random signs.
        {"random",
         {{Role::Fprop, {e4m3, e4m3}},
          {Role::Dgrad, {mxfp4SR, mxfp4}},
          {Role::Wgrad, {srRandom, random}}}},
        // NVFP4 (tensor scales; both scale rules), E5M2, and plain bf16 /
        // f32 operands.
        {"mixed",
         {{Role::Fprop, {nvfp4, nvfp4Torchao}},
          {Role::Dgrad, {bf16, e5m2Even}},
          {Role::Wgrad, {nvfp4SRH16, nvfp4H16}}}},
        {"plain",
         {{Role::Fprop, {f32, mxfp4}},
          {Role::Dgrad, {bf16, bf16}},
          {Role::Wgrad, {mxfp4, f32}}}},
    };
  }();
  return all;
}

std::string linearName(const Policy &policy) { return policy.name + ".up"; }
std::string matmulName(const Policy &policy, Role role) {
  return linearName(policy) + "." + roleName(role);
}
/// FormKernels' kernel name for the matmul named `name`.
std::string kernelName(const Policy &policy, Role role) {
  std::string name = matmulName(policy, role);
  for (char &c : name)
    if (c == '.')
      c = '_';
  return name;
}

/// The documented tensor id: FNV-1a 32 of "NAME|ROLE|OPERAND".
uint32_t tensorId(const Policy &policy, Role role, const char *operand) {
  std::string key =
      matmulName(policy, role) + "|" + roleName(role) + "|" + operand;
  uint32_t hash = 0x811C9DC5u;
  for (unsigned char c : key) {
    hash ^= c;
    hash *= 0x01000193u;
  }
  return hash;
}

std::string gemmSyntax(const std::pair<Quant, Quant> &quants) {
  return "{lhs = " + quants.first.syntax + ", rhs = " + quants.second.syntax +
         "}";
}

/// A function with the three GEMMs of one linear under `policy`, named as
/// the training step names them.
std::string moduleSource(const Policy &policy) {
  const std::string x = "tensor<64x128xf32>", w = "tensor<288x128xf32>",
                    dy = "tensor<64x288xf32>";
  std::string policyText =
      "#tetra.policy<fprop = " + gemmSyntax(policy.roles.at(Role::Fprop)) +
      ", dgrad = " + gemmSyntax(policy.roles.at(Role::Dgrad)) +
      ", wgrad = " + gemmSyntax(policy.roles.at(Role::Wgrad)) + ">";
  auto loc = [&](Role role) {
    return " loc(\"" + matmulName(policy, role) + "\"(\"model.tetra\":3:7))";
  };
  return "func.func @" + policy.name + "(%x: " + x + ", %w: " + w +
         ", %dy: " + dy + ", %seed: i64, %step: i64) -> (tensor<64x288xf32>, " +
         x + ", " + w + ") {\n" +
         "  %y = tetra.matmul %x, %w transpose_rhs random(%seed, "
         "%step) policy " +
         policyText + " role fprop : " + x + ", " + w +
         " -> tensor<64x288xf32>" + loc(Role::Fprop) +
         "\n  %dx = tetra.matmul %dy, %w random(%seed, %step) policy " +
         policyText + " role dgrad : " + dy + ", " + w + " -> " + x +
         loc(Role::Dgrad) +
         "\n  %dw = tetra.matmul %dy, %x transpose_lhs random(%seed, %step) "
         "policy " +
         policyText + " role wgrad : " + dy + ", " + x + " -> " + w +
         loc(Role::Wgrad) + "\n  return %y, %dx, %dw : tensor<64x288xf32>, " +
         x + ", " + w + "\n}\n";
}

const cpu::KernelLibrary *library() {
  static std::unique_ptr<cpu::KernelLibrary> compiled = [] {
    std::string source;
    for (const Policy &policy : policies())
      source += moduleSource(policy);
    return compileOrFail(source, /*formKernels=*/true);
  }();
  return compiled.get();
}

//===----------------------------------------------------------------------===//
// The reference side
//===----------------------------------------------------------------------===//

/// A row-major matrix.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
  float at(int64_t r, int64_t c) const { return values[r * cols + c]; }
};

Matrix randomMatrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Matrix m{rows, cols, std::vector<float>(rows * cols)};
  // Rows of different magnitudes, as activations and gradients have.
  for (int64_t r = 0; r < rows; ++r) {
    const int exponent = int(rng() % 12) - 6;
    for (int64_t c = 0; c < cols; ++c)
      m.values[r * cols + c] = std::ldexp(
          std::normal_distribution<float>(0.0f, 1.0f)(rng), exponent);
  }
  return m;
}

/// `m` transposed.
template <typename T>
std::vector<T> transposed(const std::vector<T> &m, int64_t rows, int64_t cols) {
  std::vector<T> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[c * rows + r] = m[r * cols + c];
  return t;
}

/// One operand as the GEMM sees it: what the kernel must compute from it.
struct PreparedOperand {
  /// The values the product uses, fp32, in the operand's stored layout
  /// (dequantized, or rounded to bf16, or as they are).
  std::vector<float> values;
  /// For a block-scaled operand: the quantized tensor, stored layout.
  std::optional<QuantizedTensor> quantized;
};

/// Rotate along `axis`, then quantize (or round) as `quant` says, exactly as
/// numerics does; `id` is the operand's tensor id.
PreparedOperand prepare(const Matrix &m, int axis, const Quant &quant,
                        uint32_t id) {
  std::vector<float> rotated = m.values;
  numerics::rotate(rotated.data(), numerics::viewAlong({m.rows, m.cols}, axis),
                   quant.rotation, static_cast<uint32_t>(kStep));
  PreparedOperand prepared;
  if (quant.format == "f32") {
    prepared.values = rotated;
  } else if (quant.format == "bf16") {
    numerics::roundTripBF16(rotated.data(),
                            static_cast<int64_t>(rotated.size()));
    prepared.values = rotated;
  } else {
    const RandomStream stream{kSeed, static_cast<uint32_t>(kStep), id};
    prepared.quantized = numerics::quantize(rotated.data(), {m.rows, m.cols},
                                            axis, quant.blockFormat(), stream);
    prepared.values = numerics::dequantize(*prepared.quantized);
  }
  return prepared;
}

/// The quantized operand as referenceGemm wants it: {rows, K} along axis 1.
QuantizedTensor kMajor(const QuantizedTensor &q) {
  if (q.axis == 1)
    return q;
  QuantizedTensor t = q;
  const int64_t k = q.shape[0], rows = q.shape[1];
  const int64_t blocks = k / q.format.scaling.blockSize;
  t.shape = {rows, k};
  t.axis = 1;
  t.codes = transposed(q.codes, k, rows);
  t.scales = transposed(q.scales, blocks, rows);
  return t;
}

/// A GEMM C[M][N] = op(A) · op(B), with op(A) = A or Aᵀ.
struct Gemm {
  const Matrix *a, *b;
  bool transposeA, transposeB;
  int64_t m() const { return transposeA ? a->cols : a->rows; }
  int64_t k() const { return transposeA ? a->rows : a->cols; }
  int64_t n() const { return transposeB ? b->rows : b->cols; }
  int axisA() const { return transposeA ? 0 : 1; }
  int axisB() const { return transposeB ? 1 : 0; }
};

/// op(X)[r][c] from values stored like X.
float opAt(const std::vector<float> &values, int64_t cols, bool transpose,
           int64_t r, int64_t c) {
  return transpose ? values[c * cols + r] : values[r * cols + c];
}

/// The scaled matmul's defined arithmetic (TetraKernelOps.td,
/// numerics::contractSum): chunks of G along K, each summed from +0 in k
/// order, added in chunk order — or, where the row's and the column's
/// fibers both sum exactly (`rowExact`, `colExact`; empty: none), the exact
/// sum rounded once.
std::vector<float> contractProduct(const Gemm &g, const std::vector<float> &a,
                                   const std::vector<float> &b, int64_t chunk,
                                   const std::vector<bool> &rowExact,
                                   const std::vector<bool> &colExact) {
  std::vector<float> c(g.m() * g.n());
  for (int64_t row = 0; row < g.m(); ++row)
    for (int64_t col = 0; col < g.n(); ++col) {
      const bool exact = !rowExact.empty() && !colExact.empty() &&
                         rowExact[row] && colExact[col];
      c[row * g.n() + col] = numerics::contractSum(
          &a[g.transposeA ? row : row * g.a->cols], g.transposeA ? g.a->cols : 1,
          &b[g.transposeB ? col * g.b->cols : col], g.transposeB ? 1 : g.b->cols,
          g.k(), chunk, exact);
    }
  return c;
}

/// Σ_k |a||b| in fp64 from the operands' exact values, for the bound.
std::vector<double> absoluteProduct(const Gemm &g, const std::vector<double> &a,
                                    const std::vector<double> &b) {
  std::vector<double> c(g.m() * g.n(), 0.0);
  for (int64_t row = 0; row < g.m(); ++row)
    for (int64_t col = 0; col < g.n(); ++col)
      for (int64_t k = 0; k < g.k(); ++k)
        c[row * g.n() + col] +=
            std::fabs(a[row * g.k() + k]) * std::fabs(b[col * g.k() + k]);
  return c;
}

/// op(X) as a {rows, K} fp64 matrix of the exact operand values: for a
/// quantized operand decode(code) · scale (· tensorScale) in fp64.
std::vector<double> exactKMajor(const PreparedOperand &p, const Matrix &x,
                                bool kIsRows) {
  std::vector<double> values;
  // (Quantized along the other dimension, the fp32 values are the exact
  // ones for MX and serve for the wrong-axis comparison.)
  if (p.quantized && p.quantized->axis == (kIsRows ? 0 : 1)) {
    const QuantizedTensor q = kMajor(*p.quantized);
    const numerics::FormatSpec &spec = numerics::formatSpec(q.format.element);
    const int64_t rows = q.shape[0], k = q.shape[1];
    const int blockSize = q.format.scaling.blockSize;
    const bool nvfp4 =
        q.format.scaling.scaleFormat == numerics::ScaleFormat::E4M3;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const uint8_t scale = q.scales[r * (k / blockSize) + c / blockSize];
        const double element = numerics::decode(q.codes[r * k + c], spec);
        values.push_back(nvfp4 ? element * numerics::decodeE4M3(scale) *
                                     double(q.tensorScale)
                               : element * numerics::decodeE8M0(scale));
      }
    return values;
  }
  const std::vector<float> kMajorValues =
      kIsRows ? transposed(p.values, x.rows, x.cols) : p.values;
  return std::vector<double>(kMajorValues.begin(), kMajorValues.end());
}

double gamma(int64_t n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1 - n * u);
}

//===----------------------------------------------------------------------===//
// The three GEMMs of a linear
//===----------------------------------------------------------------------===//

struct Linear {
  Matrix x = randomMatrix(kTokens, kIn, 1);
  Matrix w = randomMatrix(kOut, kIn, 2);
  Matrix dy = randomMatrix(kTokens, kOut, 3);
};

const Linear &linear() {
  static const Linear instance;
  return instance;
}

Gemm gemmFor(Role role) {
  const Linear &l = linear();
  switch (role) {
  case Role::Fprop: // Y = X · Wᵀ
    return {&l.x, &l.w, false, true};
  case Role::Dgrad: // dX = dY · W
    return {&l.dy, &l.w, false, false};
  case Role::Wgrad: // dW = dYᵀ · X, reducing over the tokens
    return {&l.dy, &l.x, true, false};
  }
  return {};
}

/// Runs the role's kernel on the linear's data; the kernel's inputs are
/// named by what they hold, in the order FormKernels gives them.
/// Runs the GEMM kernel of `policy` and `role`, its result rows in `parts`
/// calls (the kernels split rows: lowering/Conversion/Passes.h, kernelSplitsRows).
std::vector<float> runGemmKernel(const Policy &policy, Role role,
                                 int64_t parts = 1) {
  const Gemm g = gemmFor(role);
  std::string name = kernelName(policy, role);
  auto packed = library()->lookupPacked(name);
  EXPECT_NE(packed, nullptr) << name;
  if (!packed)
    return {};
  // Inputs: the operands (data is not modified) and the random source.
  std::vector<float> aData = g.a->values, bData = g.b->values;
  auto a = describe<float, 2>(aData.data(), {g.a->rows, g.a->cols});
  auto b = describe<float, 2>(bData.data(), {g.b->rows, g.b->cols});
  int64_t seed = static_cast<int64_t>(kSeed), step = kStep;
  std::vector<float> result(g.m() * g.n(), kNaN);
  auto c = describe<float, 2>(result.data(), {g.m(), g.n()});
  void *aPtr = &a, *bPtr = &b, *cPtr = &c;

  // The signature lists the inputs; map each to its argument.
  const std::string signature = library()->signature(name);
  std::vector<void *> arguments;
  std::string aType = "tensor<" + std::to_string(g.a->rows) + "x" +
                      std::to_string(g.a->cols) + "xf32>";
  std::string bType = "tensor<" + std::to_string(g.b->rows) + "x" +
                      std::to_string(g.b->cols) + "xf32>";
  // Both operands of Wgrad are [tokens, features]; the order of first use
  // is lhs, then rhs, and the seed / step where a quantizer or rotation
  // takes them first.
  const std::string inputs = signature.substr(1, signature.find(')') - 1);
  size_t position = 0;
  bool usedA = false;
  while (position < inputs.size()) {
    size_t end = inputs.find(", ", position);
    if (end == std::string::npos)
      end = inputs.size();
    const std::string type = inputs.substr(position, end - position);
    position = end + 2;
    if (type == "i64") {
      // The first i64 a kernel meets is the step if a rotation needs it
      // before any stochastic quantizer, else the seed: both are listed
      // in the expected signatures below.
      arguments.push_back(nullptr);
    } else if (!usedA && type == aType) {
      arguments.push_back(&aPtr);
      usedA = true;
    } else {
      EXPECT_EQ(type, bType) << signature;
      arguments.push_back(&bPtr);
    }
  }
  // Fill the i64 slots: seed before step unless the kernel's first op is a
  // per-step rotation, which takes the step first.
  const bool stepFirst = policy.roles.at(role).first.rotation.schedule ==
                             numerics::SignSchedule::PerStep &&
                         policy.roles.at(role).first.rotation.kind ==
                             numerics::RotationKind::RandomHadamard;
  int64_t *order[2] = {stepFirst ? &step : &seed, stepFirst ? &seed : &step};
  int next = 0;
  for (void *&argument : arguments)
    if (!argument)
      argument = order[next++];
  arguments.push_back(&cPtr);
  int64_t part = 0;
  arguments.push_back(&part);
  arguments.push_back(&parts);
  for (; part < parts; ++part)
    packed(arguments.data());
  return result;
}

struct Expected {
  std::vector<float> chunked; // the defined fp32 arithmetic
  std::vector<double> exact;  // fp64 over the exact quantized values
  std::vector<double> bound;  // γ(G + K/G + 2) Σ|a||b|
};

Expected expectedFor(const Policy &policy, Role role, bool wrongAxis = false) {
  const Gemm g = gemmFor(role);
  const auto &[lhsQuant, rhsQuant] = policy.roles.at(role);
  int axisA = g.axisA(), axisB = g.axisB();
  if (wrongAxis) // quantize along the other dimension (for Wgrad: features)
    axisA = 1 - axisA, axisB = 1 - axisB;
  const PreparedOperand a =
      prepare(*g.a, axisA, lhsQuant, tensorId(policy, role, "lhs"));
  const PreparedOperand b =
      prepare(*g.b, axisB, rhsQuant, tensorId(policy, role, "rhs"));

  int64_t chunk = g.k();
  for (const Quant *quant : {&lhsQuant, &rhsQuant})
    if (quant->blockScaled())
      chunk = std::min<int64_t>(chunk, quant->blockFormat().scaling.blockSize);

  Expected expected;
  std::vector<bool> rowExact, colExact;
  if (a.quantized && b.quantized && !wrongAxis) {
    rowExact = numerics::exactFibers(*a.quantized);
    colExact = numerics::exactFibers(*b.quantized);
  }
  expected.chunked = contractProduct(g, a.values, b.values, chunk, rowExact, colExact);
  const std::vector<double> exactA = exactKMajor(a, *g.a, g.transposeA);
  const std::vector<double> exactB = exactKMajor(b, *g.b, !g.transposeB);
  if (a.quantized && b.quantized && !wrongAxis) {
    expected.exact =
        numerics::referenceGemm(kMajor(*a.quantized), kMajor(*b.quantized));
  } else {
    // referenceGemm's arithmetic over operands it cannot take (plain ones).
    expected.exact.assign(g.m() * g.n(), 0.0);
    for (int64_t row = 0; row < g.m(); ++row)
      for (int64_t col = 0; col < g.n(); ++col) {
        double sum = 0.0;
        for (int64_t k = 0; k < g.k(); ++k)
          sum += exactA[row * g.k() + k] * exactB[col * g.k() + k];
        expected.exact[row * g.n() + col] = sum;
      }
  }
  const double factor = gamma(chunk + g.k() / chunk + 2);
  expected.bound = absoluteProduct(g, exactA, exactB);
  for (double &bound : expected.bound)
    bound *= factor;
  return expected;
}

struct GemmCase {
  size_t policy;
  Role role;
};

void PrintTo(const GemmCase &c, std::ostream *os) {
  *os << policies()[c.policy].name << "_" << roleName(c.role);
}

class CpuGemmTest : public ::testing::TestWithParam<GemmCase> {};

} // namespace

TEST(CpuGemmKernels, FormedWithTheExpectedSignatures) {
  ASSERT_NE(library(), nullptr);
  const std::string x = "tensor<64x128xf32>", w = "tensor<288x128xf32>",
                    dy = "tensor<64x288xf32>";
  // FormKernels lists inputs in the order the kernel's ops first use them.
  const std::map<std::string, std::string> expected = {
      {"paper_up_fprop", "(" + x + ", " + w + ") -> tensor<64x288xf32>"},
      {"paper_up_wgrad", "(" + dy + ", " + x + ") -> " + w},
      {"random_up_dgrad",
       "(" + dy + ", i64, i64, " + w + ") -> tensor<64x128xf32>"},
      {"random_up_wgrad", "(" + dy + ", i64, i64, " + x + ") -> " + w},
      {"mixed_up_fprop", "(" + x + ", " + w + ") -> tensor<64x288xf32>"},
      {"mixed_up_wgrad", "(" + dy + ", i64, i64, " + x + ") -> " + w},
      {"plain_up_dgrad", "(" + dy + ", " + w + ") -> tensor<64x128xf32>"},
  };
  for (const auto &[name, signature] : expected)
    EXPECT_EQ(library()->signature(name), signature) << name;
  EXPECT_EQ(library()->kernelNames().size(), 12u);
}

TEST_P(CpuGemmTest, MatchesTheDefinedArithmeticAndTheReference) {
  ASSERT_NE(library(), nullptr);
  const Policy &policy = policies()[GetParam().policy];
  const Role role = GetParam().role;
  const std::vector<float> actual = runGemmKernel(policy, role);
  ASSERT_FALSE(actual.empty());
  const Expected expected = expectedFor(policy, role);

  // Bit for bit: the same quantized codes and the same fp32 order.
  EXPECT_TRUE(sameFloats(expected.chunked, actual));
  // Whatever the split of the result rows among calls.
  EXPECT_TRUE(sameFloats(actual, runGemmKernel(policy, role, /*parts=*/3)));

  // Within the documented bound of the fp64 product of the same quantized
  // operands (numerics::referenceGemm).
  int64_t outside = 0;
  double worst = 0.0;
  for (size_t k = 0; k < actual.size(); ++k) {
    const double error = std::fabs(double(actual[k]) - expected.exact[k]);
    if (error > expected.bound[k])
      ++outside;
    if (expected.bound[k] > 0)
      worst = std::max(worst, error / expected.bound[k]);
  }
  EXPECT_EQ(outside, 0) << "worst error / bound " << worst;
}

INSTANTIATE_TEST_SUITE_P(
    AllPolicies, CpuGemmTest, ::testing::ValuesIn([] {
      std::vector<GemmCase> cases;
      for (size_t p = 0; p < policies().size(); ++p)
        for (Role role : {Role::Fprop, Role::Dgrad, Role::Wgrad})
          cases.push_back({p, role});
      return cases;
    }()),
    [](const ::testing::TestParamInfo<GemmCase> &info) {
      return policies()[info.param.policy].name + "_" +
             roleName(info.param.role);
    });

TEST(CpuGemmKernels, WgradQuantizesAlongTheTokens) {
  // dW = dYᵀ·X reduces over the 64 tokens: dY and X must be rotated and
  // quantized along dimension 0. Quantized along the features (dimension
  // 1) instead, the codes, the scales and the product all change: the
  // kernel must match the first and be far from the second.
  ASSERT_NE(library(), nullptr);
  const Policy &policy = policies()[0]; // mxfp4, hadamard<32> in Wgrad
  const std::vector<float> actual = runGemmKernel(policy, Role::Wgrad);
  ASSERT_FALSE(actual.empty());
  const Expected tokens = expectedFor(policy, Role::Wgrad);
  const Expected features =
      expectedFor(policy, Role::Wgrad, /*wrongAxis=*/true);
  EXPECT_TRUE(sameFloats(tokens.chunked, actual));
  int64_t beyondBound = 0;
  for (size_t k = 0; k < actual.size(); ++k)
    if (std::fabs(double(actual[k]) - features.exact[k]) > features.bound[k])
      ++beyondBound;
  // Nearly every entry is outside the bound of the features-axis product.
  EXPECT_GT(beyondBound, int64_t(actual.size()) * 9 / 10)
      << beyondBound << " of " << actual.size();
}

TEST(CpuGemmKernels, QuantizationIsNotTheIdentity) {
  // The quantized product differs from the f32 product by the quantization
  // error, which is far above fp32 rounding: a kernel that skipped the
  // quantizers would fail the tests above.
  ASSERT_NE(library(), nullptr);
  const Gemm g = gemmFor(Role::Fprop);
  const std::vector<float> actual = runGemmKernel(policies()[0], Role::Fprop);
  ASSERT_FALSE(actual.empty());
  const std::vector<double> plain = numerics::referenceGemm(
      g.a->values.data(), g.b->values.data(), g.m(), g.n(), g.k());
  double largest = 0.0;
  for (size_t k = 0; k < actual.size(); ++k)
    largest = std::max(largest, std::fabs(actual[k] - plain[k]) /
                                    (std::fabs(plain[k]) + 1e-3));
  EXPECT_GT(largest, 1e-2);
}

TEST(CpuGemmKernels, OddShapesTakeTheRemainderPaths) {
  // 22 rows (five groups of 4, then 2 alone) and 301 columns (a tile of 256,
  // then 45: five 8-lane steps and a scalar tail of 5), bf16 x bf16 over
  // K = 40 in one chunk: against the defined arithmetic, element by element.
  const int64_t m = 22, n = 301, k = 40;
  const std::string x = "tensor<22x40xf32>", w = "tensor<301x40xf32>",
                    y = "tensor<22x301xf32>";
  const std::string source =
      "func.func @odd(%x: " + x + ", %w: " + w + ") -> " + y + " {\n" +
      "  %y = tetra.matmul %x, %w transpose_rhs policy #tetra.policy<fprop = "
      "bf16, dgrad = bf16, wgrad = bf16> role fprop : " +
      x + ", " + w + " -> " + y +
      " loc(\"odd.fprop\"(\"model.tetra\":1:1))\n  return %y : " + y + "\n}\n";
  std::unique_ptr<cpu::KernelLibrary> odd =
      compileOrFail(source, /*formKernels=*/true);
  ASSERT_NE(odd, nullptr);
  auto packed = odd->lookupPacked("odd_fprop");
  ASSERT_NE(packed, nullptr);
  std::mt19937 random(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xData(m * k), wData(n * k), result(m * n, kNaN);
  for (float &value : xData)
    value = normal(random);
  for (float &value : wData)
    value = normal(random);
  auto a = describe<float, 2>(xData.data(), {m, k});
  auto b = describe<float, 2>(wData.data(), {n, k});
  auto c = describe<float, 2>(result.data(), {m, n});
  void *aPtr = &a, *bPtr = &b, *cPtr = &c;
  int64_t part = 0, parts = 1;
  void *arguments[] = {&aPtr, &bPtr, &cPtr, &part, &parts};
  packed(arguments);
  // In three parts (5 row groups: 1 + 2 + 2, the 2 rows after them in the
  // last part), the same bits.
  std::vector<float> whole = result;
  std::fill(result.begin(), result.end(), kNaN);
  parts = 3;
  for (part = 0; part < parts; ++part)
    packed(arguments);
  EXPECT_TRUE(sameFloats(whole, result));
  auto bf16 = [](float value) {
    return numerics::decodeBF16(numerics::encodeBF16(value));
  };
  std::vector<float> expected(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float partial = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        float product = bf16(xData[i * k + kk]) * bf16(wData[j * k + kk]);
        partial = partial + product;
      }
      float sum = 0.0f;
      expected[i * n + j] = sum + partial;
    }
  EXPECT_TRUE(sameFloats(expected, result));
}
