//===- TetraAttributes.cpp - Formats, scales, rounding, policies ----------===//
//
// Hand-written assembly formats and verifiers for the tetra attributes. The
// grammar (docs/dialect/TetraDialect.md has it with examples):
//
//   rotation      ::= `none` | `hadamard` `<` int `>`
//                   | `random_hadamard` `<` int `,` (`fixed`|`per_step`) `,`
//                   int `>`
//   operand-quant ::= (preset | element-format [`block` int `scale`
//   scale-format [rule]])
//                     (`rule` rule | `round` rounding | `rotate` rotation)*
//   gemm-policy   ::= operand-quant [`acc` type]
//                   | `{` `lhs` `=` operand-quant `,` `rhs` `=` operand-quant
//                         [`,` `acc` `=` type] `}`
//   policy        ::= role `=` gemm-policy (`,` role `=` gemm-policy)*
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraOps.h"
#include "runtime/numerics/BlockQuantize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tetra;

#include "dialect/TetraEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/TetraAttributes.cpp.inc"

void TetraDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/TetraAttributes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Parsing helpers
//===----------------------------------------------------------------------===//

/// Parses a keyword naming a case of enum `EnumT`; on a wrong keyword, lists
/// the valid ones.
template <typename EnumT>
static FailureOr<EnumT> parseEnumKeyword(AsmParser &parser, StringRef what) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (failed(parser.parseKeyword(&keyword)))
    return failure();
  if (std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword))
    return *value;
  InFlightDiagnostic diag = parser.emitError(loc)
                            << "unknown " << what << " '" << keyword
                            << "'; expected one of: ";
  for (uint32_t i = 0;; ++i) {
    StringRef name = stringifyEnum(static_cast<EnumT>(i));
    if (name.empty())
      break;
    diag << (i ? ", " : "") << name;
  }
  return failure();
}

static FailureOr<int64_t> parsePositiveInteger(AsmParser &parser,
                                               StringRef what) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t value;
  if (failed(parser.parseInteger(value)))
    return failure();
  if (value <= 0)
    return parser.emitError(loc) << what << " must be positive, got " << value;
  return value;
}

//===----------------------------------------------------------------------===//
// BlockScaleAttr
//===----------------------------------------------------------------------===//

LogicalResult
BlockScaleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t blockSize, ScaleFormat scaleFormat,
                       ScaleRule rule) {
  if (blockSize < 2 || blockSize > 1024 || !llvm::isPowerOf2_64(blockSize))
    return emitError() << "block size must be a power of two from 2 to 1024, "
                          "got "
                       << blockSize;
  if (scaleFormat == ScaleFormat::E4M3 && blockSize != 16)
    return emitError() << "an e4m3 block scale (NVFP4) needs a block of 16, "
                          "got "
                       << blockSize;
  if (scaleFormatOf(rule) != scaleFormat)
    return emitError() << "scale rule '" << stringifyScaleRule(rule)
                       << "' is for " << stringifyScaleFormat(scaleFormatOf(rule))
                       << " block scales, not " << stringifyScaleFormat(scaleFormat);
  return success();
}

/// `int `,` scale-format [`,` rule]` — the body shared by the standalone
/// attribute and nothing else (operand-quant spells it with keywords).
Attribute BlockScaleAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  FailureOr<int64_t> blockSize;
  FailureOr<ScaleFormat> scaleFormat;
  if (parser.parseLess() ||
      failed(blockSize = parsePositiveInteger(parser, "block size")) ||
      parser.parseComma() ||
      failed(scaleFormat =
                 parseEnumKeyword<ScaleFormat>(parser, "scale format")))
    return {};
  ScaleRule rule = defaultScaleRule(*scaleFormat);
  if (succeeded(parser.parseOptionalComma())) {
    FailureOr<ScaleRule> parsed =
        parseEnumKeyword<ScaleRule>(parser, "scale rule");
    if (failed(parsed))
      return {};
    rule = *parsed;
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<BlockScaleAttr>(loc, parser.getContext(), *blockSize,
                                           *scaleFormat, rule);
}

void BlockScaleAttr::print(AsmPrinter &printer) const {
  printer << "<" << getBlockSize() << ", "
          << stringifyScaleFormat(getScaleFormat());
  if (getScaleFormat() == ScaleFormat::E8M0 ||
      getRule() != defaultScaleRule(getScaleFormat()))
    printer << ", " << stringifyScaleRule(getRule());
  printer << ">";
}

//===----------------------------------------------------------------------===//
// RotationAttr
//===----------------------------------------------------------------------===//

