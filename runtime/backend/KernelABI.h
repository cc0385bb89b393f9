//===- KernelABI.h - How every kernel is called -----------------*- C++ -*-===//
//
// One calling convention for every kernel the runtime launches, whether the
// compiler generated it or it is a library kernel, on every backend: a list of
// buffers and then a list of scalars, each list in the order the kernel's
// signature gives.
//
//   - Buffers are device memory (Buffer.h). The signature gives each one a
//     name, an element type (for size checks and documentation) and an
//     access (in, out, inout).
//   - Scalars are 64-bit: integers as i64 (shapes, flags, steps), reals as
//     f64 (eps, theta, learning rate). Kinds must match the signature exactly.
//   - A variadic signature repeats its last buffer parameter and its last
//     scalar parameter together, one or more times (a list of tensors with
//     their element counts).
//
// On the CPU a kernel is a function pointer of type CpuKernelFn. A GPU
// kernel compiled by Tetra takes, as its parameters, the buffers' device
// addresses (64-bit) followed by the scalars (i64 or f64), in signature order;
// its grid comes from the LaunchConfig (Backend.h).
//
// A schedule produced by the compiler names kernels by their signature name
// ("rmsnorm.forward") and passes arguments in exactly this order; describe()
// prints a signature the way the kernel headers document it.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_KERNELABI_H
#define TETRA_RUNTIME_BACKEND_KERNELABI_H

#include "runtime/backend/ArrayView.h"
#include "runtime/backend/Buffer.h"
#include "runtime/io/Error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::backend {

class ThreadPool;

/// What a scalar argument holds.
enum class ScalarKind { Int, Float };

/// One scalar argument: an i64 or an f64.
class Scalar {
public:
  static Scalar integer(int64_t value) {
    Scalar scalar;
    scalar.kind_ = ScalarKind::Int;
    scalar.int_ = value;
    return scalar;
  }
  static Scalar real(double value) {
    Scalar scalar;
    scalar.kind_ = ScalarKind::Float;
    scalar.float_ = value;
    return scalar;
  }

  ScalarKind kind() const { return kind_; }
  /// The value of an Int scalar (0 for a Float one; signatures are checked
  /// before a kernel runs, so a kernel never sees the wrong kind).
  int64_t asInt() const { return kind_ == ScalarKind::Int ? int_ : 0; }
  /// The value of a Float scalar (0 for an Int one).
  double asFloat() const { return kind_ == ScalarKind::Float ? float_ : 0.0; }

private:
  ScalarKind kind_ = ScalarKind::Int;
  int64_t int_ = 0;
  double float_ = 0.0;
};

/// The element type a buffer parameter holds.
enum class ElementType { F32, I32 };

/// Bytes per element.
size_t elementSize(ElementType type);
/// "f32", "i32".
const char *elementTypeName(ElementType type);

/// How a kernel uses a buffer parameter.
enum class BufferAccess { In, Out, InOut };

struct BufferParam {
  std::string name;
  ElementType type = ElementType::F32;
  BufferAccess access = BufferAccess::In;
};

struct ScalarParam {
  std::string name;
  ScalarKind kind = ScalarKind::Int;
};

/// A kernel's name and parameters: what a schedule must pass.
struct KernelSignature {
  /// Stable, dotted: "<family>.<direction>" or "<name>" ("matmul").
  std::string name;
  std::vector<BufferParam> buffers;
  std::vector<ScalarParam> scalars;
  /// The last buffer and the last scalar parameter repeat together, one or
  /// more times.
  bool variadic = false;
};

/// "rmsnorm.forward(in f32 x, in f32 weight, out f32 y, out f32 rstd;
///  i64 rows, i64 dim, f64 eps)"; a variadic signature ends its lists with
/// "...".
std::string describe(const KernelSignature &signature);

/// Checks a launch's argument counts and scalar kinds against a signature;
/// the error names the kernel and the parameter.
io::Status checkArguments(const KernelSignature &signature,
                          ArrayView<Buffer> buffers, ArrayView<Scalar> scalars);

/// What a CPU kernel runs with.
struct CpuKernelContext {
  ThreadPool &pool;
  const KernelSignature &signature;
  /// What the kernel was registered with (null for library kernels; a
  /// JIT-compiled kernel's entry point and argument layout).
  const void *userData = nullptr;
};

/// A CPU kernel: called only with arguments that passed checkArguments for
/// its signature; checks sizes and values itself, and returns an error rather
/// than touching memory it was not given.
using CpuKernelFn = io::Status (*)(const CpuKernelContext &context,
                                   ArrayView<Buffer> buffers,
                                   ArrayView<Scalar> scalars);

/// A named CPU kernel.
struct CpuKernel {
  KernelSignature signature;
  CpuKernelFn function = nullptr;
  const void *userData = nullptr;
};

/// The CPU's code object: kernels by name. The library kernels are one such
/// table (runtime/kernels/Registry.h); code the compiler JIT-compiles for the
/// CPU will be another.
class CpuKernelTable {
public:
  /// Adds a kernel; an error if the name is taken. `userData` reaches the
  /// kernel through its context and must outlive the table.
  io::Status add(KernelSignature signature, CpuKernelFn function,
                 const void *userData = nullptr);
  /// The kernel called `name`, or null.
  const CpuKernel *find(std::string_view name) const;
  const std::vector<CpuKernel> &kernels() const { return kernels_; }

private:
  std::vector<CpuKernel> kernels_;
};

/// The host pointer behind a CPU buffer. Only CPU kernels may call this.
template <typename T> T *cpuPointer(const Buffer &buffer) {
  return reinterpret_cast<T *>(static_cast<uintptr_t>(buffer.address()));
}

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_KERNELABI_H
