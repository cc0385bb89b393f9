//===- TetraTrainingOps.cpp - Gradients and the optimizer -----------------===//
//
// Verifiers of the ops the training step creates (TetraTrainingOps.td): the
// backward ops check the same shapes as their forward ops, the optimizer
// ops their hyper-parameters.
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraOps.h"

#include "dialect/ShapeChecks.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace tetra;
using namespace tetra::detail;

//===----------------------------------------------------------------------===//
// The backward of the model ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::verify() {
  ArrayRef<int64_t> tokens = getTokens().getType().getShape();
  ArrayRef<int64_t> grad = getGrad().getType().getShape();
  ArrayRef<int64_t> table = getTableGrad().getType().getShape();
  SmallVector<int64_t> expected(tokens);
  expected.push_back(table[1]);
  if (!shapesMatch(grad, expected))
    return emitOpError() << "gradient is " << formatShape(grad)
                         << " but the tokens' shape followed by the table's "
                            "width is "
                         << formatShape(expected);
  if (getGrad().getType().getElementType() !=
      getTableGrad().getType().getElementType())
    return emitOpError("gradient and table gradient must have the same "
                       "element type");
  return success();
}

LogicalResult RMSNormGradOp::verify() {
  return verifyRMSNormShapes(*this, getInput().getType().getShape(),
                             getWeight().getType().getShape(),
                             getEps().convertToDouble());
}

LogicalResult RopeGradOp::verify() {
  return verifyRopeShapes(*this, "gradient", getGrad().getType().getShape(),
                          getHeadDim(), getTheta().convertToDouble());
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttentionShapes(*this, getQuery().getType().getShape(),
                               getKey().getType().getShape(), getHeads(),
                               getKvHeads());
}

LogicalResult CrossEntropyGradOp::verify() {
  return verifyCrossEntropyShapes(*this, getLogits().getType().getShape(),
                                  getTargets().getType().getShape());
}

//===----------------------------------------------------------------------===//
// The optimizer
//===----------------------------------------------------------------------===//

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  return success();
}

LogicalResult ClipByNormOp::verify() {
  if (!(getMaxNorm().convertToDouble() > 0))
    return emitOpError("max_norm must be positive");
  return success();
}

LogicalResult AdamWOp::verify() {
  auto isBeta = [](APFloat beta) {
    double value = beta.convertToDouble();
    return value >= 0 && value < 1;
  };
  if (!isBeta(getBeta1()) || !isBeta(getBeta2()))
    return emitOpError("beta1 and beta2 must be in [0, 1)");
  if (!(getEps().convertToDouble() > 0))
    return emitOpError("eps must be positive");
  if (!(getWeightDecay().convertToDouble() >= 0))
    return emitOpError("weight_decay must not be negative");
  return success();
}
