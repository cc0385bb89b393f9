//===- CpuJit.h - Compile tetra kernels for the host CPU --------*- C++ -*-===//
//
// Compiles the tetra.kernel ops of a module for the CPU this process runs on
// (buildTetraToLLVMPipeline, then the MLIR ExecutionEngine) and hands out
// each kernel's entry point. Compiled objects are cached on disk, keyed by a
// hash of the lowered IR, the target and the compiler version, so an
// unchanged kernel module is compiled once per machine.
//
// The kernel ABI (lowering/Conversion/Passes.td, --convert-tetra-to-cpu): kernel
// "NAME" is `void _mlir_ciface_NAME(args...)`, one argument per kernel
// input, then one per result; a tensor is a pointer to a MemRefDescriptor of
// a contiguous row-major buffer (float for f32, uint16_t for bf16 bits,
// uint8_t for codes and scales; rank 0 for an NVFP4 tensor scale), an
// integer input an int64_t by value. The caller allocates the results.
//
// This header has no MLIR types in it beyond a forward declaration, so that
// a caller (a test, the trainer) compiles quickly.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_CPUJIT_H
#define TETRA_DRIVER_CPUJIT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace tetra::cpu {

/// A strided memref descriptor as the kernels take it (MLIR's
/// StridedMemRefType, declared here so that callers need no MLIR headers).
template <typename T, int Rank> struct MemRefDescriptor {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

template <typename T> struct MemRefDescriptor<T, 0> {
  T *allocated;
  T *aligned;
  int64_t offset;
};

/// The descriptor of a contiguous row-major buffer of `sizes`.
template <typename T, int Rank>
MemRefDescriptor<T, Rank> describe(T *data,
                                   const std::array<int64_t, Rank> &sizes) {
  MemRefDescriptor<T, Rank> descriptor;
  descriptor.allocated = data;
  descriptor.aligned = data;
  descriptor.offset = 0;
  int64_t stride = 1;
  for (int d = Rank - 1; d >= 0; --d) {
    descriptor.sizes[d] = sizes[d];
    descriptor.strides[d] = stride;
    stride *= sizes[d];
  }
  return descriptor;
}

template <typename T> MemRefDescriptor<T, 0> describeScalar(T *data) {
  return {data, data, 0};
}

struct JitOptions {
  /// Where compiled objects are kept. Empty: $TETRA_CACHE_DIR if set, else
  /// $XDG_CACHE_HOME/tetra, else $HOME/.cache/tetra (then "cpu/" below it).
  std::string cacheDirectory;
  /// Off: always compile, never read or write the cache.
  bool useCache = true;
  /// LLVM optimization level (0-3) of the IR and of code generation.
  unsigned optLevel = 2;
  /// Run --tetra-materialize-quantization and --tetra-form-kernels first:
  /// for a module of tetra.matmul ops rather than of kernels.
  bool formKernels = false;
};

/// The compiled kernels of one module, alive as long as this object is.
class KernelLibrary {
public:
  class Impl;
  explicit KernelLibrary(std::unique_ptr<Impl> impl);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  /// The entry point `_mlir_ciface_NAME` of kernel `name`, or null.
  void *lookup(llvm::StringRef name) const;
  /// The packed entry point `_mlir__mlir_ciface_NAME(void **arguments)` of
  /// kernel `name`, or null: arguments[i] points to the entry point's i-th
  /// argument (to a MemRefDescriptor pointer, or to an int64_t), for callers
  /// that assemble argument lists at run time.
  using PackedFn = void (*)(void **);
  PackedFn lookupPacked(llvm::StringRef name) const;
  /// The kernel's entry point as a function of the given signature.
  template <typename Signature>
  Signature *lookupAs(llvm::StringRef name) const {
    return reinterpret_cast<Signature *>(lookup(name));
  }
  /// The kernels' names, in module order.
  llvm::ArrayRef<std::string> kernelNames() const;
  /// Kernel `name`'s tensor-level type, e.g. "(tensor<64x128xf32>, i64) ->
  /// tensor<64x32xf32>": its inputs in order, then its results, which the
  /// ABI turns into the entry point's arguments. Empty for an unknown name.
  std::string signature(llvm::StringRef name) const;
  /// Whether the object came from the on-disk cache (no code generation).
  bool loadedFromCache() const;
  /// The object file of this library in the cache (empty without a cache).
  llvm::StringRef cachePath() const;

private:
  std::unique_ptr<Impl> impl;
};

/// Compiles every tetra.kernel of `module` (which is not modified; other
/// functions are ignored). Errors carry the diagnostics' text.
llvm::Expected<std::unique_ptr<KernelLibrary>>
compileKernels(mlir::ModuleOp module, const JitOptions &options = {});

/// The same for a module given as MLIR text, parsed in a context of its own
/// that knows the tetra, func, arith and tensor dialects.
llvm::Expected<std::unique_ptr<KernelLibrary>>
compileKernels(llvm::StringRef source, const JitOptions &options = {});

/// The cache key of a lowered module: SHA-256 over the LLVM-dialect IR text,
/// the target triple, CPU and features, the optimization level, and the
/// compiler version (LLVM's and Tetra's kCompilerVersion). Exposed for tests.
std::string cacheKey(llvm::StringRef loweredIR, llvm::StringRef target,
                     unsigned optLevel);

/// Bumped when the CPU code generation changes in a way the lowered IR
/// would not show (it shows almost everything: the IR text is in the key).
constexpr const char *kCompilerVersion = "tetra-cpu-1";

} // namespace tetra::cpu

#endif // TETRA_DRIVER_CPUJIT_H
