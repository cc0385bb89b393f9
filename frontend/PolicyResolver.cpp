//===- PolicyResolver.cpp - Policies resolved for a model's linears ------===//
//
// loadPolicy: loads a policy file and the chain of files it extends, then
// resolves every field of every linear, role and operand by applying the
// settings in order — built-in values, then each file's default block and
// rules, base-most file first — each setting writing only the fields it
// names and recording itself as their origin. Then the checks that need the
// whole model: a rule pattern that matches no linear, a role left without a
// format, a scale rule or a rounding that applies to none of the operands it
// was set on.
//
//===----------------------------------------------------------------------===//

#include "dialect/LLVMFormatters.h"
#include "frontend/Policy.h"
#include "runtime/numerics/BlockQuantize.h"
#include "frontend/PolicyAST.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <map>

using namespace tetra::frontend;
using namespace tetra::numerics;

//===----------------------------------------------------------------------===//
// Policy.h basics
//===----------------------------------------------------------------------===//

llvm::StringRef tetra::frontend::roleName(GemmRole role) {
  switch (role) {
  case GemmRole::Fprop:
    return "fprop";
  case GemmRole::Dgrad:
    return "dgrad";
  case GemmRole::Wgrad:
    return "wgrad";
  }
  return "";
}

std::string FormatChoice::describe() const {
  std::string elementName(formatName(element));
  if (blockSize == 0)
    return elementName;
  std::string_view preset = numerics::formatPresetName(
      element, static_cast<int>(blockSize), scaleFormat);
  if (!preset.empty())
    return std::string(preset);
  return fmt::format("{} block {} scale {}", elementName, blockSize,
                     (scaleFormat == ScaleFormat::E8M0 ? "e8m0" : "e4m3"));
}

const LinearPolicy *ResolvedPolicy::find(llvm::StringRef linear) const {
  for (const LinearPolicy &policy : linears)
    if (policy.linear == linear)
      return &policy;
  return nullptr;
}

namespace {

//===----------------------------------------------------------------------===//
// Loading the extends chain
//===----------------------------------------------------------------------===//

/// The first word of a file, comments and blanks skipped.
llvm::StringRef firstWord(llvm::StringRef text) {
  while (true) {
    text = text.ltrim();
    if (!text.starts_with("#"))
      break;
    text = text.drop_until([](char c) { return c == '\n'; });
  }
  return text.take_while([](char c) { return llvm::isAlnum(c) || c == '_'; });
}

class PolicyLoader {
public:
  explicit PolicyLoader(DiagnosticEngine &diags) : diags(diags) {}

  /// Loads `path` and, first, what it extends; appends the files to `chain`
  /// base-most first. `includedFrom` is the `extends` that names it.
  bool load(llvm::StringRef path, llvm::SMLoc includedFrom);

