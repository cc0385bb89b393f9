//===- QuantizeCommand.cpp - tetra quantize -------------------------------===//
//
// `tetra quantize`: quantizes the tensors of a safetensors file exactly as a
// Tetra policy would (the numerics library is the single definition), and
// reports per tensor what was lost: SQNR, relative and maximum error, the
// fraction of elements that saturated, and how the block scales are spread.
// Optionally writes the dequantized tensors (and the codes and scales).
//
// Everything the input and the options allow to be checked is checked before
// any tensor is quantized, so an error comes alone, and no output is written
// unless every tensor was quantized.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"

#include "frontend/PolicyAST.h"
#include "frontend/PolicyGlob.h"
#include "tools/tetra/LoadInputs.h"

#include "runtime/io/Json.h"
#include "runtime/io/Safetensors.h"
#include "runtime/numerics/BlockQuantize.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <string>
#include <unordered_set>

using namespace tetra;
using namespace tetra::numerics;
using io::Dtype;
using io::Error;
using io::Expected;
using io::Status;

namespace {

constexpr const char *kPrefix = "tetra quantize: ";

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

/// What --format names: a block format, or a plain cast to BF16.
struct FormatChoice {
  std::string name;
  bool isBF16 = false;
  BlockFormat block; // Unused for bf16.
};

struct QuantizeOptions {
  FormatChoice format;
  std::optional<ScaleRule> scaleRule;
  Rounding rounding = Rounding::NearestEven;
  uint64_t seed = 0;
  Rotation rotation;
  std::string rotationText = "none";
  int axis = -1;
  std::optional<int> block;
  bool tensorsGiven = false;
  std::vector<std::string> tensors;
  std::string input;
  std::string output;
  bool codes = false;
  bool json = false;
  /// With --policy: "policy P, linear L, wgrad.lhs" (the header says so).
  std::string policySource;
};

constexpr const char *kFormatList =
    "mxfp4, mxfp8_e4m3, mxfp8_e5m2, nvfp4, bf16";

std::optional<FormatChoice> parseFormat(std::string_view name) {
  FormatChoice choice;
  choice.name = std::string(name);
  if (name == "bf16") {
    choice.isBF16 = true;
    return choice;
  }
  std::optional<BlockFormat> preset = blockFormatPreset(name);
  if (!preset)
    return std::nullopt;
  choice.block = *preset;
  return choice;
}

template <typename Integer>
std::optional<Integer> parseInteger(std::string_view text) {
  Integer value;
  const char *begin = text.data();
  const char *end = text.data() + text.size();
  if (begin != end && *begin == '+')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end)
    return std::nullopt;
  return value;
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos
                                                   ? std::string_view::npos
                                                   : comma - start);
    if (!item.empty())
      items.emplace_back(item);
    if (comma == std::string_view::npos)
      return items;
    start = comma + 1;
  }
}

/// --tensors' comma-separated names and globs; a comma inside braces
/// belongs to its glob (`layers.*.attn.{wq,wk}`).
std::vector<std::string> splitPatterns(std::string_view text) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : text) {
    depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (c == ',' && depth <= 0) {
      if (!current.empty())
        items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty())
    items.push_back(current);
  return items;
}

/// The policy language's spelling (docs/language.md): hadamard<B>,
/// random_hadamard<B> or random_hadamard<B, fixed|per_step, SEED> (one file
/// is step 0 either way), blanks allowed — rewritten to the older
/// colon form (hadamard:B, random_hadamard:B[:SEED]), which still works.
std::optional<std::string> fromPolicySpelling(std::string_view text) {
  std::string compact;
  for (char c : text)
    if (c != ' ')
      compact += c;
  size_t open = compact.find('<');
  if (open == std::string::npos || compact.back() != '>')
    return std::nullopt;
  std::string kind = compact.substr(0, open);
  std::vector<std::string> fields =
      splitList(std::string_view(compact).substr(open + 1,
                                                 compact.size() - open - 2));
  if (kind == "hadamard" && fields.size() == 1)
    return kind + ":" + fields[0];
  if (kind == "random_hadamard" && fields.size() == 1)
    return kind + ":" + fields[0];
  if (kind == "random_hadamard" && fields.size() == 3 &&
      (fields[1] == "fixed" || fields[1] == "per_step"))
    return kind + ":" + fields[0] + ":" + fields[2];
  return std::nullopt;
}

/// none | hadamard<B> | random_hadamard<B[, fixed|per_step, SEED]> (or the
/// colon forms hadamard:B | random_hadamard:B[:SEED]). A missing SEED is
/// filled in from --seed later.
Expected<Rotation> parseRotation(std::string_view given, bool &seedGiven) {
  seedGiven = false;
  Rotation rotation;
  if (given == "none")
    return rotation;
  auto invalid = [&] {
    return Error("invalid --rotate '" + std::string(given) +
                 "' (expected none, hadamard<B> or random_hadamard<B, "
                 "fixed|per_step, SEED>, as in policies)");
  };
  std::optional<std::string> policySpelling =
      given.find('<') != std::string_view::npos ? fromPolicySpelling(given)
                                                : std::optional<std::string>();
  if (given.find('<') != std::string_view::npos && !policySpelling)
    return invalid();
  std::string_view text = policySpelling ? *policySpelling : given;
  size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    return invalid();
  std::string_view kind = text.substr(0, colon);
  std::string_view rest = text.substr(colon + 1);
  if (kind == "hadamard") {
    rotation.kind = RotationKind::Hadamard;
  } else if (kind == "random_hadamard") {
    rotation.kind = RotationKind::RandomHadamard;
    size_t seedColon = rest.find(':');
    if (seedColon != std::string_view::npos) {
      std::optional<uint64_t> seed =
          parseInteger<uint64_t>(rest.substr(seedColon + 1));
      if (!seed)
        return invalid();
      rotation.seed = *seed;
      seedGiven = true;
      rest = rest.substr(0, seedColon);
    }
  } else {
    return invalid();
  }
  std::optional<int> block = parseInteger<int>(rest);
  if (!block)
    return invalid();
  if (!isValidRotationBlock(*block))
    return Error(fmt::format(
        "rotation block {} in --rotate '{}' is not one of 16, 32, 64, 128",
        *block, std::string(given)));
  rotation.blockSize = *block;
  return rotation;
}

