//===- PolicyAST.h - The syntax tree of a policy file -----------*- C++ -*-===//
//
// A policy file as written (docs/language.md, "Policy files"): its header,
// the `default` block and the `rule` blocks, each a list of settings. Every
// setting records exactly the fields it names, with their locations; the
// resolver (PolicyResolver.cpp) applies them in order to the linears of a
// model. Values are already checked against the formats, rules, roundings
// and rotations the numerics library knows.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_POLICYAST_H
#define TETRA_FRONTEND_POLICYAST_H

#include "frontend/Diagnostics.h"
#include "frontend/Policy.h"
#include "frontend/PolicyGlob.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace tetra::frontend {

/// The operands a setting's target names: `fprop` (both), `fprop.lhs`.
enum class OperandSelector { Both, Lhs, Rhs };

/// The field of a `target.field = value` setting.
enum class PolicyField { Format, Rule, Round, Rotate, Acc };
llvm::StringRef policyFieldName(PolicyField field);

/// The values one setting writes; an absent value leaves its field as an
/// earlier setting (or the built-in value) had it.
struct PolicyValues {
  std::optional<FormatChoice> format;
  std::optional<numerics::ScaleRule> rule;
  std::optional<numerics::Rounding> rounding;
  std::optional<numerics::Rotation> rotation;
  std::optional<std::string> accumulate; ///< "f32", "bf16" or "f16".
  /// Where each value is written (the format's first token, the `rule`,
  /// `round` or `rotate` keyword, or the value of a `target.field =`).
  llvm::SMLoc formatLoc, ruleLoc, roundingLoc, rotationLoc, accumulateLoc;

  /// The values in the syntax of a quant: "mxfp4 round stochastic".
  std::string describe() const;
};

/// `target = quant` or `target.field = value`.
struct PolicySetting {
  bool allRoles = false; ///< `all`: the three roles.
  GemmRole role = GemmRole::Fprop;
  OperandSelector operand = OperandSelector::Both;
  std::optional<PolicyField> field;
  PolicyValues values;
  llvm::SMRange range; ///< From the target to the last token of the value.

  llvm::SMLoc getLoc() const { return range.Start; }
  /// The target as written: "all", "wgrad.lhs".
  std::string targetText() const;
};

/// One pattern of a `rule`, as written (without quotes) and compiled.
struct PolicyPattern {
  std::string text;
  llvm::SMLoc loc; ///< The string token (its opening quote).
  Glob glob;
};

/// `default { ... }` or `rule "p1", "p2" { ... }`.
struct PolicyBlock {
  bool isDefault = true;
  std::vector<PolicyPattern> patterns; ///< Empty for `default`.
  std::vector<PolicySetting> settings;
  llvm::SMLoc loc; ///< The `default` or `rule` keyword.

  /// "default", `rule "layers.*.mlp.*"`, `rule "a", "b"`.
  std::string describe() const;
};

/// A parsed policy file.
struct PolicyFileAST {
  std::string name; ///< From `policy NAME`.
  llvm::SMLoc nameLoc;
  std::string path;
  unsigned bufferId = 0;
  std::optional<std::string> extends; ///< As written, relative to `path`.
  llvm::SMLoc extendsLoc;             ///< The string token.
  /// `attention = bf16 | f32`, when the file sets it.
  std::optional<std::string> attention;
  llvm::SMLoc attentionLoc; ///< The `attention` keyword.
  std::vector<PolicyBlock> blocks;
};

/// Parses buffer `bufferId` of the engine's SourceMgr as a policy file,
/// reporting every syntax and value error (recovering at the next setting or
/// block). Returns false if there was any; `file` then holds what could be
/// parsed.
bool parsePolicyFile(DiagnosticEngine &diags, unsigned bufferId,
                     PolicyFileAST &file);

/// Prints `file` one node per line, indented, each with its line:col.
void printPolicyAST(const PolicyFileAST &file, llvm::SourceMgr &sourceMgr,
                    llvm::raw_ostream &os);

/// The spelling of a rotation in the language: "none", "hadamard<32>",
/// "random_hadamard<16, per_step, 7>".
std::string describeRotation(const numerics::Rotation &rotation);

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_POLICYAST_H
