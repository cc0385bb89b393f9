//===- Backend.h - The device interface the runtime runs on -----*- C++ -*-===//
//
// Everything above this interface (the schedule interpreter, the trainer, the
// tests) runs a compiled training step without knowing which device it is on.
// A backend gives four things: memory, copies, code objects with named
// kernels in them, and ordered queues of work (streams) to launch kernels on.
// CpuBackend implements it today; CUDA (driver API) and HIP (libamdhip64),
// both opened with dlopen, will implement it without changes above.
//
// The contract, written for GPUs and honoured by the CPU:
//
//   Memory. allocate() returns a Buffer (Buffer.h): a device address and a
//   size, never a host pointer. Only copies move bytes between the host and
//   a Buffer. free() takes a whole allocation (not a slice) and must not be
//   called while work that uses the buffer may still be running: synchronize
//   the streams that use it first.
//
//   Streams. Work submitted to one stream (copies, fills, launches) runs in
//   submission order; work on different streams is unordered. A Stream is an
//   opaque handle; Stream{} is the default stream, which always exists.
//   Submission is asynchronous: a call may return before its work has run
//   (the CPU happens to run it before returning; callers must not rely on
//   that). synchronize(stream) waits for all work submitted to the stream.
//
//   Host memory in copies. copyToDevice reads the host source at some point
//   before the stream's next synchronize returns: keep it alive and unchanged
//   until then. copyToHost's destination holds the bytes only after the next
//   synchronize of the stream.
//
//   Code objects. loadModule() takes a CodeObject: for the CPU a table of
//   named function pointers (KernelABI.h); for CUDA a cubin (or PTX) and for
//   HIP an hsaco blob, loaded through the driver (cuModuleLoadData,
//   hipModuleLoadData). getKernel() looks a kernel up by its stable name.
//
//   Launches. launch() passes buffers and scalars by the calling convention
//   of KernelABI.h, checked against the kernel's signature when the backend
//   knows it. Scalars are captured by value at the call; buffers are read and
//   written when the kernel runs. LaunchConfig gives a GPU kernel its grid;
//   the CPU ignores it (a CPU kernel parallelizes itself over the pool).
//
//   Recorded launches. recordLaunches() takes a list of launches once;
//   replay() submits the whole list on a stream, in order, as launch()
//   would submit each, with some scalars changed (a step's number, its
//   learning rate). The list's buffers must stay allocated and its kernels
//   loaded until releaseLaunches(). The base class keeps the list and
//   replays it one launch() at a time (the CPU and HIP backends); CUDA
//   builds a graph of it, so a replay costs the host one submission
//   instead of one per launch.
//
//   Errors. Every call returns a Status or an Expected (runtime/io/Error.h).
//   A bad argument is reported by the call that got it. A failure while work
//   runs (for example a token id outside the vocabulary) is reported by the
//   launch on the CPU, and by the next synchronize of the stream on a GPU:
//   check both.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_BACKEND_H
#define TETRA_RUNTIME_BACKEND_BACKEND_H

#include "runtime/backend/ArrayView.h"
#include "runtime/backend/Buffer.h"
#include "runtime/backend/KernelABI.h"
#include "runtime/io/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::backend {

/// An ordered queue of work on a device (a CUstream, a hipStream_t). The
/// default-constructed Stream is the device's default stream.
struct Stream {
  uint64_t handle = 0;
  friend bool operator==(Stream a, Stream b) { return a.handle == b.handle; }
};

/// A loaded code object (a CUmodule, a hipModule_t, a CPU kernel table).
struct Module {
  uint64_t handle = 0;
};

/// A kernel inside a loaded module (a CUfunction, a hipFunction_t, a CPU
/// function). Valid until its module is unloaded.
struct Kernel {
  uint64_t handle = 0;
};

/// Grid and block dimensions of a GPU launch, and its dynamic shared memory.
/// The CPU ignores them.
struct LaunchConfig {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t sharedMemoryBytes = 0;
};

/// One launch of a recorded list: what launch() takes, held by value.
struct ListedLaunch {
  Kernel kernel;
  LaunchConfig config;
  std::vector<Buffer> buffers;
  std::vector<Scalar> scalars;
};

/// A recorded list of launches (the contract above).
struct LaunchList {
  uint64_t handle = 0;
};

/// A new value for scalar `scalar` of the list's launch `launch`.
struct ScalarChange {
  int launch = 0;
  int scalar = 0;
  Scalar value;
};

/// Applies `changes` to `launches` (for a backend's replay()); an error
/// for a change naming a launch or scalar the list does not have.
io::Status applyScalarChanges(std::vector<ListedLaunch> &launches,
                              ArrayView<ScalarChange> changes);

/// What a code object holds.
enum class CodeObjectFormat {
  CpuKernelTable, ///< function pointers by name (KernelABI.h)
  Cubin,          ///< NVIDIA ELF for one sm_XX (cuModuleLoadData)
  Ptx,            ///< NVIDIA PTX text, JIT-compiled by the driver
  Hsaco,          ///< AMD code object for one gfx target (hipModuleLoadData)
};

