//===- PolicyTest.cpp - Policy files resolved for a list of linears ------===//
//
// Resolution semantics (later settings override only the fields they name,
// extends order, origins) and the errors that need a whole model, on policy
// files written to a temporary folder and a hand-written list of linears.
//
//===----------------------------------------------------------------------===//

#include "frontend/Policy.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <memory>

using namespace tetra::frontend;
using namespace tetra::numerics;

namespace {

const std::vector<std::string> kLinears = {
    "layers.0.attn.wq", "layers.0.attn.wo", "layers.0.mlp.w1",
    "layers.0.mlp.w2",  "layers.1.attn.wq", "layers.1.attn.wo",
    "layers.1.mlp.w1",  "layers.1.mlp.w2",  "lm_head"};

class PolicyTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("tetra-policy-test", directory));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(directory); }

  std::string path(llvm::StringRef name) {
    llvm::SmallString<256> result(directory);
    llvm::sys::path::append(result, name);
    return result.str().str();
  }

  void write(llvm::StringRef name, llvm::StringRef text) {
    std::string file = path(name);
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(file));
    std::error_code error;
    llvm::raw_fd_ostream os(file, error);
    ASSERT_FALSE(error) << file;
    os << text;
  }

  /// Resolves `name` for `linears`; diagnostics land in `output`.
  std::optional<ResolvedPolicy>
  load(llvm::StringRef name,
       const std::vector<std::string> &linears = kLinears) {
    output.clear();
    sourceMgr = std::make_unique<llvm::SourceMgr>();
    stream = std::make_unique<llvm::raw_string_ostream>(output);
    diags = std::make_unique<DiagnosticEngine>(*sourceMgr, *stream);
    std::optional<ResolvedPolicy> policy =
        loadPolicy(*diags, path(name), linears);
    stream->flush();
    return policy;
  }

  /// "file:line:col" of an origin, the file without its folder.
  std::string where(const FieldOrigin &origin) {
    std::string full = diags->describe(origin.loc);
    return llvm::sys::path::filename(full).str();
  }

  /// Expects the load to fail with `message` at `file:line:col` (the file
  /// relative to the temporary folder).
  void expectError(llvm::StringRef name, llvm::StringRef location,
                   llvm::StringRef message) {
    std::optional<ResolvedPolicy> policy = load(name);
    EXPECT_FALSE(policy.has_value());
    auto [file, position] = location.split(':');
    std::string expected =
        path(file) + ":" + position.str() + ": error: " + message.str();
    EXPECT_NE(output.find(expected), std::string::npos)
        << "expected: " << expected << "\ngot:\n"
        << output;
  }

  llvm::SmallString<128> directory;
  std::string output;
  std::unique_ptr<llvm::SourceMgr> sourceMgr;
  std::unique_ptr<llvm::raw_string_ostream> stream;
  std::unique_ptr<DiagnosticEngine> diags;
};

const RolePolicy &role(const ResolvedPolicy &policy, llvm::StringRef linear,
                       GemmRole r) {
  const LinearPolicy *found = policy.find(linear);
  EXPECT_NE(found, nullptr) << linear.str();
  return found->role(r);
}

