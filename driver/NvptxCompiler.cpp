//===- NvptxCompiler.cpp - sm_90a GEMM kernels down to PTX ----------------===//

#include "driver/NvptxCompiler.h"


#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

using namespace mlir;
using namespace tetra;

namespace {

void initializeNvptx() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

FailureOr<std::string> emitPtx(ModuleOp device, StringRef chip) {
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(device, llvmContext, "tetra");
  if (!llvmModule)
    return device.emitError("translation of the sm_90a kernels to LLVM IR "
                            "failed");
  initializeNvptx();
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return device.emitError("LLVM has no NVPTX target: ") << error;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, chip, "+ptx84", llvm::TargetOptions(), std::nullopt,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  // LLVM's O3 middle end (NVPTX's own passes included) before codegen:
  // the prologue's per-element loops unrolled, the GEMM's addressing
  // hoisted and combined. No fast-math flags, so no contraction.
  {
    llvm::LoopAnalysisManager loops;
    llvm::FunctionAnalysisManager functions;
    llvm::CGSCCAnalysisManager cgscc;
    llvm::ModuleAnalysisManager modules;
    llvm::PassBuilder builder(machine.get());
    builder.registerModuleAnalyses(modules);
    builder.registerCGSCCAnalyses(cgscc);
    builder.registerFunctionAnalyses(functions);
    builder.registerLoopAnalyses(loops);
    builder.crossRegisterProxies(loops, functions, cgscc, modules);
    builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3)
        .run(*llvmModule, modules);
  }
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream os(ptx);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, os, nullptr,
                                   llvm::CodeGenFileType::AssemblyFile))
    return device.emitError("the NVPTX backend cannot emit PTX");
  passes.run(*llvmModule);
  return std::string(ptx.str());
}

} // namespace

FailureOr<std::vector<GpuKernelCode>> tetra::compileToPtx(ModuleOp module,
                                                          StringRef chip) {
  MLIRContext *context = module.getContext();
  std::vector<GpuKernelCode> kernels = describeGpuKernels(module);

  ConvertGpuOpsToNVVMOpsOptions options;
  options.indexBitwidth = 64;
  options.useBarePtrCallConv = true;
  if (failed(lowerGpuModules(module, createConvertGpuOpsToNVVMOps(options))))
    return failure();
  // The NVVM ops that are PTX inline (wgmma and its fences) become asm.
  PassManager inlinePtx(context);
  inlinePtx.nest<gpu::GPUModuleOp>().addPass(createConvertNVVMToLLVMPass());
  if (failed(inlinePtx.run(module)))
    return failure();
  DialectRegistry registry;
  registerNVVMDialectTranslation(registry);
  context->appendDialectRegistry(registry);

  if (failed(compileGpuModulesCached(
          module, chip, kernels,
          [&](ModuleOp device, GpuKernelCode &kernel) -> LogicalResult {
            FailureOr<std::string> ptx = emitPtx(device, chip);
            if (failed(ptx))
              return failure();
            kernel.assembly = *ptx;
            kernel.code = std::move(*ptx);
            return success();
          })))
    return failure();
  return kernels;
}
