//===- HipBackend.cpp - AMD GPUs through the HIP runtime ------------------===//

#include "runtime/backend/HipBackend.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <fmt/format.h>

using namespace tetra;
using namespace tetra::backend;

namespace tetra::backend {

/// The HIP runtime entry points Tetra uses, declared here (hip_runtime.h is
/// not needed): handles are pointers, hipError_t an int (0 is hipSuccess).
struct HipRuntime {
  using Handle = void *;

  void *library = nullptr;
  int (*hipInit)(unsigned) = nullptr;
  int (*hipRuntimeGetVersion)(int *) = nullptr;
  int (*hipGetDeviceCount)(int *) = nullptr;
  int (*hipSetDevice)(int) = nullptr;
  int (*hipDeviceGetName)(char *, int, int) = nullptr;
  int (*hipDeviceTotalMem)(size_t *, int) = nullptr;
  int (*hipMalloc)(void **, size_t) = nullptr;
  int (*hipFree)(void *) = nullptr;
  int (*hipMemcpyHtoDAsync)(void *, const void *, size_t, Handle) = nullptr;
  int (*hipMemcpyDtoHAsync)(void *, void *, size_t, Handle) = nullptr;
  int (*hipMemcpyDtoDAsync)(void *, void *, size_t, Handle) = nullptr;
  int (*hipMemsetD8Async)(void *, unsigned char, size_t, Handle) = nullptr;
  int (*hipStreamCreate)(Handle *) = nullptr;
  int (*hipStreamDestroy)(Handle) = nullptr;
  int (*hipStreamSynchronize)(Handle) = nullptr;
  int (*hipStreamQuery)(Handle) = nullptr;
  int (*hipModuleLoadData)(Handle *, const void *) = nullptr;
  int (*hipModuleUnload)(Handle) = nullptr;
  int (*hipModuleGetFunction)(Handle *, Handle, const char *) = nullptr;
  int (*hipModuleLaunchKernel)(Handle, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, unsigned, Handle, void **,
                               void **) = nullptr;
  const char *(*hipGetErrorName)(int) = nullptr;
  const char *(*hipGetErrorString)(int) = nullptr;

  ~HipRuntime() {
    if (library)
      dlclose(library);
  }

  io::Status open(const std::string &path) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *why = dlerror();
      return io::Error(
          "the HIP runtime (" + path +
          ") is not installed: running gfx950 code needs ROCm's runtime on "
          "this machine (ROCm 7 or later for the MI355X); compiling it does "
          "not (dlopen: " +
          (why ? why : "unknown error") + ")");
    }
    io::Status status = io::success();
    auto resolve = [&](auto &slot, const char *name) {
      if (!status)
        return;
      void *symbol = dlsym(library, name);
      if (!symbol)
        status = io::Error(path + " has no " + name +
                           ": not a HIP runtime Tetra can use");
      else
        std::memcpy(&slot, &symbol, sizeof(symbol));
    };
    resolve(hipInit, "hipInit");
    resolve(hipRuntimeGetVersion, "hipRuntimeGetVersion");
    resolve(hipGetDeviceCount, "hipGetDeviceCount");
    resolve(hipSetDevice, "hipSetDevice");
    resolve(hipDeviceGetName, "hipDeviceGetName");
    resolve(hipDeviceTotalMem, "hipDeviceTotalMem");
    resolve(hipMalloc, "hipMalloc");
    resolve(hipFree, "hipFree");
    resolve(hipMemcpyHtoDAsync, "hipMemcpyHtoDAsync");
    resolve(hipMemcpyDtoHAsync, "hipMemcpyDtoHAsync");
    resolve(hipMemcpyDtoDAsync, "hipMemcpyDtoDAsync");
    resolve(hipMemsetD8Async, "hipMemsetD8Async");
    resolve(hipStreamCreate, "hipStreamCreate");
    resolve(hipStreamDestroy, "hipStreamDestroy");
    resolve(hipStreamSynchronize, "hipStreamSynchronize");
    resolve(hipStreamQuery, "hipStreamQuery");
    resolve(hipModuleLoadData, "hipModuleLoadData");
    resolve(hipModuleUnload, "hipModuleUnload");
    resolve(hipModuleGetFunction, "hipModuleGetFunction");
    resolve(hipModuleLaunchKernel, "hipModuleLaunchKernel");
    resolve(hipGetErrorName, "hipGetErrorName");
    resolve(hipGetErrorString, "hipGetErrorString");
    return status;
  }
};

} // namespace tetra::backend

namespace {

void *streamHandle(Stream stream) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(stream.handle));
}

void *pointer(Buffer buffer) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(buffer.address()));
}

} // namespace

