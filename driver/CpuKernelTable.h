//===- CpuKernelTable.h - JIT-compiled kernels as runtime kernels -*- C++
//-*-===//
//
// The CPU target's bridge between the compiler and the runtime: the
// `tetra.kernel` regions of a module, JIT-compiled (driver/CpuJit.h), as a
// backend::CpuKernelTable whose entries follow the runtime's calling
// convention (runtime/backend/KernelABI.h: buffers, then scalars). Each entry
// turns its buffers into the memref descriptors the generated code takes, so
// a schedule launches generated kernels exactly like library ones.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_CPUKERNELTABLE_H
#define TETRA_DRIVER_CPUKERNELTABLE_H

#include "driver/CpuJit.h"
#include "runtime/backend/KernelABI.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace tetra::cpu {

class CompiledKernelTable {
public:
  /// Compiles every `tetra.kernel` of `module` (all shapes static; tensor
  /// operands f32, scalar operands i64 — the seed and the step) and builds
  /// the table. Kernel `k`'s signature: its tensor inputs (in) then its
  /// results (out) as buffers, its i64 inputs as scalars, in order.
  static llvm::Expected<std::unique_ptr<CompiledKernelTable>>
  compile(mlir::ModuleOp module, const JitOptions &options = {});

  const backend::CpuKernelTable &table() const { return table_; }
  const KernelLibrary &library() const { return *library_; }

  /// One kernel's entry point and argument layout (the table's user data).
  struct Entry {
    KernelLibrary::PackedFn packed = nullptr;
    /// Per argument of the generated function, in order: a buffer (its index
    /// among the launch's buffers and its shape) or a scalar (its index).
    struct Argument {
      bool isScalar = false;
      int index = 0;
      std::vector<int64_t> shape;
    };
    std::vector<Argument> arguments;
    /// The function takes `part, parts` last and computes that part of the
    /// result's rows (kernelSplitsRows): the launch runs the parts on the
    /// pool's threads.
    bool splitsRows = false;
  };

private:
  std::unique_ptr<KernelLibrary> library_;
  std::vector<std::unique_ptr<Entry>> entries_;
  backend::CpuKernelTable table_;
};

} // namespace tetra::cpu

#endif // TETRA_DRIVER_CPUKERNELTABLE_H