/// Code to load into a backend. Non-owning: the table or the image must
/// outlive the loadModule call (a CPU table must outlive the module).
struct CodeObject {
  CodeObjectFormat format = CodeObjectFormat::CpuKernelTable;
  /// For CpuKernelTable.
  const CpuKernelTable *cpuKernels = nullptr;
  /// For Cubin, Ptx and Hsaco: the bytes as read from a bundle.
  ArrayView<uint8_t> image;
  /// For messages: where the code came from ("tetra library", a bundle path).
  std::string name;

  static CodeObject cpuTable(const CpuKernelTable &table, std::string name) {
    CodeObject object;
    object.format = CodeObjectFormat::CpuKernelTable;
    object.cpuKernels = &table;
    object.name = std::move(name);
    return object;
  }
  static CodeObject binary(CodeObjectFormat format, ArrayView<uint8_t> image,
                           std::string name) {
    CodeObject object;
    object.format = format;
    object.image = image;
    object.name = std::move(name);
    return object;
  }
};

/// A device: memory, streams, code objects, launches. See the file comment
/// for the ordering and lifetime contract every backend keeps.
class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu", "cuda", "hip".
  virtual std::string_view name() const = 0;
  /// The device in words, for logs ("cpu: 2 threads").
  virtual std::string description() const = 0;

  /// `bytes` of device memory, aligned to at least 64 bytes. Zero bytes
  /// gives the null buffer, which free() accepts.
  virtual io::Expected<Buffer> allocate(size_t bytes) = 0;
  /// Releases an allocation returned by allocate(); an error for anything
  /// else (a slice, a buffer freed twice).
  virtual io::Status free(Buffer buffer) = 0;

  /// Copies `bytes` from host memory at `source` to the start of
  /// `destination`.
  virtual io::Status copyToDevice(Buffer destination, const void *source,
                                  size_t bytes, Stream stream = {}) = 0;
  /// Copies `bytes` from the start of `source` to host memory at
  /// `destination`; valid after the stream's next synchronize.
  virtual io::Status copyToHost(void *destination, Buffer source, size_t bytes,
                                Stream stream = {}) = 0;
  /// Copies `bytes` between two device buffers (which must not overlap).
  virtual io::Status copyOnDevice(Buffer destination, Buffer source,
                                  size_t bytes, Stream stream = {}) = 0;
  /// Sets every byte of `buffer` to `value` (zeroing gradients), like
  /// cuMemsetD8Async.
  virtual io::Status fill(Buffer buffer, uint8_t value, Stream stream = {}) = 0;

  virtual io::Expected<Stream> createStream() = 0;
  /// Waits for the stream's work, then destroys it. The default stream
  /// cannot be destroyed.
  virtual io::Status destroyStream(Stream stream) = 0;
  /// Waits until all work submitted to `stream` has finished; reports a
  /// failure of that work.
  virtual io::Status synchronize(Stream stream = {}) = 0;

  virtual io::Expected<Module> loadModule(const CodeObject &code) = 0;
  /// Unloads a module; its kernels must not be running or launched again.
  virtual io::Status unloadModule(Module module) = 0;
  /// The kernel named `name` in `module`.
  virtual io::Expected<Kernel> getKernel(Module module,
                                         std::string_view name) = 0;
  /// The kernel's signature when the code object carries one (the CPU's
  /// tables do; a GPU module gets it from the bundle's manifest), else null.
  virtual const KernelSignature *signature(Kernel kernel) const = 0;

  /// Enqueues `kernel` on `stream` with buffers and scalars in signature
  /// order (KernelABI.h).
  virtual io::Status launch(Kernel kernel, const LaunchConfig &config,
                            ArrayView<Buffer> buffers,
                            ArrayView<Scalar> scalars, Stream stream = {}) = 0;

  /// Records `launches` for replay() (the contract above). A bad argument
  /// is reported here where the backend checks at recording (CUDA), else
  /// by the replay that submits it.
  virtual io::Expected<LaunchList>
  recordLaunches(std::vector<ListedLaunch> launches);
  /// Applies `changes` (they stay for later replays), then submits every
  /// launch of `list` on `stream` in order. Where one launch is refused,
  /// `*refused` (if given) becomes its position in the list, else -1.
  virtual io::Status replay(LaunchList list, ArrayView<ScalarChange> changes,
                            Stream stream = {}, int *refused = nullptr);
  /// Forgets `list`; its launches must not be running.
  virtual io::Status releaseLaunches(LaunchList list);

private:
  /// The base class's recorded lists, by handle.
  std::map<uint64_t, std::vector<ListedLaunch>> launchLists_;
  uint64_t nextLaunchList_ = 1;
};

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_BACKEND_H
