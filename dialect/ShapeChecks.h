//===- ShapeChecks.h - Shape helpers the op verifiers share -----*- C++ -*-===//
//
// Internal to the dialect: how verifiers print shapes and compare sizes
// (a dynamic size matches anything), and the checks a forward op and its
// gradient op have in common.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DIALECT_SHAPECHECKS_H
#define TETRA_DIALECT_SHAPECHECKS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <string>

namespace tetra::detail {

/// A shape as `4x?x64`.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Whether two sizes can be equal: a dynamic size matches anything.
inline bool sizesMatch(int64_t a, int64_t b) {
  return mlir::ShapedType::isDynamic(a) || mlir::ShapedType::isDynamic(b) ||
         a == b;
}

/// Same rank, and every size matches.
bool shapesMatch(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Causal grouped-query attention's shapes: query [B, T, heads · hd], key
/// (and value) [B, T, kv_heads · hd], heads a positive multiple of kv_heads.
mlir::LogicalResult verifyAttentionShapes(mlir::Operation *op,
                                          llvm::ArrayRef<int64_t> query,
                                          llvm::ArrayRef<int64_t> key,
                                          int64_t heads, int64_t kvHeads);

/// RMS normalization's: weight is [d], d the input's last dimension, and a
/// positive eps.
mlir::LogicalResult verifyRMSNormShapes(mlir::Operation *op,
                                        llvm::ArrayRef<int64_t> input,
                                        llvm::ArrayRef<int64_t> weight,
                                        double eps);

/// Rotary embedding's: `what` ("input", "gradient") is [batch, seq,
/// heads · head_dim] with head_dim positive and even, and theta positive.
mlir::LogicalResult verifyRopeShapes(mlir::Operation *op, llvm::StringRef what,
                                     llvm::ArrayRef<int64_t> shape,
                                     int64_t headDim, double theta);

/// Cross-entropy's: targets are the logits' shape without the vocabulary.
mlir::LogicalResult verifyCrossEntropyShapes(mlir::Operation *op,
                                             llvm::ArrayRef<int64_t> logits,
                                             llvm::ArrayRef<int64_t> targets);

} // namespace tetra::detail

#endif // TETRA_DIALECT_SHAPECHECKS_H