/// What a policy does to one operand of one linear's GEMM role, as this
/// command's options: its format, rounding and rotation, and the axis its
/// blocks run along in the tensor as a model holds it (the GEMM's K: the
/// last axis of fprop's X [tokens, in] and W [out, in] and of dgrad's dY
/// [tokens, out]; the first of dgrad's W and of wgrad's dY and X, which
/// reduce over out features and tokens).
struct PolicyOperand {
  FormatChoice format;
  Rounding rounding = Rounding::NearestEven;
  Rotation rotation;
  int axis = -1;
  std::string source;
};

Expected<PolicyOperand> policyOperand(const std::string &policyPath,
                                      const std::optional<std::string> &model,
                                      const std::string &linear,
                                      const std::string &roleText) {
  llvm::StringRef roleName = roleText, operandName;
  std::tie(roleName, operandName) = llvm::StringRef(roleText).split('.');
  std::optional<frontend::GemmRole> role;
  for (auto r : {frontend::GemmRole::Fprop, frontend::GemmRole::Dgrad,
                 frontend::GemmRole::Wgrad})
    if (frontend::roleName(r) == roleName)
      role = r;
  if (!role || !(operandName.empty() || operandName == "lhs" ||
                 operandName == "rhs"))
    return Error("invalid --role '" + roleText +
                 "' (expected fprop, dgrad or wgrad, with .lhs or .rhs)");

  llvm::SourceMgr sourceMgr;
  frontend::DiagnosticEngine diags(sourceMgr);
  std::vector<std::string> files;
  if (model)
    files.push_back(*model);
  files.push_back(policyPath);
  std::optional<driver::LoadedInputs> inputs =
      driver::loadInputs(diags, files, {}, "tetra quantize",
                         "--policy (a run file, or a policy with --model)");
  if (!inputs)
    return Error("--policy '" + policyPath + "' does not load (see above)");
  if (!inputs->policy)
    return Error("--policy '" + policyPath +
                 "' names no policy (give a run file, or a policy file with "
                 "--model MODEL)");
  const frontend::ResolvedPolicy &policy = *inputs->policy;
  const frontend::LinearPolicy *found = policy.find(linear);
  if (!found) {
    std::vector<std::string> names = inputs->model.linearNames();
    std::string near = frontend::closestMatch(linear, names);
    return Error("model '" + inputs->model.name + "' has no linear '" +
                 linear + "'" +
                 (near.empty() ? "" : "; did you mean '" + near + "'?"));
  }
  const frontend::RolePolicy &rolePolicy = found->role(*role);
  if (operandName.empty() &&
      (rolePolicy.lhs.format != rolePolicy.rhs.format ||
       rolePolicy.lhs.rule != rolePolicy.rhs.rule ||
       rolePolicy.lhs.rounding != rolePolicy.rhs.rounding))
    return Error("the operands of " + linear + "'s " + roleName.str() +
                 " are quantized differently: name one (--role " +
                 roleName.str() + ".lhs or " + roleName.str() + ".rhs)");
  const bool rhs = operandName == "rhs";
  const frontend::OperandPolicy &operand =
      rhs ? rolePolicy.rhs : rolePolicy.lhs;
  if (!operand.format.isRounded())
    return Error(linear + "'s " + roleText + " is f32 under policy " +
                 policy.name + ": nothing to quantize");
  PolicyOperand result;
  result.format.name = operand.format.describe();
  if (operand.format.blockSize == 0) {
    result.format.isBF16 = true;
  } else {
    result.format.block.element = operand.format.element;
    result.format.block.scaling = {operand.format.blockSize,
                                   operand.format.scaleFormat, operand.rule};
  }
  result.rounding = operand.rounding;
  result.rotation = rolePolicy.rotation;
  const bool reducesFirstAxis =
      *role == frontend::GemmRole::Wgrad ||
      (*role == frontend::GemmRole::Dgrad && rhs);
  result.axis = reducesFirstAxis ? 0 : -1;
  result.source = "policy " + policy.name + ", linear " + linear + ", " +
                  roleName.str() + "." + (rhs ? "rhs" : "lhs");
  return result;
}

