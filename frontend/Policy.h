//===- Policy.h - Policy files resolved against a model's linears -*- C++
//-*-===//
//
// A policy file (docs/language.md, "Policy files") resolved for the linears
// of one model: for every linear, every role and every operand, each field's
// value and the place that set it — what `tetra explain-policy` prints and
// what MLIRGen turns into `#tetra.policy` attributes.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_POLICY_H
#define TETRA_FRONTEND_POLICY_H

#include "frontend/Diagnostics.h"
#include "runtime/numerics/BlockQuantize.h"
#include "runtime/numerics/Hadamard.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace tetra::frontend {

enum class GemmRole { Fprop = 0, Dgrad = 1, Wgrad = 2 };
llvm::StringRef roleName(GemmRole role);

/// Who set a field: "built-in", "default", `rule "layers.*.mlp.*"`, with the
/// file (a base policy's rules carry the base file) and location.
struct FieldOrigin {
  std::string description;
  llvm::SMLoc loc; ///< Invalid for built-in values.
  /// The setting as written, blanks collapsed: "wgrad.lhs.round =
  /// stochastic". Empty for built-in values.
  std::string setting;

  bool isBuiltIn() const { return !loc.isValid(); }
};

/// The element format and block scaling a preset or a full form names.
struct FormatChoice {
  numerics::ElementFormat element = numerics::ElementFormat::BF16;
  int blockSize = 0; ///< 0: no block scale (bf16, f32).
  numerics::ScaleFormat scaleFormat = numerics::ScaleFormat::E8M0;

  /// "mxfp4", "nvfp4", "bf16", ... or the full form "e2m1 block 64 scale
  /// e8m0" when no preset matches.
  std::string describe() const;

  bool hasBlockScale() const { return blockSize != 0; }
  /// Whether `rule` chooses this format's block scales (a rule of its scale
  /// format: floor..rceil for E8M0, nearest and torchao for E4M3).
  bool takesRule(numerics::ScaleRule rule) const {
    return hasBlockScale() && numerics::scaleFormatOf(rule) == scaleFormat;
  }
  /// The rule where none is set (floor for E8M0 and for no block scale,
  /// nearest for E4M3).
  numerics::ScaleRule defaultRule() const {
    return numerics::defaultScaleRule(scaleFormat);
  }
  /// False for f32, which is never rounded.
  bool isRounded() const { return element != numerics::ElementFormat::F32; }

  bool operator==(const FormatChoice &other) const {
    return element == other.element && blockSize == other.blockSize &&
           (blockSize == 0 || scaleFormat == other.scaleFormat);
  }
  bool operator!=(const FormatChoice &other) const { return !(*this == other); }
};

/// A field that does not apply to the operand's format (a scale rule of the
/// other scale format or on a format without block scales, a rounding on
/// f32) holds its neutral value (the format's defaultRule(), NearestEven),
/// so that the policy always makes a valid
/// `#tetra.quant`; its origin still says who set it.
struct OperandPolicy {
  FormatChoice format;
  numerics::ScaleRule rule = numerics::ScaleRule::Floor;
  numerics::Rounding rounding = numerics::Rounding::NearestEven;
  FieldOrigin formatOrigin, ruleOrigin, roundingOrigin;
};

struct RolePolicy {
  OperandPolicy lhs, rhs;
  numerics::Rotation rotation;    ///< Both operands, always alike.
  std::string accumulate = "f32"; ///< "f32", "bf16" or "f16".
  FieldOrigin rotationOrigin, accumulateOrigin;
};

struct LinearPolicy {
  std::string linear;  ///< "layers.3.attn.wq"
  RolePolicy roles[3]; ///< Indexed by GemmRole.

  const RolePolicy &role(GemmRole r) const {
    return roles[static_cast<int>(r)];
  }
};

struct ResolvedPolicy {
  std::string name; ///< From the `policy NAME` header.
  std::string path;
  /// The policy files that were applied, base-most first (`path` last).
  std::vector<std::string> files;
  std::vector<LinearPolicy> linears; ///< In the order of `linearNames`.
  /// The operands of every attention's products: "f32" (built-in) or
  /// "bf16" (`attention = bf16`; runtime/kernels/Attention.h).
  std::string attention = "f32";
  FieldOrigin attentionOrigin;

  const LinearPolicy *find(llvm::StringRef linear) const;
};

/// Loads the policy file at `path` (and what it extends, relative to it) into
/// `diags`' SourceMgr, and resolves it for `linearNames`. Reports every
/// error — syntax, unknown values, a rule that matches no linear, a role left
/// without a format, a per-operand rotation, an extends cycle — and returns
/// nullopt if there was any.
std::optional<ResolvedPolicy>
loadPolicy(DiagnosticEngine &diags, llvm::StringRef path,
           const std::vector<std::string> &linearNames);

struct ModelGraph;

/// Reports every block size or rotation of `policy` that does not divide the
/// size its GEMM reduces over in `model` (in features for Fprop, out features
/// for Dgrad, `tokens` for Wgrad; `tokens` = 0 skips Wgrad), at the setting
/// that chose it, once per setting; `tokensText` says where the tokens come
/// from and `context` prefixes each message. True when there is none.
bool checkReductionSizes(DiagnosticEngine &diags, const ModelGraph &model,
                         const ResolvedPolicy &policy, int64_t tokens,
                         const std::string &tokensText,
                         const std::string &context);

/// `emit --stage=ast` for a policy file.
bool dumpPolicyAST(DiagnosticEngine &diags, llvm::StringRef path,
                   llvm::raw_ostream &os);

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_POLICY_H