  std::vector<PolicyFileAST> chain;

private:
  DiagnosticEngine &diags;
  /// Real paths and display names of the files being loaded, outermost
  /// first: an extends back into one of them is a cycle.
  std::vector<std::pair<std::string, std::string>> stack;
};

bool PolicyLoader::load(llvm::StringRef path, llvm::SMLoc includedFrom) {
  std::string display = llvm::sys::path::filename(path).str();
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(path, real)) {
    for (size_t i = 0; i < stack.size(); ++i) {
      if (stack[i].first != real.str())
        continue;
      std::string cycle;
      for (size_t j = i; j < stack.size(); ++j)
        cycle += stack[j].second + " -> ";
      cycle += display;
      diags.error(includedFrom, "extends cycle: " + cycle);
      return false;
    }
  }
  if (includedFrom.isValid() && llvm::sys::fs::is_directory(path)) {
    diags.error(includedFrom, "cannot extend '" + path + "': it is a folder");
    return false;
  }
  unsigned bufferId =
      loadSourceFile(diags.getSourceMgr(), diags, path, includedFrom);
  if (!bufferId)
    return false;
  if (includedFrom.isValid()) {
    llvm::StringRef word =
        firstWord(diags.getSourceMgr().getMemoryBuffer(bufferId)->getBuffer());
    if (word != "policy") {
      diags.error(includedFrom,
                  "cannot extend '" + path + "': it is not a policy file (" +
                      (word.empty() ? std::string("it does not start with a "
                                                  "header")
                                    : "it starts with '" + word.str() + "'") +
                      ")",
                  {}, "a policy file starts with 'policy NAME'");
      return false;
    }
  }
  PolicyFileAST file;
  bool ok = parsePolicyFile(diags, bufferId, file);
  if (file.extends) {
    llvm::SmallString<256> basePath;
    if (llvm::sys::path::is_absolute(*file.extends)) {
      basePath = *file.extends;
    } else {
      basePath = llvm::sys::path::parent_path(path);
      llvm::sys::path::append(basePath, *file.extends);
      llvm::sys::path::remove_dots(basePath, /*remove_dot_dot=*/true);
    }
    stack.push_back({real.str().str(), display});
    ok &= load(basePath, file.extendsLoc);
    stack.pop_back();
  }
  chain.push_back(std::move(file));
  return ok;
}

//===----------------------------------------------------------------------===//
// Resolution
//===----------------------------------------------------------------------===//

/// A setting in application order, with what explain-policy calls it.
struct AppliedSetting {
  const PolicySetting *setting;
  std::string description;
};

struct OperandState {
  OperandPolicy policy;
  bool hasFormat = false;
  int formatSetting = -1, ruleSetting = -1, roundingSetting = -1;
};

struct RoleState {
  OperandState operands[2];
  RolePolicy policy; ///< rotation and accumulate (operands live above).
  int rotationSetting = -1, accumulateSetting = -1;
};

struct LinearState {
  RoleState roles[3];
};

FieldOrigin builtIn() { return {"built-in", {}, {}}; }

/// The source text of a setting, comments dropped and blanks collapsed.
std::string settingText(const PolicySetting &setting) {
  llvm::StringRef text(setting.range.Start.getPointer(),
                       setting.range.End.getPointer() -
                           setting.range.Start.getPointer());
  std::string result;
  bool blank = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n')
        ++i;
      blank = true;
      continue;
    }
    if (llvm::isSpace(c)) {
      blank = true;
      continue;
    }
    if (blank && !result.empty())
      result += ' ';
    blank = false;
    result += c;
  }
  return result;
}

void apply(const PolicySetting &setting, int id, const FieldOrigin &origin,
           LinearState &state) {
  const PolicyValues &values = setting.values;
  for (int role = 0; role < 3; ++role) {
    if (!setting.allRoles && static_cast<int>(setting.role) != role)
      continue;
    RoleState &roleState = state.roles[role];
    for (int operand = 0; operand < 2; ++operand) {
      if ((setting.operand == OperandSelector::Lhs && operand != 0) ||
          (setting.operand == OperandSelector::Rhs && operand != 1))
        continue;
      OperandState &op = roleState.operands[operand];
      if (values.format) {
        op.policy.format = *values.format;
        op.policy.formatOrigin = origin;
        op.hasFormat = true;
        op.formatSetting = id;
      }
      if (values.rule) {
        op.policy.rule = *values.rule;
        op.policy.ruleOrigin = origin;
        op.ruleSetting = id;
      }
      if (values.rounding) {
        op.policy.rounding = *values.rounding;
        op.policy.roundingOrigin = origin;
        op.roundingSetting = id;
      }
    }
    if (values.rotation) {
      roleState.policy.rotation = *values.rotation;
      roleState.policy.rotationOrigin = origin;
      roleState.rotationSetting = id;
    }
    if (values.accumulate) {
      roleState.policy.accumulate = *values.accumulate;
      roleState.policy.accumulateOrigin = origin;
      roleState.accumulateSetting = id;
    }
  }
}

