//===- CpuBackend.cpp - The Backend interface on the host -----------------===//
//
// Memory comes from aligned operator new (nothrow: an allocation failure is
// an error, not an exception). Handles for streams, modules and kernels are
// counters, so a stale handle is an error rather than a dangling pointer.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CpuBackend.h"

#include <cstring>
#include <fmt/format.h>
#include <new>

namespace tetra::backend {

namespace {

constexpr size_t kAlignment = 64;

std::string bytesText(size_t bytes) { return fmt::format("{} bytes", bytes); }

} // namespace

CpuBackend::CpuBackend(int threadCount) : pool_(threadCount) {}

CpuBackend::~CpuBackend() {
  for (const auto &[address, size] : allocations_)
    ::operator delete(reinterpret_cast<void *>(static_cast<uintptr_t>(address)),
                      std::align_val_t(kAlignment));
}

io::Expected<std::unique_ptr<CpuBackend>> CpuBackend::create() {
  io::Expected<int> threads = ThreadPool::configuredThreadCount();
  if (!threads)
    return threads.error();
  return std::make_unique<CpuBackend>(*threads);
}

std::string CpuBackend::description() const {
  return fmt::format("cpu: {} threads", pool_.threadCount());
}

io::Expected<Buffer> CpuBackend::allocate(size_t bytes) {
  if (bytes == 0)
    return Buffer();
  // Round up so that a kernel may read whole vectors at the end of a buffer.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes)
    return io::Error("cannot allocate " + bytesText(bytes));
  void *memory =
      ::operator new(rounded, std::align_val_t(kAlignment), std::nothrow);
  if (!memory)
    return io::Error("out of memory allocating " + bytesText(bytes));
  const auto address =
      static_cast<DeviceAddress>(reinterpret_cast<uintptr_t>(memory));
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[address] = bytes;
  bytesInUse_ += bytes;
  peakBytesInUse_ = std::max(peakBytesInUse_, bytesInUse_);
  return Buffer(address, bytes);
}

io::Status CpuBackend::free(Buffer buffer) {
  if (buffer.address() == 0 && buffer.empty())
    return io::success();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocations_.find(buffer.address());
  if (it == allocations_.end() || it->second != buffer.size())
    return io::Error("free: the buffer of " + bytesText(buffer.size()) +
                     " is not a live allocation (freed twice, a slice, or "
                     "never allocated)");
  ::operator delete(
      reinterpret_cast<void *>(static_cast<uintptr_t>(buffer.address())),
      std::align_val_t(kAlignment));
  bytesInUse_ -= it->second;
  allocations_.erase(it);
  return io::success();
}

bool CpuBackend::isLive(Buffer buffer) const {
  return insideAllocation(allocations_, buffer);
}

io::Error CpuBackend::notLive(Buffer buffer, const std::string &what) {
  return io::Error(what + ": the buffer of " + bytesText(buffer.size()) +
                   " is not inside a live allocation");
}

io::Status CpuBackend::checkStream(Stream stream) const {
  if (stream.handle == 0 || streams_.count(stream.handle))
    return io::success();
  return io::Error(fmt::format("unknown stream {}", stream.handle));
}

io::Status CpuBackend::copyToDevice(Buffer destination, const void *source,
                                    size_t bytes, Stream stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (io::Status status = checkStream(stream); !status)
      return status;
    if (!isLive(destination))
      return notLive(destination, "copyToDevice");
  }
  if (bytes > destination.size())
    return io::Error("copyToDevice: " + bytesText(bytes) +
                     " do not fit in a buffer of " +
                     bytesText(destination.size()));
  if (bytes == 0)
    return io::success();
  if (!source)
    return io::Error("copyToDevice: null host source");
  std::memcpy(cpuPointer<void>(destination), source, bytes);
  return io::success();
}

io::Status CpuBackend::copyToHost(void *destination, Buffer source,
                                  size_t bytes, Stream stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (io::Status status = checkStream(stream); !status)
      return status;
    if (!isLive(source))
      return notLive(source, "copyToHost");
  }
  if (bytes > source.size())
    return io::Error("copyToHost: " + bytesText(bytes) +
                     " requested from a buffer of " + bytesText(source.size()));
  if (bytes == 0)
    return io::success();
  if (!destination)
    return io::Error("copyToHost: null host destination");
  std::memcpy(destination, cpuPointer<void>(source), bytes);
  return io::success();
}