/// Parses the command line. `input` receives the input file as soon as it
/// is known, so that the caller can name it in the error.
Expected<QuantizeOptions>
parseOptions(const std::vector<std::string_view> &args, bool &wantsHelp,
             std::string &input) {
  wantsHelp = false;
  QuantizeOptions options;
  // The first error of the scan; reported once every argument was seen, so
  // that it can name the input file.
  std::optional<Error> scanError;
  std::optional<std::string> formatText, ruleText, roundText, rotateText,
      seedText, axisText, blockText, policyText, modelText, linearText,
      roleText;
  bool positionalOnly = false;
  std::vector<std::string> inputs;

  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (positionalOnly || arg.empty() || arg[0] != '-' || arg == "-") {
      inputs.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      positionalOnly = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      wantsHelp = true;
      return options;
    }
    if (arg == "--codes") {
      options.codes = true;
      continue;
    }
    if (arg == "--json") {
      options.json = true;
      continue;
    }
    // Options with a value: "--name value", "--name=value", "-o value",
    // "-oVALUE".
    std::string_view name = arg, value;
    bool hasInlineValue = false;
    if (arg.substr(0, 2) == "--") {
      size_t equals = arg.find('=');
      if (equals != std::string_view::npos) {
        name = arg.substr(0, equals);
        value = arg.substr(equals + 1);
        hasInlineValue = true;
      }
    } else if (arg.substr(0, 2) == "-o" && arg.size() > 2) {
      name = "-o";
      value = arg.substr(2);
      hasInlineValue = true;
    }
    std::optional<std::string> *slot = nullptr;
    if (name == "--format")
      slot = &formatText;
    else if (name == "--policy")
      slot = &policyText;
    else if (name == "--model")
      slot = &modelText;
    else if (name == "--linear")
      slot = &linearText;
    else if (name == "--role")
      slot = &roleText;
    else if (name == "--scale-rule")
      slot = &ruleText;
    else if (name == "--round")
      slot = &roundText;
    else if (name == "--rotate")
      slot = &rotateText;
    else if (name == "--seed")
      slot = &seedText;
    else if (name == "--axis")
      slot = &axisText;
    else if (name == "--block")
      slot = &blockText;
    else if (name != "--tensors" && name != "-o" && name != "--output") {
      if (!scanError)
        scanError = Error("unknown option '" + std::string(arg) +
                          "' (see 'tetra quantize --help')");
      continue;
    }
    if (!hasInlineValue) {
      if (i + 1 >= args.size()) {
        if (!scanError)
          scanError = Error("option " + std::string(name) + " needs a value");
        continue;
      }
      value = args[++i];
    }
    if (slot)
      *slot = std::string(value);
    else if (name == "--tensors") {
      options.tensorsGiven = true;
      options.tensors = splitPatterns(value);
      if (options.tensors.empty() && !scanError)
        scanError = Error("--tensors needs at least one tensor name");
    } else {
      if (value.empty() && !scanError)
        scanError = Error("option " + std::string(name) + " needs a file name");
      options.output = std::string(value);
    }
  }
  if (inputs.size() == 1)
    input = inputs[0];
  if (scanError)
    return *scanError;

  if (inputs.empty())
    return Error("no input file (usage: tetra quantize --format FORMAT "
                 "IN.safetensors [-o OUT.safetensors])");
  if (inputs.size() > 1)
    return Error("more than one input file ('" + inputs[0] + "', '" +
                 inputs[1] + "'); quantize one file at a time");
  options.input = inputs[0];

  if (policyText) {
    if (formatText || ruleText || roundText || rotateText || blockText)
      return Error("--policy sets the format, scale rule, rounding and "
                   "rotation: leave out --format, --scale-rule, --round, "
                   "--rotate and --block");
    if (!linearText || !roleText)
      return Error("--policy needs --linear NAME and --role "
                   "fprop|dgrad|wgrad[.lhs|.rhs]");
    Expected<PolicyOperand> chosen =
        policyOperand(*policyText, modelText, *linearText, *roleText);
    if (!chosen)
      return chosen.error();
    options.format = chosen->format;
    options.rounding = chosen->rounding;
    options.rotation = chosen->rotation;
    options.rotationText = frontend::describeRotation(chosen->rotation);
    options.axis = chosen->axis;
    options.policySource = chosen->source;
    formatText = options.format.name; // checked below as any --format
  } else if (modelText || linearText || roleText) {
    return Error("--model, --linear and --role go with --policy");
  }
  if (!formatText)
    return Error("missing --format (one of " + std::string(kFormatList) + ")");
  std::optional<FormatChoice> format =
      policyText ? std::optional<FormatChoice>(options.format)
                 : parseFormat(*formatText);
  if (!format)
    return Error("unknown format '" + *formatText + "' (expected one of " +
                 kFormatList + ")");
  options.format = *format;

  if (ruleText) {
    options.scaleRule = parseScaleRule(*ruleText);
    if (!options.scaleRule)
      return Error("unknown scale rule '" + *ruleText +
                   "' (expected floor, ceil, even or rceil for MX formats, "
                   "nearest or torchao for nvfp4)");
    if (options.format.isBF16)
      return Error("--scale-rule applies to block scales; " +
                   options.format.name + " has no scales");
    const ScaleFormat scales = options.format.block.scaling.scaleFormat;
    if (scaleFormatOf(*options.scaleRule) != scales)
      return Error("--scale-rule " + *ruleText + " is a rule of " +
                   std::string(scaleFormatName(
                       scaleFormatOf(*options.scaleRule))) +
                   " scales; " + options.format.name + " has " +
                   std::string(scaleFormatName(scales)) + " scales (" +
                   scaleRuleNamesOf(scales) + ")");
    options.format.block.scaling.rule = *options.scaleRule;
  }
  if (roundText) {
    std::optional<Rounding> rounding = parseRounding(*roundText);
    if (!rounding)
      return Error("unknown rounding '" + *roundText +
                   "' (expected nearest_even, nearest_away or stochastic)");
    options.rounding = *rounding;
  }
  options.format.block.rounding = options.rounding;
  if (seedText) {
    std::optional<uint64_t> seed = parseInteger<uint64_t>(*seedText);
    if (!seed)
      return Error("invalid --seed '" + *seedText +
                   "' (expected a non-negative integer)");
    options.seed = *seed;
  }
  if (rotateText) {
    bool seedGiven = false;
    Expected<Rotation> rotation = parseRotation(*rotateText, seedGiven);
    if (!rotation)
      return rotation.error();
    options.rotation = *rotation;
    if (options.rotation.kind == RotationKind::RandomHadamard && !seedGiven)
      options.rotation.seed = options.seed;
    options.rotationText = *rotateText;
  }
  if (axisText) {
    std::optional<int> axis = parseInteger<int>(*axisText);
    if (!axis)
      return Error("invalid --axis '" + *axisText + "' (expected an integer)");
    options.axis = *axis;
  }
  if (blockText) {
    std::optional<int> block = parseInteger<int>(*blockText);
    if (!block || *block <= 0)
      return Error("invalid --block '" + *blockText +
                   "' (expected a positive integer)");
    if (options.format.isBF16)
      return Error("--block does not apply to bf16, which has no blocks");
    if (options.format.block.scaling.scaleFormat == ScaleFormat::E4M3 &&
        *block != 16)
      return Error("nvfp4 uses blocks of 16 elements; --block " + *blockText +
                   " is not allowed");
    options.block = *block;
    options.format.block.scaling.blockSize = *block;
  }
  if (options.codes && options.output.empty())
    return Error("--codes needs an output file (-o OUT.safetensors)");
  return options;
}

//===----------------------------------------------------------------------===//
// Planning: which tensors, along which axis; every check before any work.
//===----------------------------------------------------------------------===//

struct TensorPlan {
  const io::TensorInfo *info;
  int axis; // Normalized, 0 <= axis < rank.
  AxisView view;
};

std::string nameList(const io::SafetensorsFile &file) {
  std::string list;
  size_t shown = 0;
  for (const io::TensorInfo &tensor : file.tensors()) {
    if (shown == 8) {
      list += fmt::format(", ... ({} in all)", file.tensors().size());
      break;
    }
    if (shown++)
      list += ", ";
    list += "'" + tensor.name + "'";
  }
  return list.empty() ? "none" : list;
}