/// "fprop.lhs" etc.
std::string cellName(int role, int operand) {
  return roleName(static_cast<GemmRole>(role)).str() +
         (operand == 0 ? ".lhs" : ".rhs");
}

class Resolver {
public:
  Resolver(DiagnosticEngine &diags, const std::vector<PolicyFileAST> &chain,
           const std::vector<std::string> &linearNames)
      : diags(diags), chain(chain), linearNames(linearNames) {}

  std::optional<ResolvedPolicy> resolve();

private:
  void reportUnmatchedPatterns(
      const std::vector<std::vector<std::vector<bool>>> &patternMatched);
  void reportMissingFormats(const std::vector<LinearState> &states);
  void reportInapplicableFields(const std::vector<LinearState> &states);
  /// Refuses bf16 operands rounded stochastically (at the setting that
  /// caused it) and warns where bf16 operands keep a rotation set before
  /// the setting that made them bf16.
  void checkBF16Operands(const std::vector<LinearState> &states);
  /// Refuses an accumulator other than f32 on a role whose operands are
  /// quantized or rotated (only f32 x f32 products may accumulate in bf16
  /// or f16), at the setting that chose it.
  void checkAccumulators(const std::vector<LinearState> &states);

  DiagnosticEngine &diags;
  const std::vector<PolicyFileAST> &chain;
  const std::vector<std::string> &linearNames;
  std::vector<AppliedSetting> settings;
};

std::optional<ResolvedPolicy> Resolver::resolve() {
  unsigned errorsBefore = diags.errorCount();
  std::vector<LinearState> states(linearNames.size());
  for (LinearState &state : states)
    for (RoleState &role : state.roles) {
      for (OperandState &op : role.operands)
        op.policy.formatOrigin = op.policy.ruleOrigin =
            op.policy.roundingOrigin = builtIn();
      role.policy.rotationOrigin = role.policy.accumulateOrigin = builtIn();
    }

  // patternMatched[file][block][pattern]
  std::vector<std::vector<std::vector<bool>>> patternMatched(chain.size());
  for (size_t fileIndex = 0; fileIndex < chain.size(); ++fileIndex) {
    const PolicyFileAST &file = chain[fileIndex];
    std::string prefix =
        fileIndex + 1 == chain.size()
            ? std::string()
            : llvm::sys::path::filename(file.path).str() + ": ";
    patternMatched[fileIndex].resize(file.blocks.size());
    for (size_t blockIndex = 0; blockIndex < file.blocks.size(); ++blockIndex) {
      const PolicyBlock &block = file.blocks[blockIndex];
      std::vector<bool> &matchedPatterns =
          patternMatched[fileIndex][blockIndex];
      matchedPatterns.assign(block.patterns.size(), false);
      std::vector<bool> selected(linearNames.size(), block.isDefault);
      for (size_t linear = 0; linear < linearNames.size(); ++linear)
        for (size_t p = 0; p < block.patterns.size(); ++p)
          if (block.patterns[p].glob.matches(linearNames[linear])) {
            selected[linear] = true;
            matchedPatterns[p] = true;
          }
      std::string description = prefix + block.describe();
      for (const PolicySetting &setting : block.settings) {
        int id = static_cast<int>(settings.size());
        settings.push_back({&setting, description});
        FieldOrigin origin{description, setting.getLoc(), settingText(setting)};
        for (size_t linear = 0; linear < linearNames.size(); ++linear)
          if (selected[linear])
            apply(setting, id, origin, states[linear]);
      }
    }
  }

  reportUnmatchedPatterns(patternMatched);
  reportMissingFormats(states);
  reportInapplicableFields(states);
  checkBF16Operands(states);
  checkAccumulators(states);
  if (diags.errorCount() != errorsBefore)
    return std::nullopt;

  ResolvedPolicy resolved;
  resolved.name = chain.back().name;
  resolved.path = chain.back().path;
  resolved.attentionOrigin = builtIn();
  for (size_t fileIndex = 0; fileIndex < chain.size(); ++fileIndex) {
    const PolicyFileAST &file = chain[fileIndex];
    resolved.files.push_back(file.path);
    if (file.attention) { // the most derived file's setting wins
      resolved.attention = *file.attention;
      resolved.attentionOrigin = {
          fileIndex + 1 == chain.size()
              ? std::string("attention")
              : llvm::sys::path::filename(file.path).str() + ": attention",
          file.attentionLoc, "attention = " + *file.attention};
    }
  }
  for (size_t linear = 0; linear < linearNames.size(); ++linear) {
    LinearPolicy policy;
    policy.linear = linearNames[linear];
    for (int role = 0; role < 3; ++role) {
      RoleState &state = states[linear].roles[role];
      RolePolicy &rolePolicy = policy.roles[role];
      rolePolicy = state.policy;
      OperandPolicy *targets[2] = {&rolePolicy.lhs, &rolePolicy.rhs};
      for (int operand = 0; operand < 2; ++operand) {
        OperandPolicy op = state.operands[operand].policy;
        // Fields the format does not take hold their neutral values.
        if (!op.format.takesRule(op.rule)) {
          // The format's default, which no setting chose.
          op.rule = op.format.defaultRule();
          op.ruleOrigin = FieldOrigin{};
        }
        if (!op.format.isRounded())
          op.rounding = Rounding::NearestEven;
        *targets[operand] = op;
      }
    }
    resolved.linears.push_back(std::move(policy));
  }
  return resolved;
}

