//===- TetraOps.cpp - tetra dialect operations ----------------------------===//
//
// Verifiers: every way a matmul, quantize, dequantize or rotate can disagree
// with its policy or its shapes is reported here, before any pass runs.
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraOps.h"

#include "dialect/ShapeChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace tetra;
using namespace tetra::detail;

#define GET_OP_CLASSES
#include "dialect/TetraOps.cpp.inc"

/// The random source (`random(%seed, %step)`) comes whole or not at all, and
/// must be there when the quantization draws random bits.
static LogicalResult verifyRandomSource(Operation *op, Value seed, Value step,
                                        bool needed, StringRef why) {
  if (static_cast<bool>(seed) != static_cast<bool>(step))
    return op->emitOpError("needs both a seed and a step, or neither");
  if (needed && !seed)
    return op->emitOpError() << why
                             << " and needs a random source: add "
                                "random(%seed, %step)";
  return success();
}

/// Checks that `rotation`'s block fits `extent`, the size it rotates along.
static LogicalResult verifyRotationExtent(Operation *op, int64_t extent,
                                          RotationAttr rotation,
                                          StringRef what) {
  if (rotation.isNone() || ShapedType::isDynamic(extent))
    return success();
  if (rotation.getBlockSize() > extent)
    return op->emitOpError()
           << "rotation block " << rotation.getBlockSize()
           << " is larger than the " << what << " size " << extent;
  if (extent % rotation.getBlockSize() != 0)
    return op->emitOpError()
           << "rotation block " << rotation.getBlockSize()
           << " does not divide the " << what << " size " << extent;
  return success();
}

/// Checks a reduction (or quantization) extent against a quantization's block
/// size and its rotation.
static LogicalResult verifyExtent(Operation *op, int64_t extent,
                                  OperandQuantAttr quant, StringRef what) {
  if (!ShapedType::isDynamic(extent) && extent % quant.getBlockSize() != 0)
    return op->emitOpError()
           << what << " size " << extent
           << " is not divisible by the block size " << quant.getBlockSize();
  return verifyRotationExtent(op, extent, quant.getRotation(), what);
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  ArrayRef<int64_t> lhs = getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = getRhs().getType().getShape();
  ArrayRef<int64_t> result = getResult().getType().getShape();
  int64_t m = lhs[1 - getLhsReductionDim()];
  int64_t lhsK = lhs[getLhsReductionDim()];
  int64_t rhsK = rhs[getRhsReductionDim()];
  int64_t n = rhs[1 - getRhsReductionDim()];
  if (!sizesMatch(lhsK, rhsK))
    return emitOpError() << "shapes do not multiply: op(lhs) is "
                         << formatShape({m, lhsK}) << " and op(rhs) is "
                         << formatShape({rhsK, n}) << " (transposes applied)";
  if (!sizesMatch(result[0], m) || !sizesMatch(result[1], n))
    return emitOpError() << "result is " << formatShape(result)
                         << " but op(lhs) · op(rhs) is " << formatShape({m, n});

  GemmPolicyAttr policy = getGemmPolicy();
  std::string role = stringifyRole(getRole()).str();
  int64_t k = ShapedType::isDynamic(lhsK) ? rhsK : lhsK;
  if (failed(verifyExtent(*this, k, policy.getLhs(),
                          "reduction (" + role + " lhs)")) ||
      failed(verifyExtent(*this, k, policy.getRhs(),
                          "reduction (" + role + " rhs)")))
    return failure();
  return verifyRandomSource(*this, getSeed(), getStep(),
                            policy.needsRandomSource(),
                            "the " + role +
                                " policy rounds stochastically or redraws "
                                "Hadamard signs per step");
}

//===----------------------------------------------------------------------===//
// QuantizeOp and DequantizeOp
//===----------------------------------------------------------------------===//

/// The checks quantize and dequantize share: the values' shape `shape`
/// against the codes, scales and per-tensor scale, for `quant` along `axis`.
static LogicalResult
verifyQuantizedLayout(Operation *op, ArrayRef<int64_t> shape, int64_t axis,
                      OperandQuantAttr quant, RankedTensorType codes,
                      RankedTensorType scales, Value tensorScale) {
  if (!quant.getBlockScale())
    return op->emitOpError()
           << "needs a block-scaled format (e2m1, e4m3 or e5m2), got "
           << stringifyElementFormat(quant.getFormat());
  if (!quant.getRotation().isNone())
    return op->emitOpError("quantization must not rotate: rotate with "
                           "tetra.rotate first");
  int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is out of range for a "
                             << "tensor of rank " << rank;
  if (failed(verifyExtent(op, shape[axis], quant, "axis")))
    return failure();

  if (codes.getShape() != shape)
    return op->emitOpError() << "codes are " << formatShape(codes.getShape())
                             << " but the values are " << formatShape(shape);
  if (codes.getElementType() != quant.getCodeType())
    return op->emitOpError()
           << "codes must be " << quant.getCodeType() << " for " << quant
           << ", got " << codes.getElementType();

  SmallVector<int64_t> scaleShape(shape);
  if (!ShapedType::isDynamic(scaleShape[axis]))
    scaleShape[axis] /= quant.getBlockSize();
  if (scales.getShape() != ArrayRef<int64_t>(scaleShape))
    return op->emitOpError()
           << "scales must be " << formatShape(scaleShape)
           << " (one per block of " << quant.getBlockSize() << " along axis "
           << axis << "), got " << formatShape(scales.getShape());
  if (scales.getElementType() != quant.getScaleType())
    return op->emitOpError() << "scales must be " << quant.getScaleType()
                             << ", got " << scales.getElementType();

  bool needsTensorScale =
      quant.getBlockScale().getScaleFormat() == ScaleFormat::E4M3;
  if (needsTensorScale && !tensorScale)
    return op->emitOpError("NVFP4 (e4m3 block scales) needs a per-tensor "
                           "fp32 scale");
  if (!needsTensorScale && tensorScale)
    return op->emitOpError("only NVFP4 (e4m3 block scales) has a per-tensor "
                           "scale");
  return success();
}

