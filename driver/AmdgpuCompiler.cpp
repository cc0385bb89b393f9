//===- AmdgpuCompiler.cpp - gfx950 GEMM kernels down to HSACO -------------===//

#include "driver/AmdgpuCompiler.h"

#include "mlir/Conversion/GPUToROCDL/GPUToROCDLPass.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "lld/Common/Driver.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <mutex>
#include <regex>

LLD_HAS_DRIVER(elf)

using namespace mlir;
using namespace tetra;

namespace {

void initializeAmdgpu() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
  });
}

/// One gpu.module's body, translated and compiled: the object and the
/// assembly.
LogicalResult emitGfx950(ModuleOp device, StringRef chip, std::string &object,
                         std::string &assembly) {
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(device, llvmContext, "tetra");
  if (!llvmModule)
    return device.emitError("translation of the gfx950 kernels to LLVM IR "
                            "failed");
  // Code object v5: what current HIP runtimes surely load (LLVM 22
  // defaults to v6).
  llvmModule->addModuleFlag(llvm::Module::Error, "amdhsa_code_object_version",
                            500);
  initializeAmdgpu();
  llvm::Triple triple("amdgcn-amd-amdhsa");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return device.emitError("LLVM has no AMDGPU target: ") << error;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, chip, "", llvm::TargetOptions(), std::nullopt, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  for (auto [kind, out] :
       {std::pair{llvm::CodeGenFileType::AssemblyFile, &assembly},
        std::pair{llvm::CodeGenFileType::ObjectFile, &object}}) {
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*llvmModule);
    llvm::SmallString<0> bytes;
    llvm::raw_svector_ostream os(bytes);
    llvm::legacy::PassManager passes;
    if (machine->addPassesToEmitFile(passes, os, nullptr, kind))
      return device.emitError("the AMDGPU backend cannot emit code for ")
             << chip;
    passes.run(*copy);
    *out = std::string(bytes.str());
  }
  return success();
}

/// Links a relocatable gfx950 object into an HSACO (a shared object) with
/// lld, in process, through temporary files.
LogicalResult linkHsaco(Location loc, const std::string &object,
                        std::string &hsaco) {
  llvm::SmallString<128> objectPath, hsacoPath;
  if (llvm::sys::fs::createTemporaryFile("tetra-gfx950", "o", objectPath) ||
      llvm::sys::fs::createTemporaryFile("tetra-gfx950", "hsaco", hsacoPath))
    return emitError(loc, "cannot create temporary files to link the HSACO");
  auto cleanUp = llvm::make_scope_exit([&] {
    llvm::sys::fs::remove(objectPath);
    llvm::sys::fs::remove(hsacoPath);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objectPath, ec);
    if (ec)
      return emitError(loc, "cannot write ") << objectPath << ": " << ec.message();
    os << object;
  }
  static std::mutex lldMutex; // lld's driver is not reentrant
  std::lock_guard<std::mutex> lock(lldMutex);
  std::string diagnostics;
  llvm::raw_string_ostream errors(diagnostics);
  const char *args[] = {"ld.lld", "-shared", objectPath.c_str(), "-o",
                        hsacoPath.c_str()};
  lld::Result result = lld::lldMain(args, llvm::nulls(), errors,
                                    {{lld::Gnu, &lld::elf::link}});
  if (result.retCode != 0)
    return emitError(loc, "lld could not link the HSACO: ") << diagnostics;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> linked =
      llvm::MemoryBuffer::getFile(hsacoPath);
  if (!linked)
    return emitError(loc, "cannot read the linked HSACO");
  hsaco = (*linked)->getBuffer().str();
  return success();
}

} // namespace