void Resolver::reportUnmatchedPatterns(
    const std::vector<std::vector<std::vector<bool>>> &patternMatched) {
  for (size_t fileIndex = 0; fileIndex < chain.size(); ++fileIndex) {
    const PolicyFileAST &file = chain[fileIndex];
    for (size_t blockIndex = 0; blockIndex < file.blocks.size(); ++blockIndex) {
      const PolicyBlock &block = file.blocks[blockIndex];
      for (size_t p = 0; p < block.patterns.size(); ++p) {
        if (patternMatched[fileIndex][blockIndex][p])
          continue;
        const PolicyPattern &pattern = block.patterns[p];
        std::string message =
            (block.patterns.size() == 1 ? "rule \"" : "pattern \"") +
            pattern.text + "\" matches no linear of the model";
        std::string suggestion = pattern.glob.suggest(linearNames);
        if (!suggestion.empty())
          message += "; did you mean \"" + suggestion + "\"?";
        std::string hint;
        if (suggestion.empty() && !linearNames.empty())
          hint = "the model's linears are named like '" + linearNames.front() +
                 "' ('tetra explain-policy' lists them all)";
        diags.error(pattern.loc, message, {}, hint);
      }
    }
  }
}

void Resolver::reportMissingFormats(const std::vector<LinearState> &states) {
  for (int role = 0; role < 3; ++role) {
    size_t first = states.size(), count = 0;
    for (size_t linear = 0; linear < states.size(); ++linear) {
      const RoleState &state = states[linear].roles[role];
      if (state.operands[0].hasFormat && state.operands[1].hasFormat)
        continue;
      if (first == states.size())
        first = linear;
      ++count;
    }
    if (!count)
      continue;
    const RoleState &state = states[first].roles[role];
    std::string what = roleName(static_cast<GemmRole>(role)).str();
    if (state.operands[0].hasFormat)
      what += ".rhs";
    else if (state.operands[1].hasFormat)
      what += ".lhs";
    std::string message =
        "no format for " + what + " of linear '" + linearNames[first] + "'";
    if (count > 1)
      message += fmt::format(" (nor of {} more linear{})", count - 1,
                             (count > 2 ? "s" : ""));
    const PolicyFileAST &file = chain.back();
    diags.error(file.nameLoc, message, {},
                "formats have no built-in value: set every role's format in "
                "the default block (e.g. 'all = bf16') or in a rule");
  }
}

