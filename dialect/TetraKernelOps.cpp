//===- TetraKernelOps.cpp - Scaled matmuls and kernel regions -------------===//
//
// Verifiers for tetra.scaled_matmul (codes, scales and quantizations must
// agree with each other and with the shapes) and tetra.kernel, and the
// kernel's assembly format:
//
//   tetra.kernel "name" (%arg = %value, ...) : (types) -> (types) { ... }
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraOps.h"

#include "dialect/ShapeChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace tetra;
using namespace tetra::detail;

//===----------------------------------------------------------------------===//
// ScaledMatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// One operand of a scaled matmul, as the verifier sees it.
struct GemmOperand {
  StringRef side; // "lhs" or "rhs"
  Value values;   // codes, or plain f32 values
  Value scales;
  Value tensorScale;
  OperandQuantAttr quant;
  unsigned reductionDim;
};
} // namespace

static LogicalResult verifyGemmOperand(Operation *op,
                                       const GemmOperand &operand) {
  OperandQuantAttr quant = operand.quant;
  StringRef side = operand.side;
  if (!quant.getRotation().isNone())
    return op->emitOpError()
           << side << " quantization must not rotate: rotate with "
           << "tetra.rotate before quantizing";
  auto valuesType = cast<RankedTensorType>(operand.values.getType());
  ArrayRef<int64_t> shape = valuesType.getShape();

  BlockScaleAttr blockScale = quant.getBlockScale();
  if (!blockScale) {
    if (!valuesType.getElementType().isF32())
      return op->emitOpError() << side << " is not block-quantized (" << quant
                               << ") and must hold f32 values, got "
                               << valuesType.getElementType();
    if (operand.scales || operand.tensorScale)
      return op->emitOpError() << side << " is not block-quantized (" << quant
                               << ") and takes no scales";
    return success();
  }

  if (valuesType.getElementType() != quant.getCodeType())
    return op->emitOpError()
           << side << " codes must be " << quant.getCodeType() << " for "
           << quant << ", got " << valuesType.getElementType();
  if (!operand.scales)
    return op->emitOpError() << side << " is block-quantized (" << quant
                             << ") and needs its scales";
  int64_t blockSize = blockScale.getBlockSize();
  int64_t extent = shape[operand.reductionDim];
  if (!ShapedType::isDynamic(extent) && extent % blockSize != 0)
    return op->emitOpError()
           << "reduction size " << extent << " of " << side
           << " is not divisible by its block size " << blockSize;

  auto scalesType = cast<RankedTensorType>(operand.scales.getType());
  SmallVector<int64_t> expected(shape);
  if (!ShapedType::isDynamic(extent))
    expected[operand.reductionDim] = extent / blockSize;
  if (scalesType.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << side << " scales must be " << formatShape(expected)
           << " (one per block of " << blockSize << " along dimension "
           << operand.reductionDim << "), got "
           << formatShape(scalesType.getShape());
  if (scalesType.getElementType() != quant.getScaleType())
    return op->emitOpError()
           << side << " scales must be " << quant.getScaleType() << ", got "
           << scalesType.getElementType();

  bool needsTensorScale = blockScale.getScaleFormat() == ScaleFormat::E4M3;
  if (needsTensorScale && !operand.tensorScale)
    return op->emitOpError() << side
                             << " is NVFP4 (e4m3 block scales) and needs its "
                                "per-tensor fp32 scale";
  if (!needsTensorScale && operand.tensorScale)
    return op->emitOpError()
           << side << " has a per-tensor scale, which only NVFP4 has";
  return success();
}

LogicalResult ScaledMatmulOp::verify() {
  const GemmOperand lhs = {
      "lhs",          getLhs(),
      getLhsScales(), getLhsTensorScale(),
      getLhsQuant(),  getLhsReductionDim(),
  };
  const GemmOperand rhs = {
      "rhs",          getRhs(),
      getRhsScales(), getRhsTensorScale(),
      getRhsQuant(),  getRhsReductionDim(),
  };
  if (failed(verifyGemmOperand(*this, lhs)) ||
      failed(verifyGemmOperand(*this, rhs)))
    return failure();

  ArrayRef<int64_t> lhsShape = getLhs().getType().getShape();
  ArrayRef<int64_t> rhsShape = getRhs().getType().getShape();
  int64_t m = lhsShape[1 - getLhsReductionDim()];
  int64_t lhsK = lhsShape[getLhsReductionDim()];
  int64_t rhsK = rhsShape[getRhsReductionDim()];
  int64_t n = rhsShape[1 - getRhsReductionDim()];
  if (!sizesMatch(lhsK, rhsK))
    return emitOpError() << "shapes do not multiply: op(lhs) is "
                         << formatShape({m, lhsK}) << " and op(rhs) is "
                         << formatShape({rhsK, n}) << " (transposes applied)";
  ArrayRef<int64_t> result = getResult().getType().getShape();
  if (!sizesMatch(result[0], m) || !sizesMatch(result[1], n))
    return emitOpError() << "result is " << formatShape(result)
                         << " but op(lhs) · op(rhs) is " << formatShape({m, n});
  return success();
}

int64_t ScaledMatmulOp::getAccumulationChunk() {
  int64_t chunk = ShapedType::kDynamic;
  for (OperandQuantAttr quant : {getLhsQuant(), getRhsQuant()}) {
    if (!quant.getBlockScale())
      continue;
    int64_t blockSize = quant.getBlockScale().getBlockSize();
    chunk =
        ShapedType::isDynamic(chunk) ? blockSize : std::min(chunk, blockSize);
  }
  return chunk;
}

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

ParseResult KernelOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseAttribute(name, parser.getBuilder().getNoneType(),
                            getKernelNameAttrName(result.name),
                            result.attributes))
    return failure();

  SmallVector<OpAsmParser::Argument> arguments;
  SmallVector<OpAsmParser::UnresolvedOperand> inputs;
  SMLoc inputsLoc = parser.getCurrentLocation();
  if (parser.parseAssignmentList(arguments, inputs))
    return failure();

  FunctionType type;
  SMLoc typeLoc = parser.getCurrentLocation();
  if (parser.parseColonType(type))
    return failure();
  if (type.getNumInputs() != inputs.size())
    return parser.emitError(typeLoc)
           << "kernel has " << inputs.size() << " inputs but its type lists "
           << type.getNumInputs();
  if (parser.resolveOperands(inputs, type.getInputs(), inputsLoc,
                             result.operands))
    return failure();
  for (auto [argument, argumentType] : llvm::zip(arguments, type.getInputs()))
    argument.type = argumentType;
  result.addTypes(type.getResults());

  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  return parser.parseRegion(*body, arguments);
}