std::vector<KernelParameter> HipBackend::parameterLayout(size_t buffers,
                                                         size_t scalars) {
  std::vector<KernelParameter> layout;
  for (size_t i = 0; i < buffers + scalars; ++i)
    layout.push_back({static_cast<int64_t>(8 * i), 8,
                      i < buffers ? "global_buffer" : "by_value"});
  return layout;
}

io::Error HipBackend::runtimeError(const char *call, int result) const {
  const char *name = hip_ && hip_->hipGetErrorName
                         ? hip_->hipGetErrorName(result)
                         : nullptr;
  const char *text = hip_ && hip_->hipGetErrorString
                         ? hip_->hipGetErrorString(result)
                         : nullptr;
  return io::Error(std::string(call) + ": " +
                   (name ? name : fmt::format("HIP error {}", result)) +
                   (text ? std::string(" (") + text + ")" : std::string()));
}

io::Expected<std::unique_ptr<HipBackend>>
HipBackend::create(int ordinal, const std::string &library) {
  std::unique_ptr<HipBackend> backend(new HipBackend());
  backend->hip_ = std::make_unique<HipRuntime>();
  HipRuntime &hip = *backend->hip_;
  if (io::Status opened = hip.open(library); !opened)
    return opened.error();
  if (int r = hip.hipInit(0))
    return backend->runtimeError("hipInit", r);
  hip.hipRuntimeGetVersion(&backend->runtimeVersion_);
  int count = 0;
  if (int r = hip.hipGetDeviceCount(&count))
    return backend->runtimeError("hipGetDeviceCount", r);
  if (ordinal < 0 || ordinal >= count)
    return io::Error(
        fmt::format("no HIP device {} ({} found)", ordinal, count));
  backend->device_ = ordinal;
  if (int r = hip.hipSetDevice(ordinal))
    return backend->runtimeError("hipSetDevice", r);
  char name[256] = {};
  hip.hipDeviceGetName(name, sizeof(name) - 1, ordinal);
  backend->deviceName_ = name;
  hip.hipDeviceTotalMem(&backend->totalMemory_, ordinal);
  return backend;
}

HipBackend::~HipBackend() {
  if (!hip_ || !hip_->hipFree)
    return;
  for (const auto &[address, bytes] : tables_.allocations())
    hip_->hipFree(reinterpret_cast<void *>(static_cast<uintptr_t>(address)));
  for (const auto &[module, name] : tables_.modules())
    hip_->hipModuleUnload(reinterpret_cast<void *>(module));
}

std::string HipBackend::description() const {
  const std::string memory = fmt::format(
      "{:.1f} GiB", static_cast<double>(totalMemory_) / (1024.0 * 1024 * 1024));
  // hipRuntimeGetVersion: major * 10,000,000 + minor * 100,000 + patch.
  return fmt::format("{} ({}, HIP {}.{})", deviceName_, memory,
                     runtimeVersion_ / 10000000,
                     runtimeVersion_ / 100000 % 100);
}

io::Expected<Buffer> HipBackend::allocate(size_t bytes) {
  if (bytes == 0)
    return Buffer();
  void *address = nullptr;
  if (int r = hip_->hipMalloc(&address, bytes))
    return io::Error(fmt::format("{} allocating {} bytes",
                                 runtimeError("hipMalloc", r).message(),
                                 bytes));
  DeviceAddress device = reinterpret_cast<uintptr_t>(address);
  tables_.addAllocation(device, bytes);
  return Buffer(device, bytes);
}

io::Status HipBackend::free(Buffer buffer) {
  if (buffer.empty())
    return io::success();
  if (io::Status known = tables_.removeAllocation(buffer); !known)
    return known;
  if (int r = hip_->hipFree(pointer(buffer)))
    return runtimeError("hipFree", r);
  return io::success();
}

io::Status HipBackend::copyToDevice(Buffer destination, const void *source,
                                    size_t bytes, Stream stream) {
  if (io::Status ok = tables_.checkCopy("copyToDevice", bytes, &destination, nullptr);
      !ok)
    return ok;
  if (bytes == 0)
    return io::success();
  if (int r = hip_->hipMemcpyHtoDAsync(pointer(destination), source, bytes,
                                       streamHandle(stream)))
    return runtimeError("hipMemcpyHtoDAsync", r);
  return io::success();
}

io::Status HipBackend::copyToHost(void *destination, Buffer source,
                                  size_t bytes, Stream stream) {
  if (io::Status ok = tables_.checkCopy("copyToHost", bytes, nullptr, &source);
      !ok)
    return ok;
  if (bytes == 0)
    return io::success();
  if (int r = hip_->hipMemcpyDtoHAsync(destination, pointer(source), bytes,
                                       streamHandle(stream)))
    return runtimeError("hipMemcpyDtoHAsync", r);
  return io::success();
}