void Resolver::checkBF16Operands(const std::vector<LinearState> &states) {
  // Per setting: bf16 operands it leaves rounded stochastically (an error:
  // no kernel rounds to bf16 stochastically yet), and bf16 operands that
  // keep a rotation set before the setting that made them bf16 (a warning:
  // a rotated bf16 GEMM is valid, but rarely meant), each with an example.
  struct Found {
    int inheritedFrom = -1; ///< The rotation's or rounding's setting.
    std::string example;
  };
  std::map<int, Found> stochastic, rotated;
  const FormatChoice bf16;
  for (size_t linear = 0; linear < states.size(); ++linear)
    for (int role = 0; role < 3; ++role) {
      const RoleState &roleState = states[linear].roles[role];
      for (int operand = 0; operand < 2; ++operand) {
        const OperandState &op = roleState.operands[operand];
        if (!op.hasFormat || op.policy.format != bf16)
          continue;
        const std::string example =
            cellName(role, operand) + " of '" + linearNames[linear] + "'";
        if (op.policy.rounding == Rounding::Stochastic) {
          // Where the rounding came last, it is the mistake; else the
          // bf16 setting that kept it.
          const bool inherited = op.roundingSetting < op.formatSetting;
          Found &f = stochastic[inherited ? op.formatSetting
                                          : op.roundingSetting];
          f.inheritedFrom = inherited ? op.roundingSetting : -1;
          if (f.example.empty())
            f.example = example;
        }
        if (roleState.policy.rotation.kind !=
                tetra::numerics::RotationKind::None &&
            roleState.rotationSetting < op.formatSetting) {
          Found &f = rotated[op.formatSetting];
          f.inheritedFrom = roleState.rotationSetting;
          if (f.example.empty())
            f.example = example;
        }
      }
    }
  for (const auto &[id, f] : stochastic) {
    const PolicySetting &setting = *settings[id].setting;
    diags.error(setting.getLoc(),
                std::string(f.inheritedFrom >= 0
                                ? "these bf16 operands keep the stochastic "
                                  "rounding set before them"
                                : "bf16 operands rounded stochastically") +
                    " (" + f.example +
                    ", for one): bf16 is rounded to nearest even only (no "
                    "kernel rounds to bf16 stochastically yet)",
                setting.range,
                "add 'round nearest_even' to the bf16 format here, or round "
                "stochastically to a block format");
    if (f.inheritedFrom >= 0)
      diags.note(settings[f.inheritedFrom].setting->getLoc(),
                 "the rounding is set here");
  }
  for (const auto &[id, f] : rotated) {
    const PolicySetting &setting = *settings[id].setting;
    diags.warning(setting.getLoc(),
                  "these bf16 operands keep the rotation '" +
                      settingText(*settings[f.inheritedFrom].setting) +
                      "' set before them (" + f.example + ", for one)",
                  setting.range,
                  "write 'rotate = none' for their roles here if bf16 should "
                  "not be rotated ('tetra explain-policy' shows each "
                  "operand's origin)");
    diags.note(settings[f.inheritedFrom].setting->getLoc(),
               "the rotation is set here");
  }
}

void Resolver::checkAccumulators(const std::vector<LinearState> &states) {
  std::map<int, std::string> examples; // per acc setting: one role it breaks
  const FormatChoice f32{tetra::numerics::ElementFormat::F32};
  for (size_t linear = 0; linear < states.size(); ++linear)
    for (int role = 0; role < 3; ++role) {
      const RoleState &roleState = states[linear].roles[role];
      if (roleState.accumulateSetting < 0 ||
          roleState.policy.accumulate == "f32")
        continue;
      const bool rotated = roleState.policy.rotation.kind !=
                           tetra::numerics::RotationKind::None;
      for (int operand = 0; operand < 2; ++operand) {
        const OperandState &op = roleState.operands[operand];
        if (!op.hasFormat || (op.policy.format == f32 && !rotated))
          continue;
        std::string &example = examples[roleState.accumulateSetting];
        if (example.empty())
          example = cellName(role, operand) + " of '" + linearNames[linear] +
                    "' is " + op.policy.format.describe() +
                    (rotated ? ", rotated" : "");
        break;
      }
    }
  for (const auto &[id, example] : examples) {
    const PolicySetting &setting = *settings[id].setting;
    diags.error(setting.getLoc(),
                "'" + settingText(setting) +
                    "' on quantized products: they accumulate in f32 (" +
                    example + ")",
                setting.range,
                "only f32 x f32 products, unrotated, accumulate in bf16 or "
                "f16");
  }
}

