//===- CudaBackend.h - NVIDIA GPUs through the CUDA driver API --*- C++ -*-===//
//
// The Backend interface on one NVIDIA GPU, through the CUDA driver API,
// which it opens with dlopen("libcuda.so.1"): building Tetra needs no CUDA
// SDK, and a machine with only the driver runs it. Memory is cuMemAlloc'd
// device memory (a Buffer's address is the CUdeviceptr); modules are PTX
// (JIT-compiled by the driver, which reports the JIT log on failure) or
// cubins; streams are CUstreams.
//
// A launch passes its arguments as the kernel's parameters in signature
// order (KernelABI.h): each buffer as its 64-bit device address, each scalar
// as a 64-bit integer or double — the calling convention the compiler's GPU
// kernels are generated for (`.param .u64` / `.param .s64` / `.param .f64`).
// A launch's dynamic shared memory above 48 KiB is allowed to its kernel
// (cuFuncSetAttribute) before its first launch with that much.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_CUDABACKEND_H
#define TETRA_RUNTIME_BACKEND_CUDABACKEND_H

#include "runtime/backend/Backend.h"
#include "runtime/backend/DeviceTables.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace tetra::backend {

struct CudaDriver;

class CudaBackend final : public Backend {
public:
  /// The backend on device `ordinal`: an error (never a crash) when the
  /// driver library is missing, no device is there, or it fails to start.
  static io::Expected<std::unique_ptr<CudaBackend>> create(int ordinal = 0);
  /// Frees every allocation still live and unloads every module.
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  /// "NVIDIA H200 (sm_90, 139.8 GiB, driver 13.0)".
  std::string description() const override;
  /// The compute capability, e.g. 90.
  int computeCapability() const { return computeCapability_; }
  /// Whether the work queued on `stream` has finished (cuStreamQuery),
  /// without waiting: how NCCL's collectives are awaited with a timeout.
  io::Expected<bool> idle(Stream stream = {});

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

  /// PTX (NUL-terminated or not) or a cubin.
  io::Expected<Module> loadModule(const CodeObject &code) override;
  io::Status unloadModule(Module module) override;
  io::Expected<Kernel> getKernel(Module module, std::string_view name) override;
  /// GPU modules carry no signatures (a bundle's manifest will): null.
  const KernelSignature *signature(Kernel kernel) const override;

  /// What a loaded kernel uses, as the driver compiled it (PTX is
  /// JIT-compiled at load), and how many blocks of `blockThreads` threads
  /// fit on one SM.
  struct KernelResources {
    int registers = 0;   ///< per thread
    int staticSharedBytes = 0;
    int localBytes = 0;  ///< per thread: spills and stack
    int blocksPerSM = 0;
  };
  io::Expected<KernelResources> resources(Kernel kernel, int blockThreads);

  io::Status launch(Kernel kernel, const LaunchConfig &config,
                    ArrayView<Buffer> buffers, ArrayView<Scalar> scalars,
                    Stream stream = {}) override;

  /// A CUDA graph of the launches, one kernel node each in a chain.
  io::Expected<LaunchList>
  recordLaunches(std::vector<ListedLaunch> launches) override;
  /// Changed scalars are set on the instantiated graph's nodes
  /// (cuGraphExecKernelNodeSetParams), then the graph is launched.
  io::Status replay(LaunchList list, ArrayView<ScalarChange> changes,
                    Stream stream = {}, int *refused = nullptr) override;
  io::Status releaseLaunches(LaunchList list) override;

private:
  CudaBackend() = default;
  struct Graph;
  /// Checks a launch's buffers and allows its kernel the shared memory it
  /// asks for (launch() and recordLaunches()).
  io::Status prepareLaunch(Kernel kernel, const LaunchConfig &config,
                           ArrayView<Buffer> buffers);
  io::Status destroyGraph(Graph &graph);
  /// The error for a failed driver call: "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY
  /// (out of memory)".
  io::Error driverError(const char *call, int result) const;

  std::unique_ptr<CudaDriver> driver_;
  /// The dynamic shared memory each kernel may use so far (above 48 KiB a
  /// kernel must be allowed it, once, before its launch).
  std::map<uint64_t, uint32_t> sharedAllowed_;
  int device_ = 0;
  void *context_ = nullptr;
  int computeCapability_ = 0;
  std::string deviceName_;
  size_t totalMemory_ = 0;
  int driverVersion_ = 0;

  DeviceTables tables_;
  std::map<uint64_t, std::unique_ptr<Graph>> graphs_;
  uint64_t nextGraph_ = 1;
};

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_CUDABACKEND_H