RotationAttr RotationAttr::getNone(MLIRContext *context) {
  return get(context, RotationKind::None, 0, SignSchedule::Fixed, 0);
}

LogicalResult RotationAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   RotationKind kind, int64_t blockSize,
                                   SignSchedule schedule, uint64_t seed) {
  if (kind == RotationKind::None) {
    if (blockSize != 0 || schedule != SignSchedule::Fixed || seed != 0)
      return emitError() << "rotation 'none' takes no parameters";
    return success();
  }
  if (blockSize != 16 && blockSize != 32 && blockSize != 64 && blockSize != 128)
    return emitError() << "Hadamard block must be 16, 32, 64 or 128, got "
                       << blockSize;
  if (kind == RotationKind::Hadamard &&
      (schedule != SignSchedule::Fixed || seed != 0))
    return emitError() << "a deterministic Hadamard rotation takes no signs";
  return success();
}

/// Parses the rotation grammar without the attribute's own brackets.
static RotationAttr parseRotationBody(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  FailureOr<RotationKind> kind =
      parseEnumKeyword<RotationKind>(parser, "rotation");
  if (failed(kind))
    return {};
  MLIRContext *context = parser.getContext();
  if (*kind == RotationKind::None)
    return RotationAttr::getNone(context);
  FailureOr<int64_t> blockSize;
  if (parser.parseLess() ||
      failed(blockSize = parsePositiveInteger(parser, "Hadamard block")))
    return {};
  SignSchedule schedule = SignSchedule::Fixed;
  uint64_t seed = 0;
  if (*kind == RotationKind::RandomHadamard) {
    FailureOr<SignSchedule> parsedSchedule;
    if (parser.parseComma() ||
        failed(parsedSchedule =
                   parseEnumKeyword<SignSchedule>(parser, "sign schedule")) ||
        parser.parseComma() || parser.parseInteger(seed))
      return {};
    schedule = *parsedSchedule;
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<RotationAttr>(loc, context, *kind, *blockSize,
                                         schedule, seed);
}

static void printRotationBody(AsmPrinter &printer, RotationAttr rotation) {
  printer << stringifyRotationKind(rotation.getKind());
  switch (rotation.getKind()) {
  case RotationKind::None:
    return;
  case RotationKind::Hadamard:
    printer << "<" << rotation.getBlockSize() << ">";
    return;
  case RotationKind::RandomHadamard:
    printer << "<" << rotation.getBlockSize() << ", "
            << stringifySignSchedule(rotation.getSchedule()) << ", "
            << rotation.getSeed() << ">";
    return;
  }
}

Attribute RotationAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  RotationAttr rotation = parseRotationBody(parser);
  if (!rotation || parser.parseGreater())
    return {};
  return rotation;
}

void RotationAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printRotationBody(printer, *this);
  printer << ">";
}

//===----------------------------------------------------------------------===//
// OperandQuantAttr
//===----------------------------------------------------------------------===//

namespace {
struct QuantPreset {
  StringRef name;
  ElementFormat format;
  int64_t blockSize; // 0: no block scale
  ScaleFormat scaleFormat;
};

/// The numerics library's presets (runtime/numerics/BlockQuantize.h: the
/// one list) in the dialect's enums. The first preset of a format/block/
/// scale wins when printing, so `mxfp8` (an alias) prints as `mxfp8_e4m3`.
const std::vector<QuantPreset> &quantPresets() {
  static const std::vector<QuantPreset> presets = [] {
    std::vector<QuantPreset> all;
    for (const numerics::FormatPreset &preset : numerics::formatPresets()) {
      std::string_view element = numerics::formatName(preset.element);
      all.push_back(
          {StringRef(preset.name.data(), preset.name.size()),
           *symbolizeElementFormat(StringRef(element.data(), element.size())),
           preset.blockSize,
           preset.scaleFormat == numerics::ScaleFormat::E4M3
               ? ScaleFormat::E4M3
               : ScaleFormat::E8M0});
    }
    return all;
  }();
  return presets;
}
} // namespace

static OperandQuantAttr makeQuant(MLIRContext *context,
                                  const QuantPreset &preset) {
  BlockScaleAttr blockScale;
  if (preset.blockSize)
    blockScale =
        BlockScaleAttr::get(context, preset.blockSize, preset.scaleFormat,
                            defaultScaleRule(preset.scaleFormat));
  return OperandQuantAttr::get(context, preset.format, blockScale,
                               Rounding::NearestEven,
                               RotationAttr::getNone(context));
}

FailureOr<OperandQuantAttr> OperandQuantAttr::getPreset(MLIRContext *context,
                                                        StringRef name) {
  for (const QuantPreset &preset : quantPresets())
    if (preset.name == name)
      return makeQuant(context, preset);
  return failure();
}

