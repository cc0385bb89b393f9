//===- TetraAttributes.h - Formats, scales, rounding, policies --*- C++ -*-===//
//
// The attributes and enums of the tetra dialect (generated from
// TetraAttributes.td).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DIALECT_TETRAATTRIBUTES_H
#define TETRA_DIALECT_TETRAATTRIBUTES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include "dialect/TetraEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/TetraAttributes.h.inc"

namespace tetra {

/// What a GEMM's operand is to its linear layer in `role`: "x" (the
/// activation), "w" (the weight) or "dy" (the output gradient) — Fprop
/// x · wᵀ, Dgrad dy · w, Wgrad dyᵀ · x. The one naming of IR, schedules,
/// metrics and messages.
llvm::StringRef gemmOperandName(Role role, bool lhs);

/// The scale format whose blocks `rule` chooses scales for (numerics'
/// scaleFormatOf), and a scale format's rule where none is named: floor
/// (e8m0), nearest (e4m3).
ScaleFormat scaleFormatOf(ScaleRule rule);
ScaleRule defaultScaleRule(ScaleFormat format);

} // namespace tetra

#endif // TETRA_DIALECT_TETRAATTRIBUTES_H
