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

#endif // TETRA_DIALECT_TETRAATTRIBUTES_H
