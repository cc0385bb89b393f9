//===- NcclCommunicator.h - GPU ranks through NCCL or RCCL ------*- C++ -*-===//
//
// The communicator of GPU ranks: NCCL (`libnccl.so.2`) on NVIDIA, RCCL
// (`librccl.so.1`, the same API) on AMD, dlopen'ed like the driver — no
// build-time dependency, and a clear error where the library is missing.
// The library is found on the loader's path, or where TETRA_NCCL_LIBRARY
// (TETRA_RCCL_LIBRARY) names it; the GPU machine's Python environment ships
// NCCL in site-packages/nvidia/nccl/lib.
//
// Rank 0 makes the unique id and sets it in the run's TcpStore; every rank
// joins with it. Collectives run on the backend's default stream, in order
// with the step's kernels; each is waited for by polling the stream and
// the communicator's asynchronous error, and aborted (ncclCommAbort) past
// the timeout — a dead or hung peer never hangs the others. Sums are the
// engine's (Reduction::Sum); the fixed-order sum is the CPU ranks' so far.
// Host scalars (the loss, the stop flag) are summed through the store.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DISTRIBUTED_NCCLCOMMUNICATOR_H
#define TETRA_RUNTIME_DISTRIBUTED_NCCLCOMMUNICATOR_H

#include "runtime/distributed/Communicator.h"
#include "runtime/distributed/TcpStore.h"

#include <functional>
#include <memory>

namespace tetra::distributed {

enum class GpuCollectives { Nccl, Rccl };

/// Whether the work queued on the backend's default stream has finished
/// (true), is still running (false), or failed (an error).
using StreamIdle = std::function<io::Expected<bool>()>;

/// Joins rank `info.rank` of `info.worldSize` on the current device (the
/// backend's context must be current on this thread).
io::Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(GpuCollectives library, const RankInfo &info,
                       TcpStore &store, StreamIdle idle,
                       std::chrono::milliseconds timeout);

} // namespace tetra::distributed

#endif // TETRA_RUNTIME_DISTRIBUTED_NCCLCOMMUNICATOR_H