LogicalResult QuantizeOp::verify() {
  OperandQuantAttr quant = getQuant();
  if (failed(verifyQuantizedLayout(*this, getInput().getType().getShape(),
                                   getAxis(), quant, getCodes().getType(),
                                   getScales().getType(), getTensorScale())))
    return failure();
  return verifyRandomSource(*this, getSeed(), getStep(), quant.isStochastic(),
                            "rounds stochastically");
}

LogicalResult DequantizeOp::verify() {
  return verifyQuantizedLayout(*this, getResult().getType().getShape(),
                               getAxis(), getQuant(), getCodes().getType(),
                               getScales().getType(), getTensorScale());
}

//===----------------------------------------------------------------------===//
// RotateOp
//===----------------------------------------------------------------------===//

LogicalResult RotateOp::verify() {
  RotationAttr rotation = getRotation();
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError() << "axis " << axis << " is out of range for a "
                         << "tensor of rank " << rank;
  if (failed(verifyRotationExtent(*this, shape[axis], rotation, "axis")))
    return failure();
  if (rotation.needsStep() && !getStep())
    return emitOpError("redraws its signs every step and needs the step: add "
                       "step(%step)");
  return success();
}

OpFoldResult RotateOp::fold(FoldAdaptor) {
  if (getRotation().isNone())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Model ops
//===----------------------------------------------------------------------===//

/// The product of `sizes`, dynamic if any is.
static int64_t productOf(ArrayRef<int64_t> sizes) {
  int64_t product = 1;
  for (int64_t size : sizes) {
    if (ShapedType::isDynamic(size))
      return ShapedType::kDynamic;
    product *= size;
  }
  return product;
}

LogicalResult LinearOp::verify() {
  ArrayRef<int64_t> input = getInput().getType().getShape();
  ArrayRef<int64_t> weight = getWeight().getType().getShape();
  if (input.empty())
    return emitOpError("input must have at least one dimension");
  if (!sizesMatch(input.back(), weight[1]))
    return emitOpError() << "input is " << formatShape(input)
                         << " but weight is " << formatShape(weight)
                         << ": the input's last dimension must equal the "
                            "weight's second";
  SmallVector<int64_t> expected(input.drop_back());
  expected.push_back(weight[0]);
  ArrayRef<int64_t> result = getResult().getType().getShape();
  if (!shapesMatch(result, expected))
    return emitOpError() << "result is " << formatShape(result)
                         << " but x·wᵀ is " << formatShape(expected);

  // Each role reduces over its own dimension: Fprop over the input
  // features, Dgrad over the output features, Wgrad over the tokens.
  int64_t reductions[] = {weight[1], weight[0], productOf(input.drop_back())};
  for (Role role : {Role::Fprop, Role::Dgrad, Role::Wgrad}) {
    GemmPolicyAttr policy = getPolicy().getForRole(role);
    int64_t extent = reductions[static_cast<unsigned>(role)];
    std::string what = "reduction (" + stringifyRole(role).str();
    if (failed(verifyExtent(*this, extent, policy.getLhs(), what + " lhs)")) ||
        failed(verifyExtent(*this, extent, policy.getRhs(), what + " rhs)")))
      return failure();
  }
  return success();
}

LogicalResult EmbeddingOp::verify() {
  ArrayRef<int64_t> table = getTable().getType().getShape();
  SmallVector<int64_t> expected(getTokens().getType().getShape());
  expected.push_back(table[1]);
  ArrayRef<int64_t> result = getResult().getType().getShape();
  if (!shapesMatch(result, expected))
    return emitOpError() << "result is " << formatShape(result)
                         << " but the tokens' shape followed by the table's "
                            "width is "
                         << formatShape(expected);
  if (getResult().getType().getElementType() !=
      getTable().getType().getElementType())
    return emitOpError("result and table must have the same element type");
  return success();
}

LogicalResult RMSNormOp::verify() {
  return verifyRMSNormShapes(*this, getInput().getType().getShape(),
                             getWeight().getType().getShape(),
                             getEps().convertToDouble());
}

LogicalResult RopeOp::verify() {
  return verifyRopeShapes(*this, "input", getInput().getType().getShape(),
                          getHeadDim(), getTheta().convertToDouble());
}

LogicalResult AttentionOp::verify() {
  if (getKey().getType() != getValue().getType())
    return emitOpError("key and value must have the same type");
  return verifyAttentionShapes(*this, getQuery().getType().getShape(),
                               getKey().getType().getShape(), getHeads(),
                               getKvHeads());
}

LogicalResult CrossEntropyOp::verify() {
  return verifyCrossEntropyShapes(*this, getLogits().getType().getShape(),
                                  getTargets().getType().getShape());
}
