//===- MLIRGen.h - An elaborated model into the tetra dialect ---*- C++ -*-===//
//
// Emits one `func.func` per model function (`forward`, `loss`, ...) over the
// model's parameters and the function's inputs, with every linear carrying
// its resolved `#tetra.policy` and every op the file:line:col it came from.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_MLIRGEN_H
#define TETRA_FRONTEND_MLIRGEN_H

#include "frontend/ModelGraph.h"
#include "frontend/Policy.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <map>
#include <string>

namespace tetra::frontend {

struct EmitOptions {
  /// Sizes for symbolic dimensions (`batch`, `seq`); unbound ones stay
  /// dynamic (`?`).
  std::map<std::string, int64_t> dimensions;
};

/// Registers the dialects the emitted module uses.
void loadEmitDialects(mlir::MLIRContext &context);

/// The module for `model`. Without a policy every role is `f32` (no
/// quantization). Returns null, after reporting through the context's
/// diagnostic handler, if the module does not verify — a frontend bug, since
/// elaboration checks everything the verifiers do, but never a crash.
mlir::OwningOpRef<mlir::ModuleOp> emitModule(mlir::MLIRContext &context,
                                             const llvm::SourceMgr &sourceMgr,
                                             const ModelGraph &model,
                                             const ResolvedPolicy *policy,
                                             const EmitOptions &options = {});

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_MLIRGEN_H