Type OperandQuantAttr::getCodeType() const {
  MLIRContext *context = getContext();
  switch (getFormat()) {
  case ElementFormat::E2M1:
    return Float4E2M1FNType::get(context);
  case ElementFormat::E4M3:
    return Float8E4M3FNType::get(context);
  case ElementFormat::E5M2:
    return Float8E5M2Type::get(context);
  case ElementFormat::BF16:
    return BFloat16Type::get(context);
  case ElementFormat::F32:
    return Float32Type::get(context);
  }
  llvm_unreachable("unknown element format");
}

Type OperandQuantAttr::getScaleType() const {
  if (!getBlockScale())
    return {};
  if (getBlockScale().getScaleFormat() == ScaleFormat::E4M3)
    return Float8E4M3FNType::get(getContext());
  return Float8E8M0FNUType::get(getContext());
}

int64_t OperandQuantAttr::getBlockSize() const {
  return getBlockScale() ? getBlockScale().getBlockSize() : 1;
}

LogicalResult
OperandQuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         ElementFormat format, BlockScaleAttr blockScale,
                         Rounding rounding, RotationAttr rotation) {
  bool isNarrow = format == ElementFormat::E2M1 ||
                  format == ElementFormat::E4M3 ||
                  format == ElementFormat::E5M2;
  if (isNarrow && !blockScale)
    return emitError() << "element format " << stringifyElementFormat(format)
                       << " needs a block scale";
  if (!isNarrow && blockScale)
    return emitError() << "element format " << stringifyElementFormat(format)
                       << " takes no block scale";
  if (blockScale && blockScale.getScaleFormat() == ScaleFormat::E4M3 &&
      format != ElementFormat::E2M1)
    return emitError() << "an e4m3 block scale (NVFP4) needs e2m1 elements, "
                          "got "
                       << stringifyElementFormat(format);
  if (format == ElementFormat::F32 && rounding != Rounding::NearestEven)
    return emitError() << "f32 operands are not rounded; rounding '"
                       << stringifyRounding(rounding) << "' does not apply";
  if (!rotation)
    return emitError() << "missing rotation";
  return success();
}

/// Parses the operand-quant grammar (no brackets).
static OperandQuantAttr parseOperandQuantBody(AsmParser &parser) {
  MLIRContext *context = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  StringRef base;
  if (failed(parser.parseKeyword(&base)))
    return {};

  ElementFormat format;
  BlockScaleAttr blockScale;
  if (FailureOr<OperandQuantAttr> preset =
          OperandQuantAttr::getPreset(context, base);
      succeeded(preset)) {
    format = preset->getFormat();
    blockScale = preset->getBlockScale();
    SMLoc blockLoc = parser.getCurrentLocation();
    if (succeeded(parser.parseOptionalKeyword("block"))) {
      parser.emitError(blockLoc)
          << "preset '" << base << "' fixes its block scaling; write an "
          << "element format (e2m1, e4m3, e5m2) to choose one";
      return {};
    }
  } else if (std::optional<ElementFormat> parsed =
                 symbolizeElementFormat(base)) {
    format = *parsed;
    if (succeeded(parser.parseOptionalKeyword("block"))) {
      SMLoc blockLoc = parser.getCurrentLocation();
      FailureOr<int64_t> blockSize;
      FailureOr<ScaleFormat> scaleFormat;
      if (failed(blockSize = parsePositiveInteger(parser, "block size")) ||
          parser.parseKeyword("scale") ||
          failed(scaleFormat =
                     parseEnumKeyword<ScaleFormat>(parser, "scale format")))
        return {};
      ScaleRule rule = defaultScaleRule(*scaleFormat);
      StringRef ruleName;
      if (succeeded(parser.parseOptionalKeyword(
              &ruleName, {"floor", "ceil", "even", "rceil", "nearest",
                          "torchao"})))
        rule = *symbolizeScaleRule(ruleName);
      blockScale = parser.getChecked<BlockScaleAttr>(
          blockLoc, context, *blockSize, *scaleFormat, rule);
      if (!blockScale)
        return {};
    }
  } else {
    parser.emitError(loc)
        << "unknown quantization '" << base << "'; expected a preset ("
        << llvm::join(llvm::map_range(quantPresets(),
                                      [](const QuantPreset &preset) {
                                        return preset.name;
                                      }),
                      ", ")
        << ") or an element format (e2m1, e4m3, e5m2, bf16, f32)";
    return {};
  }

  Rounding rounding = Rounding::NearestEven;
  RotationAttr rotation = RotationAttr::getNone(context);
  while (true) {
    SMLoc modifierLoc = parser.getCurrentLocation();
    if (succeeded(parser.parseOptionalKeyword("rule"))) {
      FailureOr<ScaleRule> rule =
          parseEnumKeyword<ScaleRule>(parser, "scale rule");
      if (failed(rule))
        return {};
      if (!blockScale) {
        parser.emitError(modifierLoc)
            << "a scale rule applies only to block scales";
        return {};
      }
      blockScale = parser.getChecked<BlockScaleAttr>(
          modifierLoc, context, blockScale.getBlockSize(),
          blockScale.getScaleFormat(), *rule);
      if (!blockScale)
        return {};
    } else if (succeeded(parser.parseOptionalKeyword("round"))) {
      FailureOr<Rounding> parsed =
          parseEnumKeyword<Rounding>(parser, "rounding");
      if (failed(parsed))
        return {};
      rounding = *parsed;
    } else if (succeeded(parser.parseOptionalKeyword("rotate"))) {
      rotation = parseRotationBody(parser);
      if (!rotation)
        return {};
    } else {
      break;
    }
  }
  return parser.getChecked<OperandQuantAttr>(loc, context, format, blockScale,
                                             rounding, rotation);
}

