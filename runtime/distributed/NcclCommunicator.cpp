//===- NcclCommunicator.cpp - GPU ranks through NCCL or RCCL --------------===//

#include "runtime/distributed/NcclCommunicator.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fmt/format.h>
#include <thread>
#include <type_traits>
#include <vector>

using namespace tetra;
using namespace tetra::distributed;

namespace {

// nccl.h's types and values (the same in rccl.h), as the library's ABI.
struct UniqueId {
  char internal[128];
};
using Comm = void *;
using Result = int;
constexpr Result kSuccess = 0, kInProgress = 7;
constexpr int kFloat32 = 7, kSum = 0;

struct Library {
  void *handle = nullptr;
  std::string name;
  Result (*getVersion)(int *) = nullptr;
  Result (*getUniqueId)(UniqueId *) = nullptr;
  Result (*commInitRank)(Comm *, int, UniqueId, int) = nullptr;
  Result (*allReduce)(const void *, void *, size_t, int, int, Comm,
                      void *) = nullptr;
  Result (*broadcast)(const void *, void *, size_t, int, int, Comm,
                      void *) = nullptr;
  Result (*commGetAsyncError)(Comm, Result *) = nullptr;
  Result (*commAbort)(Comm) = nullptr;
  Result (*commDestroy)(Comm) = nullptr;
  const char *(*getErrorString)(Result) = nullptr;

  std::string error(Result result) const {
    return fmt::format("{} ({})",
                       getErrorString ? getErrorString(result) : "error",
                       result);
  }
};

io::Expected<Library> load(GpuCollectives which) {
  Library library;
  const bool nccl = which == GpuCollectives::Nccl;
  const char *variable = nccl ? "TETRA_NCCL_LIBRARY" : "TETRA_RCCL_LIBRARY";
  const char *path = std::getenv(variable);
  library.name = path ? path : nccl ? "libnccl.so.2" : "librccl.so.1";
  library.handle = ::dlopen(library.name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library.handle)
    return io::Error(fmt::format(
        "cannot load {} ({}): {} ranks need it on the loader's path (or {} "
        "naming it)",
        library.name, ::dlerror(), nccl ? "NVIDIA GPU" : "AMD GPU",
        variable));
  std::string missing;
  auto resolve = [&](auto &slot, const char *symbol) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(
        ::dlsym(library.handle, symbol));
    if (!slot)
      missing += std::string(missing.empty() ? "" : ", ") + symbol;
  };
  resolve(library.getVersion, "ncclGetVersion");
  resolve(library.getUniqueId, "ncclGetUniqueId");
  resolve(library.commInitRank, "ncclCommInitRank");
  resolve(library.allReduce, "ncclAllReduce");
  resolve(library.broadcast, "ncclBroadcast");
  resolve(library.commGetAsyncError, "ncclCommGetAsyncError");
  resolve(library.commAbort, "ncclCommAbort");
  resolve(library.commDestroy, "ncclCommDestroy");
  resolve(library.getErrorString, "ncclGetErrorString");
  if (!missing.empty())
    return io::Error(
        fmt::format("{} lacks {}: not NCCL's API", library.name, missing));
  return library;
}

class NcclCommunicator : public Communicator {
public:
  NcclCommunicator(Library library, Comm comm, const RankInfo &info,
                   TcpStore &store, StreamIdle idle,
                   std::chrono::milliseconds timeout, std::string engine)
      : library_(std::move(library)), comm_(comm), info_(info),
        store_(store), idle_(std::move(idle)), timeout_(timeout),
        engine_(std::move(engine)) {}
  ~NcclCommunicator() override {
    if (comm_) // an aborted communicator has none left
      library_.commDestroy(comm_);
  }
  int rank() const override { return info_.rank; }
  int size() const override { return info_.worldSize; }
  std::string engine() const override { return engine_; }

  io::Status allReduceSum(float *data, size_t count,
                          Reduction reduction) override {
    if (reduction == Reduction::FixedOrder && size() > 1)
      return io::Error(fmt::format(
          "{}: the fixed-order sum is the CPU ranks' (Gloo) so far; GPU ranks "
          "sum with --reduction sum",
          engine_));
    return collective("all-reduce", count, [&] {
      return library_.allReduce(data, data, count, kFloat32, kSum, comm_,
                                nullptr);
    });
  }

  io::Status broadcast(float *data, size_t count, int root) override {
    return collective("broadcast", count, [&] {
      return library_.broadcast(data, data, count, kFloat32, root, comm_,
                                nullptr);
    });
  }

