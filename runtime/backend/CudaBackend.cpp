//===- CudaBackend.cpp - NVIDIA GPUs through the CUDA driver API ----------===//

#include "runtime/backend/CudaBackend.h"

#include <dlfcn.h>

#include <cstring>
#include <fmt/format.h>
#include <vector>

using namespace tetra;
using namespace tetra::backend;

namespace tetra::backend {

/// The driver entry points Tetra uses, declared here (cuda.h is not needed):
/// handles are pointers, CUdeviceptr is 64 bits, CUresult an int (0 is
/// CUDA_SUCCESS).
struct CudaDriver {
  using Handle = void *;
  using DevicePtr = unsigned long long;

  void *library = nullptr;
  int (*cuInit)(unsigned) = nullptr;
  int (*cuDriverGetVersion)(int *) = nullptr;
  int (*cuDeviceGetCount)(int *) = nullptr;
  int (*cuDeviceGet)(int *, int) = nullptr;
  int (*cuDeviceGetName)(char *, int, int) = nullptr;
  int (*cuDeviceGetAttribute)(int *, int, int) = nullptr;
  int (*cuDeviceTotalMem)(size_t *, int) = nullptr;
  int (*cuDevicePrimaryCtxRetain)(Handle *, int) = nullptr;
  int (*cuDevicePrimaryCtxRelease)(int) = nullptr;
  int (*cuCtxSetCurrent)(Handle) = nullptr;
  int (*cuMemAlloc)(DevicePtr *, size_t) = nullptr;
  int (*cuMemFree)(DevicePtr) = nullptr;
  int (*cuMemcpyHtoDAsync)(DevicePtr, const void *, size_t, Handle) = nullptr;
  int (*cuMemcpyDtoHAsync)(void *, DevicePtr, size_t, Handle) = nullptr;
  int (*cuMemcpyDtoDAsync)(DevicePtr, DevicePtr, size_t, Handle) = nullptr;
  int (*cuMemsetD8Async)(DevicePtr, unsigned char, size_t, Handle) = nullptr;
  int (*cuStreamCreate)(Handle *, unsigned) = nullptr;
  int (*cuStreamDestroy)(Handle) = nullptr;
  int (*cuStreamSynchronize)(Handle) = nullptr;
  int (*cuStreamQuery)(Handle) = nullptr;
  int (*cuModuleLoadDataEx)(Handle *, const void *, unsigned, int *,
                            void **) = nullptr;
  int (*cuModuleUnload)(Handle) = nullptr;
  int (*cuModuleGetFunction)(Handle *, Handle, const char *) = nullptr;
  int (*cuFuncGetAttribute)(int *, int, Handle) = nullptr;
  int (*cuFuncSetAttribute)(Handle, int, int) = nullptr;
  int (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, Handle, int,
                                                     size_t) = nullptr;
  int (*cuLaunchKernel)(Handle, unsigned, unsigned, unsigned, unsigned,
                        unsigned, unsigned, unsigned, Handle, void **,
                        void **) = nullptr;
  /// CUDA_KERNEL_NODE_PARAMS_v2.
  struct KernelNodeParams {
    Handle function = nullptr;
    unsigned grid[3] = {1, 1, 1};
    unsigned block[3] = {1, 1, 1};
    unsigned sharedMemoryBytes = 0;
    void **kernelParams = nullptr;
    void **extra = nullptr;
    Handle kernel = nullptr;  ///< CUkernel, unused
    Handle context = nullptr; ///< unused: the function's context
  };
  int (*cuGraphCreate)(Handle *, unsigned) = nullptr;
  int (*cuGraphAddKernelNode)(Handle *, Handle, const Handle *, size_t,
                              const KernelNodeParams *) = nullptr;
  int (*cuGraphInstantiateWithFlags)(Handle *, Handle,
                                     unsigned long long) = nullptr;
  int (*cuGraphExecKernelNodeSetParams)(Handle, Handle,
                                        const KernelNodeParams *) = nullptr;
  int (*cuGraphLaunch)(Handle, Handle) = nullptr;
  int (*cuGraphExecDestroy)(Handle) = nullptr;
  int (*cuGraphDestroy)(Handle) = nullptr;
  int (*cuGetErrorName)(int, const char **) = nullptr;
  int (*cuGetErrorString)(int, const char **) = nullptr;

