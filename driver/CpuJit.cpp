//===- CpuJit.cpp - Compile tetra kernels for the host CPU ----------------===//
//
// Lower (buildTetraToLLVMPipeline), hash the lowered IR with the target and
// the compiler version, and either load the cached object for that hash into
// an LLJIT or compile with the MLIR ExecutionEngine and store its object.
// Both paths link only libMLIR.so and libLLVM.so.
//
//===----------------------------------------------------------------------===//

#include "driver/CpuJit.h"

#include "driver/CacheRoot.h"

#include "dialect/TetraOps.h"
#include "driver/Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <mutex>

using namespace tetra;
using namespace tetra::cpu;

class KernelLibrary::Impl {
public:
  std::vector<std::string> names;
  llvm::StringMap<std::string> signatures;
  llvm::StringMap<void *> entries;
  llvm::StringMap<void *> packedEntries;
  /// Exactly one of the two holds the code: the engine that compiled it, or
  /// the LLJIT that loaded it from the cache.
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  bool fromCache = false;
  std::string cachePath;
};

KernelLibrary::KernelLibrary(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
KernelLibrary::~KernelLibrary() = default;

void *KernelLibrary::lookup(llvm::StringRef name) const {
  return impl->entries.lookup(name);
}
KernelLibrary::PackedFn
KernelLibrary::lookupPacked(llvm::StringRef name) const {
  return reinterpret_cast<PackedFn>(impl->packedEntries.lookup(name));
}
llvm::ArrayRef<std::string> KernelLibrary::kernelNames() const {
  return impl->names;
}
std::string KernelLibrary::signature(llvm::StringRef name) const {
  return impl->signatures.lookup(name);
}
bool KernelLibrary::loadedFromCache() const { return impl->fromCache; }
llvm::StringRef KernelLibrary::cachePath() const { return impl->cachePath; }

namespace {

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::string entryPointName(llvm::StringRef kernel) {
  return ("_mlir_ciface_" + kernel).str();
}

/// The ExecutionEngine wraps every function F in `_mlir_F(void **)`.
std::string packedEntryPointName(llvm::StringRef kernel) {
  return "_mlir_" + entryPointName(kernel);
}

/// The cache root (CacheRoot.h) or the options' directory; "cpu/" below
/// it.
std::string cacheDirectory(const JitOptions &options) {
  llvm::SmallString<256> directory(options.cacheDirectory);
  if (directory.empty())
    directory = codeCacheRoot();
  if (directory.empty())
    return "";
  llvm::sys::path::append(directory, "cpu");
  return std::string(directory);
}

std::optional<llvm::CodeGenOptLevel> codeGenLevel(unsigned optLevel) {
  switch (optLevel) {
  case 0:
    return llvm::CodeGenOptLevel::None;
  case 1:
    return llvm::CodeGenOptLevel::Less;
  case 2:
    return llvm::CodeGenOptLevel::Default;
  default:
    return llvm::CodeGenOptLevel::Aggressive;
  }
}

/// Loads a cached object into an LLJIT that resolves everything else
/// (malloc, free, expf) from this process, as the ExecutionEngine does.
llvm::Error loadCachedObject(KernelLibrary::Impl &library,
                             llvm::orc::JITTargetMachineBuilder builder,
                             std::unique_ptr<llvm::MemoryBuffer> object) {
  builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  auto jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(std::move(builder))
          .setObjectLinkingLayerCreator(
              [](llvm::orc::ExecutionSession &session)
                  -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                    session, [](const llvm::MemoryBuffer &) {
                      return std::make_unique<llvm::SectionMemoryManager>();
                    });
              })
          .create();
  if (!jit)
    return jit.takeError();
  char prefix = (*jit)->getDataLayout().getGlobalPrefix();
  auto generator =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (!generator)
    return generator.takeError();
  (*jit)->getMainJITDylib().addGenerator(std::move(*generator));
  if (llvm::Error error = (*jit)->addObjectFile(std::move(object)))
    return error;
  for (const std::string &name : library.names) {
    auto address = (*jit)->lookup(entryPointName(name));
    if (!address)
      return address.takeError();
    library.entries[name] = address->toPtr<void *>();
    auto packed = (*jit)->lookup(packedEntryPointName(name));
    if (!packed)
      return packed.takeError();
    library.packedEntries[name] = packed->toPtr<void *>();
  }
  library.jit = std::move(*jit);
  return llvm::Error::success();
}

/// Writes `engine`'s object to `path` through a temporary file and a
/// rename, so that a reader never sees half an object. Failing to cache is
/// not an error: the code is compiled already.
void storeObject(mlir::ExecutionEngine &engine, llvm::StringRef path) {
  if (llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return;
  std::string temporary =
      (path + ".tmp" + llvm::Twine(llvm::sys::Process::getProcessId())).str();
  engine.dumpToObjectFile(temporary);
  if (llvm::sys::fs::rename(temporary, path))
    llvm::sys::fs::remove(temporary);
}

} // namespace

