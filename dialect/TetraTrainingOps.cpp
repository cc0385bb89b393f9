//===- TetraTrainingOps.cpp - Gradients and the optimizer -----------------===//
//
// Verifiers of the ops the training step creates (TetraTrainingOps.td): the
// backward ops check the same shapes as their forward ops, the optimizer
// ops their hyper-parameters.
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace tetra;

/// Prints a shape as `4x?x64`.
static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      shape, os,
      [&](int64_t size) {
        if (ShapedType::isDynamic(size))
          os << "?";
        else
          os << size;
      },
      "x");
  return text;
}

static bool sizesMatch(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

static bool shapesMatch(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!sizesMatch(x, y))
      return false;
  return true;
}

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
  ArrayRef<int64_t> input = getInput().getType().getShape();
  ArrayRef<int64_t> weight = getWeight().getType().getShape();
  if (input.empty() || weight.size() != 1 ||
      !sizesMatch(input.back(), weight[0]))
    return emitOpError() << "weight is " << formatShape(weight)
                         << " but must be [d] for an input of "
                         << formatShape(input) << ", d its last dimension";
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult RopeGradOp::verify() {
  ArrayRef<int64_t> grad = getGrad().getType().getShape();
  int64_t headDim = getHeadDim();
  if (headDim <= 0 || headDim % 2 != 0)
    return emitOpError() << "head_dim must be positive and even, got "
                         << headDim;
  if (grad.size() != 3)
    return emitOpError("gradient must be [batch, seq, heads · head_dim]");
  if (!ShapedType::isDynamic(grad[2]) && grad[2] % headDim != 0)
    return emitOpError() << "features " << grad[2]
                         << " are not a whole number of heads of " << headDim;
  if (getTheta().convertToDouble() <= 0)
    return emitOpError("theta must be positive");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  ArrayRef<int64_t> query = getQuery().getType().getShape();
  ArrayRef<int64_t> key = getKey().getType().getShape();
  if (query.size() != 3 || key.size() != 3)
    return emitOpError("query, key and value must be [batch, seq, features]");
  if (!sizesMatch(query[0], key[0]) || !sizesMatch(query[1], key[1]))
    return emitOpError() << "query is " << formatShape(query) << " but key is "
                         << formatShape(key)
                         << ": batch and sequence must match";
  int64_t heads = getHeads(), kvHeads = getKvHeads();
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return emitOpError() << "heads (" << heads
                         << ") must be a positive multiple of kv_heads ("
                         << kvHeads << ")";
  if (ShapedType::isDynamic(query[2]) || ShapedType::isDynamic(key[2]))
    return success();
  if (query[2] % heads != 0)
    return emitOpError() << "query features " << query[2]
                         << " are not divisible by heads " << heads;
  int64_t headDim = query[2] / heads;
  if (key[2] != kvHeads * headDim)
    return emitOpError() << "key features " << key[2] << " must be kv_heads ("
                         << kvHeads << ") × head_dim (" << headDim << ")";
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  ArrayRef<int64_t> logits = getLogits().getType().getShape();
  ArrayRef<int64_t> targets = getTargets().getType().getShape();
  if (logits.empty() || !shapesMatch(logits.drop_back(), targets))
    return emitOpError() << "targets are " << formatShape(targets)
                         << " but logits are " << formatShape(logits)
                         << ": targets must be the logits' shape without "
                            "the vocabulary";
  return success();
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
