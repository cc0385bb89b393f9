//===- PolicyParser.cpp - Parsing policy files ----------------------------===//
//
// Recursive descent over the lexer's tokens (docs/language.md, "Policy
// files"). Values are checked as they are read — an unknown preset, a block
// size NVFP4 cannot take, a scale rule of another format's scales, a
// rotation on one operand — each reported at the token at fault. After a
// syntax error the parser skips to the next setting (a line that starts with
// an identifier, or the block's '}') or the next block, so that one run
// reports every error of a file.
//
//===----------------------------------------------------------------------===//

#include "dialect/LLVMFormatters.h"
#include "frontend/Lexer.h"
#include "frontend/ParserBase.h"
#include "frontend/PolicyAST.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"

#include <array>
#include <map>

using namespace tetra::frontend;
using namespace tetra::numerics;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

namespace {

const std::vector<std::string> kRoleNames = {"fprop", "dgrad", "wgrad", "all"};
const std::vector<std::string> kPresetNames = [] {
  std::vector<std::string> names;
  for (const FormatPreset &preset : formatPresets())
    names.emplace_back(preset.name);
  return names;
}();
const std::vector<std::string> kElementNames = {"e2m1", "e4m3", "e5m2", "bf16",
                                                "f32"};
const std::vector<std::string> kScaleRuleNames = [] {
  std::vector<std::string> names;
  for (ScaleRule rule : scaleRules())
    names.emplace_back(scaleRuleName(rule));
  return names;
}();
const std::vector<std::string> kRoundingNames = {"nearest_even", "nearest_away",
                                                 "stochastic"};
const std::vector<std::string> kRotationNames = {"none", "hadamard",
                                                 "random_hadamard"};
const std::vector<std::string> kScheduleNames = {"fixed", "per_step"};
const std::vector<std::string> kModifierNames = {"rule", "round", "rotate"};
const std::vector<std::string> kFieldNames = {"format", "rule", "round",
                                              "rotate", "acc"};
const std::vector<std::string> kAccumulateNames = {"f32", "bf16", "f16"};

std::string joinNames(const std::vector<std::string> &names) {
  return llvm::join(names, ", ");
}

/// Why `rule` cannot choose the block scales of `format` (named `name`), or
/// "" where it can.
std::string ruleMismatch(ScaleRule rule, const FormatChoice &format,
                         const std::string &name) {
  if (format.takesRule(rule))
    return "";
  if (!format.hasBlockScale())
    return "a scale rule applies only to formats with block scales; '" +
           name + "' has none";
  return "'" + std::string(scaleRuleName(rule)) + "' is a rule of " +
         std::string(scaleFormatName(scaleFormatOf(rule))) +
         " block scales; '" + name + "' has " +
         std::string(scaleFormatName(format.scaleFormat)) +
         " scales (rules: " + scaleRuleNamesOf(format.scaleFormat) + ")";
}

/// A preset's format; bf16 and f32 are presets with no block scale.
std::optional<FormatChoice> presetFormat(llvm::StringRef name) {
  const FormatPreset *preset =
      findFormatPreset(std::string_view(name.data(), name.size()));
  if (!preset)
    return std::nullopt;
  FormatChoice choice;
  choice.element = preset->element;
  if (preset->blockSize) {
    choice.blockSize = preset->blockSize;
    choice.scaleFormat = preset->scaleFormat;
  }
  return choice;
}

/// The preset to suggest for a bare element format (its MX one).
llvm::StringRef presetFor(ElementFormat element) {
  std::string_view name =
      formatPresetName(element, 32, ScaleFormat::E8M0);
  return llvm::StringRef(name.data(), name.size());
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

class PolicyParser : ParserBase {
public:
  PolicyParser(DiagnosticEngine &diags, unsigned bufferId)
      : ParserBase(diags, bufferId) {}

  bool parseFile(PolicyFileAST &file);

private:

  bool isRoleName(const Token &t) const {
    return t.is(TokenKind::Identifier) &&
           llvm::is_contained(kRoleNames, t.spelling);
  }
  bool startsBlock(const Token &t) {
    return (t.isIdentifier("rule") || t.isIdentifier("default") ||
            t.isIdentifier("attention")) &&
           t.startsLine;
  }

  void parseBlock(PolicyFileAST &file);
  void parseAttention(PolicyFileAST &file);
  bool parseBlockBody(PolicyBlock &block);
  bool parseSetting(PolicySetting &setting);
  bool parseQuant(PolicySetting &setting);
  bool parseFieldValue(PolicySetting &setting, const Token &fieldToken);
  bool parseFormat(PolicyValues &values);
  bool parseRotation(Rotation &rotation);
  template <typename T>
  bool parseName(const std::vector<std::string> &names, llvm::StringRef what,
                 std::optional<T> (*parse)(std::string_view), T &value);
  void checkDuplicates(
      const PolicySetting &setting,
      std::map<std::pair<int, int>, std::array<llvm::SMLoc, 5>> &seen);
  void skipToBlock();

  llvm::SMLoc defaultLoc;
  bool sawRule = false;
};

bool PolicyParser::parseFile(PolicyFileAST &file) {
  Token name;
  if (!parseHeader("policy", name))
    return false;
  file.name = name.spelling.str();
  file.nameLoc = name.getLoc();
  if (token.isIdentifier("extends")) {
    consume();
    if (token.is(TokenKind::String)) {
      file.extends = Lexer::stringValue(token);
      file.extendsLoc = token.getLoc();
      consume();
    } else {
      error(token,
            "expected the base policy's path after 'extends', got " +
                describeToken(token),
            "paths are strings, relative to this file: extends \"base.tetra\"");
    }
  }
  while (!token.is(TokenKind::EndOfFile)) {
    if (token.is(TokenKind::Error)) {
      ok = false;
      consume();
      continue;
    }
    if (token.isIdentifier("default") || token.isIdentifier("rule")) {
      parseBlock(file);
      continue;
    }
    if (token.isIdentifier("attention")) {
      parseAttention(file);
      continue;
    }
    if (token.isIdentifier("extends")) {
      error(token, "'extends' must come right after the policy header");
      skipToBlock();
      continue;
    }
    std::string hint;
    if (token.is(TokenKind::Identifier))
      hint = didYouMeanSuffix(token.spelling, {"default", "rule", "attention"});
    error(token,
          "expected 'default', 'rule' or 'attention', got " +
              describeToken(token) + hint);
    skipToBlock();
  }
  return ok;
}

/// `attention = bf16 | f32`: what the products of every attention see.
void PolicyParser::parseAttention(PolicyFileAST &file) {
  const Token keyword = token;
  consume();
  if (!token.is(TokenKind::Equal)) {
    error(token, "expected '=' after 'attention', got " + describeToken(token),
          "attention = bf16");
    skipToBlock();
    return;
  }
  consume();
  static const std::vector<std::string> kValues = {"bf16", "f32"};
  if (!token.is(TokenKind::Identifier) ||
      !llvm::is_contained(kValues, token.spelling)) {
    std::string hint;
    if (token.is(TokenKind::Identifier))
      hint = didYouMeanSuffix(token.spelling, kValues);
    error(token,
          "expected 'bf16' or 'f32' for the attention's operands, got " +
              describeToken(token) + hint,
          "attention's products take fp32 (f32, the default) or BF16 "
          "operands");
    skipToBlock();
    return;
  }
  if (file.attention) {
    error(keyword, "'attention' is set twice in this file");
    diags.note(file.attentionLoc, "the first setting is here");
  } else {
    file.attention = token.spelling.str();
    file.attentionLoc = keyword.getLoc();
  }
  consume();
}

void PolicyParser::parseBlock(PolicyFileAST &file) {
  PolicyBlock block;
  block.loc = token.getLoc();
  block.isDefault = token.isIdentifier("default");
  Token keyword = token;
  consume();
  if (block.isDefault) {
    if (defaultLoc.isValid()) {
      error(keyword, "a policy has one default block");
      diags.note(defaultLoc, "the default block is here");
    } else if (sawRule) {
      error(keyword, "the default block must come before the rules",
            "rules apply in order after the default");
    }
    defaultLoc = keyword.getLoc();
  } else {
    sawRule = true;
    // Patterns: STRING ("," STRING)*
    while (true) {
      if (!token.is(TokenKind::String)) {
        error(token,
              "expected a pattern (a string such as \"layers.*.mlp.*\"), "
              "got " +
                  describeToken(token));
        skipToBlock();
        return;
      }
      PolicyPattern pattern;
      pattern.text = Lexer::stringValue(token);
      pattern.loc = token.getLoc();
      GlobError globError;
      if (std::optional<Glob> glob = Glob::compile(pattern.text, globError)) {
        pattern.glob = std::move(*glob);
        block.patterns.push_back(std::move(pattern));
      } else {
        // Point at the character when the string has no escapes (then the
        // offsets agree), else at the string.
        llvm::SMLoc at = token.getLoc();
        if (token.spelling.size() == pattern.text.size() + 2)
          at = llvm::SMLoc::getFromPointer(token.spelling.data() + 1 +
                                           globError.offset);
        error(at,
              "invalid pattern \"" + pattern.text + "\": " + globError.message);
      }
      consume();
      if (!token.is(TokenKind::Comma))
        break;
      consume();
    }
  }
  bool closed = parseBlockBody(block);
  file.blocks.push_back(std::move(block));
  if (!closed)
    skipToBlock();
}

bool PolicyParser::parseBlockBody(PolicyBlock &block) {
  if (!token.is(TokenKind::LBrace)) {
    error(token, "expected '{' to open the " +
                     std::string(block.isDefault ? "default block" : "rule") +
                     ", got " + describeToken(token));
    return false;
  }
  llvm::SMLoc open = token.getLoc();
  consume();
  std::map<std::pair<int, int>, std::array<llvm::SMLoc, 5>> seen;
  while (true) {
    BlockStep step = stepInBlock(open);
    if (step == BlockStep::Closed || step == BlockStep::Unclosed)
      return true;
    if (step == BlockStep::Skipped)
      continue;
    if (startsBlock(token)) {
      const Token &next = lexer.peek();
      if (next.is(TokenKind::String) || next.is(TokenKind::LBrace)) {
        error(token, "expected '}' before '" + token.spelling + "'");
        diags.note(open, "to close this '{'");
        return true;
      }
    }
    PolicySetting setting;
    Token start = token;
    if (parseSetting(setting)) {
      checkDuplicates(setting, seen);
      block.settings.push_back(std::move(setting));
    } else {
      skipToSetting(start);
    }
  }
}

void PolicyParser::skipToBlock() {
  int depth = 0;
  bool first = true;
  while (!token.is(TokenKind::EndOfFile)) {
    if (!first && depth == 0 && startsBlock(token))
      return;
    first = false;
    if (token.is(TokenKind::LBrace))
      ++depth;
    else if (token.is(TokenKind::RBrace) && depth > 0)
      --depth;
    consume();
  }
}

bool PolicyParser::parseSetting(PolicySetting &setting) {
  Token start = token;
  if (!token.is(TokenKind::Identifier)) {
    error(token, "expected a setting (fprop, dgrad, wgrad or all), got " +
                     describeToken(token));
    return false;
  }
  auto role = llvm::find(kRoleNames, token.spelling);
  if (role == kRoleNames.end()) {
    error(token,
          "unknown role '" + token.spelling + "'" +
              didYouMeanSuffix(token.spelling, kRoleNames),
          "roles: fprop (Y = X·Wᵀ), dgrad (dX = dY·W), wgrad (dW = dYᵀ·X), "
          "all");
    return false;
  }
  size_t roleIndex = role - kRoleNames.begin();
  setting.allRoles = roleIndex == 3;
  if (!setting.allRoles)
    setting.role = static_cast<GemmRole>(roleIndex);
  consume();

  Token fieldToken;
  auto parseField = [&]() {
    auto field = llvm::find(kFieldNames, token.spelling);
    setting.field = static_cast<PolicyField>(field - kFieldNames.begin());
    fieldToken = token;
    consume();
  };
  if (token.is(TokenKind::Dot)) {
    consume();
    if (token.isIdentifier("lhs") || token.isIdentifier("rhs")) {
      setting.operand = token.isIdentifier("lhs") ? OperandSelector::Lhs
                                                  : OperandSelector::Rhs;
      consume();
      if (token.is(TokenKind::Dot)) {
        consume();
        if (!token.is(TokenKind::Identifier) ||
            !llvm::is_contained(kFieldNames, token.spelling)) {
          std::string hint = token.is(TokenKind::Identifier)
                                 ? didYouMeanSuffix(token.spelling, kFieldNames)
                                 : "";
          error(token,
                "unknown field " + describeToken(token) + " of " +
                    setting.targetText() + hint,
                "fields: " + joinNames(kFieldNames));
          return false;
        }
        parseField();
      }
    } else if (token.is(TokenKind::Identifier) &&
               llvm::is_contained(kFieldNames, token.spelling)) {
      parseField();
    } else {
      std::vector<std::string> candidates = {"lhs", "rhs"};
      candidates.insert(candidates.end(), kFieldNames.begin(),
                        kFieldNames.end());
      std::string hint = token.is(TokenKind::Identifier)
                             ? didYouMeanSuffix(token.spelling, candidates)
                             : "";
      error(token,
            "unknown operand or field " + describeToken(token) + " of " +
                setting.targetText() + hint,
            "operands: lhs, rhs; fields: " + joinNames(kFieldNames));
      return false;
    }
  }
  if (!token.is(TokenKind::Equal)) {
    error(token,
          "expected '=' after '" + setting.targetText() +
              (setting.field ? "." + policyFieldName(*setting.field).str()
                             : std::string()) +
              "', got " + describeToken(token));
    return false;
  }
  consume();
  bool parsed = setting.field ? parseFieldValue(setting, fieldToken)
                              : parseQuant(setting);
  setting.range = {start.getLoc(), previousEnd};
  return parsed;
}

template <typename T>
bool PolicyParser::parseName(const std::vector<std::string> &names,
                             llvm::StringRef what,
                             std::optional<T> (*parse)(std::string_view),
                             T &value) {
  // A role name is never a value: it starts the next setting.
  if (!token.is(TokenKind::Identifier) || isRoleName(token)) {
    llvm::StringRef article =
        llvm::StringRef("aeiou").contains(what.front()) ? "an " : "a ";
    error(token, "expected " + article + what + " (" + joinNames(names) +
                     "), got " + describeToken(token));
    return false;
  }
  std::optional<T> parsed = parse(std::string_view(token.spelling));
  if (!parsed) {
    error(token,
          "unknown " + what + " '" + token.spelling + "'" +
              didYouMeanSuffix(token.spelling, names),
          what + "s: " + joinNames(names));
    consume();
    return false;
  }
  value = *parsed;
  consume();
  return true;
}

std::optional<std::string> parseAccumulate(std::string_view name) {
  if (llvm::is_contained(kAccumulateNames, name))
    return std::string(name);
  return std::nullopt;
}

bool PolicyParser::parseFormat(PolicyValues &values) {
  if (!token.is(TokenKind::Identifier)) {
    error(token,
          "expected a format (a preset such as mxfp4, or an element format "
          "with its block scale), got " +
              describeToken(token));
    return false;
  }
  Token base = token;
  consume();
  FormatChoice format;
  std::vector<std::string> candidates = kPresetNames;
  candidates.insert(candidates.end(), kElementNames.begin(),
                    kElementNames.end() - 2);
  if (std::optional<FormatChoice> preset = presetFormat(base.spelling)) {
    format = *preset;
    if (token.isIdentifier("block")) {
      if (format.blockSize == 0)
        error(token, base.spelling + " takes no block scale");
      else
        error(token,
              "preset '" + base.spelling +
                  "' fixes its block scaling; write an element format (e2m1, "
                  "e4m3, e5m2) to choose one");
      return false;
    }
  } else if (std::optional<ElementFormat> element =
                 parseElementFormat(std::string_view(base.spelling))) {
    format.element = *element;
    if (!token.isIdentifier("block")) {
      error(base, "element format '" + base.spelling +
                      "' needs a block scale: write '" + base.spelling +
                      " block 32 scale e8m0' or the preset " +
                      presetFor(*element));
      return true;
    }
    consume();
    if (!token.is(TokenKind::Integer)) {
      error(token, "expected the block size after 'block', got " +
                       describeToken(token));
      return false;
    }
    Token blockToken = token;
    int64_t blockSize = Lexer::integerValue(token);
    consume();
    if (blockSize < 2 || blockSize > 1024 || !llvm::isPowerOf2_64(blockSize))
      error(blockToken, "block size must be a power of two from 2 to 1024, "
                        "got " +
                            blockToken.spelling);
    format.blockSize = static_cast<int>(blockSize);
    if (!token.isIdentifier("scale")) {
      error(token,
            "expected 'scale' after the block size, got " +
                describeToken(token),
            "the full form is 'e2m1 block 32 scale e8m0 [floor|ceil|even|"
            "rceil]' or 'e2m1 block 16 scale e4m3 [nearest|torchao]'");
      return false;
    }
    consume();
    Token scaleToken = token;
    if (token.isIdentifier("e8m0") || token.isIdentifier("e4m3")) {
      format.scaleFormat =
          token.isIdentifier("e8m0") ? ScaleFormat::E8M0 : ScaleFormat::E4M3;
      consume();
    } else {
      std::string hint = token.is(TokenKind::Identifier)
                             ? didYouMeanSuffix(token.spelling, {"e8m0", "e4m3"})
                             : "";
      error(token, "expected a scale format (e8m0 or e4m3), got " +
                       describeToken(token) + hint);
      return false;
    }
    if (format.scaleFormat == ScaleFormat::E4M3) {
      if (format.element != ElementFormat::E2M1)
        error(scaleToken,
              "an e4m3 block scale (NVFP4) needs e2m1 elements, got " +
                  base.spelling);
      else if (format.blockSize != 16)
        error(blockToken,
              "NVFP4 (e2m1 with e4m3 scales) uses blocks of 16, got " +
                  blockToken.spelling);
    }
    if (token.is(TokenKind::Identifier) &&
        parseScaleRule(std::string_view(token.spelling))) {
      const ScaleRule rule = *parseScaleRule(std::string_view(token.spelling));
      std::string mismatch = ruleMismatch(rule, format, format.describe());
      if (!mismatch.empty())
        error(token, mismatch);
      values.rule = rule;
      values.ruleLoc = token.getLoc();
      consume();
    }
  } else {
    error(base,
          "unknown format '" + base.spelling + "'" +
              didYouMeanSuffix(base.spelling, candidates),
          "presets: " + joinNames(kPresetNames) +
              "; or an element format with its block scale: e2m1|e4m3|e5m2 "
              "block N scale e8m0|e4m3");
    return false;
  }
  values.format = format;
  values.formatLoc = base.getLoc();
  return true;
}

bool PolicyParser::parseRotation(Rotation &rotation) {
  if (!token.is(TokenKind::Identifier)) {
    error(token, "expected a rotation (none, hadamard<B>, random_hadamard<B, "
                 "fixed|per_step, SEED>), got " +
                     describeToken(token));
    return false;
  }
  Token kind = token;
  if (!llvm::is_contained(kRotationNames, kind.spelling)) {
    error(token,
          "unknown rotation '" + token.spelling + "'" +
              didYouMeanSuffix(token.spelling, kRotationNames),
          "rotations: none, hadamard<B>, random_hadamard<B, fixed|per_step, "
          "SEED>");
    return false;
  }
  consume();
  rotation = Rotation();
  if (kind.spelling == "none") {
    if (token.is(TokenKind::Less) && !token.startsLine) {
      error(token, "rotation 'none' takes no parameters");
      return false;
    }
    return true;
  }
  bool random = kind.spelling == "random_hadamard";
  rotation.kind =
      random ? RotationKind::RandomHadamard : RotationKind::Hadamard;
  if (!token.is(TokenKind::Less)) {
    error(token,
          "expected '<' after '" + kind.spelling + "', got " +
              describeToken(token),
          random ? "random_hadamard<16, per_step, SEED>" : "hadamard<32>");
    return false;
  }
  consume();
  if (!token.is(TokenKind::Integer)) {
    error(token, "expected the Hadamard block size (16, 32, 64 or 128), got " +
                     describeToken(token));
    return false;
  }
  int64_t block = Lexer::integerValue(token);
  if (block > 1024 || !isValidRotationBlock(static_cast<int>(block)))
    error(token,
          "Hadamard block must be 16, 32, 64 or 128, got " + token.spelling);
  rotation.blockSize = static_cast<int>(block);
  consume();
  if (random) {
    if (!token.is(TokenKind::Comma)) {
      error(token,
            "expected ',' and the sign schedule (fixed or per_step), got " +
                describeToken(token),
            "random_hadamard<B, fixed|per_step, SEED>");
      return false;
    }
    consume();
    if (token.isIdentifier("fixed") || token.isIdentifier("per_step")) {
      rotation.schedule = token.isIdentifier("fixed") ? SignSchedule::Fixed
                                                      : SignSchedule::PerStep;
      consume();
    } else {
      std::string hint = token.is(TokenKind::Identifier)
                             ? didYouMeanSuffix(token.spelling, kScheduleNames)
                             : "";
      error(token, "expected the sign schedule (fixed or per_step), got " +
                       describeToken(token) + hint);
      return false;
    }
    if (!token.is(TokenKind::Comma)) {
      error(token, "expected ',' and the seed, got " + describeToken(token),
            "random_hadamard<B, fixed|per_step, SEED>");
      return false;
    }
    consume();
    if (!token.is(TokenKind::Integer)) {
      error(token, "expected the seed (a non-negative integer), got " +
                       describeToken(token));
      return false;
    }
    rotation.seed = static_cast<uint64_t>(Lexer::integerValue(token));
    consume();
  } else if (token.is(TokenKind::Comma)) {
    error(token, "a deterministic Hadamard rotation takes only a block size",
          "random signs: random_hadamard<B, fixed|per_step, SEED>");
    return false;
  }
  if (!token.is(TokenKind::Greater)) {
    error(token,
          "expected '>' to close the rotation, got " + describeToken(token));
    return false;
  }
  consume();
  return true;
}

bool PolicyParser::parseQuant(PolicySetting &setting) {
  PolicyValues &values = setting.values;
  if (!parseFormat(values))
    return false;
  while (token.is(TokenKind::Identifier) && !isRoleName(token)) {
    Token keyword = token;
    auto duplicate = [&](bool given) {
      if (given)
        error(keyword, "'" + keyword.spelling + "' is given twice");
    };
    if (startsBlock(token) && (lexer.peek().is(TokenKind::String) ||
                               lexer.peek().is(TokenKind::LBrace)))
      break; // `rule "..."`: the block was not closed; reported there.
    if (token.isIdentifier("rule")) {
      consume();
      ScaleRule rule;
      if (!parseName(kScaleRuleNames, "scale rule", &parseScaleRule, rule))
        return false;
      duplicate(values.rule.has_value());
      if (values.format) {
        std::string mismatch =
            ruleMismatch(rule, *values.format, values.format->describe());
        if (!mismatch.empty())
          error(keyword, mismatch);
      }
      values.rule = rule;
      values.ruleLoc = keyword.getLoc();
    } else if (token.isIdentifier("round")) {
      consume();
      Rounding rounding;
      if (!parseName(kRoundingNames, "rounding", &parseRounding, rounding))
        return false;
      duplicate(values.rounding.has_value());
      if (values.format && !values.format->isRounded() &&
          rounding != Rounding::NearestEven)
        error(keyword, "f32 operands are not rounded: 'round " +
                           std::string(roundingName(rounding)) +
                           "' does not apply");
      values.rounding = rounding;
      values.roundingLoc = keyword.getLoc();
    } else if (token.isIdentifier("rotate")) {
      consume();
      Rotation rotation;
      if (!parseRotation(rotation))
        return false;
      duplicate(values.rotation.has_value());
      if (setting.operand != OperandSelector::Both)
        error(keyword,
              "rotation is per role: both operands of a GEMM are rotated "
              "alike",
              "rotate the role: '" + roleName(setting.role).str() +
                  ".rotate = " + describeRotation(rotation) + "'");
      values.rotation = rotation;
      values.rotationLoc = keyword.getLoc();
    } else if (token.startsLine) {
      break; // A new setting with a misspelled role: reported there.
    } else {
      std::vector<std::string> candidates = kModifierNames;
      candidates.push_back("acc");
      error(token,
            "unknown modifier '" + token.spelling + "'" +
                didYouMeanSuffix(token.spelling, candidates),
            "modifiers: rule, round, rotate; the accumulator is set as "
            "'fprop.acc = bf16'");
      return false;
    }
  }
  return true;
}

bool PolicyParser::parseFieldValue(PolicySetting &setting,
                                   const Token &fieldToken) {
  PolicyValues &values = setting.values;
  bool perOperand = setting.operand != OperandSelector::Both;
  switch (*setting.field) {
  case PolicyField::Format:
    if (!parseFormat(values))
      return false;
    if (token.is(TokenKind::Identifier) && !token.startsLine &&
        llvm::is_contained(kModifierNames, token.spelling)) {
      error(token,
            "'" + setting.targetText() +
                ".format' takes only a format; to set '" + token.spelling +
                "' too, write '" + setting.targetText() + " = " +
                values.format->describe() + " " + token.spelling + " ...'");
      return false;
    }
    return true;
  case PolicyField::Rule: {
    values.ruleLoc = token.getLoc();
    ScaleRule rule;
    if (!parseName(kScaleRuleNames, "scale rule", &parseScaleRule, rule))
      return false;
    values.rule = rule;
    return true;
  }
  case PolicyField::Round: {
    values.roundingLoc = token.getLoc();
    Rounding rounding;
    if (!parseName(kRoundingNames, "rounding", &parseRounding, rounding))
      return false;
    values.rounding = rounding;
    return true;
  }
  case PolicyField::Rotate: {
    values.rotationLoc = token.getLoc();
    Rotation rotation;
    if (!parseRotation(rotation))
      return false;
    if (perOperand)
      error(fieldToken,
            "rotation is per role: both operands of a GEMM are rotated alike",
            "rotate the role: '" +
                (setting.allRoles ? std::string("all")
                                  : roleName(setting.role).str()) +
                ".rotate = " + describeRotation(rotation) + "'");
    values.rotation = rotation;
    return true;
  }
  case PolicyField::Acc: {
    values.accumulateLoc = token.getLoc();
    std::string accumulate;
    if (!parseName(kAccumulateNames, "accumulator type", &parseAccumulate,
                   accumulate))
      return false;
    if (perOperand)
      error(fieldToken, "the accumulator is per role, not per operand",
            "write '" +
                (setting.allRoles ? std::string("all")
                                  : roleName(setting.role).str()) +
                ".acc = " + accumulate + "'");
    values.accumulate = accumulate;
    return true;
  }
  }
  return false;
}

/// Two settings of one block that write the same field of the same target
/// (spelled alike) are a mistake: the first would be dead.
void PolicyParser::checkDuplicates(
    const PolicySetting &setting,
    std::map<std::pair<int, int>, std::array<llvm::SMLoc, 5>> &seen) {
  int role = setting.allRoles ? 3 : static_cast<int>(setting.role);
  auto &previous = seen[{role, static_cast<int>(setting.operand)}];
  const PolicyValues &v = setting.values;
  std::pair<bool, llvm::SMLoc> written[5] = {
      {v.format.has_value(), v.formatLoc},
      {v.rule.has_value(), v.ruleLoc},
      {v.rounding.has_value(), v.roundingLoc},
      {v.rotation.has_value(), v.rotationLoc},
      {v.accumulate.has_value(), v.accumulateLoc}};
  for (int field = 0; field < 5; ++field) {
    auto [given, loc] = written[field];
    if (!given)
      continue;
    if (previous[field].isValid()) {
      error(loc.isValid() ? loc : setting.getLoc(),
            "this block already sets " + setting.targetText() + "." +
                policyFieldName(static_cast<PolicyField>(field)) +
                "; the earlier value would never apply");
      diags.note(previous[field], "set here");
      continue;
    }
    previous[field] = loc.isValid() ? loc : setting.getLoc();
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

llvm::StringRef tetra::frontend::policyFieldName(PolicyField field) {
  return kFieldNames[static_cast<int>(field)];
}

std::string tetra::frontend::describeRotation(const Rotation &rotation) {
  switch (rotation.kind) {
  case RotationKind::None:
    return "none";
  case RotationKind::Hadamard:
    return fmt::format("hadamard<{}>", rotation.blockSize);
  case RotationKind::RandomHadamard:
    return fmt::format(
        "random_hadamard<{}, {}, {}>", rotation.blockSize,
        (rotation.schedule == SignSchedule::Fixed ? "fixed" : "per_step"),
        rotation.seed);
  }
  return "none";
}

std::string PolicyValues::describe() const {
  std::vector<std::string> parts;
  if (format)
    parts.push_back(format->describe());
  if (rule)
    parts.push_back("rule " + std::string(scaleRuleName(*rule)));
  if (rounding)
    parts.push_back("round " + std::string(roundingName(*rounding)));
  if (rotation)
    parts.push_back("rotate " + describeRotation(*rotation));
  if (accumulate)
    parts.push_back("acc " + *accumulate);
  return llvm::join(parts, " ");
}

std::string PolicySetting::targetText() const {
  std::string text = allRoles ? "all" : roleName(role).str();
  if (operand == OperandSelector::Lhs)
    text += ".lhs";
  else if (operand == OperandSelector::Rhs)
    text += ".rhs";
  return text;
}

std::string PolicyBlock::describe() const {
  if (isDefault)
    return "default";
  std::string text = "rule ";
  for (size_t i = 0; i < patterns.size(); ++i)
    text += (i ? ", \"" : "\"") + patterns[i].text + "\"";
  return text;
}

bool tetra::frontend::parsePolicyFile(DiagnosticEngine &diags,
                                      unsigned bufferId, PolicyFileAST &file) {
  file.bufferId = bufferId;
  file.path = diags.getSourceMgr()
                  .getMemoryBuffer(bufferId)
                  ->getBufferIdentifier()
                  .str();
  PolicyParser parser(diags, bufferId);
  return parser.parseFile(file);
}

void tetra::frontend::printPolicyAST(const PolicyFileAST &file,
                                     llvm::SourceMgr &sourceMgr,
                                     llvm::raw_ostream &os) {
  if (file.name.empty())
    return; // The header did not parse: nothing else did.
  auto at = [&](llvm::SMLoc loc) {
    if (!loc.isValid())
      return std::string();
    auto [line, column] = sourceMgr.getLineAndColumn(loc);
    return fmt::format(" @{}:{}", line, column);
  };
  os << "Policy " << file.name << at(file.nameLoc) << "\n";
  if (file.extends)
    os << "  Extends \"" << *file.extends << "\"" << at(file.extendsLoc)
       << "\n";
  if (file.attention)
    os << "  Attention " << *file.attention << at(file.attentionLoc) << "\n";
  for (const PolicyBlock &block : file.blocks) {
    std::string head = block.describe();
    if (block.isDefault)
      head = "Default";
    else
      head = "Rule" + head.substr(4);
    os << "  " << head << at(block.loc) << "\n";
    for (const PolicySetting &setting : block.settings) {
      os << "    Setting " << setting.targetText();
      if (setting.field)
        os << "." << policyFieldName(*setting.field);
      std::string value = setting.values.describe();
      // A field setting shows only its value: "round stochastic" ->
      // "stochastic".
      if (setting.field && *setting.field != PolicyField::Format)
        value = llvm::StringRef(value).split(' ').second.str();
      os << " = " << value << at(setting.getLoc()) << "\n";
    }
  }
}
