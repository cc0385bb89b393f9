//===- Registry.cpp - The library kernels by name -------------------------===//

#include "runtime/kernels/Registry.h"

#include "runtime/kernels/Attention.h"
#include "runtime/kernels/CrossEntropy.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Embedding.h"
#include "runtime/kernels/Matmul.h"
#include "runtime/kernels/Optimizer.h"
#include "runtime/kernels/RMSNorm.h"
#include "runtime/kernels/Rope.h"

#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

namespace tetra::kernels {

namespace {

backend::CpuKernelTable buildTable() {
  using AddFn = io::Status (*)(backend::CpuKernelTable &);
  const AddFn families[] = {
      addEmbeddingKernels, addRMSNormKernels,     addRopeKernels,
      addAttentionKernels, addElementwiseKernels, addCrossEntropyKernels,
      addMatmulKernels,    addOptimizerKernels,
  };
  backend::CpuKernelTable table;
  for (AddFn add : families) {
    io::Status status = add(table);
    if (!status) {
      // Only a duplicate name can fail here: a programming error caught by
      // every test that loads the table.
      fmt::print(stderr, "tetra: kernel registry: {}\n",
                 status.error().message());
      std::abort();
    }
  }
  return table;
}

} // namespace

const backend::CpuKernelTable &libraryKernels() {
  static const backend::CpuKernelTable table = buildTable();
  return table;
}

const backend::KernelSignature *librarySignature(std::string_view name) {
  const backend::CpuKernel *kernel = libraryKernels().find(name);
  return kernel ? &kernel->signature : nullptr;
}

} // namespace tetra::kernels
