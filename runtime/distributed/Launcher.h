//===- Launcher.h - One process per rank -------------------------*- C++ -*-===//
//
// `tetra train RUN --ranks N`, `tetra-run BUNDLE --gpus N`: starts N copies
// of the same command, each told its place the way torchrun and SLURM tell
// theirs (RANK, WORLD_SIZE, LOCAL_RANK — also the GPU a rank takes —,
// MASTER_ADDR=127.0.0.1, MASTER_PORT a free port), and waits for them. A
// rank that fails — an error, a signal — is named, and the others are
// stopped if they have not stopped by themselves within a grace period
// (their collectives fail as soon as a peer's connection closes, or at the
// communicator's timeout for a hung peer).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DISTRIBUTED_LAUNCHER_H
#define TETRA_RUNTIME_DISTRIBUTED_LAUNCHER_H

#include "runtime/distributed/Communicator.h"

#include <chrono>
#include <string>
#include <vector>

namespace tetra::distributed {

/// Runs this program (/proc/self/exe) with `argv` (argv[0] and the rest as
/// this process got them) as `ranks` processes; `who` starts the messages
/// ("tetra train"). Returns 0 when every rank succeeded, else the first
/// failing rank's exit code (128 + its signal).
int launchRanks(int ranks, const std::vector<std::string> &argv,
                const std::string &who, std::chrono::seconds grace);

/// What a process of a launched run does first: returns "rank R: " for
/// its messages (several ranks; else ""), and silences stdout on ranks
/// other than 0 (rank 0 reports; the others' errors still reach stderr).
io::Expected<std::string> enterRank(const RankInfo &info);

/// A TCP port of the loopback interface nothing listens on now (the
/// kernel's pick; 29500 if it cannot tell).
int freePort();

} // namespace tetra::distributed

#endif // TETRA_RUNTIME_DISTRIBUTED_LAUNCHER_H
