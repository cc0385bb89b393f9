//===- GlooCommunicator.h - CPU ranks through Gloo --------------*- C++ -*-===//
//
// The communicator of CPU ranks: Gloo (libgloo-dev) over TCP, its pairs
// connected through the run's TcpStore. Host memory only. Kept out of
// tetra-run (which trains GPU bundles and links no Gloo).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DISTRIBUTED_GLOOCOMMUNICATOR_H
#define TETRA_RUNTIME_DISTRIBUTED_GLOOCOMMUNICATOR_H

#include "runtime/distributed/Communicator.h"
#include "runtime/distributed/TcpStore.h"

#include <memory>

namespace tetra::distributed {

/// Connects rank `info.rank` of `info.worldSize` through `store` (every
/// pair of ranks over TCP on `info.masterAddr`'s interface family); every
/// collective gives up after `timeout`.
io::Expected<std::unique_ptr<Communicator>>
createGlooCommunicator(const RankInfo &info, TcpStore &store,
                       std::chrono::milliseconds timeout);

} // namespace tetra::distributed

#endif // TETRA_RUNTIME_DISTRIBUTED_GLOOCOMMUNICATOR_H