/// Checks that `tensor` can be quantized as asked; the message names the
/// tensor and, unless the user chose the tensors, suggests --tensors.
Expected<TensorPlan> planTensor(const io::TensorInfo &tensor,
                                const QuantizeOptions &options) {
  std::string what = "tensor '" + tensor.name + "' (shape " +
                     io::shapeToString(tensor.shape) + ", " +
                     std::string(io::dtypeName(tensor.dtype)) + ")";
  std::string hint = options.tensorsGiven
                         ? ""
                         : "; choose the tensors to quantize with --tensors";
  if (!io::isFloatDtype(tensor.dtype))
    return Error(what +
                 " is not a floating-point tensor; only F32, F16 and "
                 "BF16 tensors can be quantized" +
                 hint);
  int rank = static_cast<int>(tensor.shape.size());
  if (rank == 0)
    return Error(what + " is a scalar and has no axis to quantize along" +
                 hint);
  int axis = options.axis < 0 ? options.axis + rank : options.axis;
  if (axis < 0 || axis >= rank)
    return Error(fmt::format(
        "--axis {} is out of range for {} of rank {} (valid: {} to {}){}",
        options.axis, what, rank, -rank, rank - 1, hint));
  TensorPlan plan{&tensor, axis, viewAlong(tensor.shape, axis)};
  int64_t extent = plan.view.extent;
  if (!options.format.isBF16) {
    int block = options.format.block.scaling.blockSize;
    if (extent % block != 0)
      return Error(fmt::format(
          "{}: extent {} along axis {} is not divisible by the block size {}{}",
          what, extent, axis, block, hint));
  }
  if (options.rotation.kind != RotationKind::None &&
      extent % options.rotation.blockSize != 0)
    return Error(fmt::format("{}: extent {} along axis {} is not divisible by "
                             "the rotation block {}{}",
                             what, extent, axis, options.rotation.blockSize,
                             hint));
  return plan;
}

/// Whether `file` is a Tetra checkpoint (its metadata says so).
bool isCheckpoint(const io::SafetensorsFile &file) {
  for (const auto &[key, value] : file.metadata())
    if (key == "format" && value == "tetra-checkpoint")
      return true;
  return false;
}

/// A checkpoint's AdamW moments (optimizer.m.*, optimizer.v.*).
bool isOptimizerState(const std::string &name) {
  return llvm::StringRef(name).starts_with("optimizer.");
}

Expected<std::vector<TensorPlan>> planAll(const io::SafetensorsFile &file,
                                          const QuantizeOptions &options,
                                          size_t &leftOut) {
  std::vector<const io::TensorInfo *> selected;
  leftOut = 0;
  if (options.tensorsGiven) {
    // Names, or globs over the dotted names as in policies (layers.*.mlp.*,
    // optimizer.**, attn.{wq,wk}), each in the file's order.
    std::unordered_set<std::string> seen;
    for (const std::string &pattern : options.tensors) {
      std::vector<const io::TensorInfo *> matched;
      if (const io::TensorInfo *tensor = file.find(pattern)) {
        matched.push_back(tensor);
      } else if (pattern.find_first_of("*{") != std::string::npos) {
        frontend::GlobError error;
        std::optional<frontend::Glob> glob =
            frontend::Glob::compile(pattern, error);
        if (!glob)
          return Error("invalid --tensors pattern '" + pattern +
                       "': " + error.message);
        for (const io::TensorInfo &tensor : file.tensors())
          if (glob->matches(tensor.name))
            matched.push_back(&tensor);
      }
      if (matched.empty())
        return Error("no tensor " +
                     std::string(pattern.find_first_of("*{") !=
                                         std::string::npos
                                     ? "matches '"
                                     : "named '") +
                     pattern + "' (the file has " + nameList(file) + ")");
      for (const io::TensorInfo *tensor : matched)
        if (seen.insert(tensor->name).second)
          selected.push_back(tensor);
    }
  } else {
    // A checkpoint's parameters, not its optimizer state.
    const bool checkpoint = isCheckpoint(file);
    for (const io::TensorInfo &tensor : file.tensors()) {
      if (checkpoint && isOptimizerState(tensor.name)) {
        ++leftOut;
        continue;
      }
      selected.push_back(&tensor);
    }
    if (selected.empty())
      return Error("the file holds no tensors");
  }
  std::vector<TensorPlan> plans;
  std::unordered_set<std::string> outputNames;
  for (const io::TensorInfo *tensor : selected) {
    Expected<TensorPlan> plan = planTensor(*tensor, options);
    if (!plan)
      return plan.error();
    plans.push_back(*plan);
    outputNames.insert(tensor->name);
  }
  if (options.codes) {
    // The side tensors must not collide with the dequantized ones.
    for (const TensorPlan &plan : plans)
      for (const char *suffix : {".codes", ".scales", ".tensor_scale"})
        if (outputNames.count(plan.info->name + suffix))
          return Error("--codes would write '" + plan.info->name + suffix +
                       "', which is also the name of a quantized tensor");
  }
  return plans;
}

//===----------------------------------------------------------------------===//
// Quantizing one tensor and measuring the damage
//===----------------------------------------------------------------------===//

/// How the block scales of a tensor are spread. Bins are E8M0 exponents for
/// MX, and binades (floor(log2 s)) of the decoded E4M3 scales for NVFP4.
struct ScaleSummary {
  bool isE4M3 = false;
  int64_t blocks = 0;     ///< Blocks summarized (neither all-zero nor NaN).
  int64_t zeroBlocks = 0; ///< All-zero blocks (E8M0: exponent -127).
  int64_t nanBlocks = 0;  ///< Blocks holding NaN/Inf: scale NaN.
  /// NVFP4 blocks whose E4M3 scale rounded to 0 (tiny next to the tensor's
  /// amax): every element flushes to zero.
  int64_t underflowBlocks = 0;
  int minBin = 0, medianBin = 0, maxBin = 0;
  std::vector<int64_t> counts;                       ///< counts[b - minBin].
  float minScale = 0, medianScale = 0, maxScale = 0; ///< E4M3 only.
  float tensorScale = 1;                             ///< E4M3 only.
};

struct TensorResult {
  int64_t elements = 0;
  int64_t finiteElements = 0; ///< Where input and result are both finite.
  double signal = 0;          ///< Sum of x^2.
  double noise = 0;           ///< Sum of (x - q)^2.
  double maxAbsError = 0;
  int64_t clipped = 0;
  bool hasScales = false;
  ScaleSummary scales;
  std::vector<float> dequantized;
  std::vector<uint8_t> codes; ///< Block formats.
  std::vector<uint8_t> scaleCodes;
  std::vector<uint16_t> bf16Codes; ///< bf16.
  std::vector<int64_t> scaleShape;

  double sqnrDb() const {
    if (noise == 0)
      return INFINITY;
    if (signal == 0)
      return -INFINITY;
    return 10.0 * std::log10(signal / noise);
  }
  double relativeError() const {
    if (signal == 0)
      return noise == 0 ? 0.0 : INFINITY;
    return std::sqrt(noise / signal);
  }
  double clippedFraction() const {
    return elements
               ? static_cast<double>(clipped) / static_cast<double>(elements)
               : 0.0;
  }
};