void Resolver::reportInapplicableFields(
    const std::vector<LinearState> &states) {
  // Per setting: how many operands a rule / rounding it set applies to, and
  // an example of one it does not.
  struct Usage {
    int applies = 0, misses = 0;
    std::string example;
  };
  std::map<int, Usage> ruleUsage, roundingUsage;
  for (size_t linear = 0; linear < states.size(); ++linear)
    for (int role = 0; role < 3; ++role)
      for (int operand = 0; operand < 2; ++operand) {
        const OperandState &op = states[linear].roles[role].operands[operand];
        if (!op.hasFormat)
          continue;
        auto count = [&](int id, bool applies, std::map<int, Usage> &usage) {
          if (id < 0)
            return;
          Usage &u = usage[id];
          if (applies) {
            ++u.applies;
            return;
          }
          if (!u.misses++)
            u.example = cellName(role, operand) + " of '" +
                        linearNames[linear] + "' is " +
                        op.policy.format.describe();
        };
        if (op.ruleSetting >= 0)
          count(op.ruleSetting,
                op.policy.format.takesRule(
                    *settings[op.ruleSetting].setting->values.rule),
                ruleUsage);
        count(op.roundingSetting, op.policy.format.isRounded(), roundingUsage);
      }
  for (auto &[id, usage] : ruleUsage) {
    const PolicySetting &setting = *settings[id].setting;
    // A setting that names the format too was checked by the parser.
    if (usage.applies || setting.values.format)
      continue;
    const ScaleRule rule = *setting.values.rule;
    diags.error(setting.values.ruleLoc,
                "'rule " + std::string(scaleRuleName(rule)) +
                    "' applies to none of the operands it is set on: it "
                    "needs " +
                    std::string(scaleFormatName(scaleFormatOf(rule))) +
                    " block scales (" + usage.example + ")");
  }
  for (auto &[id, usage] : roundingUsage) {
    const PolicySetting &setting = *settings[id].setting;
    if (usage.applies || setting.values.format ||
        *setting.values.rounding == Rounding::NearestEven)
      continue;
    diags.error(setting.values.roundingLoc,
                "'round " +
                    std::string(roundingName(*setting.values.rounding)) +
                    "' applies to none of the operands it is set on: f32 "
                    "operands are not rounded (" +
                    usage.example + ")");
  }
}

} // namespace

std::optional<ResolvedPolicy>
tetra::frontend::loadPolicy(DiagnosticEngine &diags, llvm::StringRef path,
                            const std::vector<std::string> &linearNames) {
  PolicyLoader loader(diags);
  if (!loader.load(path, {}))
    return std::nullopt;
  Resolver resolver(diags, loader.chain, linearNames);
  return resolver.resolve();
}

bool tetra::frontend::dumpPolicyAST(DiagnosticEngine &diags,
                                    llvm::StringRef path,
                                    llvm::raw_ostream &os) {
  unsigned bufferId = loadSourceFile(diags.getSourceMgr(), diags, path);
  if (!bufferId)
    return false;
  PolicyFileAST file;
  bool ok = parsePolicyFile(diags, bufferId, file);
  printPolicyAST(file, diags.getSourceMgr(), os);
  return ok;
}
