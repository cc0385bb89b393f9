//===- TetraOps.h - tetra dialect operations --------------------*- C++ -*-===//

#ifndef TETRA_DIALECT_TETRAOPS_H
#define TETRA_DIALECT_TETRAOPS_H

#include "dialect/TetraAttributes.h"
#include "dialect/TetraDialect.h"
#include "dialect/TetraDifferentiableOpInterface.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/TetraOps.h.inc"

#endif // TETRA_DIALECT_TETRAOPS_H
