//===- CpuBackend.h - The Backend interface on the host ---------*- C++ -*-===//
//
// Device memory is host memory, a code object is a table of function
// pointers, and a launch calls the function on the calling thread, which
// splits the work over the backend's ThreadPool. Work runs when it is
// submitted, so every stream is trivially in order and synchronize() has
// nothing to wait for; the Backend contract (Backend.h) still holds, so code
// written against the CPU runs unchanged on an asynchronous GPU.
//
// The CPU backend is also the strict one: it keeps a table of live
// allocations and rejects a copy or a launch whose buffers are not inside
// one (freed, never allocated, or out of range), and a launch whose arguments
// do not match the kernel's signature, so that mistakes in a schedule show up
// as errors in CI rather than as corrupted memory.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_CPUBACKEND_H
#define TETRA_RUNTIME_BACKEND_CPUBACKEND_H

#include "runtime/backend/Backend.h"
#include "runtime/backend/ThreadPool.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace tetra::backend {

class CpuBackend final : public Backend {
public:
  /// A backend whose pool has `threadCount` threads (the caller included).
  explicit CpuBackend(int threadCount);
  /// Frees every allocation still live.
  ~CpuBackend() override;

  /// A backend sized by ThreadPool::configuredThreadCount() (the affinity
  /// mask, or TETRA_NUM_THREADS); an error if TETRA_NUM_THREADS is invalid.
  static io::Expected<std::unique_ptr<CpuBackend>> create();

  ThreadPool &pool() { return pool_; }

  std::string_view name() const override { return "cpu"; }
  std::string description() const override;

  io::Expected<Buffer> allocate(size_t bytes) override;
  io::Status free(Buffer buffer) override;

  io::Status copyToDevice(Buffer destination, const void *source, size_t bytes,
                          Stream stream = {}) override;
  io::Status copyToHost(void *destination, Buffer source, size_t bytes,
                        Stream stream = {}) override;
  io::Status copyOnDevice(Buffer destination, Buffer source, size_t bytes,
                          Stream stream = {}) override;
  io::Status fill(Buffer buffer, uint8_t value, Stream stream = {}) override;

  io::Expected<Stream> createStream() override;
  io::Status destroyStream(Stream stream) override;
  io::Status synchronize(Stream stream = {}) override;

  io::Expected<Module> loadModule(const CodeObject &code) override;
  io::Status unloadModule(Module module) override;
  io::Expected<Kernel> getKernel(Module module, std::string_view name) override;
  const KernelSignature *signature(Kernel kernel) const override;

  io::Status launch(Kernel kernel, const LaunchConfig &config,
                    ArrayView<Buffer> buffers, ArrayView<Scalar> scalars,
                    Stream stream = {}) override;

  /// Bytes in live allocations, and the most there ever were.
  size_t bytesInUse() const;
  size_t peakBytesInUse() const;

private:
  /// Requires mutex_. Whether `buffer` lies inside a live allocation (an
  /// empty buffer always does).
  bool isLive(Buffer buffer) const;
  /// The error for a buffer that is not; `what` names the argument.
  static io::Error notLive(Buffer buffer, const std::string &what);
  /// Requires mutex_.
  io::Status checkStream(Stream stream) const;

  struct LoadedKernel {
    uint64_t module;
    const CpuKernel *kernel;
  };

  ThreadPool pool_;
  mutable std::mutex mutex_;
  /// Start address -> size of every live allocation.
  std::map<DeviceAddress, size_t> allocations_;
  size_t bytesInUse_ = 0;
  size_t peakBytesInUse_ = 0;
  std::set<uint64_t> streams_;
  std::map<uint64_t, const CpuKernelTable *> modules_;
  std::map<uint64_t, LoadedKernel> kernels_;
  uint64_t nextHandle_ = 1;
};

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_CPUBACKEND_H
