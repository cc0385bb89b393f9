//===- NvptxCompiler.h - sm_90a GEMM kernels down to PTX --------*- C++ -*-===//
//
// The sm_90a target's code production, in process and with no CUDA toolkit:
// --convert-tetra-to-nvvm's gpu.modules through the upstream GPU-to-NVVM
// conversion (bare-pointer memref arguments, 64-bit indices), MLIR's LLVM IR
// translation, and LLVM's NVPTX backend (`sm_90a`, PTX 8.4). Each GEMM
// kernel comes out as PTX text, which the CUDA driver JIT-compiles at load
// time, with the launches its gpu.funcs recorded (tetra.launch).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_NVPTXCOMPILER_H
#define TETRA_DRIVER_NVPTXCOMPILER_H

#include "driver/GpuCode.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace tetra {

/// Compiles every gpu.module of `module` (the output of
/// --convert-tetra-to-nvvm) to PTX. `module` is lowered in place. Errors
/// are emitted on the module's context.
mlir::FailureOr<std::vector<GpuKernelCode>>
compileToPtx(mlir::ModuleOp module, llvm::StringRef chip = "sm_90a");

} // namespace tetra

#endif // TETRA_DRIVER_NVPTXCOMPILER_H
