//===- Buffer.h - A handle to device memory ---------------------*- C++ -*-===//
//
// A Buffer names bytes in a device's memory: an address in the device's
// address space and a size. It does not own the memory (Backend::free does)
// and is not a host pointer: on a GPU the address means nothing to the host,
// and code above the backends never dereferences it. Only a CPU kernel turns
// it into a pointer (cpuPointer in KernelABI.h).
//
// The memory plan of a compiled step allocates a few large buffers and hands
// kernels slices of them, so a slice is a Buffer too.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_BUFFER_H
#define TETRA_RUNTIME_BACKEND_BUFFER_H

#include "runtime/io/Error.h"

#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <string>

namespace tetra::backend {

/// An address in a device's memory: a host address for the CPU, a
/// CUdeviceptr for CUDA, a hipDeviceptr_t for HIP. 64 bits hold all three.
using DeviceAddress = uint64_t;

/// `size` bytes at `address` on some device. Copyable and cheap; the null
/// buffer (address 0, size 0) stands for an empty allocation.
class Buffer {
public:
  Buffer() = default;
  Buffer(DeviceAddress address, size_t size) : address_(address), size_(size) {}

  DeviceAddress address() const { return address_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// The `size` bytes at `offset` inside this buffer, or an error when they
  /// do not fit. A slice is a view: free the whole allocation, never a slice.
  io::Expected<Buffer> slice(size_t offset, size_t size) const {
    if (offset > size_ || size > size_ - offset)
      return io::Error(fmt::format(
          "slice of {} bytes at offset {} does not fit in a buffer of {} bytes",
          size, offset, size_));
    return Buffer(address_ + offset, size);
  }

  friend bool operator==(const Buffer &a, const Buffer &b) {
    return a.address_ == b.address_ && a.size_ == b.size_;
  }
  friend bool operator!=(const Buffer &a, const Buffer &b) { return !(a == b); }

private:
  DeviceAddress address_ = 0;
  size_t size_ = 0;
};

/// Whether `buffer` lies inside one of `allocations` (base address ->
/// bytes), as a backend checks every buffer a call names; an empty buffer
/// always does.
inline bool insideAllocation(const std::map<DeviceAddress, size_t> &allocations,
                             Buffer buffer) {
  if (buffer.empty())
    return true;
  auto it = allocations.upper_bound(buffer.address());
  if (it == allocations.begin())
    return false;
  --it;
  const DeviceAddress offset = buffer.address() - it->first;
  return offset <= it->second && buffer.size() <= it->second - offset;
}

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_BUFFER_H