static void printOperandQuantBody(AsmPrinter &printer, OperandQuantAttr quant) {
  BlockScaleAttr blockScale = quant.getBlockScale();
  const std::vector<QuantPreset> &presets = quantPresets();
  auto preset =
      llvm::find_if(presets, [&](const QuantPreset &candidate) {
        if (candidate.format != quant.getFormat())
          return false;
        if (!blockScale)
          return candidate.blockSize == 0;
        return candidate.blockSize == blockScale.getBlockSize() &&
               candidate.scaleFormat == blockScale.getScaleFormat();
      });
  if (preset != presets.end()) {
    printer << preset->name;
    if (blockScale &&
        blockScale.getRule() != defaultScaleRule(blockScale.getScaleFormat()))
      printer << " rule " << stringifyScaleRule(blockScale.getRule());
  } else {
    printer << stringifyElementFormat(quant.getFormat());
    if (blockScale) {
      printer << " block " << blockScale.getBlockSize() << " scale "
              << stringifyScaleFormat(blockScale.getScaleFormat());
      if (blockScale.getScaleFormat() == ScaleFormat::E8M0 ||
          blockScale.getRule() !=
              defaultScaleRule(blockScale.getScaleFormat()))
        printer << " " << stringifyScaleRule(blockScale.getRule());
    }
  }
  if (quant.getRounding() != Rounding::NearestEven)
    printer << " round " << stringifyRounding(quant.getRounding());
  if (!quant.getRotation().isNone()) {
    printer << " rotate ";
    printRotationBody(printer, quant.getRotation());
  }
}

Attribute OperandQuantAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  OperandQuantAttr quant = parseOperandQuantBody(parser);
  if (!quant || parser.parseGreater())
    return {};
  return quant;
}

void OperandQuantAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printOperandQuantBody(printer, *this);
  printer << ">";
}

//===----------------------------------------------------------------------===//
// GemmPolicyAttr
//===----------------------------------------------------------------------===//

bool GemmPolicyAttr::needsRandomSource() const {
  auto needs = [](OperandQuantAttr quant) {
    return quant.isStochastic() || quant.getRotation().needsStep();
  };
  return needs(getLhs()) || needs(getRhs());
}

LogicalResult
GemmPolicyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       OperandQuantAttr lhs, OperandQuantAttr rhs,
                       Type accumulateType) {
  if (!lhs || !rhs)
    return emitError() << "a GEMM policy needs both operands";
  if (lhs.getRotation() != rhs.getRotation()) {
    std::string lhsText, rhsText;
    llvm::raw_string_ostream(lhsText) << lhs.getRotation();
    llvm::raw_string_ostream(rhsText) << rhs.getRotation();
    return emitError() << "lhs and rhs must be rotated alike, got " << lhsText
                       << " and " << rhsText
                       << ": rotating one operand changes the product";
  }
  if (!isa_and_nonnull<Float32Type, Float16Type, BFloat16Type>(accumulateType))
    return emitError() << "accumulator must be f32, f16 or bf16, got "
                       << accumulateType;
  return success();
}