  ~CudaDriver() {
    if (library)
      dlclose(library);
  }

  /// Opens `path` and resolves every entry point; an error naming the
  /// first one missing.
  io::Status open(const char *path) {
    library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *why = dlerror();
      return io::Error(std::string("cannot load the CUDA driver (") + path +
                       "): " + (why ? why : "unknown error"));
    }
    io::Status status = io::success();
    auto resolve = [&](auto &slot, const char *name) {
      if (!status)
        return;
      void *symbol = dlsym(library, name);
      if (!symbol)
        status = io::Error(std::string("the CUDA driver has no ") + name);
      else
        std::memcpy(&slot, &symbol, sizeof(symbol));
    };
    resolve(cuInit, "cuInit");
    resolve(cuDriverGetVersion, "cuDriverGetVersion");
    resolve(cuDeviceGetCount, "cuDeviceGetCount");
    resolve(cuDeviceGet, "cuDeviceGet");
    resolve(cuDeviceGetName, "cuDeviceGetName");
    resolve(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    resolve(cuDeviceTotalMem, "cuDeviceTotalMem_v2");
    resolve(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    resolve(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    resolve(cuCtxSetCurrent, "cuCtxSetCurrent");
    resolve(cuMemAlloc, "cuMemAlloc_v2");
    resolve(cuMemFree, "cuMemFree_v2");
    resolve(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    resolve(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    resolve(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    resolve(cuMemsetD8Async, "cuMemsetD8Async");
    resolve(cuStreamCreate, "cuStreamCreate");
    resolve(cuStreamDestroy, "cuStreamDestroy_v2");
    resolve(cuStreamSynchronize, "cuStreamSynchronize");
    resolve(cuStreamQuery, "cuStreamQuery");
    resolve(cuModuleLoadDataEx, "cuModuleLoadDataEx");
    resolve(cuModuleUnload, "cuModuleUnload");
    resolve(cuModuleGetFunction, "cuModuleGetFunction");
    resolve(cuFuncGetAttribute, "cuFuncGetAttribute");
    resolve(cuFuncSetAttribute, "cuFuncSetAttribute");
    resolve(cuOccupancyMaxActiveBlocksPerMultiprocessor,
            "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    resolve(cuLaunchKernel, "cuLaunchKernel");
    resolve(cuGraphCreate, "cuGraphCreate");
    resolve(cuGraphAddKernelNode, "cuGraphAddKernelNode_v2");
    resolve(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    resolve(cuGraphExecKernelNodeSetParams,
            "cuGraphExecKernelNodeSetParams_v2");
    resolve(cuGraphLaunch, "cuGraphLaunch");
    resolve(cuGraphExecDestroy, "cuGraphExecDestroy");
    resolve(cuGraphDestroy, "cuGraphDestroy");
    resolve(cuGetErrorName, "cuGetErrorName");
    resolve(cuGetErrorString, "cuGetErrorString");
    return status;
  }
};

/// A recorded list: the graph, its instantiation, a node per launch.
struct CudaBackend::Graph {
  void *graph = nullptr;
  void *exec = nullptr;
  std::vector<void *> nodes;
  std::vector<ListedLaunch> launches;
};

} // namespace tetra::backend

namespace {

// CUdevice_attribute values (cuda.h).
constexpr int kComputeCapabilityMajor = 75;
constexpr int kComputeCapabilityMinor = 76;
// CUjit_option values.
constexpr int kJitInfoLogBuffer = 3;
constexpr int kJitInfoLogBufferSize = 4;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSize = 6;

void *streamHandle(Stream stream) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(stream.handle));
}

} // namespace

io::Error CudaBackend::driverError(const char *call, int result) const {
  const char *name = nullptr, *text = nullptr;
  if (driver_ && driver_->cuGetErrorName)
    driver_->cuGetErrorName(result, &name);
  if (driver_ && driver_->cuGetErrorString)
    driver_->cuGetErrorString(result, &text);
  return io::Error(std::string(call) + ": " +
                   (name ? name : fmt::format("CUDA error {}", result)) +
                   (text ? std::string(" (") + text + ")" : std::string()));
}

io::Expected<std::unique_ptr<CudaBackend>> CudaBackend::create(int ordinal) {
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  backend->driver_ = std::make_unique<CudaDriver>();
  CudaDriver &cu = *backend->driver_;
  if (io::Status opened = cu.open("libcuda.so.1"); !opened)
    return opened.error();
  if (int r = cu.cuInit(0))
    return backend->driverError("cuInit", r);
  cu.cuDriverGetVersion(&backend->driverVersion_);
  int count = 0;
  if (int r = cu.cuDeviceGetCount(&count))
    return backend->driverError("cuDeviceGetCount", r);
  if (ordinal < 0 || ordinal >= count)
    return io::Error(
        fmt::format("no CUDA device {} ({} found)", ordinal, count));
  if (int r = cu.cuDeviceGet(&backend->device_, ordinal))
    return backend->driverError("cuDeviceGet", r);
  char name[256] = {};
  cu.cuDeviceGetName(name, sizeof(name) - 1, backend->device_);
  backend->deviceName_ = name;
  int major = 0, minor = 0;
  cu.cuDeviceGetAttribute(&major, kComputeCapabilityMajor, backend->device_);
  cu.cuDeviceGetAttribute(&minor, kComputeCapabilityMinor, backend->device_);
  backend->computeCapability_ = major * 10 + minor;
  cu.cuDeviceTotalMem(&backend->totalMemory_, backend->device_);
  if (int r = cu.cuDevicePrimaryCtxRetain(&backend->context_, backend->device_))
    return backend->driverError("cuDevicePrimaryCtxRetain", r);
  if (int r = cu.cuCtxSetCurrent(backend->context_))
    return backend->driverError("cuCtxSetCurrent", r);
  return backend;
}

CudaBackend::~CudaBackend() {
  if (!driver_ || !context_)
    return;
  driver_->cuCtxSetCurrent(context_);
  for (auto &[handle, graph] : graphs_)
    (void)destroyGraph(*graph);
  for (const auto &[address, bytes] : tables_.allocations())
    driver_->cuMemFree(address);
  for (const auto &[module, name] : tables_.modules())
    driver_->cuModuleUnload(reinterpret_cast<void *>(module));
  driver_->cuDevicePrimaryCtxRelease(device_);
}

std::string CudaBackend::description() const {
  const std::string memory = fmt::format(
      "{:.1f} GiB", static_cast<double>(totalMemory_) / (1024.0 * 1024 * 1024));
  return fmt::format("{} (sm_{}, {}, driver {}.{})", deviceName_,
                     computeCapability_, memory, driverVersion_ / 1000,
                     driverVersion_ % 1000 / 10);
}

io::Expected<Buffer> CudaBackend::allocate(size_t bytes) {
  if (bytes == 0)
    return Buffer();
  CudaDriver::DevicePtr address = 0;
  if (int r = driver_->cuMemAlloc(&address, bytes))
    return io::Error(fmt::format("{} allocating {} bytes",
                                 driverError("cuMemAlloc", r).message(),
                                 bytes));
  tables_.addAllocation(address, bytes);
  return Buffer(address, bytes);
}

io::Status CudaBackend::free(Buffer buffer) {
  if (buffer.empty())
    return io::success();
  if (io::Status known = tables_.removeAllocation(buffer); !known)
    return known;
  if (int r = driver_->cuMemFree(buffer.address()))
    return driverError("cuMemFree", r);
  return io::success();
}

io::Status CudaBackend::copyToDevice(Buffer destination, const void *source,
                                     size_t bytes, Stream stream) {
  if (io::Status ok = tables_.checkCopy("copyToDevice", bytes, &destination, nullptr);
      !ok)
    return ok;
  if (bytes == 0)
    return io::success();
  if (int r = driver_->cuMemcpyHtoDAsync(destination.address(), source, bytes,
                                         streamHandle(stream)))
    return driverError("cuMemcpyHtoDAsync", r);
  return io::success();
}

io::Status CudaBackend::copyToHost(void *destination, Buffer source,
                                   size_t bytes, Stream stream) {
  if (io::Status ok = tables_.checkCopy("copyToHost", bytes, nullptr, &source);
      !ok)
    return ok;
  if (bytes == 0)
    return io::success();
  if (int r = driver_->cuMemcpyDtoHAsync(destination, source.address(), bytes,
                                         streamHandle(stream)))
    return driverError("cuMemcpyDtoHAsync", r);
  return io::success();
}

io::Status CudaBackend::copyOnDevice(Buffer destination, Buffer source,
                                     size_t bytes, Stream stream) {
  if (io::Status ok =
          tables_.checkCopy("copyOnDevice", bytes, &destination, &source);
      !ok)
    return ok;
  if (bytes == 0)
    return io::success();
  if (int r = driver_->cuMemcpyDtoDAsync(
          destination.address(), source.address(), bytes, streamHandle(stream)))
    return driverError("cuMemcpyDtoDAsync", r);
  return io::success();
}

io::Status CudaBackend::fill(Buffer buffer, uint8_t value, Stream stream) {
  if (io::Status live = tables_.checkLive(buffer, "fill"); !live)
    return live;
  if (buffer.empty())
    return io::success();
  if (int r = driver_->cuMemsetD8Async(buffer.address(), value, buffer.size(),
                                       streamHandle(stream)))
    return driverError("cuMemsetD8Async", r);
  return io::success();
}

io::Expected<Stream> CudaBackend::createStream() {
  void *handle = nullptr;
  if (int r = driver_->cuStreamCreate(&handle, 0))
    return driverError("cuStreamCreate", r);
  return Stream{reinterpret_cast<uint64_t>(handle)};
}

io::Status CudaBackend::destroyStream(Stream stream) {
  if (stream.handle == 0)
    return io::Error("destroyStream: the default stream cannot be destroyed");
  if (int r = driver_->cuStreamDestroy(streamHandle(stream)))
    return driverError("cuStreamDestroy", r);
  return io::success();
}

io::Expected<bool> CudaBackend::idle(Stream stream) {
  constexpr int kNotReady = 600; // CUDA_ERROR_NOT_READY
  int r = driver_->cuStreamQuery(streamHandle(stream));
  if (r == kNotReady)
    return false;
  if (r != 0)
    return driverError("cuStreamQuery", r);
  return true;
}

io::Status CudaBackend::synchronize(Stream stream) {
  if (int r = driver_->cuStreamSynchronize(streamHandle(stream)))
    return driverError("cuStreamSynchronize", r);
  return io::success();
}

io::Expected<Module> CudaBackend::loadModule(const CodeObject &code) {
  if (code.format != CodeObjectFormat::Ptx &&
      code.format != CodeObjectFormat::Cubin)
    return io::Error("'" + code.name +
                     "': the CUDA backend loads PTX or cubins only");
  if (code.image.empty())
    return io::Error("'" + code.name + "': empty code object");
  // The driver wants PTX NUL-terminated.
  std::vector<uint8_t> text;
  const void *image = code.image.data();
  if (code.format == CodeObjectFormat::Ptx &&
      code.image.data()[code.image.size() - 1] != 0) {
    text.assign(code.image.begin(), code.image.end());
    text.push_back(0);
    image = text.data();
  }
  std::vector<char> errorLog(16384, 0), infoLog(16384, 0);
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize,
                   kJitInfoLogBuffer, kJitInfoLogBufferSize};
  void *values[] = {
      errorLog.data(), reinterpret_cast<void *>(errorLog.size() - 1),
      infoLog.data(), reinterpret_cast<void *>(infoLog.size() - 1)};
  void *module = nullptr;
  if (int r = driver_->cuModuleLoadDataEx(&module, image, 4, options, values)) {
    std::string log(errorLog.data());
    while (!log.empty() && (log.back() == '\n' || log.back() == ' '))
      log.pop_back();
    return io::Error("'" + code.name +
                     "': " + driverError("cuModuleLoadData", r).message() +
                     (log.empty() ? std::string() : ":\n" + log));
  }
  tables_.addModule(reinterpret_cast<uint64_t>(module), code.name);
  return Module{reinterpret_cast<uint64_t>(module)};
}

io::Status CudaBackend::unloadModule(Module module) {
  if (io::Status known = tables_.removeModule(module.handle); !known)
    return known;
  if (int r = driver_->cuModuleUnload(reinterpret_cast<void *>(module.handle)))
    return driverError("cuModuleUnload", r);
  return io::success();
}

io::Expected<Kernel> CudaBackend::getKernel(Module module,
                                            std::string_view name) {
  io::Expected<std::string> moduleName = tables_.moduleName(module.handle);
  if (!moduleName)
    return moduleName.error();
  void *function = nullptr;
  std::string symbol(name);
  if (int r = driver_->cuModuleGetFunction(
          &function, reinterpret_cast<void *>(module.handle), symbol.c_str()))
    return io::Error("'" + *moduleName + "' has no kernel '" + symbol + "' (" +
                     driverError("cuModuleGetFunction", r).message() + ")");
  return Kernel{reinterpret_cast<uint64_t>(function)};
}

const KernelSignature *CudaBackend::signature(Kernel) const { return nullptr; }

io::Expected<CudaBackend::KernelResources>
CudaBackend::resources(Kernel kernel, int blockThreads) {
  // CUfunction_attribute: shared 1, local 3, registers 4.
  enum { kSharedSizeBytes = 1, kLocalSizeBytes = 3, kNumRegs = 4 };
  KernelResources used;
  void *function = reinterpret_cast<void *>(kernel.handle);
  for (auto [attribute, slot] :
       {std::pair{kNumRegs, &used.registers},
        std::pair{kSharedSizeBytes, &used.staticSharedBytes},
        std::pair{kLocalSizeBytes, &used.localBytes}})
    if (int r = driver_->cuFuncGetAttribute(slot, attribute, function))
      return driverError("cuFuncGetAttribute", r);
  if (int r = driver_->cuOccupancyMaxActiveBlocksPerMultiprocessor(
          &used.blocksPerSM, function, blockThreads, 0))
    return driverError("cuOccupancyMaxActiveBlocksPerMultiprocessor", r);
  return used;
}

io::Status CudaBackend::prepareLaunch(Kernel kernel, const LaunchConfig &config,
                                      ArrayView<Buffer> buffers) {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (io::Status live = tables_.checkLive(buffers[i], "launch"); !live)
      return io::Error(
          fmt::format("{} (buffer argument {})", live.error().message(), i));
  constexpr uint32_t kDefaultSharedBytes = 48 * 1024;
  constexpr int kMaxDynamicSharedBytes = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  if (config.sharedMemoryBytes > kDefaultSharedBytes) {
    uint32_t &allowed = sharedAllowed_[kernel.handle];
    if (allowed < config.sharedMemoryBytes) {
      if (int r = driver_->cuFuncSetAttribute(
              reinterpret_cast<void *>(kernel.handle), kMaxDynamicSharedBytes,
              static_cast<int>(config.sharedMemoryBytes)))
        return io::Error(
            fmt::format("{} ({} bytes of shared memory)",
                        driverError("cuFuncSetAttribute", r).message(),
                        config.sharedMemoryBytes));
      allowed = config.sharedMemoryBytes;
    }
  }
  return io::success();
}

io::Status CudaBackend::launch(Kernel kernel, const LaunchConfig &config,
                               ArrayView<Buffer> buffers,
                               ArrayView<Scalar> scalars, Stream stream) {
  if (io::Status ready = prepareLaunch(kernel, config, buffers); !ready)
    return ready;
  ParameterSlots parameters(buffers, scalars);
  if (int r = driver_->cuLaunchKernel(
          reinterpret_cast<void *>(kernel.handle), config.grid[0],
          config.grid[1], config.grid[2], config.block[0], config.block[1],
          config.block[2], config.sharedMemoryBytes, streamHandle(stream),
          parameters.data(), nullptr))
    return driverError("cuLaunchKernel", r);
  return io::success();
}

//===----------------------------------------------------------------------===//
// Recorded launches: a CUDA graph, one kernel node per launch in a chain
//===----------------------------------------------------------------------===//

namespace {

/// The node parameters of `launch`; `slots` holds the values they point to.
CudaDriver::KernelNodeParams nodeParams(const ListedLaunch &launch,
                                        ParameterSlots &slots) {
  CudaDriver::KernelNodeParams params;
  params.function = reinterpret_cast<void *>(launch.kernel.handle);
  for (int d = 0; d < 3; ++d) {
    params.grid[d] = launch.config.grid[d];
    params.block[d] = launch.config.block[d];
  }
  params.sharedMemoryBytes = launch.config.sharedMemoryBytes;
  params.kernelParams = slots.data();
  return params;
}

} // namespace

io::Status CudaBackend::destroyGraph(Graph &graph) {
  int r = 0;
  if (graph.exec)
    r = driver_->cuGraphExecDestroy(graph.exec);
  if (graph.graph)
    if (int d = driver_->cuGraphDestroy(graph.graph); d && !r)
      r = d;
  graph.exec = graph.graph = nullptr;
  return r ? io::Status(driverError("cuGraphDestroy", r)) : io::success();
}

io::Expected<LaunchList>
CudaBackend::recordLaunches(std::vector<ListedLaunch> launches) {
  auto graph = std::make_unique<Graph>();
  graph->launches = std::move(launches);
  auto fail = [&](io::Error error) -> io::Expected<LaunchList> {
    (void)destroyGraph(*graph);
    return error;
  };
  if (int r = driver_->cuGraphCreate(&graph->graph, 0))
    return fail(driverError("cuGraphCreate", r));
  for (size_t l = 0; l < graph->launches.size(); ++l) {
    const ListedLaunch &launch = graph->launches[l];
    if (io::Status ready = prepareLaunch(launch.kernel, launch.config,
                                         ArrayView<Buffer>(launch.buffers));
        !ready)
      return fail(io::Error(fmt::format("launch {} of the list: {}", l,
                                        ready.error().message())));
    ParameterSlots slots{ArrayView<Buffer>(launch.buffers),
                         ArrayView<Scalar>(launch.scalars)};
    CudaDriver::KernelNodeParams params = nodeParams(launch, slots);
    void *node = nullptr;
    void *previous = graph->nodes.empty() ? nullptr : graph->nodes.back();
    if (int r = driver_->cuGraphAddKernelNode(&node, graph->graph,
                                              previous ? &previous : nullptr,
                                              previous ? 1 : 0, &params))
      return fail(io::Error(
          fmt::format("launch {} of the list: {}", l,
                      driverError("cuGraphAddKernelNode", r).message())));
    graph->nodes.push_back(node);
  }
  if (int r =
          driver_->cuGraphInstantiateWithFlags(&graph->exec, graph->graph, 0))
    return fail(driverError("cuGraphInstantiate", r));
  LaunchList list{nextGraph_++};
  graphs_[list.handle] = std::move(graph);
  return list;
}

io::Status CudaBackend::replay(LaunchList list, ArrayView<ScalarChange> changes,
                               Stream stream, int *refused) {
  if (refused)
    *refused = -1;
  auto found = graphs_.find(list.handle);
  if (found == graphs_.end())
    return io::Error("replay: not a recorded list of this backend");
  Graph &graph = *found->second;
  if (io::Status applied = applyScalarChanges(graph.launches, changes);
      !applied)
    return applied;
  std::vector<bool> changed(graph.launches.size(), false);
  for (const ScalarChange &change : changes) {
    if (changed[change.launch])
      continue;
    changed[change.launch] = true;
    const ListedLaunch &launch = graph.launches[change.launch];
    ParameterSlots slots{ArrayView<Buffer>(launch.buffers),
                         ArrayView<Scalar>(launch.scalars)};
    CudaDriver::KernelNodeParams params = nodeParams(launch, slots);
    if (int r = driver_->cuGraphExecKernelNodeSetParams(
            graph.exec, graph.nodes[change.launch], &params)) {
      if (refused)
        *refused = change.launch;
      return driverError("cuGraphExecKernelNodeSetParams", r);
    }
  }
  if (int r = driver_->cuGraphLaunch(graph.exec, streamHandle(stream)))
    return driverError("cuGraphLaunch", r);
  return io::success();
}

io::Status CudaBackend::releaseLaunches(LaunchList list) {
  auto found = graphs_.find(list.handle);
  if (found == graphs_.end())
    return io::Error("releaseLaunches: not a recorded list of this backend");
  io::Status destroyed = destroyGraph(*found->second);
  graphs_.erase(found);
  return destroyed;
}
