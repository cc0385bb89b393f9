//===- TetraDifferentiableOpInterface.h - Gradient rules --------*- C++ -*-===//
//
// The interface through which every model op but tetra.linear says how it
// differentiates (TetraDifferentiableOpInterface.td).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DIALECT_TETRADIFFERENTIABLEOPINTERFACE_H
#define TETRA_DIALECT_TETRADIFFERENTIABLEOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "dialect/TetraDifferentiableOpInterface.h.inc"

#endif // TETRA_DIALECT_TETRADIFFERENTIABLEOPINTERFACE_H
