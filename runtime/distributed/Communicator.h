//===- Communicator.h - Collectives between the ranks of a run --*- C++ -*-===//
//
// The contract every engine implements for data-parallel training: Gloo for
// CPU ranks (GlooCommunicator.h), NCCL on NVIDIA and RCCL on AMD (the same
// API, dlopen'ed like the driver). Buffers are the ranks' own memory as the
// run's backend holds it — host memory for CPU ranks, device memory for GPU
// ranks — and every collective is called by every rank in the same order.
//
// A collective that cannot finish — a peer died, or hung past the timeout —
// returns an error naming the collective and what the engine saw; it never
// waits forever. The run then stops every rank (the launcher names the rank
// that died).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DISTRIBUTED_COMMUNICATOR_H
#define TETRA_RUNTIME_DISTRIBUTED_COMMUNICATOR_H

#include "runtime/distributed/TcpStore.h"
#include "runtime/io/Error.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tetra::distributed {

/// How gradients are summed across ranks.
enum class Reduction {
  /// The engine's all-reduce (a ring, a tree): fast; its summation order
  /// depends on the engine and the rank count.
  Sum,
  /// Every rank's buffer gathered and summed in rank order, ((r0 + r1) +
  /// r2) + ...: the order of one rank accumulating the ranks' micro-batches
  /// in turn, so N ranks of micro-batch B give one rank's accumulation of
  /// N x B bit for bit. N times the buffer's memory, and slower.
  FixedOrder,
};

/// "sum" / "fixed_order", and back.
std::string_view reductionName(Reduction reduction);
std::optional<Reduction> parseReduction(std::string_view name);

/// Where this process is in the run: the launcher's variables, as torchrun
/// and SLURM set them.
struct RankInfo {
  int rank = 0, worldSize = 1, localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  /// Whether the variables were set: this process is a rank of a launched
  /// run (of one rank, maybe), with a communicator.
  bool launched = false;
  /// How long a collective (and the rendezvous) may wait for the other
  /// ranks before this rank gives up: TETRA_COLLECTIVE_TIMEOUT seconds,
  /// default 300.
  std::chrono::seconds timeout{300};
  /// How long the launcher lets the other ranks stop by themselves after
  /// one failed, before it stops them: the timeout, within 5 to 30 s.
  std::chrono::seconds launcherGrace() const;
  /// From RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (none
  /// set: a single rank) and TETRA_COLLECTIVE_TIMEOUT. An error for a
  /// malformed or inconsistent value.
  static io::Expected<RankInfo> fromEnvironment();
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The engine, for messages: "gloo", "nccl", "rccl".
  virtual std::string engine() const = 0;

  /// In place: every rank's `count` floats at `data` become their sum over
  /// the ranks, by `reduction`.
  virtual io::Status allReduceSum(float *data, size_t count,
                                  Reduction reduction) = 0;
  /// In place, on host memory whatever the engine (a few scalars: losses,
  /// flags): the sum over the ranks.
  virtual io::Status allReduceHost(double *data, size_t count) = 0;
  /// In place: every rank's `count` floats at `data` (the engine's memory,
  /// as allReduceSum's) become rank `root`'s, bit for bit.
  virtual io::Status broadcast(float *data, size_t count, int root) = 0;
  /// Returns once every rank has called it.
  virtual io::Status barrier() = 0;
};

/// A launched process's place in its run: the rendezvous store (rank 0
/// serves it) and the communicator an engine made through it.
struct RankConnection {
  std::unique_ptr<TcpStore> store;
  std::unique_ptr<Communicator> communicator;
};
using EngineFactory =
    std::function<io::Expected<std::unique_ptr<Communicator>>(TcpStore &)>;
/// Connects to (rank 0: serves) the store at info.masterAddr:masterPort,
/// then makes the communicator with `engine`.
io::Expected<RankConnection> connectRanks(const RankInfo &info,
                                          std::chrono::milliseconds timeout,
                                          const EngineFactory &engine);

} // namespace tetra::distributed

#endif // TETRA_RUNTIME_DISTRIBUTED_COMMUNICATOR_H
