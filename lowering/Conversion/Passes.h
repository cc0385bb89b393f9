//===- Passes.h - One conversion per target ---------------------*- C++ -*-===//
//
// `--convert-tetra-to-cpu` (TetraToCPU.cpp), declared in Passes.td, and the
// pipeline from kernels to the LLVM dialect (TetraToLLVMPipeline.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_PASSES_H
#define TETRA_LOWERING_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace tetra {

#define GEN_PASS_DECL
#include "lowering/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/Conversion/Passes.h.inc"

/// The CPU code generation pipeline: `--convert-tetra-to-cpu`, then the
/// upstream conversions down to the LLVM dialect (scf, cf, memref, math,
/// arith, func), ready for translation to LLVM IR. Runs on a module whose
/// kernels are formed (`--tetra-form-kernels`).
void buildTetraToLLVMPipeline(mlir::OpPassManager &pm);

class KernelOp;

/// Whether the CPU code of `kernel` computes its result rows in parts: the
/// kernel yields exactly one value, the result of its scaled matmul. Its
/// function then takes two more i64 arguments after the results, `part` and
/// `parts`, and a call computes only part `part` of `parts` of the result's
/// rows (everything the rows need is computed by every call): the runtime
/// calls the parts on its threads, and any partition gives the same bits.
bool kernelSplitsRows(KernelOp kernel);

/// Registers the passes above and the pipeline as `--tetra-to-llvm`.
void registerTetraConversionPipelines();

} // namespace tetra

#endif // TETRA_LOWERING_CONVERSION_PASSES_H
