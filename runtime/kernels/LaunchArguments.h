//===- LaunchArguments.h - Checked arguments of a CPU launch ----*- C++ -*-===//
//
// Every registry entry point turns (buffers, scalars) into typed pointers and
// sizes before it calls its kernel, and must never touch memory it was not
// given. LaunchArguments does the checking: shapes are non-negative, element
// counts do not overflow, every buffer is large enough and aligned for its
// element type. It records the first failure and hands out harmless defaults
// afterwards, so an entry point reads straight through and tests ok() once:
//
//   LaunchArguments args(context, buffers, scalars);
//   const int64_t rows = args.size(0), dim = args.size(1);
//   const float *x = args.input<float>(0, args.product({rows, dim}));
//   ...
//   if (!args.ok())
//     return args.status();
//
// Internal to runtime/kernels.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_LAUNCHARGUMENTS_H
#define TETRA_RUNTIME_KERNELS_LAUNCHARGUMENTS_H

#include "runtime/backend/KernelABI.h"
#include "runtime/io/Error.h"

#include <cstdint>
#include <fmt/format.h>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

namespace tetra::kernels {

class LaunchArguments {
public:
  LaunchArguments(const backend::CpuKernelContext &context,
                  backend::ArrayView<backend::Buffer> buffers,
                  backend::ArrayView<backend::Scalar> scalars)
      : context_(context), buffers_(buffers), scalars_(scalars) {}

  backend::ThreadPool &pool() const { return context_.pool; }
  size_t bufferCount() const { return buffers_.size(); }
  size_t scalarCount() const { return scalars_.size(); }

  /// Integer scalar `index`, which must be at least `minimum` (a shape).
  int64_t size(size_t index, int64_t minimum = 0) {
    const int64_t value = scalars_[index].asInt();
    if (value < minimum)
      fail(fmt::format("'{}' is {}, must be at least {}", scalarName(index),
                       value, minimum));
    return value < minimum ? minimum : value;
  }

  /// Integer scalar `index`, which must be 0 or 1.
  bool flag(size_t index) {
    const int64_t value = scalars_[index].asInt();
    if (value != 0 && value != 1)
      fail(fmt::format("'{}' is {}, must be 0 or 1", scalarName(index), value));
    return value == 1;
  }

  /// Integer scalar `index`, unchecked.
  int64_t integer(size_t index) const { return scalars_[index].asInt(); }
  /// Float scalar `index`.
  double real(size_t index) const { return scalars_[index].asFloat(); }

  /// The product of non-negative sizes, or a failure on overflow.
  int64_t product(std::initializer_list<int64_t> factors) {
    int64_t result = 1;
    for (int64_t factor : factors) {
      if (factor < 0 || (factor != 0 && result > INT64_MAX / 4 / factor)) {
        fail("the element count overflows");
        return 0;
      }
      result *= factor;
    }
    return result;
  }

  /// Records a failure unless `condition` holds.
  void require(bool condition, const std::string &message) {
    if (!condition)
      fail(message);
  }

  /// Buffer `index` as `elements` values of T (read only).
  template <typename T> const T *input(size_t index, int64_t elements) {
    return bind<T>(index, elements);
  }
  /// Buffer `index` as `elements` values of T (written).
  template <typename T> T *output(size_t index, int64_t elements) {
    return bind<T>(index, elements);
  }

  bool ok() const { return !error_.has_value(); }
  io::Status status() const {
    if (error_)
      return *error_;
    return io::success();
  }

  /// Records `message` (prefixed with the kernel's name) as the failure if
  /// none was recorded yet.
  void fail(const std::string &message) {
    if (!error_)
      error_ = io::Error(context_.signature.name + ": " + message);
  }

private:
  std::string scalarName(size_t index) const {
    const auto &params = context_.signature.scalars;
    return params[index < params.size() ? index : params.size() - 1].name;
  }
  const backend::BufferParam &bufferParam(size_t index) const {
    const auto &params = context_.signature.buffers;
    return params[index < params.size() ? index : params.size() - 1];
  }

  template <typename T> T *bind(size_t index, int64_t elements) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t>);
    if (!ok())
      return nullptr;
    const backend::Buffer &buffer = buffers_[index];
    const backend::BufferParam &param = bufferParam(index);
    auto label = [&] {
      return fmt::format("buffer {} '{}'", index, param.name);
    };
    const uint64_t needed = static_cast<uint64_t>(elements) * sizeof(T);
    if (buffer.size() < needed) {
      fail(fmt::format("{} holds {} bytes, needs {} ({} x {})", label(),
                       buffer.size(), needed, elements,
                       backend::elementTypeName(param.type)));
      return nullptr;
    }
    if (buffer.address() % alignof(T) != 0) {
      fail(fmt::format("{} is not aligned to {} bytes", label(), alignof(T)));
      return nullptr;
    }
    return backend::cpuPointer<T>(buffer);
  }

  const backend::CpuKernelContext &context_;
  backend::ArrayView<backend::Buffer> buffers_;
  backend::ArrayView<backend::Scalar> scalars_;
  std::optional<io::Error> error_;
};

/// Shorthands for signatures.
inline backend::BufferParam inF32(std::string name) {
  return {std::move(name), backend::ElementType::F32,
          backend::BufferAccess::In};
}
inline backend::BufferParam inI32(std::string name) {
  return {std::move(name), backend::ElementType::I32,
          backend::BufferAccess::In};
}
inline backend::BufferParam outF32(std::string name) {
  return {std::move(name), backend::ElementType::F32,
          backend::BufferAccess::Out};
}
inline backend::BufferParam inoutF32(std::string name) {
  return {std::move(name), backend::ElementType::F32,
          backend::BufferAccess::InOut};
}
inline backend::ScalarParam i64(std::string name) {
  return {std::move(name), backend::ScalarKind::Int};
}
inline backend::ScalarParam f64(std::string name) {
  return {std::move(name), backend::ScalarKind::Float};
}

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_LAUNCHARGUMENTS_H
