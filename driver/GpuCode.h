//===- GpuCode.h - Compiled GPU kernels and their launches ------*- C++ -*-===//
//
// What a GPU target's compiler hands to `tetra compile` and `tetra emit`:
// per GEMM kernel, its code object, its assembly, what it computes and its
// launches, read off the gpu.modules of --convert-tetra-to-nvvm or
// --convert-tetra-to-amdgpu (their `tetra.gemm` and `tetra.launch`
// attributes; lowering/Conversion/Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_GPUCODE_H
#define TETRA_DRIVER_GPUCODE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <array>
#include <string>
#include <vector>

namespace tetra {

/// One launch of a GPU kernel: the function, its geometry and what each of
/// its parameters is ("input:0", "result:0", "scratch:lhs.codes",
/// "scalar:seed").
struct GpuLaunch {
  std::string function;
  std::array<int64_t, 3> grid{}, block{};
  std::vector<std::string> arguments;
  /// A variant of another function (GemmKernelPlan.h: kBF16ResultSuffix,
  /// kPlusAddendSuffix), launched only in its function's place.
  bool variant = false;
};

/// One compiled GEMM kernel.
struct GpuKernelCode {
  std::string name; ///< The tetra.kernel's name.
  std::string gemm; ///< "layers.0.attn.wq.fprop".
  /// What it computes, as JSON: the GEMM, its sizes and transposes, each
  /// operand's quantization and rotation, the scratch buffers' bytes.
  std::string description;
  std::string code;      ///< The code object: PTX text, or HSACO bytes.
  std::string assembly;  ///< Human-readable ISA (PTX itself for sm_90a).
  std::vector<GpuLaunch> launches;
};

/// The kernels of `module`'s gpu.modules, in order, with their launches and
/// descriptions (code and assembly empty): read before the modules are
/// lowered, which drops the attributes.
std::vector<GpuKernelCode> describeGpuKernels(mlir::ModuleOp module);

/// Lowers every gpu.module of `module` to the LLVM dialect with the
/// target's GPU conversion `convertGpuOps` (GPU-to-NVVM or GPU-to-ROCDL):
/// scf to cf and math.ctlz to its LLVM intrinsic first (nothing may call
/// into a device library), then the conversion, which lowers the other
/// dialects through their ConvertToLLVM interfaces (registered here); and
/// registers the LLVM IR translations of the builtin and LLVM dialects.
mlir::LogicalResult lowerGpuModules(mlir::ModuleOp module,
                                    std::unique_ptr<mlir::Pass> convertGpuOps);

/// A lowered gpu.module's body as a module of its own, for translation.
mlir::OwningOpRef<mlir::ModuleOp> deviceModule(mlir::Operation *gpuModule);

/// `compile(device, kernel)` for each lowered gpu.module of `module` (its
/// device module and its entry of `kernels`, in order), except where the
/// compile cache (GpuCodeCache.h) holds the module's code for `chip`: then
/// the cached code and assembly. What is compiled is cached.
mlir::LogicalResult compileGpuModulesCached(
    mlir::ModuleOp module, llvm::StringRef chip,
    std::vector<GpuKernelCode> &kernels,
    llvm::function_ref<mlir::LogicalResult(mlir::ModuleOp, GpuKernelCode &)>
        compile);

} // namespace tetra

#endif // TETRA_DRIVER_GPUCODE_H