std::vector<AmdgpuResources> tetra::amdgpuResources(StringRef assembly) {
  std::vector<AmdgpuResources> report;
  std::string text = assembly.str();
  // Each kernel's descriptor block names it and its resources.
  std::regex kernelStart(R"(\.amdhsa_kernel\s+(\S+))");
  auto field = [](const std::string &block, const char *name) -> int64_t {
    std::regex pattern(std::string("\\.") + name + R"(\s+(\d+))");
    std::smatch match;
    return std::regex_search(block, match, pattern) ? std::stoll(match[1])
                                                    : 0;
  };
  for (std::sregex_iterator it(text.begin(), text.end(), kernelStart), end;
       it != end; ++it) {
    AmdgpuResources kernel;
    kernel.function = (*it)[1];
    size_t blockEnd = text.find(".end_amdhsa_kernel", it->position());
    std::string block = text.substr(it->position(), blockEnd - it->position());
    int64_t nextVgpr = field(block, "amdhsa_next_free_vgpr");
    int64_t accumOffset = field(block, "amdhsa_accum_offset");
    kernel.vgprs = accumOffset > 0 ? accumOffset : nextVgpr;
    kernel.agprs = std::max<int64_t>(0, nextVgpr - kernel.vgprs);
    kernel.sgprs = field(block, "amdhsa_next_free_sgpr");
    kernel.ldsBytes = field(block, "amdhsa_group_segment_fixed_size");
    kernel.scratchBytes = field(block, "amdhsa_private_segment_fixed_size");
    // The function's body: from its label to its end marker.
    std::string label = "\n" + kernel.function + ":";
    size_t bodyBegin = text.find(label);
    size_t bodyEnd = text.find(".Lfunc_end", bodyBegin);
    if (bodyBegin != std::string::npos) {
      std::string body = text.substr(bodyBegin, bodyEnd - bodyBegin);
      for (size_t at = body.find("v_mfma_"); at != std::string::npos;
           at = body.find("v_mfma_", at + 1)) {
        ++kernel.mfmas;
        kernel.scaledMfmas += body.compare(at, 12, "v_mfma_scale") == 0;
      }
    }
    // The metadata's entry for this function: its .args up to its .name.
    size_t metadata = text.find("amdhsa.kernels:");
    size_t named = text.find(".name:           " + kernel.function + "\n",
                             metadata == std::string::npos ? 0 : metadata);
    if (metadata != std::string::npos && named != std::string::npos) {
      size_t entry = text.rfind("\n  - ", named);
      std::string args = text.substr(entry, named - entry);
      std::regex argument(
          R"(\.offset:\s+(\d+)\s+\.size:\s+(\d+)\s+\.value_kind:\s+(\w+))");
      for (std::sregex_iterator a(args.begin(), args.end(), argument), none;
           a != none; ++a)
        if (std::string((*a)[3]).rfind("hidden_", 0) != 0)
          kernel.arguments.push_back(
              {std::stoll((*a)[1]), std::stoll((*a)[2]), (*a)[3]});
    }
    int64_t slots = ((nextVgpr + 7) / 8) * 8;
    kernel.occupancy = slots > 0 ? std::min<int64_t>(8, 512 / slots) : 8;
    report.push_back(kernel);
  }
  return report;
}

FailureOr<std::vector<GpuKernelCode>> tetra::compileToHsaco(ModuleOp module,
                                                            StringRef chip) {
  MLIRContext *context = module.getContext();
  std::vector<GpuKernelCode> kernels = describeGpuKernels(module);

  ConvertGpuOpsToROCDLOpsOptions options;
  options.chipset = chip.str();
  options.indexBitwidth = 64;
  options.useBarePtrCallConv = true;
  if (failed(lowerGpuModules(module, createConvertGpuOpsToROCDLOps(options))))
    return failure();
  DialectRegistry registry;
  registerROCDLDialectTranslation(registry);
  context->appendDialectRegistry(registry);

  if (failed(compileGpuModulesCached(
          module, chip, kernels,
          [&](ModuleOp device, GpuKernelCode &kernel) -> LogicalResult {
            std::string object;
            if (failed(emitGfx950(device, chip, object, kernel.assembly)))
              return failure();
            return linkHsaco(device.getLoc(), object, kernel.code);
          })))
    return failure();
  return kernels;
}
