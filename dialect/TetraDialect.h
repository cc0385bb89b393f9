//===- TetraDialect.h - The tetra dialect -----------------------*- C++ -*-===//
//
// Include this for the dialect class; TetraOps.h for ops and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DIALECT_TETRADIALECT_H
#define TETRA_DIALECT_TETRADIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/TetraDialect.h.inc"

#endif // TETRA_DIALECT_TETRADIALECT_H