  io::Status allReduceHost(double *data, size_t count) override {
    // Through the store: every rank's values, summed in rank order.
    const std::string key = fmt::format("host/{}", hostRound_++);
    std::vector<char> mine(count * sizeof(double));
    std::memcpy(mine.data(), data, mine.size());
    if (io::Status s = store_.set(fmt::format("{}/{}", key, rank()), mine); !s)
      return s;
    std::vector<double> sum(count, 0.0);
    for (int r = 0; r < size(); ++r) {
      io::Expected<std::vector<char>> theirs =
          store_.get(fmt::format("{}/{}", key, r));
      if (!theirs)
        return io::Error(fmt::format("{} host sum: rank {}: {}", engine_, r,
                                     theirs.error().message()));
      if (theirs->size() != mine.size())
        return io::Error(fmt::format("{} host sum: rank {} sent {} bytes",
                                     engine_, r, theirs->size()));
      for (size_t i = 0; i < count; ++i) {
        double value;
        std::memcpy(&value, theirs->data() + i * sizeof(double),
                    sizeof value);
        sum[i] += value;
      }
    }
    std::memcpy(data, sum.data(), mine.size());
    return io::success();
  }

  io::Status barrier() override {
    return store_.barrier(fmt::format("barrier/{}", barrierRound_++), size());
  }

private:
  /// Enqueues a collective of `count` elements (`enqueue` returns NCCL's
  /// result) on the step's stream and waits for it (wait()).
  template <typename F>
  io::Status collective(const char *what, size_t count, F &&enqueue) {
    if (count == 0)
      return io::success();
    if (aborted_)
      return io::Error(engine_ + ": the communicator was aborted");
    if (Result r = enqueue(); r != kSuccess)
      return io::Error(
          fmt::format("{} {}: {}", engine_, what, library_.error(r)));
    return wait(what);
  }
  /// Polls the stream and the communicator until the collective is done,
  /// failed, or past the timeout (then aborts the communicator): busily
  /// for the first millisecond (a step's sums take about that), then with
  /// 50 µs sleeps.
  io::Status wait(const char *what) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout_;
    while (true) {
      io::Expected<bool> idle = idle_();
      if (!idle)
        return io::Error(fmt::format("{} {}: {}", engine_, what,
                                     idle.error().message()));
      if (*idle)
        return io::success();
      Result state = kSuccess;
      library_.commGetAsyncError(comm_, &state);
      if (state != kSuccess && state != kInProgress) {
        abort();
        return io::Error(fmt::format("{} {} failed: {}", engine_, what,
                                     library_.error(state)));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        abort();
        return io::Error(fmt::format(
            "{} {} did not finish within {} s (a rank died or hung): the "
            "communicator was aborted",
            engine_, what, timeout_.count() / 1000));
      }
      if (std::chrono::steady_clock::now() - start <
          std::chrono::milliseconds(1))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void abort() {
    if (!aborted_)
      library_.commAbort(comm_);
    aborted_ = true;
    comm_ = nullptr;
  }

  Library library_;
  Comm comm_;
  RankInfo info_;
  TcpStore &store_;
  StreamIdle idle_;
  std::chrono::milliseconds timeout_;
  std::string engine_;
  bool aborted_ = false;
  int64_t hostRound_ = 0, barrierRound_ = 0;
};

} // namespace

io::Expected<std::unique_ptr<Communicator>>
tetra::distributed::createNcclCommunicator(GpuCollectives which,
                                           const RankInfo &info,
                                           TcpStore &store, StreamIdle idle,
                                           std::chrono::milliseconds timeout) {
  io::Expected<Library> library = load(which);
  if (!library)
    return library.error();
  int version = 0;
  library->getVersion(&version);
  const std::string engine =
      fmt::format("{} {}", which == GpuCollectives::Nccl ? "nccl" : "rccl",
                  version);
  UniqueId id{};
  if (info.rank == 0) {
    if (Result r = library->getUniqueId(&id); r != kSuccess)
      return io::Error(
          fmt::format("{}: ncclGetUniqueId: {}", engine, library->error(r)));
    if (io::Status s = store.set("nccl/id", std::vector<char>(
                                                id.internal,
                                                id.internal + sizeof id));
        !s)
      return s.error();
  } else {
    io::Expected<std::vector<char>> shared = store.get("nccl/id");
    if (!shared)
      return shared.error();
    if (shared->size() != sizeof id)
      return io::Error(fmt::format("{}: rank 0's unique id has {} bytes",
                                   engine, shared->size()));
    std::memcpy(id.internal, shared->data(), sizeof id);
  }
  Comm comm = nullptr;
  if (Result r = library->commInitRank(&comm, info.worldSize, id, info.rank);
      r != kSuccess)
    return io::Error(fmt::format("{}: rank {} of {} cannot join: {}", engine,
                                 info.rank, info.worldSize,
                                 library->error(r)));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(*library), comm, info, store,
                           std::move(idle), timeout, engine));
}