bool isFiniteFloat(float x) { return std::isfinite(x); }

int floorLog2(float x) { return std::ilogb(x); }

void summarizeScales(const std::vector<int> &bins,
                     const std::vector<float> &values, ScaleSummary &summary) {
  summary.blocks = static_cast<int64_t>(bins.size());
  if (bins.empty())
    return;
  std::vector<int> sorted = bins;
  std::sort(sorted.begin(), sorted.end());
  summary.minBin = sorted.front();
  summary.maxBin = sorted.back();
  summary.medianBin = sorted[(sorted.size() - 1) / 2];
  summary.counts.assign(summary.maxBin - summary.minBin + 1, 0);
  for (int bin : bins)
    ++summary.counts[bin - summary.minBin];
  if (!values.empty()) {
    std::vector<float> sortedValues = values;
    std::sort(sortedValues.begin(), sortedValues.end());
    summary.minScale = sortedValues.front();
    summary.maxScale = sortedValues.back();
    summary.medianScale = sortedValues[(sortedValues.size() - 1) / 2];
  }
}

/// Block formats: rotate, quantize, count saturations, dequantize, rotate
/// back. The same steps as numerics::fakeQuantize, kept apart to see the
/// codes and scales.
TensorResult quantizeBlocks(const std::vector<float> &x, const TensorPlan &plan,
                            const QuantizeOptions &options) {
  const BlockFormat &format = options.format.block;
  const FormatSpec &spec = formatSpec(format.element);
  const std::vector<int64_t> &shape = plan.info->shape;
  const AxisView &view = plan.view;
  const int blockSize = format.scaling.blockSize;
  const bool isE4M3 = format.scaling.scaleFormat == ScaleFormat::E4M3;

  TensorResult result;
  result.hasScales = true;
  result.scales.isE4M3 = isE4M3;
  result.elements = view.numElements();
  result.scaleShape = shape;
  result.scaleShape[plan.axis] /= blockSize;

  std::vector<float> rotated = x;
  if (options.rotation.kind != RotationKind::None)
    rotate(rotated.data(), view, options.rotation, /*step=*/0);
  RandomStream stream{options.seed, 0, tensorIdOf(plan.info->name)};
  QuantizedTensor quantized =
      quantize(rotated.data(), shape, plan.axis, format, stream);
  result.scales.tensorScale = quantized.tensorScale;

  // Saturation and scale statistics, block by block, in the rotated basis
  // (where the quantizer saw the values).
  const int64_t blocksAlongAxis = view.extent / blockSize;
  std::vector<int> bins;
  std::vector<float> scaleValues;
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t b = 0; b < blocksAlongAxis; ++b)
      for (int64_t i = 0; i < view.inner; ++i) {
        uint8_t scale =
            quantized.scales[(o * blocksAlongAxis + b) * view.inner + i];
        float amax = 0;
        bool nonFinite = false;
        for (int j = 0; j < blockSize; ++j) {
          float value = rotated[view.index(o, b * blockSize + j, i)];
          if (!isFiniteFloat(value))
            nonFinite = true;
          else
            amax = std::max(amax, std::fabs(value));
        }
        if (nonFinite) {
          ++result.scales.nanBlocks;
          continue;
        }
        if (amax == 0) {
          ++result.scales.zeroBlocks;
          continue;
        }
        // The largest magnitude this block can represent, as dequantize()
        // computes it.
        double largest;
        if (isE4M3) {
          float decoded = decodeE4M3(scale);
          if (decoded == 0) {
            // Flushed to zero: an underflow, not a saturation.
            ++result.scales.underflowBlocks;
            continue;
          }
          largest = static_cast<double>(spec.maxFinite * decoded *
                                        quantized.tensorScale);
          bins.push_back(floorLog2(decoded));
          scaleValues.push_back(decoded);
        } else {
          largest = static_cast<double>(spec.maxFinite) * decodeE8M0(scale);
          bins.push_back(e8m0Exponent(scale));
        }
        for (int j = 0; j < blockSize; ++j)
          if (std::fabs(static_cast<double>(
                  rotated[view.index(o, b * blockSize + j, i)])) > largest)
            ++result.clipped;
      }
  summarizeScales(bins, scaleValues, result.scales);

  result.dequantized = dequantize(quantized);
  if (options.rotation.kind != RotationKind::None)
    rotate(result.dequantized.data(), view, options.rotation, /*step=*/0,
           /*inverse=*/true);
  result.codes = std::move(quantized.codes);
  result.scaleCodes = std::move(quantized.scales);
  return result;
}

/// bf16: a plain cast (rotation aside), element by element.
TensorResult quantizeBF16(const std::vector<float> &x, const TensorPlan &plan,
                          const QuantizeOptions &options) {
  TensorResult result;
  result.elements = plan.view.numElements();
  std::vector<float> rotated = x;
  if (options.rotation.kind != RotationKind::None)
    rotate(rotated.data(), plan.view, options.rotation, /*step=*/0);
  RandomStream stream{options.seed, 0, tensorIdOf(plan.info->name)};
  bool stochastic = options.rounding == Rounding::Stochastic;
  result.bf16Codes.resize(rotated.size());
  result.dequantized.resize(rotated.size());
  for (size_t k = 0; k < rotated.size(); ++k) {
    uint32_t bits = stochastic ? randomBits(stream, k) : 0;
    uint16_t code = encodeBF16(rotated[k], options.rounding, bits);
    result.bf16Codes[k] = code;
    result.dequantized[k] = decodeBF16(code);
    // Saturation for a plain cast: a finite value that overflowed.
    if (isFiniteFloat(rotated[k]) && !isFiniteFloat(result.dequantized[k]))
      ++result.clipped;
  }
  if (options.rotation.kind != RotationKind::None)
    rotate(result.dequantized.data(), plan.view, options.rotation, /*step=*/0,
           /*inverse=*/true);
  return result;
}

void measure(const std::vector<float> &x, TensorResult &result) {
  for (size_t k = 0; k < x.size(); ++k) {
    double original = x[k];
    double quantized = result.dequantized[k];
    if (!std::isfinite(original) || !std::isfinite(quantized))
      continue;
    ++result.finiteElements;
    double error = quantized - original;
    result.signal += original * original;
    result.noise += error * error;
    result.maxAbsError = std::max(result.maxAbsError, std::fabs(error));
  }
}

