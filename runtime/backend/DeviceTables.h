//===- DeviceTables.h - What a GPU backend keeps track of -------*- C++ -*-===//
//
// The bookkeeping the CUDA and HIP backends share, whatever their driver:
// the live allocations (every buffer a call names is checked against them
// before anything reaches the device), the loaded modules by handle and
// name, the size checks of copies, and the parameter slots of a launch
// (KernelABI.h: each buffer as its 64-bit device address, then each scalar
// as a 64-bit integer or double). Thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_DEVICETABLES_H
#define TETRA_RUNTIME_BACKEND_DEVICETABLES_H

#include "runtime/backend/ArrayView.h"
#include "runtime/backend/Buffer.h"
#include "runtime/backend/KernelABI.h"
#include "runtime/io/Error.h"

#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tetra::backend {

class DeviceTables {
public:
  void addAllocation(DeviceAddress address, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    allocations_[address] = bytes;
  }
  /// Forgets `buffer`, which must be an allocation of this backend as
  /// allocate() returned it.
  io::Status removeAllocation(Buffer buffer) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(buffer.address());
    if (it == allocations_.end() || it->second != buffer.size())
      return io::Error(fmt::format(
          "free: not an allocation of this backend ({} bytes)", buffer.size()));
    allocations_.erase(it);
    return io::success();
  }
  /// `buffer` lies inside a live allocation; else an error for call `what`.
  io::Status checkLive(Buffer buffer, const char *what) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (insideAllocation(allocations_, buffer))
      return io::success();
    return io::Error(
        fmt::format("{}: {} bytes at {:#x} are not inside a live allocation",
                    what, buffer.size(), buffer.address()));
  }
  /// A copy of `bytes` from `source` into `destination` (either may be
  /// null: host memory) fits both and names live buffers.
  io::Status checkCopy(const char *what, size_t bytes, const Buffer *destination,
                       const Buffer *source) const {
    size_t limit = SIZE_MAX;
    for (const Buffer *buffer : {destination, source})
      if (buffer)
        limit = std::min(limit, buffer->size());
    if (bytes > limit)
      return io::Error(
          destination && source
              ? fmt::format("{}: {} bytes between buffers of {} and {}", what,
                            bytes, source->size(), destination->size())
              : fmt::format("{}: {} bytes {} a buffer of {}", what, bytes,
                            destination ? "into" : "from",
                            (destination ? destination : source)->size()));
    for (const Buffer *buffer : {source, destination})
      if (buffer)
        if (io::Status live = checkLive(*buffer, what); !live)
          return live;
    return io::success();
  }
  /// Every live allocation, for the backend's destructor.
  std::map<DeviceAddress, size_t> allocations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocations_;
  }

  void addModule(uint64_t handle, std::string name) {
    std::lock_guard<std::mutex> lock(mutex_);
    modules_[handle] = std::move(name);
  }
  io::Status removeModule(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!modules_.erase(handle))
      return io::Error("unloadModule: not a module of this backend");
    return io::success();
  }
  /// The name a module was loaded under.
  io::Expected<std::string> moduleName(uint64_t handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = modules_.find(handle);
    if (it == modules_.end())
      return io::Error("getKernel: not a module of this backend");
    return it->second;
  }
  std::map<uint64_t, std::string> modules() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return modules_;
  }

private:
  mutable std::mutex mutex_;
  std::map<DeviceAddress, size_t> allocations_; ///< address -> bytes
  std::map<uint64_t, std::string> modules_;     ///< module handle -> name
};

/// A launch's parameters as the driver takes them: one 64-bit slot per
/// parameter (buffers' device addresses, then scalars' bits) and a pointer
/// to each slot.
struct ParameterSlots {
  std::vector<uint64_t> slots;
  std::vector<void *> pointers;

  ParameterSlots(ArrayView<Buffer> buffers, ArrayView<Scalar> scalars)
      : slots(buffers.size() + scalars.size()), pointers(slots.size()) {
    for (size_t i = 0; i < buffers.size(); ++i)
      slots[i] = buffers[i].address();
    for (size_t i = 0; i < scalars.size(); ++i) {
      uint64_t bits = 0;
      if (scalars[i].kind() == ScalarKind::Int) {
        int64_t value = scalars[i].asInt();
        std::memcpy(&bits, &value, sizeof(bits));
      } else {
        double value = scalars[i].asFloat();
        std::memcpy(&bits, &value, sizeof(bits));
      }
      slots[buffers.size() + i] = bits;
    }
    for (size_t i = 0; i < slots.size(); ++i)
      pointers[i] = &slots[i];
  }
  void **data() { return pointers.empty() ? nullptr : pointers.data(); }
};

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_DEVICETABLES_H
