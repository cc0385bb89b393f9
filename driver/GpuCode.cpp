//===- GpuCode.cpp - Compiled GPU kernels and their launches --------------===//

#include "driver/GpuCode.h"

#include "driver/GpuCodeCache.h"

#include "runtime/io/Json.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace tetra;

namespace {

/// An attribute as JSON: dictionaries, arrays, strings, integers, booleans.
void appendJson(std::string &out, Attribute attribute) {
  if (auto dictionary = dyn_cast<DictionaryAttr>(attribute)) {
    out += '{';
    const char *separator = "";
    for (NamedAttribute field : dictionary) {
      out += separator;
      io::appendJsonString(out, field.getName().strref());
      out += ':';
      appendJson(out, field.getValue());
      separator = ",";
    }
    out += '}';
  } else if (auto array = dyn_cast<ArrayAttr>(attribute)) {
    out += '[';
    for (auto [i, element] : llvm::enumerate(array)) {
      out += i ? "," : "";
      appendJson(out, element);
    }
    out += ']';
  } else if (auto integers = dyn_cast<DenseI64ArrayAttr>(attribute)) {
    out += '[';
    for (auto [i, value] : llvm::enumerate(integers.asArrayRef())) {
      out += i ? "," : "";
      io::appendJsonInteger(out, value);
    }
    out += ']';
  } else if (auto string = dyn_cast<StringAttr>(attribute)) {
    io::appendJsonString(out, string.strref());
  } else if (auto boolean = dyn_cast<BoolAttr>(attribute)) {
    out += boolean.getValue() ? "true" : "false";
  } else if (auto integer = dyn_cast<IntegerAttr>(attribute)) {
    io::appendJsonInteger(out, integer.getInt());
  } else {
    out += "null";
  }
}

/// The launches recorded on a gpu.module's functions (before conversion).
std::vector<GpuLaunch> launchesOf(gpu::GPUModuleOp gpuModule) {
  std::vector<GpuLaunch> launches;
  for (gpu::GPUFuncOp func : gpuModule.getOps<gpu::GPUFuncOp>()) {
    auto launch = func->getAttrOfType<DictionaryAttr>("tetra.launch");
    if (!launch)
      continue;
    GpuLaunch entry;
    entry.function = func.getName().str();
    auto grid = launch.getAs<DenseI64ArrayAttr>("grid");
    auto block = launch.getAs<DenseI64ArrayAttr>("block");
    for (int d = 0; d < 3; ++d) {
      entry.grid[d] = grid[d];
      entry.block[d] = block[d];
    }
    for (Attribute name : launch.getAs<ArrayAttr>("arguments"))
      entry.arguments.push_back(cast<StringAttr>(name).str());
    entry.variant = launch.contains("variant");
    launches.push_back(std::move(entry));
  }
  return launches;
}

} // namespace

std::vector<GpuKernelCode> tetra::describeGpuKernels(ModuleOp module) {
  std::vector<GpuKernelCode> kernels;
  for (gpu::GPUModuleOp gpuModule : module.getOps<gpu::GPUModuleOp>()) {
    GpuKernelCode kernel;
    kernel.name = gpuModule.getName().str();
    if (auto gemm = gpuModule->getAttrOfType<DictionaryAttr>("tetra.gemm")) {
      kernel.gemm = gemm.getAs<StringAttr>("gemm").str();
      appendJson(kernel.description, gemm);
    }
    kernel.launches = launchesOf(gpuModule);
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

LogicalResult tetra::lowerGpuModules(ModuleOp module,
                                     std::unique_ptr<Pass> convertGpuOps) {
  MLIRContext *context = module.getContext();
  DialectRegistry interfaces;
  arith::registerConvertArithToLLVMInterface(interfaces);
  cf::registerConvertControlFlowToLLVMInterface(interfaces);
  index::registerConvertIndexToLLVMInterface(interfaces);
  registerConvertMathToLLVMInterface(interfaces);
  registerConvertMemRefToLLVMInterface(interfaces);
  ub::registerConvertUBToLLVMInterface(interfaces);
  vector::registerConvertVectorToLLVMInterface(interfaces);
  registerBuiltinDialectTranslation(interfaces);
  registerLLVMDialectTranslation(interfaces);
  context->appendDialectRegistry(interfaces);

  PassManager pm(context);
  OpPassManager &inGpu = pm.nest<gpu::GPUModuleOp>();
  inGpu.addPass(createSCFToControlFlowPass());
  inGpu.addPass(createConvertMathToLLVMPass());
  inGpu.addPass(std::move(convertGpuOps));
  inGpu.addPass(createReconcileUnrealizedCastsPass());
  inGpu.addPass(createCanonicalizerPass());
  inGpu.addPass(createCSEPass());
  return pm.run(module);
}

OwningOpRef<ModuleOp> tetra::deviceModule(Operation *gpuModule) {
  OwningOpRef<ModuleOp> device = ModuleOp::create(gpuModule->getLoc());
  OpBuilder builder = OpBuilder::atBlockEnd(device->getBody());
  for (Operation &op : cast<gpu::GPUModuleOp>(gpuModule).getBody()->getOperations())
    builder.clone(op);
  return device;
}

LogicalResult tetra::compileGpuModulesCached(
    ModuleOp module, llvm::StringRef chip, std::vector<GpuKernelCode> &kernels,
    llvm::function_ref<LogicalResult(ModuleOp, GpuKernelCode &)> compile) {
  size_t index = 0;
  for (gpu::GPUModuleOp gpuModule : module.getOps<gpu::GPUModuleOp>()) {
    OwningOpRef<ModuleOp> device = deviceModule(gpuModule);
    GpuKernelCode &kernel = kernels[index++];
    std::string text;
    llvm::raw_string_ostream os(text);
    device->print(os);
    const std::string key = gpuCacheKey(text, chip);
    if (std::optional<CachedGpuCode> cached = readCachedGpuCode(chip, key)) {
      kernel.assembly = cached->assembly.empty() ? cached->code
                                                 : std::move(cached->assembly);
      kernel.code = std::move(cached->code);
      continue;
    }
    if (failed(compile(*device, kernel)))
      return failure();
    // PTX is its own assembly: stored once.
    const bool same = kernel.assembly == kernel.code;
    storeCachedGpuCode(chip, key,
                       {kernel.code, same ? std::string() : kernel.assembly});
  }
  return success();
}