//===----------------------------------------------------------------------===//
// Reporting
//===----------------------------------------------------------------------===//


std::string compactShape(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  return fmt::format("{}", fmt::join(shape, "x"));
}

/// One character per bin, eight heights; an empty bin is a '.'.
std::string sparkline(const std::vector<int64_t> &counts) {
  static const char *const kBars[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                      "\u2585", "\u2586", "\u2587", "\u2588"};
  // Merge neighbouring bins so that the line stays short.
  constexpr size_t kMaxWidth = 24;
  size_t group = (counts.size() + kMaxWidth - 1) / kMaxWidth;
  if (group == 0)
    return "";
  std::vector<int64_t> merged;
  for (size_t k = 0; k < counts.size(); k += group) {
    int64_t sum = 0;
    for (size_t j = k; j < std::min(counts.size(), k + group); ++j)
      sum += counts[j];
    merged.push_back(sum);
  }
  int64_t peak = *std::max_element(merged.begin(), merged.end());
  std::string line;
  for (int64_t count : merged) {
    if (count == 0) {
      line += ".";
      continue;
    }
    // Heights 1..8 in proportion to the count; any non-empty bin shows.
    int64_t height = (count * 8 + peak - 1) / peak;
    line += kBars[std::clamp<int64_t>(height, 1, 8) - 1];
  }
  return line;
}

std::string scaleColumn(const TensorResult &result) {
  if (!result.hasScales)
    return "-";
  const ScaleSummary &s = result.scales;
  std::string text;
  if (s.blocks == 0) {
    // Nothing to summarize: an empty tensor, or only zero, flushed and NaN
    // blocks.
    if (s.zeroBlocks || s.underflowBlocks)
      text = "all zero";
    else if (s.nanBlocks)
      return fmt::format("all {} blocks NaN", s.nanBlocks);
    else
      return "-";
  } else if (s.isE4M3) {
    text = fmt::format("{:.3g}..{:.3g} med {:.3g} x {:.3g} {}", s.minScale,
                       s.maxScale, s.medianScale, s.tensorScale,
                       sparkline(s.counts));
  } else {
    text = fmt::format("{}..{} med {} {}", s.minBin, s.maxBin, s.medianBin,
                       sparkline(s.counts));
  }
  if (s.underflowBlocks)
    text += fmt::format(" ({} flushed to 0)", s.underflowBlocks);
  if (s.nanBlocks)
    text += fmt::format(" ({} NaN)", s.nanBlocks);
  return text;
}

struct Table {
  size_t nameWidth = 6;
  size_t shapeWidth = 5;
  std::string scaleHeader;
};

void printTableHeader(const Table &table) {
  fmt::print("{:<{}}  {:<5}  {:<{}}  {:>8}  {:>9}  {:>9}  {:>8}  {}\n",
             "tensor", table.nameWidth, "dtype", "shape", table.shapeWidth,
             "SQNR dB", "rel err", "max err", "clipped", table.scaleHeader);
  std::string rule = std::string(table.nameWidth, '-') + "  -----  " +
                     std::string(table.shapeWidth, '-') +
                     "  --------  ---------  ---------  --------  " +
                     std::string(table.scaleHeader.size(), '-');
  fmt::print("{}\n", rule);
}

void printTableRow(const Table &table, const TensorPlan &plan,
                   const TensorResult &result) {
  const io::TensorInfo &info = *plan.info;
  std::string sqnr, relative, maxError, clipped;
  if (result.finiteElements == 0) {
    sqnr = relative = maxError = clipped = "-";
  } else {
    double db = result.sqnrDb();
    sqnr =
        std::isinf(db) ? (db > 0 ? "inf" : "-inf") : fmt::format("{:.2f}", db);
    relative = fmt::format("{:.3e}", result.relativeError());
    maxError = fmt::format("{:.3e}", result.maxAbsError);
    clipped = fmt::format("{:.3f}%", 100.0 * result.clippedFraction());
  }
  fmt::print("{:<{}}  {:<5}  {:<{}}  {:>8}  {:>9}  {:>9}  {:>8}  {}\n",
             info.name, table.nameWidth, std::string(io::dtypeName(info.dtype)),
             compactShape(info.shape), table.shapeWidth, sqnr, relative,
             maxError, clipped, scaleColumn(result));
}

io::JsonValue integerArray(const std::vector<int64_t> &values) {
  io::JsonValue array = io::JsonValue::array();
  for (int64_t value : values)
    array.push(io::JsonValue::integer(value));
  return array;
}

void printJsonRow(const TensorPlan &plan, const TensorResult &result,
                  const QuantizeOptions &options) {
  using io::JsonValue;
  const io::TensorInfo &info = *plan.info;
  JsonValue row = JsonValue::object();
  row.set("name", JsonValue::string(info.name));
  row.set("dtype", JsonValue::string(std::string(io::dtypeName(info.dtype))));
  row.set("shape", integerArray(info.shape));
  row.set("format", JsonValue::string(options.format.name));
  row.set("axis", JsonValue::integer(plan.axis));
  if (!options.format.isBF16)
    row.set("block",
            JsonValue::integer(options.format.block.scaling.blockSize));
  row.set("elements", JsonValue::integer(result.elements));
  row.set("finite_elements", JsonValue::integer(result.finiteElements));
  bool measured = result.finiteElements > 0;
  row.set("sqnr_db",
          measured ? JsonValue::number(result.sqnrDb()) : JsonValue::null());
  row.set("rel_error", measured ? JsonValue::number(result.relativeError())
                                : JsonValue::null());
  row.set("max_abs_error",
          measured ? JsonValue::number(result.maxAbsError) : JsonValue::null());
  row.set("clipped", JsonValue::integer(result.clipped));
  row.set("clipped_fraction", JsonValue::number(result.clippedFraction()));
  if (result.hasScales) {
    const ScaleSummary &s = result.scales;
    JsonValue scales = JsonValue::object();
    scales.set("format", JsonValue::string(s.isE4M3 ? "E4M3" : "E8M0"));
    scales.set("blocks", JsonValue::integer(s.blocks));
    scales.set("zero_blocks", JsonValue::integer(s.zeroBlocks));
    scales.set("nan_blocks", JsonValue::integer(s.nanBlocks));
    if (s.isE4M3)
      scales.set("underflow_blocks", JsonValue::integer(s.underflowBlocks));
    if (s.blocks > 0) {
      // E8M0: exponents; E4M3: binades floor(log2 scale).
      scales.set("min_exponent", JsonValue::integer(s.minBin));
      scales.set("median_exponent", JsonValue::integer(s.medianBin));
      scales.set("max_exponent", JsonValue::integer(s.maxBin));
      scales.set("counts", integerArray(s.counts));
      if (s.isE4M3) {
        scales.set("min", JsonValue::number(s.minScale));
        scales.set("median", JsonValue::number(s.medianScale));
        scales.set("max", JsonValue::number(s.maxScale));
      }
    }
    if (s.isE4M3)
      scales.set("tensor_scale", JsonValue::number(s.tensorScale));
    row.set("scales", std::move(scales));
  }
  fmt::print("{}\n", io::writeJson(row));
}

