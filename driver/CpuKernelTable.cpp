//===- CpuKernelTable.cpp - JIT-compiled kernels as runtime kernels -------===//

#include "driver/CpuKernelTable.h"

#include "dialect/LLVMFormatters.h"
#include "dialect/TetraOps.h"
#include "lowering/Conversion/Passes.h"
#include "runtime/backend/ThreadPool.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tetra;
using namespace tetra::cpu;

namespace {

/// Calls a generated kernel through its packed entry point: every tensor as
/// a pointer to a row-major memref descriptor over the buffer's memory,
/// every scalar as an int64_t.
io::Status runCompiledKernel(const backend::CpuKernelContext &context,
                             backend::ArrayView<backend::Buffer> buffers,
                             backend::ArrayView<backend::Scalar> scalars) {
  const auto *entry =
      static_cast<const CompiledKernelTable::Entry *>(context.userData);
  if (!entry)
    return io::Error(context.signature.name + ": no compiled code");
  size_t count = entry->arguments.size();
  // Descriptors: {allocated, aligned, offset, sizes[R], strides[R]}.
  std::vector<std::vector<int64_t>> descriptors(count);
  std::vector<void *> descriptorPointers(count);
  std::vector<int64_t> scalarValues(count);
  std::vector<void *> arguments(count);
  for (size_t i = 0; i < count; ++i) {
    const CompiledKernelTable::Entry::Argument &argument = entry->arguments[i];
    if (argument.isScalar) {
      scalarValues[i] = scalars[argument.index].asInt();
      arguments[i] = &scalarValues[i];
      continue;
    }
    int64_t address = static_cast<int64_t>(buffers[argument.index].address());
    std::vector<int64_t> &descriptor = descriptors[i];
    descriptor = {address, address, 0};
    descriptor.insert(descriptor.end(), argument.shape.begin(),
                      argument.shape.end());
    int64_t stride = 1;
    std::vector<int64_t> strides(argument.shape.size());
    for (int d = static_cast<int>(argument.shape.size()) - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= argument.shape[d];
    }
    if (buffers[argument.index].size() <
        static_cast<size_t>(stride) * sizeof(float))
      return io::Error(
          fmt::format("{}: buffer {} holds {} bytes, the kernel needs {}",
                      context.signature.name, argument.index,
                      buffers[argument.index].size(), stride * sizeof(float)));
    descriptor.insert(descriptor.end(), strides.begin(), strides.end());
    descriptorPointers[i] = descriptor.data();
    arguments[i] = &descriptorPointers[i];
  }
  if (!entry->splitsRows) {
    entry->packed(arguments.data());
    return io::success();
  }
  // One part of the result rows per thread; every part computes its rows
  // exactly as a single call would, so the bits do not depend on the split.
  const int64_t parts = context.pool.threadCount();
  context.pool.parallelFor(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      std::vector<void *> own = arguments;
      int64_t partValue = part, partsValue = parts;
      own.push_back(&partValue);
      own.push_back(&partsValue);
      entry->packed(own.data());
    }
  });
  return io::success();
}

} // namespace

llvm::Expected<std::unique_ptr<CompiledKernelTable>>
CompiledKernelTable::compile(ModuleOp module, const JitOptions &options) {
  auto table = std::unique_ptr<CompiledKernelTable>(new CompiledKernelTable());
  std::string error;
  module.walk([&](KernelOp kernel) {
    if (!error.empty())
      return;
    auto entry = std::make_unique<Entry>();
    entry->splitsRows = kernelSplitsRows(kernel);
    backend::KernelSignature signature;
    signature.name = kernel.getKernelName().str();
    int bufferCount = 0, scalarCount = 0;
    auto addTensor = [&](Type type, backend::BufferAccess access,
                         const std::string &name) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || !tensor.hasStaticShape() ||
          !tensor.getElementType().isF32()) {
        error = signature.name + ": kernel operand of type " +
                llvm::formatv("{0}", type).str() +
                " (the CPU runtime passes static f32 tensors)";
        return;
      }
      Entry::Argument argument;
      argument.index = bufferCount++;
      argument.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
      entry->arguments.push_back(argument);
      signature.buffers.push_back({name, backend::ElementType::F32, access});
    };
    for (auto [index, input] : llvm::enumerate(kernel.getInputs())) {
      if (input.getType().isInteger(64)) {
        Entry::Argument argument;
        argument.isScalar = true;
        argument.index = scalarCount++;
        entry->arguments.push_back(argument);
        signature.scalars.push_back(
            {fmt::format("i{}", index), backend::ScalarKind::Int});
        continue;
      }
      addTensor(input.getType(), backend::BufferAccess::In,
                fmt::format("in{}", index));
    }
    for (auto [index, result] : llvm::enumerate(kernel.getResults()))
      addTensor(result.getType(), backend::BufferAccess::Out,
                fmt::format("out{}", index));
    if (error.empty()) {
      table->entries_.push_back(std::move(entry));
      if (io::Status added = table->table_.add(signature, runCompiledKernel,
                                               table->entries_.back().get());
          !added)
        error = added.error().message();
    }
  });
  if (!error.empty())
    return llvm::createStringError(error);

  llvm::Expected<std::unique_ptr<KernelLibrary>> library =
      compileKernels(module, options);
  if (!library)
    return library.takeError();
  table->library_ = std::move(*library);
  for (size_t i = 0; i < table->entries_.size(); ++i) {
    const std::string &name = table->table_.kernels()[i].signature.name;
    table->entries_[i]->packed = table->library_->lookupPacked(name);
    if (!table->entries_[i]->packed)
      return llvm::createStringError("no compiled entry point for kernel '" +
                                     name + "'");
  }
  return table;
}