/// Parses the gemm-policy grammar (no brackets).
static GemmPolicyAttr parseGemmPolicyBody(AsmParser &parser) {
  MLIRContext *context = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  Type accumulateType = Float32Type::get(context);
  OperandQuantAttr lhs, rhs;
  if (succeeded(parser.parseOptionalLBrace())) {
    if (parser.parseKeyword("lhs") || parser.parseEqual() ||
        !(lhs = parseOperandQuantBody(parser)) || parser.parseComma() ||
        parser.parseKeyword("rhs") || parser.parseEqual() ||
        !(rhs = parseOperandQuantBody(parser)))
      return {};
    if (succeeded(parser.parseOptionalComma()) &&
        (parser.parseKeyword("acc") || parser.parseEqual() ||
         parser.parseType(accumulateType)))
      return {};
    if (parser.parseRBrace())
      return {};
  } else {
    if (!(lhs = parseOperandQuantBody(parser)))
      return {};
    rhs = lhs;
    if (succeeded(parser.parseOptionalKeyword("acc")) &&
        parser.parseType(accumulateType))
      return {};
  }
  return parser.getChecked<GemmPolicyAttr>(loc, context, lhs, rhs,
                                           accumulateType);
}

static void printGemmPolicyBody(AsmPrinter &printer, GemmPolicyAttr policy) {
  bool defaultAccumulator = isa<Float32Type>(policy.getAccumulateType());
  if (policy.getLhs() == policy.getRhs()) {
    printOperandQuantBody(printer, policy.getLhs());
    if (!defaultAccumulator)
      printer << " acc " << policy.getAccumulateType();
    return;
  }
  printer << "{lhs = ";
  printOperandQuantBody(printer, policy.getLhs());
  printer << ", rhs = ";
  printOperandQuantBody(printer, policy.getRhs());
  if (!defaultAccumulator)
    printer << ", acc = " << policy.getAccumulateType();
  printer << "}";
}

Attribute GemmPolicyAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  GemmPolicyAttr policy = parseGemmPolicyBody(parser);
  if (!policy || parser.parseGreater())
    return {};
  return policy;
}

void GemmPolicyAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printGemmPolicyBody(printer, *this);
  printer << ">";
}

//===----------------------------------------------------------------------===//
// PolicyAttr
//===----------------------------------------------------------------------===//

GemmPolicyAttr PolicyAttr::getForRole(Role role) const {
  switch (role) {
  case Role::Fprop:
    return getFprop();
  case Role::Dgrad:
    return getDgrad();
  case Role::Wgrad:
    return getWgrad();
  }
  llvm_unreachable("unknown role");
}

Attribute PolicyAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  GemmPolicyAttr roles[3];
  if (parser.parseLess())
    return {};
  do {
    SMLoc roleLoc = parser.getCurrentLocation();
    FailureOr<Role> role = parseEnumKeyword<Role>(parser, "GEMM role");
    if (failed(role))
      return {};
    GemmPolicyAttr &slot = roles[static_cast<unsigned>(*role)];
    if (slot) {
      parser.emitError(roleLoc)
          << "role '" << stringifyRole(*role) << "' is given twice";
      return {};
    }
    if (parser.parseEqual() || !(slot = parseGemmPolicyBody(parser)))
      return {};
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return {};
  for (unsigned i = 0; i < 3; ++i) {
    if (!roles[i]) {
      parser.emitError(loc)
          << "policy has no '" << stringifyRole(static_cast<Role>(i))
          << "' role; every role must be given";
      return {};
    }
  }
  return PolicyAttr::get(parser.getContext(), roles[0], roles[1], roles[2]);
}

void PolicyAttr::print(AsmPrinter &printer) const {
  printer << "<fprop = ";
  printGemmPolicyBody(printer, getFprop());
  printer << ", dgrad = ";
  printGemmPolicyBody(printer, getDgrad());
  printer << ", wgrad = ";
  printGemmPolicyBody(printer, getWgrad());
  printer << ">";
}

llvm::StringRef tetra::gemmOperandName(Role role, bool lhs) {
  if (lhs)
    return role == Role::Fprop ? "x" : "dy";
  return role == Role::Wgrad ? "x" : "w";
}

// The dialect's rules and scale formats are numerics', case for case.
static_assert(static_cast<int>(ScaleRule::Torchao) ==
                  static_cast<int>(numerics::ScaleRule::Torchao) &&
              static_cast<int>(ScaleFormat::E4M3) ==
                  static_cast<int>(numerics::ScaleFormat::E4M3));

ScaleFormat tetra::scaleFormatOf(ScaleRule rule) {
  return static_cast<ScaleFormat>(numerics::scaleFormatOf(
      static_cast<numerics::ScaleRule>(rule)));
}

ScaleRule tetra::defaultScaleRule(ScaleFormat format) {
  return static_cast<ScaleRule>(numerics::defaultScaleRule(
      static_cast<numerics::ScaleFormat>(format)));
}