std::string describeSettings(const QuantizeOptions &options) {
  std::string text = options.policySource.empty()
                         ? options.format.name
                         : options.policySource + ": " + options.format.name;
  if (!options.format.isBF16) {
    const BlockFormat &format = options.format.block;
    std::string element(formatName(format.element));
    for (char &c : element)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    text += fmt::format(" ({}, block {}, ", element, format.scaling.blockSize);
    if (format.scaling.scaleFormat == ScaleFormat::E8M0)
      text += "E8M0 scales, rule " +
              std::string(scaleRuleName(format.scaling.rule)) + ")";
    else
      text += "E4M3 scales x fp32 tensor scale, rule " +
              std::string(scaleRuleName(format.scaling.rule)) + ")";
  }
  text += ", round " + std::string(roundingName(options.rounding));
  text += ", rotate " + options.rotationText;
  if (options.rotation.kind == RotationKind::RandomHadamard)
    text += fmt::format(" (seed {})", options.rotation.seed);
  text += fmt::format(", axis {}", options.axis);
  if (options.rounding == Rounding::Stochastic)
    text += fmt::format(", seed {}", options.seed);
  return text;
}

//===----------------------------------------------------------------------===//
// The command
//===----------------------------------------------------------------------===//

int fail(const std::string &message) {
  fmt::print(stderr, "{}error: {}\n", kPrefix, message);
  return 1;
}

int runQuantize(const QuantizeOptions &options) {
  Expected<io::SafetensorsFile> opened =
      io::SafetensorsFile::open(options.input);
  if (!opened)
    return fail(opened.error().message());
  const io::SafetensorsFile &file = *opened;

  size_t leftOut = 0;
  Expected<std::vector<TensorPlan>> planned = planAll(file, options, leftOut);
  if (!planned)
    return fail(planned.error().withContext(options.input).message());
  const std::vector<TensorPlan> &plans = *planned;
  if (leftOut > 0)
    fmt::print(stderr,
               "tetra quantize: note: {} is a Tetra checkpoint: its {} "
               "optimizer tensors (AdamW's moments) are left out; --tensors "
               "'optimizer.**' quantizes them\n",
               options.input, leftOut);

  Table table;
  table.scaleHeader =
      options.format.isBF16 ? "scales"
      : options.format.block.scaling.scaleFormat == ScaleFormat::E4M3
          ? "E4M3 scales: min..max med x tensor scale"
          : "E8M0 scale exponents: min..max med";
  for (const TensorPlan &plan : plans) {
    table.nameWidth = std::max(table.nameWidth, plan.info->name.size());
    table.shapeWidth =
        std::max(table.shapeWidth, compactShape(plan.info->shape).size());
  }
  if (!options.json) {
    fmt::print("{}: {}\n", options.input, describeSettings(options));
    printTableHeader(table);
  }

  io::SafetensorsWriter writer;
  for (const auto &entry : file.metadata())
    writer.setMetadata(entry.first, entry.second);
  writer.setMetadata("tetra.quantize", describeSettings(options));

  int64_t overflowed = 0;
  for (const TensorPlan &plan : plans) {
    const io::TensorInfo &info = *plan.info;
    Expected<std::vector<float>> values = file.readFloats(info);
    if (!values)
      return fail(values.error().message());
    TensorResult result;
    if (info.numElements() == 0) {
      result.hasScales = !options.format.isBF16;
      result.scales.isE4M3 =
          !options.format.isBF16 &&
          options.format.block.scaling.scaleFormat == ScaleFormat::E4M3;
      result.scaleShape = info.shape;
      if (!options.format.isBF16)
        result.scaleShape[plan.axis] /= options.format.block.scaling.blockSize;
    } else if (options.format.isBF16) {
      result = quantizeBF16(*values, plan, options);
    } else {
      result = quantizeBlocks(*values, plan, options);
    }
    measure(*values, result);
    if (options.json)
      printJsonRow(plan, result, options);
    else
      printTableRow(table, plan, result);
    std::fflush(stdout);

    if (options.output.empty())
      continue;
    // The dequantized values, in the input's basis and dtype.
    if (info.dtype != Dtype::F32)
      for (float value : result.dequantized) {
        float stored = info.dtype == Dtype::F16
                           ? io::halfToFloat(io::floatToHalf(value))
                           : io::bfloat16ToFloat(io::floatToBFloat16(value));
        if (std::isfinite(value) && !std::isfinite(stored))
          ++overflowed;
      }
    Status added = writer.addFloatTensor(info.name, info.dtype, info.shape,
                                         result.dequantized.data(),
                                         result.dequantized.size());
    if (added && options.codes) {
      if (options.format.isBF16) {
        added = writer.addTensor(info.name + ".codes", Dtype::BF16, info.shape,
                                 result.bf16Codes.data(),
                                 result.bf16Codes.size() * sizeof(uint16_t));
      } else {
        added = writer.addTensor(info.name + ".codes", Dtype::U8, info.shape,
                                 std::move(result.codes));
        if (added)
          added =
              writer.addTensor(info.name + ".scales", Dtype::U8,
                               result.scaleShape, std::move(result.scaleCodes));
        if (added && result.scales.isE4M3) {
          float tensorScale = result.scales.tensorScale;
          added = writer.addTensor(info.name + ".tensor_scale", Dtype::F32, {},
                                   &tensorScale, sizeof(tensorScale));
        }
      }
    }
    if (!added)
      return fail(added.error().withContext(options.output).message());
  }

  if (options.output.empty())
    return 0;
  if (overflowed)
    fmt::print(stderr,
               "{}warning: {} dequantized values overflow the input's 16-bit "
               "dtype and are stored as infinities in {}\n",
               kPrefix, overflowed, options.output);
  if (Status written = writer.write(options.output); !written)
    return fail(written.error().message());
  if (!options.json)
    fmt::print("wrote {}: {} tensors\n", options.output, writer.numTensors());
  return 0;
}

} // namespace

