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

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <array>
#include <string>
#include <vector>

namespace tetra {

/// One launch of a GPU kernel: the function, its geometry and what each of
/// its parameters is ("input:0", "result:0", "scratch:lhs.codes",
/// "scalar:seed"; lowering/Conversion/Passes.td).
struct GpuLaunch {
  std::string function;
  std::array<int64_t, 3> grid{}, block{};
  std::vector<std::string> arguments;
};

/// One compiled GEMM kernel: its tetra.kernel name, the GEMM it computes
/// ("layers.0.attn.wq.fprop"), its code and its launches in order.
struct GpuKernelCode {
  std::string name;
  std::string gemm;
  /// What it computes, as JSON: the GEMM, its sizes and transposes, each
  /// operand's quantization and rotation, the scratch buffers' bytes
  /// (--convert-tetra-to-nvvm's `tetra.gemm`).
  std::string description;
  std::string code; ///< PTX text for sm_90a.
  std::vector<GpuLaunch> launches;
};

/// Compiles every gpu.module of `module` (the output of
/// --convert-tetra-to-nvvm) to PTX. `module` is lowered in place. Errors
/// are emitted on the module's context.
mlir::FailureOr<std::vector<GpuKernelCode>>
compileToPtx(mlir::ModuleOp module, llvm::StringRef chip = "sm_90a");

} // namespace tetra

#endif // TETRA_DRIVER_NVPTXCOMPILER_H