io::Status HipBackend::copyOnDevice(Buffer destination, Buffer source,
                                    size_t bytes, Stream stream) {
  if (io::Status ok =
          tables_.checkCopy("copyOnDevice", bytes, &destination, &source);
      !ok)
    return ok;
  if (bytes == 0)
    return io::success();
  if (int r = hip_->hipMemcpyDtoDAsync(pointer(destination), pointer(source),
                                       bytes, streamHandle(stream)))
    return runtimeError("hipMemcpyDtoDAsync", r);
  return io::success();
}

io::Status HipBackend::fill(Buffer buffer, uint8_t value, Stream stream) {
  if (io::Status live = tables_.checkLive(buffer, "fill"); !live)
    return live;
  if (buffer.empty())
    return io::success();
  if (int r = hip_->hipMemsetD8Async(pointer(buffer), value, buffer.size(),
                                     streamHandle(stream)))
    return runtimeError("hipMemsetD8Async", r);
  return io::success();
}

io::Expected<Stream> HipBackend::createStream() {
  void *handle = nullptr;
  if (int r = hip_->hipStreamCreate(&handle))
    return runtimeError("hipStreamCreate", r);
  return Stream{reinterpret_cast<uint64_t>(handle)};
}

io::Status HipBackend::destroyStream(Stream stream) {
  if (stream.handle == 0)
    return io::Error("destroyStream: the default stream cannot be destroyed");
  if (int r = hip_->hipStreamDestroy(streamHandle(stream)))
    return runtimeError("hipStreamDestroy", r);
  return io::success();
}

io::Expected<bool> HipBackend::idle(Stream stream) {
  constexpr int kNotReady = 600; // hipErrorNotReady
  int r = hip_->hipStreamQuery(streamHandle(stream));
  if (r == kNotReady)
    return false;
  if (r != 0)
    return runtimeError("hipStreamQuery", r);
  return true;
}

io::Status HipBackend::synchronize(Stream stream) {
  if (int r = hip_->hipStreamSynchronize(streamHandle(stream)))
    return runtimeError("hipStreamSynchronize", r);
  return io::success();
}

io::Expected<Module> HipBackend::loadModule(const CodeObject &code) {
  if (code.format != CodeObjectFormat::Hsaco)
    return io::Error("'" + code.name +
                     "': the HIP backend loads HSACO code objects only");
  // An HSACO is an ELF shared object: check before the runtime sees it.
  if (code.image.size() < 4 || std::memcmp(code.image.data(), "\x7f" "ELF", 4))
    return io::Error("'" + code.name + "': not an HSACO (no ELF header)");
  void *module = nullptr;
  if (int r = hip_->hipModuleLoadData(&module, code.image.data()))
    return io::Error("'" + code.name +
                     "': " + runtimeError("hipModuleLoadData", r).message());
  tables_.addModule(reinterpret_cast<uint64_t>(module), code.name);
  return Module{reinterpret_cast<uint64_t>(module)};
}

io::Status HipBackend::unloadModule(Module module) {
  if (io::Status known = tables_.removeModule(module.handle); !known)
    return known;
  if (int r = hip_->hipModuleUnload(reinterpret_cast<void *>(module.handle)))
    return runtimeError("hipModuleUnload", r);
  return io::success();
}

io::Expected<Kernel> HipBackend::getKernel(Module module,
                                           std::string_view name) {
  io::Expected<std::string> moduleName = tables_.moduleName(module.handle);
  if (!moduleName)
    return moduleName.error();
  void *function = nullptr;
  std::string symbol(name);
  if (int r = hip_->hipModuleGetFunction(
          &function, reinterpret_cast<void *>(module.handle), symbol.c_str()))
    return io::Error("'" + *moduleName + "' has no kernel '" + symbol + "' (" +
                     runtimeError("hipModuleGetFunction", r).message() + ")");
  return Kernel{reinterpret_cast<uint64_t>(function)};
}

const KernelSignature *HipBackend::signature(Kernel) const { return nullptr; }

io::Status HipBackend::launch(Kernel kernel, const LaunchConfig &config,
                              ArrayView<Buffer> buffers,
                              ArrayView<Scalar> scalars, Stream stream) {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (io::Status live = tables_.checkLive(buffers[i], "launch"); !live)
      return io::Error(
          fmt::format("{} (buffer argument {})", live.error().message(), i));
  ParameterSlots parameters(buffers, scalars);
  if (int r = hip_->hipModuleLaunchKernel(
          reinterpret_cast<void *>(kernel.handle), config.grid[0],
          config.grid[1], config.grid[2], config.block[0], config.block[1],
          config.block[2], config.sharedMemoryBytes, streamHandle(stream),
          parameters.data(), nullptr))
    return runtimeError("hipModuleLaunchKernel", r);
  return io::success();
}
