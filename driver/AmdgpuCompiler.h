//===- AmdgpuCompiler.h - gfx950 GEMM kernels down to HSACO -----*- C++ -*-===//
//
// The gfx950 target's code production, in process and with no ROCm:
// --convert-tetra-to-amdgpu's gpu.modules through the upstream GPU-to-ROCDL
// conversion (bare-pointer memref arguments, 64-bit indices), MLIR's LLVM IR
// translation, LLVM's AMDGPU backend (gfx950, code object v5) and lld as a
// library: one HSACO per GEMM kernel, which `hipModuleLoadData` loads on an
// MI355X, with its assembly and a resource report.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_AMDGPUCOMPILER_H
#define TETRA_DRIVER_AMDGPUCOMPILER_H

#include "driver/GpuCode.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace tetra {

/// One explicit kernel argument as the code object's metadata lays it out.
struct AmdgpuArgument {
  int64_t offset = 0, size = 0;
  std::string kind; ///< "global_buffer", "by_value".
};

/// What a gfx950 kernel function uses, read off its assembly's .amdhsa
/// directives, and its explicit arguments from its metadata (the hidden
/// ones, which the HIP runtime fills, left out).
struct AmdgpuResources {
  std::string function;
  int64_t vgprs = 0, agprs = 0, sgprs = 0;
  int64_t ldsBytes = 0, scratchBytes = 0;
  /// v_mfma_* instructions in the function (the GEMM launch's K loop is
  /// not unrolled: its MFMAs per staged step), and of those v_mfma_scale_*.
  int64_t mfmas = 0, scaledMfmas = 0;
  /// Waves per SIMD the registers allow (512 unified VGPR/AGPR slots per
  /// lane, in granules of 8; at most 8).
  int64_t occupancy = 0;
  std::vector<AmdgpuArgument> arguments;
};

/// The resource report of every kernel function in a gfx950 assembly.
std::vector<AmdgpuResources> amdgpuResources(llvm::StringRef assembly);

/// Compiles every gpu.module of `module` (the output of
/// --convert-tetra-to-amdgpu) to HSACO. `module` is lowered in place.
/// Errors are emitted on the module's context.
mlir::FailureOr<std::vector<GpuKernelCode>>
compileToHsaco(mlir::ModuleOp module, llvm::StringRef chip = "gfx950");

} // namespace tetra

#endif // TETRA_DRIVER_AMDGPUCOMPILER_H
