//===- HipBackend.h - AMD GPUs through the HIP runtime ----------*- C++ -*-===//
//
// The Backend interface on one AMD GPU (an MI355X, gfx950), through the HIP
// runtime, which it opens with dlopen("libamdhip64.so"): building Tetra
// needs no ROCm, and a machine with ROCm's runtime runs gfx950 bundles.
// Memory is hipMalloc'd; modules are HSACO code objects
// (hipModuleLoadData); streams are hipStreams.
//
// Where the other AMD libraries enter (docs/architecture.md): libamd_comgr
// only to inspect or link code objects on the user's machine, hipRTC
// (inside libamdhip64) only for kernels that arrive as HIP source — Tetra's
// own kernels are HSACO compiled in process, so neither is needed to run
// them.
//
// A launch passes its arguments as the kernel's explicit parameters in
// signature order (KernelABI.h): each buffer as its 64-bit device address
// (`global_buffer`, 8 bytes), then each scalar as a 64-bit integer or
// double (`by_value`, 8 bytes), at offsets 0, 8, 16, ...; the runtime
// fills the code object v5 hidden arguments after them. parameterLayout()
// states this, and the tests check it against every compiled kernel's
// metadata. There is no AMD GPU here: everything below that needs one is
// untested; create() without ROCm is tested, and says what is missing.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_HIPBACKEND_H
#define TETRA_RUNTIME_BACKEND_HIPBACKEND_H

#include "runtime/backend/Backend.h"
#include "runtime/backend/DeviceTables.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tetra::backend {

struct HipRuntime;

/// One explicit kernel parameter as a launch passes it.
struct KernelParameter {
  int64_t offset = 0, size = 0;
  const char *kind = ""; ///< "global_buffer" or "by_value" (code object v5).
};

class HipBackend final : public Backend {
public:
  /// The backend on device `ordinal`: an error (never a crash) when ROCm's
  /// runtime is not installed, no device is there, or it fails to start.
  /// `library` is the runtime to open (tests point it elsewhere).
  static io::Expected<std::unique_ptr<HipBackend>>
  create(int ordinal = 0, const std::string &library = "libamdhip64.so");
  ~HipBackend() override;

  /// Where a launch with `buffers` buffers and `scalars` scalars puts each
  /// explicit parameter.
  static std::vector<KernelParameter> parameterLayout(size_t buffers,
                                                      size_t scalars);

  std::string_view name() const override { return "hip"; }
  /// "AMD Instinct MI355X (288.0 GiB, HIP 7.0)".
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
  /// Whether `stream`'s work has finished (hipStreamQuery), without
  /// waiting: how RCCL's collectives are awaited.
  io::Expected<bool> idle(Stream stream = {});
  /// An HSACO code object.
  io::Expected<Module> loadModule(const CodeObject &code) override;
  io::Status unloadModule(Module module) override;
  io::Expected<Kernel> getKernel(Module module, std::string_view name) override;
  const KernelSignature *signature(Kernel kernel) const override;
  io::Status launch(Kernel kernel, const LaunchConfig &config,
                    ArrayView<Buffer> buffers, ArrayView<Scalar> scalars,
                    Stream stream = {}) override;

private:
  HipBackend() = default;
  io::Error runtimeError(const char *call, int result) const;

  std::unique_ptr<HipRuntime> hip_;
  int device_ = 0;
  std::string deviceName_;
  size_t totalMemory_ = 0;
  int runtimeVersion_ = 0;
  DeviceTables tables_;
};

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_HIPBACKEND_H
