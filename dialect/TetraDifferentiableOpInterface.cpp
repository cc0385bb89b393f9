//===- TetraDifferentiableOpInterface.cpp - The model ops' gradients ------===//
//
// The interface's generated definitions, and every model op's gradient
// rule: which backward op (TetraTrainingOps.td, where each formula is
// written out) computes the gradient of each operand from the gradient of
// the result. tetra.linear has none here: the training-step pass turns it
// into its three role matmuls.
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraDifferentiableOpInterface.h"
#include "dialect/TetraOps.h"

using namespace mlir;
using namespace tetra;

#include "dialect/TetraDifferentiableOpInterface.cpp.inc"

/// The single result gradient of a one-result op.
static Value resultGradientOf(ValueRange resultGradients) {
  assert(resultGradients.size() == 1 && "a model op has one result");
  return resultGradients.front();
}

LogicalResult
EmbeddingOp::buildGradients(OpBuilder &builder, ValueRange resultGradients,
                            SmallVectorImpl<Value> &operandGradients) {
  Value table =
      EmbeddingGradOp::create(builder, getLoc(), getTable().getType(),
                              getTokens(), resultGradientOf(resultGradients));
  operandGradients.assign({table, Value()});
  return success();
}

LogicalResult
RMSNormOp::buildGradients(OpBuilder &builder, ValueRange resultGradients,
                          SmallVectorImpl<Value> &operandGradients) {
  auto grad =
      RMSNormGradOp::create(builder, getLoc(), getInput(), getWeight(),
                            resultGradientOf(resultGradients), getEpsAttr());
  operandGradients.assign({grad.getInputGrad(), grad.getWeightGrad()});
  return success();
}

LogicalResult RopeOp::buildGradients(OpBuilder &builder,
                                     ValueRange resultGradients,
                                     SmallVectorImpl<Value> &operandGradients) {
  Value input =
      RopeGradOp::create(builder, getLoc(), resultGradientOf(resultGradients),
                         getHeadDimAttr(), getThetaAttr());
  operandGradients.assign({input});
  return success();
}

LogicalResult
AttentionOp::buildGradients(OpBuilder &builder, ValueRange resultGradients,
                            SmallVectorImpl<Value> &operandGradients) {
  auto grad = AttentionGradOp::create(
      builder, getLoc(), getQuery(), getKey(), getValue(),
      resultGradientOf(resultGradients), getHeadsAttr(), getKvHeadsAttr(),
      getBf16OperandsAttr());
  operandGradients.assign(
      {grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  return success();
}

LogicalResult SiluOp::buildGradients(OpBuilder &builder,
                                     ValueRange resultGradients,
                                     SmallVectorImpl<Value> &operandGradients) {
  Value input = SiluGradOp::create(builder, getLoc(), getInput(),
                                   resultGradientOf(resultGradients));
  operandGradients.assign({input});
  return success();
}

/// d(x + y) = (dz, dz).
LogicalResult AddOp::buildGradients(OpBuilder &builder,
                                    ValueRange resultGradients,
                                    SmallVectorImpl<Value> &operandGradients) {
  Value grad = resultGradientOf(resultGradients);
  operandGradients.assign({grad, grad});
  return success();
}

/// d(x - y) = (dz, -dz).
LogicalResult SubOp::buildGradients(OpBuilder &builder,
                                    ValueRange resultGradients,
                                    SmallVectorImpl<Value> &operandGradients) {
  Value grad = resultGradientOf(resultGradients);
  Value negated =
      ScaleOp::create(builder, getLoc(), grad, builder.getF64FloatAttr(-1.0));
  operandGradients.assign({grad, negated});
  return success();
}

/// d(x · y) = (dz · y, dz · x).
LogicalResult MulOp::buildGradients(OpBuilder &builder,
                                    ValueRange resultGradients,
                                    SmallVectorImpl<Value> &operandGradients) {
  Value grad = resultGradientOf(resultGradients);
  Value lhs = MulOp::create(builder, getLoc(), grad, getRhs());
  Value rhs = MulOp::create(builder, getLoc(), grad, getLhs());
  operandGradients.assign({lhs, rhs});
  return success();
}

/// d(c · x) = c · dz.
LogicalResult
ScaleOp::buildGradients(OpBuilder &builder, ValueRange resultGradients,
                        SmallVectorImpl<Value> &operandGradients) {
  Value input = ScaleOp::create(
      builder, getLoc(), resultGradientOf(resultGradients), getFactorAttr());
  operandGradients.assign({input});
  return success();
}

LogicalResult
CrossEntropyOp::buildGradients(OpBuilder &builder, ValueRange resultGradients,
                               SmallVectorImpl<Value> &operandGradients) {
  Value logits =
      CrossEntropyGradOp::create(builder, getLoc(), getLogits(), getTargets(),
                                 resultGradientOf(resultGradients));
  operandGradients.assign({logits, Value()});
  return success();
}