io::Status CpuBackend::copyOnDevice(Buffer destination, Buffer source,
                                    size_t bytes, Stream stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (io::Status status = checkStream(stream); !status)
      return status;
    if (!isLive(destination))
      return notLive(destination, "copyOnDevice destination");
    if (!isLive(source))
      return notLive(source, "copyOnDevice source");
  }
  if (bytes > destination.size() || bytes > source.size())
    return io::Error("copyOnDevice: " + bytesText(bytes) +
                     " do not fit (source " + bytesText(source.size()) +
                     ", destination " + bytesText(destination.size()) + ")");
  if (bytes == 0)
    return io::success();
  const DeviceAddress d = destination.address(), s = source.address();
  if (d < s + bytes && s < d + bytes)
    return io::Error("copyOnDevice: source and destination overlap");
  std::memcpy(cpuPointer<void>(destination), cpuPointer<void>(source), bytes);
  return io::success();
}

io::Status CpuBackend::fill(Buffer buffer, uint8_t value, Stream stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (io::Status status = checkStream(stream); !status)
      return status;
    if (!isLive(buffer))
      return notLive(buffer, "fill");
  }
  if (!buffer.empty())
    std::memset(cpuPointer<void>(buffer), value, buffer.size());
  return io::success();
}

io::Expected<Stream> CpuBackend::createStream() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t handle = nextHandle_++;
  streams_.insert(handle);
  return Stream{handle};
}

io::Status CpuBackend::destroyStream(Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream.handle == 0)
    return io::Error("destroyStream: the default stream cannot be destroyed");
  if (!streams_.erase(stream.handle))
    return io::Error(
        fmt::format("destroyStream: unknown stream {}", stream.handle));
  return io::success();
}

io::Status CpuBackend::synchronize(Stream stream) {
  // Work ran when it was submitted; its failures were reported then.
  std::lock_guard<std::mutex> lock(mutex_);
  return checkStream(stream);
}

io::Expected<Module> CpuBackend::loadModule(const CodeObject &code) {
  if (code.format != CodeObjectFormat::CpuKernelTable || !code.cpuKernels)
    return io::Error(code.name +
                     ": the cpu backend loads kernel tables, not GPU code");
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t handle = nextHandle_++;
  modules_[handle] = code.cpuKernels;
  return Module{handle};
}

io::Status CpuBackend::unloadModule(Module module) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!modules_.erase(module.handle))
    return io::Error(
        fmt::format("unloadModule: unknown module {}", module.handle));
  for (auto it = kernels_.begin(); it != kernels_.end();)
    it = it->second.module == module.handle ? kernels_.erase(it) : ++it;
  return io::success();
}

io::Expected<Kernel> CpuBackend::getKernel(Module module,
                                           std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = modules_.find(module.handle);
  if (it == modules_.end())
    return io::Error(
        fmt::format("getKernel: unknown module {}", module.handle));
  const CpuKernel *kernel = it->second->find(name);
  if (!kernel)
    return io::Error("no kernel named '" + std::string(name) + "'");
  // One handle per (module, kernel), so repeated lookups do not grow the map.
  for (const auto &[handle, loaded] : kernels_)
    if (loaded.module == module.handle && loaded.kernel == kernel)
      return Kernel{handle};
  const uint64_t handle = nextHandle_++;
  kernels_[handle] = LoadedKernel{module.handle, kernel};
  return Kernel{handle};
}

const KernelSignature *CpuBackend::signature(Kernel kernel) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kernels_.find(kernel.handle);
  return it == kernels_.end() ? nullptr : &it->second.kernel->signature;
}

io::Status CpuBackend::launch(Kernel kernel, const LaunchConfig &config,
                              ArrayView<Buffer> buffers,
                              ArrayView<Scalar> scalars, Stream stream) {
  (void)config;
  const CpuKernel *function = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kernels_.find(kernel.handle);
    if (it == kernels_.end())
      return io::Error(
          fmt::format("launch: unknown kernel {} (its module was unloaded?)",
                      kernel.handle));
    function = it->second.kernel;
    if (io::Status status = checkStream(stream); !status)
      return status;
    for (size_t i = 0; i < buffers.size(); ++i)
      if (!isLive(buffers[i]))
        return notLive(buffers[i], fmt::format("{} buffer {}",
                                               function->signature.name, i));
  }
  if (io::Status status = checkArguments(function->signature, buffers, scalars);
      !status)
    return status;
  const CpuKernelContext context{pool_, function->signature,
                                 function->userData};
  return function->function(context, buffers, scalars);
}

size_t CpuBackend::bytesInUse() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytesInUse_;
}

size_t CpuBackend::peakBytesInUse() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peakBytesInUse_;
}

} // namespace tetra::backend
