//===- KernelABI.cpp - How every kernel is called -------------------------===//
//
// Signature printing and the argument checks every backend applies before a
// launch.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/KernelABI.h"

#include <fmt/format.h>

namespace tetra::backend {

namespace {

const char *accessName(BufferAccess access) {
  switch (access) {
  case BufferAccess::In:
    return "in";
  case BufferAccess::Out:
    return "out";
  case BufferAccess::InOut:
    return "inout";
  }
  return "?";
}

const char *scalarKindName(ScalarKind kind) {
  return kind == ScalarKind::Int ? "i64" : "f64";
}

} // namespace

size_t elementSize(ElementType type) {
  switch (type) {
  case ElementType::F32:
  case ElementType::I32:
    return 4;
  }
  return 0;
}

const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::I32:
    return "i32";
  }
  return "?";
}

std::string describe(const KernelSignature &signature) {
  std::string text = signature.name + "(";
  for (size_t i = 0; i < signature.buffers.size(); ++i) {
    const BufferParam &param = signature.buffers[i];
    if (i)
      text += ", ";
    text += std::string(accessName(param.access)) + " " +
            elementTypeName(param.type) + " " + param.name;
  }
  if (signature.variadic)
    text += "...";
  text += "; ";
  for (size_t i = 0; i < signature.scalars.size(); ++i) {
    const ScalarParam &param = signature.scalars[i];
    if (i)
      text += ", ";
    text += std::string(scalarKindName(param.kind)) + " " + param.name;
  }
  if (signature.variadic)
    text += "...";
  return text + ")";
}

io::Status checkArguments(const KernelSignature &signature,
                          ArrayView<Buffer> buffers,
                          ArrayView<Scalar> scalars) {
  const size_t fixedBuffers = signature.buffers.size();
  const size_t fixedScalars = signature.scalars.size();
  if (!signature.variadic) {
    if (buffers.size() != fixedBuffers || scalars.size() != fixedScalars)
      return io::Error(
          fmt::format("{}: expects {} buffers and {} scalars, got {} and {}",
                      signature.name, fixedBuffers, fixedScalars,
                      buffers.size(), scalars.size()));
  } else {
    // The last parameter of each list repeats, the same number of times.
    const bool shapeOk =
        fixedBuffers > 0 && fixedScalars > 0 &&
        buffers.size() >= fixedBuffers && scalars.size() >= fixedScalars &&
        buffers.size() - fixedBuffers == scalars.size() - fixedScalars;
    if (!shapeOk)
      return io::Error(
          fmt::format("{}: expects {} + n buffers and {} + n scalars with the "
                      "same n >= 1, got {} and {}",
                      signature.name, fixedBuffers - 1, fixedScalars - 1,
                      buffers.size(), scalars.size()));
  }
  for (size_t i = 0; i < scalars.size(); ++i) {
    const ScalarParam &param =
        signature.scalars[i < fixedScalars ? i : fixedScalars - 1];
    if (scalars[i].kind() != param.kind)
      return io::Error(fmt::format("{}: scalar {} '{}' must be {}, got {}",
                                   signature.name, i, param.name,
                                   scalarKindName(param.kind),
                                   scalarKindName(scalars[i].kind())));
  }
  return io::success();
}

io::Status CpuKernelTable::add(KernelSignature signature, CpuKernelFn function,
                               const void *userData) {
  if (find(signature.name))
    return io::Error("kernel '" + signature.name + "' is registered twice");
  if (!function)
    return io::Error("kernel '" + signature.name + "' has no function");
  kernels_.push_back(CpuKernel{std::move(signature), function, userData});
  return io::success();
}

const CpuKernel *CpuKernelTable::find(std::string_view name) const {
  for (const CpuKernel &kernel : kernels_)
    if (kernel.signature.name == name)
      return &kernel;
  return nullptr;
}

} // namespace tetra::backend