TEST_F(PolicyTest, DefaultAndBuiltIns) {
  write("p.tetra", "policy p\n"
                   "default {\n"
                   "  all = mxfp4\n"
                   "}\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  ASSERT_TRUE(policy) << output;
  EXPECT_EQ(policy->name, "p");
  ASSERT_EQ(policy->linears.size(), kLinears.size());
  for (size_t i = 0; i < kLinears.size(); ++i)
    EXPECT_EQ(policy->linears[i].linear, kLinears[i]);
  for (GemmRole r : {GemmRole::Fprop, GemmRole::Dgrad, GemmRole::Wgrad}) {
    const RolePolicy &rp = role(*policy, "layers.1.mlp.w2", r);
    for (const OperandPolicy *op : {&rp.lhs, &rp.rhs}) {
      EXPECT_EQ(op->format.describe(), "mxfp4");
      EXPECT_EQ(op->formatOrigin.description, "default");
      EXPECT_EQ(op->formatOrigin.setting, "all = mxfp4");
      EXPECT_EQ(where(op->formatOrigin), "p.tetra:3:3");
      EXPECT_EQ(op->rule, ScaleRule::Floor);
      EXPECT_TRUE(op->ruleOrigin.isBuiltIn());
      EXPECT_EQ(op->ruleOrigin.description, "built-in");
      EXPECT_EQ(op->rounding, Rounding::NearestEven);
      EXPECT_TRUE(op->roundingOrigin.isBuiltIn());
    }
    EXPECT_EQ(rp.rotation.kind, RotationKind::None);
    EXPECT_TRUE(rp.rotationOrigin.isBuiltIn());
    EXPECT_EQ(rp.accumulate, "f32");
    EXPECT_TRUE(rp.accumulateOrigin.isBuiltIn());
  }
  EXPECT_EQ(policy->find("nonexistent"), nullptr);
}

TEST_F(PolicyTest, LaterRulesOverrideOnlyTheFieldsTheySet) {
  write("p.tetra", "policy p\n"
                   "default {\n"
                   "  all = mxfp4 rule even\n"
                   "  wgrad.rotate = hadamard<32>\n"
                   "}\n"
                   "rule \"layers.*.mlp.*\" {\n"
                   "  wgrad = mxfp4 round stochastic\n"
                   "}\n"
                   "rule \"lm_head\" { all = bf16 }\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  ASSERT_TRUE(policy) << output;

  const RolePolicy &mlp = role(*policy, "layers.0.mlp.w1", GemmRole::Wgrad);
  EXPECT_EQ(mlp.lhs.format.describe(), "mxfp4");
  EXPECT_EQ(mlp.lhs.formatOrigin.description, "rule \"layers.*.mlp.*\"");
  EXPECT_EQ(mlp.lhs.rounding, Rounding::Stochastic);
  EXPECT_EQ(mlp.rhs.rounding, Rounding::Stochastic);
  EXPECT_EQ(mlp.lhs.roundingOrigin.setting, "wgrad = mxfp4 round stochastic");
  EXPECT_EQ(where(mlp.lhs.roundingOrigin), "p.tetra:7:3");
  // Not named by the rule: kept from the default.
  EXPECT_EQ(mlp.lhs.rule, ScaleRule::Even);
  EXPECT_EQ(mlp.lhs.ruleOrigin.description, "default");
  EXPECT_EQ(mlp.rotation.kind, RotationKind::Hadamard);
  EXPECT_EQ(mlp.rotation.blockSize, 32);
  EXPECT_EQ(mlp.rotationOrigin.setting, "wgrad.rotate = hadamard<32>");
  // Another role of the same linear is untouched.
  const RolePolicy &mlpFprop =
      role(*policy, "layers.0.mlp.w1", GemmRole::Fprop);
  EXPECT_EQ(mlpFprop.lhs.rounding, Rounding::NearestEven);
  EXPECT_EQ(mlpFprop.rotation.kind, RotationKind::None);

  const RolePolicy &attn = role(*policy, "layers.1.attn.wq", GemmRole::Wgrad);
  EXPECT_EQ(attn.lhs.rounding, Rounding::NearestEven);
  EXPECT_EQ(attn.lhs.formatOrigin.description, "default");

  // bf16 takes no scale rule: the inherited `even` holds Floor, silently.
  const RolePolicy &head = role(*policy, "lm_head", GemmRole::Wgrad);
  EXPECT_EQ(head.lhs.format.describe(), "bf16");
  EXPECT_EQ(head.lhs.formatOrigin.description, "rule \"lm_head\"");
  EXPECT_EQ(head.lhs.rule, ScaleRule::Floor);
  EXPECT_EQ(head.rotation.kind, RotationKind::Hadamard);
}

TEST_F(PolicyTest, OperandAndFieldTargets) {
  write("p.tetra", "policy p\n"
                   "default {\n"
                   "  all = mxfp4\n"
                   "  dgrad.rhs = mxfp8\n"
                   "  wgrad.lhs.round = stochastic\n"
                   "  all.lhs.rule = rceil\n"
                   "  wgrad.format = e2m1 block 64 scale e8m0 ceil\n"
                   "  dgrad = nvfp4\n"
                   "}\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  ASSERT_TRUE(policy) << output;
  const LinearPolicy &linear = *policy->find("layers.0.attn.wq");
  // dgrad = nvfp4 (later) replaced dgrad.rhs = mxfp8: formats are whole.
  EXPECT_EQ(linear.role(GemmRole::Dgrad).rhs.format.describe(), "nvfp4");
  EXPECT_EQ(linear.role(GemmRole::Dgrad).lhs.format.describe(), "nvfp4");
  // nvfp4 has e4m3 scales: the rceil set before gives way to their
  // default, nearest.
  EXPECT_EQ(linear.role(GemmRole::Dgrad).lhs.rule, ScaleRule::Nearest);
  const RolePolicy &wgrad = linear.role(GemmRole::Wgrad);
  EXPECT_EQ(wgrad.lhs.rounding, Rounding::Stochastic);
  EXPECT_EQ(wgrad.rhs.rounding, Rounding::NearestEven);
  EXPECT_EQ(wgrad.lhs.format.describe(), "e2m1 block 64 scale e8m0");
  EXPECT_EQ(wgrad.lhs.format.blockSize, 64);
  // The full form's rule came after all.lhs.rule = rceil.
  EXPECT_EQ(wgrad.lhs.rule, ScaleRule::Ceil);
  EXPECT_EQ(wgrad.rhs.rule, ScaleRule::Ceil);
  const RolePolicy &fprop = linear.role(GemmRole::Fprop);
  EXPECT_EQ(fprop.lhs.rule, ScaleRule::RCeil);
  EXPECT_EQ(fprop.rhs.rule, ScaleRule::Floor);
  EXPECT_EQ(fprop.accumulate, "f32");
}

TEST_F(PolicyTest, AccumulatorPerRoleOnF32Products) {
  // Only f32 x f32 products may accumulate in bf16 (quantized ones are
  // refused: accumulator_quantized.tetra).
  write("p.tetra", "policy p\n"
                   "default { all = mxfp4 }\n"
                   "rule \"lm_head\" {\n"
                   "  fprop = f32\n"
                   "  fprop.acc = bf16\n"
                   "}\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  ASSERT_TRUE(policy) << output;
  const LinearPolicy &head = *policy->find("lm_head");
  EXPECT_EQ(head.role(GemmRole::Fprop).accumulate, "bf16");
  EXPECT_EQ(head.role(GemmRole::Dgrad).accumulate, "f32");
  EXPECT_EQ(policy->find("layers.0.attn.wq")->role(GemmRole::Fprop).accumulate,
            "f32");
}

TEST_F(PolicyTest, ExtendsAppliesTheBaseFirst) {
  write("root.tetra", "policy root\n"
                      "default { all = bf16 }\n"
                      "rule \"layers.**\" { fprop = mxfp4 }\n");
  write("sub/middle.tetra", "policy middle extends \"../root.tetra\"\n"
                            "rule \"layers.*.mlp.*\" {\n"
                            "  fprop = nvfp4\n"
                            "  dgrad = mxfp4\n"
                            "}\n");
  write("sub/leaf.tetra",
        "# the leaf\n"
        "policy leaf extends \"middle.tetra\"\n"
        "default { wgrad = mxfp8_e5m2 }\n"
        "rule \"layers.0.mlp.*\" { dgrad.round = stochastic }\n");
  std::optional<ResolvedPolicy> policy = load("sub/leaf.tetra");
  ASSERT_TRUE(policy) << output;
  EXPECT_EQ(policy->name, "leaf");
  ASSERT_EQ(policy->files.size(), 3u);
  EXPECT_EQ(llvm::sys::path::filename(policy->files[0]), "root.tetra");
  EXPECT_EQ(llvm::sys::path::filename(policy->files[1]), "middle.tetra");
  EXPECT_EQ(llvm::sys::path::filename(policy->files[2]), "leaf.tetra");

  const LinearPolicy &attn = *policy->find("layers.0.attn.wq");
  EXPECT_EQ(attn.role(GemmRole::Fprop).lhs.format.describe(), "mxfp4");
  EXPECT_EQ(attn.role(GemmRole::Fprop).lhs.formatOrigin.description,
            "root.tetra: rule \"layers.**\"");
  EXPECT_EQ(where(attn.role(GemmRole::Fprop).lhs.formatOrigin),
            "root.tetra:3:20");
  EXPECT_EQ(attn.role(GemmRole::Dgrad).lhs.format.describe(), "bf16");
  EXPECT_EQ(attn.role(GemmRole::Dgrad).lhs.formatOrigin.description,
            "root.tetra: default");
  // The leaf's default applies after every rule of its bases.
  EXPECT_EQ(attn.role(GemmRole::Wgrad).lhs.format.describe(), "mxfp8_e5m2");
  EXPECT_EQ(attn.role(GemmRole::Wgrad).lhs.formatOrigin.description, "default");

  const LinearPolicy &mlp = *policy->find("layers.0.mlp.w1");
  EXPECT_EQ(mlp.role(GemmRole::Fprop).lhs.format.describe(), "nvfp4");
  EXPECT_EQ(mlp.role(GemmRole::Fprop).lhs.formatOrigin.description,
            "middle.tetra: rule \"layers.*.mlp.*\"");
  EXPECT_EQ(mlp.role(GemmRole::Dgrad).lhs.rounding, Rounding::Stochastic);
  EXPECT_EQ(mlp.role(GemmRole::Dgrad).lhs.roundingOrigin.description,
            "rule \"layers.0.mlp.*\"");
  const LinearPolicy &mlp1 = *policy->find("layers.1.mlp.w1");
  EXPECT_EQ(mlp1.role(GemmRole::Dgrad).lhs.rounding, Rounding::NearestEven);

  const LinearPolicy &head = *policy->find("lm_head");
  EXPECT_EQ(head.role(GemmRole::Fprop).lhs.format.describe(), "bf16");
}

TEST_F(PolicyTest, UnmatchedRuleSuggestsAPattern) {
  write("p.tetra", "policy p\n"
                   "default { all = bf16 }\n"
                   "rule \"layers.*.mpl.*\" { fprop = mxfp4 }\n"
                   "rule \"lm_head\", \"embed\" { fprop = mxfp4 }\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  EXPECT_FALSE(policy);
  EXPECT_NE(output.find("p.tetra:3:6: error: rule \"layers.*.mpl.*\" matches "
                        "no linear of the model; did you mean "
                        "\"layers.*.mlp.*\"?"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("p.tetra:4:17: error: pattern \"embed\" matches no "
                        "linear of the model"),
            std::string::npos)
      << output;
  EXPECT_EQ(diags->errorCount(), 2u);
}

TEST_F(PolicyTest, MissingFormatNamesTheLinearAndRole) {
  write("p.tetra", "policy p\n"
                   "default { fprop = mxfp4 wgrad = mxfp4 }\n"
                   "rule \"layers.**\" { dgrad = mxfp4 }\n"
                   "rule \"lm_head\" { wgrad.lhs = bf16 }\n");
  expectError("p.tetra", "p.tetra:1:8",
              "no format for dgrad of linear 'lm_head'");
  write("q.tetra", "policy q\n"
                   "rule \"layers.**\" { fprop.lhs = mxfp4 }\n");
  std::optional<ResolvedPolicy> policy = load("q.tetra");
  EXPECT_FALSE(policy);
  EXPECT_NE(output.find("error: no format for fprop.rhs of linear "
                        "'layers.0.attn.wq' (nor of 8 more linears)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("error: no format for wgrad of linear "
                        "'layers.0.attn.wq' (nor of 8 more linears)"),
            std::string::npos)
      << output;
}

TEST_F(PolicyTest, ExtendsErrors) {
  write("a.tetra", "policy a extends \"b.tetra\"\ndefault { all = bf16 }\n");
  write("b.tetra", "policy b extends \"a.tetra\"\n");
  expectError("a.tetra", "b.tetra:1:18",
              "extends cycle: a.tetra -> b.tetra -> a.tetra");

  write("self.tetra", "policy self extends \"self.tetra\"\n");
  expectError("self.tetra", "self.tetra:1:21",
              "extends cycle: self.tetra -> self.tetra");

  write("missing.tetra", "policy m extends \"nowhere.tetra\"\n");
  expectError("missing.tetra", "missing.tetra:1:18", "cannot read");

  write("model.tetra", "model tiny\nconfig { dim = 4 }\n");
  write("notpolicy.tetra", "policy n extends \"model.tetra\"\n");
  expectError("notpolicy.tetra", "notpolicy.tetra:1:18",
              "cannot extend '" + path("model.tetra") +
                  "': it is not a policy file (it starts with 'model')");
}

TEST_F(PolicyTest, ValueErrors) {
  write("p.tetra",
        "policy p\n"
        "default {\n"
        "  all = mxfp5\n"                                    // 3
        "  fprp = mxfp4\n"                                   // 4
        "  wgrad.lhs.rotate = hadamard<32>\n"                // 5
        "  wgrad.rhs = mxfp4 rotate hadamard<32>\n"          // 6
        "  dgrad = e2m1 block 32 scale e4m3\n"               // 7
        "  fprop = f32 round stochastic\n"                   // 8
        "  all.rhs = nvfp4 rule ceil\n"                      // 9
        "  wgrad.rotate = hadamard<48>\n"                    // 10
        "  wgrad.roud = stochastic\n"                        // 11
        "  all.lhs.acc = bf16\n"                             // 12
        "  dgrad = e2m1\n"                                   // 13
        "  all = bf16 block 32 scale e8m0\n"                 // 14
        "  all = mxfp4 round stochatic\n"                    // 15
        "  wgrad.rotate = random_hadamard<16, per_stp, 3>\n" // 16
        "}\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  EXPECT_FALSE(policy);
  auto expect = [&](const std::string &at, const std::string &message) {
    std::string expected = path("p.tetra") + ":" + at + ": error: " + message;
    EXPECT_NE(output.find(expected), std::string::npos)
        << "expected: " << expected << "\ngot:\n"
        << output;
  };
  expect("3:9", "unknown format 'mxfp5'; did you mean 'mxfp4'?");
  expect("4:3", "unknown role 'fprp'; did you mean 'fprop'?");
  expect("5:13", "rotation is per role: both operands of a GEMM are rotated "
                 "alike");
  expect("6:21", "rotation is per role");
  expect("7:22", "NVFP4 (e2m1 with e4m3 scales) uses blocks of 16, got 32");
  expect("8:15", "f32 operands are not rounded: 'round stochastic' does not "
                 "apply");
  expect("9:19", "'ceil' is a rule of e8m0 block scales; 'nvfp4' has e4m3 "
                 "scales (rules: nearest, torchao)");
  expect("10:27", "Hadamard block must be 16, 32, 64 or 128, got 48");
  expect("11:9", "unknown operand or field 'roud' of wgrad; did you mean "
                 "'round'?");
  expect("12:11", "the accumulator is per role, not per operand");
  expect("13:11", "element format 'e2m1' needs a block scale: write 'e2m1 "
                  "block 32 scale e8m0' or the preset mxfp4");
  expect("14:14", "bf16 takes no block scale");
  expect("15:21", "unknown rounding 'stochatic'; did you mean 'stochastic'?");
  expect("16:38", "expected the sign schedule (fixed or per_step), got "
                  "'per_stp'; did you mean 'per_step'?");
  EXPECT_EQ(diags->errorCount(), 14u) << output;
}

TEST_F(PolicyTest, DuplicateSettingInOneBlock) {
  write("p.tetra", "policy p\n"
                   "default {\n"
                   "  all = mxfp4\n"
                   "  wgrad = mxfp4 round stochastic\n"
                   "  wgrad.round = nearest_even\n"
                   "}\n");
  expectError("p.tetra", "p.tetra:5:17",
              "this block already sets wgrad.round; the earlier value would "
              "never apply");
  EXPECT_NE(output.find("p.tetra:4:17: note: set here"), std::string::npos)
      << output;
}

TEST_F(PolicyTest, FieldThatAppliesToNothing) {
  write("p.tetra", "policy p\n"
                   "default { all = mxfp4 }\n"
                   "rule \"lm_head\" { all = bf16 }\n"
                   "rule \"lm_head\" { all.rule = ceil }\n"
                   "rule \"lm_head\" { fprop = f32 }\n"
                   "rule \"lm_head\" { fprop.round = stochastic }\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  EXPECT_FALSE(policy);
  EXPECT_NE(output.find("p.tetra:4:29: error: 'rule ceil' applies to none of "
                        "the operands it is set on: it needs e8m0 "
                        "block scales (fprop.lhs of 'lm_head' is f32)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("p.tetra:6:32: error: 'round stochastic' applies to "
                        "none of the operands it is set on"),
            std::string::npos)
      << output;
}

TEST_F(PolicyTest, SyntaxErrorsRecover) {
  write("p.tetra", "policy p\n"
                   "default {\n"
                   "  all mxfp4\n"
                   "  fprop = mxfp4 round\n"
                   "  dgrad = = mxfp4\n"
                   "  wgrad = mxfp4\n"
                   "rule \"lm_head\" { all = bf16 }\n"
                   "rule \"layers.{0..1\" { all = bf16 }\n"
                   "blah\n");
  std::optional<ResolvedPolicy> policy = load("p.tetra");
  EXPECT_FALSE(policy);
  auto expect = [&](const std::string &at, const std::string &message) {
    std::string expected = path("p.tetra") + ":" + at + ": error: " + message;
    EXPECT_NE(output.find(expected), std::string::npos)
        << "expected: " << expected << "\ngot:\n"
        << output;
  };
  expect("3:7", "expected '=' after 'all', got 'mxfp4'");
  expect("5:3", "expected a rounding (nearest_even, nearest_away, "
                "stochastic), got 'dgrad'");
  expect("5:11", "expected a format");
  expect("7:1", "expected '}' before 'rule'");
  expect("8:14", "invalid pattern \"layers.{0..1\": unclosed '{' in pattern");
  expect("9:1", "expected 'default', 'rule' or 'attention', got 'blah'");
}

TEST_F(PolicyTest, HeaderErrors) {
  write("model.tetra", "model m\n");
  expectError("model.tetra", "model.tetra:1:1",
              "this is a model file, not a policy");
  write("two.tetra", "policy two\n"
                     "default { all = bf16 }\n"
                     "rule \"lm_head\" { all = bf16 }\n"
                     "default { all = bf16 }\n");
  expectError("two.tetra", "two.tetra:4:1", "a policy has one default block");
  write("late.tetra", "policy late\n"
                      "rule \"lm_head\" { all = bf16 }\n"
                      "default { all = bf16 }\n");
  expectError("late.tetra", "late.tetra:3:1",
              "the default block must come before the rules");
}

TEST_F(PolicyTest, DumpAST) {
  write("p.tetra", "policy p extends \"base.tetra\"\n"
                   "default { all = mxfp4 rule even }\n"
                   "rule \"layers.*.mlp.*\", \"lm_head\" {\n"
                   "  wgrad.lhs.round = stochastic\n"
                   "  wgrad.rotate = random_hadamard<16, per_step, 7>\n"
                   "  dgrad.format = e2m1 block 64 scale e8m0 ceil\n"
                   "}\n");
  llvm::SourceMgr sourceMgr;
  std::string errors, dump;
  llvm::raw_string_ostream errorStream(errors), dumpStream(dump);
  DiagnosticEngine engine(sourceMgr, errorStream);
  EXPECT_TRUE(dumpPolicyAST(engine, path("p.tetra"), dumpStream)) << errors;
  EXPECT_EQ(dump, "Policy p @1:8\n"
                  "  Extends \"base.tetra\" @1:18\n"
                  "  Default @2:1\n"
                  "    Setting all = mxfp4 rule even @2:11\n"
                  "  Rule \"layers.*.mlp.*\", \"lm_head\" @3:1\n"
                  "    Setting wgrad.lhs.round = stochastic @4:3\n"
                  "    Setting wgrad.rotate = random_hadamard<16, per_step, "
                  "7> @5:3\n"
                  "    Setting dgrad.format = e2m1 block 64 scale e8m0 rule "
                  "ceil @6:3\n");
}

TEST(FormatChoiceTest, Describe) {
  FormatChoice choice;
  EXPECT_EQ(choice.describe(), "bf16");
  choice.element = ElementFormat::E4M3;
  choice.blockSize = 32;
  EXPECT_EQ(choice.describe(), "mxfp8_e4m3");
  choice.element = ElementFormat::E2M1;
  choice.blockSize = 16;
  choice.scaleFormat = ScaleFormat::E4M3;
  EXPECT_EQ(choice.describe(), "nvfp4");
  EXPECT_TRUE(choice.takesRule(ScaleRule::Torchao));
  EXPECT_FALSE(choice.takesRule(ScaleRule::Floor));
  EXPECT_EQ(choice.defaultRule(), ScaleRule::Nearest);
  choice.scaleFormat = ScaleFormat::E8M0;
  EXPECT_EQ(choice.describe(), "e2m1 block 16 scale e8m0");
  EXPECT_TRUE(choice.takesRule(ScaleRule::RCeil));
  EXPECT_FALSE(choice.takesRule(ScaleRule::Nearest));
  EXPECT_EQ(choice.defaultRule(), ScaleRule::Floor);
  EXPECT_EQ(roleName(GemmRole::Wgrad), "wgrad");
}

} // namespace