void KernelOp::print(OpAsmPrinter &printer) {
  printer << " ";
  printer.printAttributeWithoutType(getKernelNameAttr());
  printer << " (";
  llvm::interleaveComma(llvm::zip(getBodyBlock().getArguments(), getInputs()),
                        printer, [&](auto pair) {
                          printer << std::get<0>(pair) << " = "
                                  << std::get<1>(pair);
                        });
  printer << ") : ";
  printer.printFunctionalType(getInputs().getTypes(), getResultTypes());
  printer.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                           {getKernelNameAttrName()});
  printer << " ";
  printer.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

LogicalResult KernelOp::verifyRegions() {
  if (getKernelName().empty())
    return emitOpError("needs a non-empty kernel name");
  Block &body = getBodyBlock();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments()
                         << " arguments but the kernel has "
                         << getInputs().size() << " inputs";
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(body.getArgumentTypes(), getInputs())))
    if (std::get<0>(pair) != std::get<1>(pair).getType())
      return emitOpError() << "body argument " << index << " is "
                           << std::get<0>(pair) << " but input " << index
                           << " is " << std::get<1>(pair).getType();
  auto yield = body.empty() ? YieldOp() : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError("body must end with tetra.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return yield.emitOpError()
           << "yields " << yield.getValues().size()
           << " values whose types differ from the kernel's results";
  return success();
}