std::string tetra::cpu::cacheKey(llvm::StringRef loweredIR,
                                 llvm::StringRef target, unsigned optLevel) {
  llvm::SHA256 hash;
  for (llvm::StringRef part :
       {loweredIR, target, llvm::StringRef(LLVM_VERSION_STRING),
        llvm::StringRef(kCompilerVersion)}) {
    hash.update(part);
    hash.update(llvm::StringRef("\0", 1));
  }
  hash.update(std::to_string(optLevel));
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

llvm::Expected<std::unique_ptr<KernelLibrary>>
tetra::cpu::compileKernels(mlir::ModuleOp module, const JitOptions &options) {
  initializeNativeTarget();
  mlir::MLIRContext *context = module.getContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag.getLocation() << ": " << diag << "\n";
    return mlir::success();
  });

  // Work on a copy: form its kernels if asked, then lower it to the LLVM
  // dialect.
  mlir::OwningOpRef<mlir::ModuleOp> lowered = module.clone();
  if (options.formKernels) {
    mlir::PassManager pm(context);
    buildPipeline(pm, PipelineOptions(), PipelineStage::Kernels,
                  PipelineStage::Quantized);
    if (mlir::failed(pm.run(*lowered)))
      return llvm::createStringError("kernel formation failed:\n" +
                                     diagnostics);
  }
  auto library = std::make_unique<KernelLibrary::Impl>();
  lowered->walk([&](KernelOp kernel) {
    std::string name = kernel.getKernelName().str();
    std::string signature;
    llvm::raw_string_ostream os(signature);
    os << mlir::FunctionType::get(context, kernel.getInputs().getTypes(),
                                  kernel.getResultTypes());
    library->names.push_back(name);
    library->signatures[name] = signature;
  });

  mlir::registerBuiltinDialectTranslation(*context);
  mlir::registerLLVMDialectTranslation(*context);
  mlir::PassManager pm(context);
  buildPipeline(pm, PipelineOptions(), PipelineStage::Code,
                PipelineStage::Code);
  if (mlir::failed(pm.run(*lowered)))
    return llvm::createStringError("CPU code generation failed:\n" +
                                   diagnostics);

  auto targetBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!targetBuilder)
    return targetBuilder.takeError();
  std::string target = targetBuilder->getTargetTriple().str() + " " +
                       targetBuilder->getCPU() + " " +
                       targetBuilder->getFeatures().getString();

  std::string directory = options.useCache ? cacheDirectory(options) : "";
  if (!directory.empty()) {
    std::string text;
    llvm::raw_string_ostream os(text);
    lowered->print(os);
    llvm::SmallString<256> path(directory);
    llvm::sys::path::append(path,
                            cacheKey(text, target, options.optLevel) + ".o");
    library->cachePath = std::string(path);
    if (auto object = llvm::MemoryBuffer::getFile(path)) {
      // A cache entry that does not load (truncated, foreign) is
      // recompiled and overwritten.
      if (llvm::Error error =
              loadCachedObject(*library, *targetBuilder, std::move(*object))) {
        llvm::consumeError(std::move(error));
        library->entries.clear();
        library->packedEntries.clear();
        library->jit.reset();
      } else {
        library->fromCache = true;
        return std::make_unique<KernelLibrary>(std::move(library));
      }
    }
  }

  mlir::ExecutionEngineOptions engineOptions;
  auto transformer =
      mlir::makeOptimizingTransformer(options.optLevel, 0, nullptr);
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel = codeGenLevel(options.optLevel);
  engineOptions.enableObjectDump = !library->cachePath.empty();
  engineOptions.enableGDBNotificationListener = false;
  engineOptions.enablePerfNotificationListener = false;
  auto engine = mlir::ExecutionEngine::create(*lowered, engineOptions);
  if (!engine)
    return engine.takeError();
  for (const std::string &name : library->names) {
    auto address = (*engine)->lookup(entryPointName(name));
    if (!address)
      return address.takeError();
    library->entries[name] = *address;
    auto packed = (*engine)->lookup(packedEntryPointName(name));
    if (!packed)
      return packed.takeError();
    library->packedEntries[name] = *packed;
  }
  if (!library->cachePath.empty())
    storeObject(**engine, library->cachePath);
  library->engine = std::move(*engine);
  return std::make_unique<KernelLibrary>(std::move(library));
}

llvm::Expected<std::unique_ptr<KernelLibrary>>
tetra::cpu::compileKernels(llvm::StringRef source, const JitOptions &options) {
  mlir::DialectRegistry registry;
  registry.insert<TetraDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::tensor::TensorDialect>();
  mlir::MLIRContext context(registry);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag.getLocation() << ": " << diag << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  if (!module)
    return llvm::createStringError("cannot parse the kernel module:\n" +
                                   diagnostics);
  return compileKernels(*module, options);
}