namespace tetra::driver {

void printQuantizeHelp() {
  std::printf(R"(USAGE: tetra quantize --format FORMAT [options] IN.safetensors
                      [-o OUT.safetensors [--codes]]
       tetra quantize --policy RUN|POLICY [--model MODEL] --linear NAME
                      --role ROLE[.lhs|.rhs] [options] IN.safetensors

Quantizes the floating-point tensors (F32, F16, BF16) of a safetensors file
exactly as a Tetra policy would, and prints one row per tensor saying how much
was lost.

FORMATS (--format)
  mxfp4        E2M1 elements, blocks of 32, E8M0 power-of-two scales (OCP MX)
  mxfp8_e4m3   E4M3 elements, blocks of 32, E8M0 scales
  mxfp8_e5m2   E5M2 elements, blocks of 32, E8M0 scales
  nvfp4        E2M1 elements, blocks of 16, E4M3 scales times an fp32
               per-tensor scale
  bf16         a plain cast to bfloat16 (no blocks, no scales)

OPTIONS
  --format F          element format (required), see above
  --scale-rule R      how the block scale is chosen from the block's largest
                      magnitude: MX formats' E8M0 scales floor (default,
                      OCP MX), ceil, even, rceil; nvfp4's E4M3 scales
                      nearest (default) or torchao (torchao's rule)
  --round M           nearest_even (default), nearest_away, stochastic
  --seed N            seed of stochastic rounding, and of random Hadamard
                      signs when --rotate gives none (default 0). Draws are
                      keyed by (seed, step 0, FNV-1a hash of the tensor name)
  --rotate R          none (default), hadamard<B>, random_hadamard<B> or
                      random_hadamard<B, fixed|per_step, SEED> as in
                      policies (the colon forms hadamard:B and
                      random_hadamard:B[:SEED] still work), B in 16, 32,
                      64, 128: rotate blocks of B elements along the
                      quantization axis before quantizing, and rotate
                      back after dequantizing
  --policy FILE       instead of the format options, what a policy does to
                      one operand: FILE a run file (its model and policy)
                      or a policy file with --model MODEL; with
  --linear NAME       the linear (layers.3.attn.wq, lm_head) and
  --role R[.OPERAND]  its GEMM role (fprop, dgrad, wgrad) and operand
                      (lhs, rhs; needed where the two differ): the format,
                      scale rule, rounding and rotation the policy gives
                      it, blocks along the GEMM's K (the last axis, but the
                      first for dgrad.rhs and wgrad: --axis overrides)
  --axis N            the axis the blocks run along (default -1, the last;
                      a negative axis counts from the end)
  --block N           elements per block (default 32 for MX; nvfp4 allows
                      only 16)
  --tensors A,B,...   quantize only these tensors: names, or globs over
                      the dotted names as in policies (layers.*.mlp.*,
                      optimizer.**, attn.{wq,wk}); default: all but a
                      Tetra checkpoint's optimizer state
  -o, --output OUT    write the dequantized tensors to OUT
  --codes             with -o, also write the codes and scales
  --json              print one JSON object per tensor instead of the table
  -h, --help          print this help

WHICH TENSORS
  Without --tensors every tensor of the file is quantized (of a Tetra
  checkpoint, its parameters: AdamW's moments are left out, with a note on
  stderr), and one that cannot be (not F32/F16/BF16, a scalar, an axis out
  of range, an extent along the axis not divisible by the block or rotation
  size) is an error: nothing else is skipped. Name the tensors to quantize
  with --tensors to leave the others out.

COLUMNS
  SQNR dB    10 log10(sum x^2 / sum (x - q)^2), x the input, q the dequantized
             result in the input's basis (fp32, before -o rounds it to the
             input's dtype)
  rel err    ||x - q|| / ||x||
  max err    max |x - q|
  clipped    elements whose magnitude exceeded the largest value their block
             can represent (maxFinite x scale), i.e. saturated; measured in
             the rotated basis, where the quantizer saw them (bf16: finite
             values that overflowed to infinity)
  scales     MX: the E8M0 scale exponents (min..max, median) and a histogram,
             one bar per exponent from min to max ('.' = none); all-zero
             blocks are left out. nvfp4: the E4M3 scales (min..max, median),
             the fp32 tensor scale, and a histogram over their binades.
             A block holding NaN or Inf gets a NaN scale, and an nvfp4 block
             whose E4M3 scale rounds to 0 flushes to zero; both are counted
             apart.
  Elements where the input or the result is NaN or Inf are left out of the
  error columns; "-" means nothing was left to measure.

  --json prints the same per tensor, unrounded: sqnr_db, rel_error,
  max_abs_error, clipped (a count), clipped_fraction, and "scales" with the
  exponent range, median and histogram counts. sqnr_db is null when the
  result is exact (an infinite SQNR) or nothing was measured.

OUTPUT (-o)
  OUT holds, for every quantized tensor, the dequantized values under the same
  name, shape and dtype as in IN, in the original (unrotated) basis, so that
  it compares element for element with IN. Tensors not selected by --tensors
  are not written. IN's __metadata__ is copied and "tetra.quantize" records
  the settings. The file is written atomically: on any error nothing is
  written and an existing OUT is left as it was.

  --codes adds, for each tensor NAME:
    NAME.codes         U8, NAME's shape: one element code per byte (E2M1 in
                       the low 4 bits, E4M3/E5M2 one byte); for bf16, the
                       BF16 values themselves
    NAME.scales        U8, NAME's shape with the axis divided by the block:
                       E8M0 codes (MX) or E4M3 codes (nvfp4)
    NAME.tensor_scale  F32 scalar, nvfp4 only
  Codes and scales are in the ROTATED basis when --rotate is given: they are
  what the GEMM consumes, and dequantizing them gives the rotated tensor.
)");
}

int quantizeMain(const std::vector<std::string_view> &args) {
  bool wantsHelp = false;
  std::string input;
  Expected<QuantizeOptions> options = parseOptions(args, wantsHelp, input);
  if (wantsHelp) {
    printQuantizeHelp();
    return 0;
  }
  if (!options) // Name the file the command was about, when there is one.
    return fail(input.empty() ? options.error().message()
                              : options.error().withContext(input).message());
  return runQuantize(*options);
}

} // namespace tetra::driver
