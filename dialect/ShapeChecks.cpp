//===- ShapeChecks.cpp - Shape helpers the op verifiers share -------------===//

#include "dialect/ShapeChecks.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

std::string tetra::detail::formatShape(ArrayRef<int64_t> shape) {
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

bool tetra::detail::shapesMatch(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!sizesMatch(x, y))
      return false;
  return true;
}

LogicalResult tetra::detail::verifyAttentionShapes(Operation *op,
                                                   ArrayRef<int64_t> query,
                                                   ArrayRef<int64_t> key,
                                                   int64_t heads,
                                                   int64_t kvHeads) {
  if (query.size() != 3 || key.size() != 3)
    return op->emitOpError(
        "query, key and value must be [batch, seq, features]");
  if (!sizesMatch(query[0], key[0]) || !sizesMatch(query[1], key[1]))
    return op->emitOpError()
           << "query is " << formatShape(query) << " but key is "
           << formatShape(key) << ": batch and sequence must match";
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return op->emitOpError()
           << "heads (" << heads
           << ") must be a positive multiple of kv_heads (" << kvHeads << ")";
  if (ShapedType::isDynamic(query[2]) || ShapedType::isDynamic(key[2]))
    return success();
  if (query[2] % heads != 0)
    return op->emitOpError() << "query features " << query[2]
                             << " are not divisible by heads " << heads;
  int64_t headDim = query[2] / heads;
  if (key[2] != kvHeads * headDim)
    return op->emitOpError()
           << "key features " << key[2] << " must be kv_heads (" << kvHeads
           << ") × head_dim (" << headDim << ")";
  return success();
}

LogicalResult
tetra::detail::verifyCrossEntropyShapes(Operation *op, ArrayRef<int64_t> logits,
                                        ArrayRef<int64_t> targets) {
  if (logits.empty() || !shapesMatch(logits.drop_back(), targets))
    return op->emitOpError()
           << "targets are " << formatShape(targets) << " but logits are "
           << formatShape(logits)
           << ": targets must be the logits' shape without the vocabulary";
  return success();
}

LogicalResult tetra::detail::verifyRMSNormShapes(Operation *op,
                                                 ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> weight,
                                                 double eps) {
  if (input.empty() || weight.size() != 1 ||
      !sizesMatch(input.back(), weight[0]))
    return op->emitOpError() << "weight is " << formatShape(weight)
                             << " but must be [d] for an input of "
                             << formatShape(input) << ", d its last dimension";
  if (eps <= 0)
    return op->emitOpError("eps must be positive");
  return success();
}

LogicalResult tetra::detail::verifyRopeShapes(Operation *op, StringRef what,
                                              ArrayRef<int64_t> shape,
                                              int64_t headDim, double theta) {
  if (headDim <= 0 || headDim % 2 != 0)
    return op->emitOpError()
           << "head_dim must be positive and even, got " << headDim;
  if (shape.size() != 3)
    return op->emitOpError()
           << what << " must be [batch, seq, heads · head_dim]";
  if (!ShapedType::isDynamic(shape[2]) && shape[2] % headDim != 0)
    return op->emitOpError()
           << "features " << shape[2] << " are not a whole number of heads of "
           << headDim;
  if (theta <= 0)
    return op->emitOpError("theta must be positive");
  return success();
}
