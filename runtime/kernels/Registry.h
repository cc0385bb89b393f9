//===- Registry.h - The library kernels by name -----------------*- C++ -*-===//
//
// Every library kernel (the ones the compiler does not generate) under a
// stable name with its signature, as one CPU code object: a schedule names
// "rmsnorm.forward", the runtime loads this table into the CpuBackend and
// launches the kernel with buffers and scalars in signature order
// (runtime/backend/KernelABI.h). The calling convention of each kernel is
// documented in its family's header; runtime/kernels/README.md has them all
// in one table, and KernelTests checks that table against this registry.
//
//   const CpuKernelTable &table = libraryKernels();
//   Module module = *backend.loadModule(CodeObject::cpuTable(table,
//   "library")); Kernel norm = *backend.getKernel(module, "rmsnorm.forward");
//   backend.launch(norm, {}, {x, weight, y, rstd},
//                  {Scalar::integer(rows), Scalar::integer(dim),
//                   Scalar::real(1e-5)});
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REGISTRY_H
#define TETRA_RUNTIME_KERNELS_REGISTRY_H

#include "runtime/backend/KernelABI.h"

#include <string_view>

namespace tetra::kernels {

/// All library kernels, built once on first use (thread-safe).
const backend::CpuKernelTable &libraryKernels();

/// The signature of the library kernel called `name`, or null (a compiled
/// kernel, or a typo): what a schedule's validation checks launches against.
const backend::KernelSignature *librarySignature(std::string_view name);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_REGISTRY_H
