//===- ThreadPool.h - Deterministic parallelFor -----------------*- C++ -*-===//
//
// The CPU backend's only source of parallelism. A training step must give the
// same bits every run, so the split of a range into chunks depends only on
// the arguments of parallelFor (begin, end, grain), never on the number of
// threads or on timing: a kernel that reduces per chunk and then combines the
// chunk results in chunk order gets the same float result with 1 thread or 64.
// Which thread runs a chunk is decided at run time (threads claim chunks from
// an atomic counter, which balances triangular work such as causal attention),
// but that cannot change any result because chunks never share outputs.
//
// The caller participates in the work; a parallelFor inside a parallelFor runs
// inline on the calling thread (no oversubscription, no deadlock).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BACKEND_THREADPOOL_H
#define TETRA_RUNTIME_BACKEND_THREADPOOL_H

#include "runtime/io/Error.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace tetra::backend {

/// A non-owning reference to a callable, like llvm::function_ref: cheap to
/// pass, no allocation. The callable must outlive the call it is passed to.
template <typename Fn> class FunctionRef;

template <typename Ret, typename... Params> class FunctionRef<Ret(Params...)> {
public:
  template <
      typename Callable,
      typename = std::enable_if_t<!std::is_same_v<
          std::remove_cv_t<std::remove_reference_t<Callable>>, FunctionRef>>>
  FunctionRef(Callable &&callable)
      : callback_(&invoke<std::remove_reference_t<Callable>>),
        callable_(reinterpret_cast<intptr_t>(&callable)) {}

  Ret operator()(Params... params) const {
    return callback_(callable_, std::forward<Params>(params)...);
  }

private:
  template <typename Callable>
  static Ret invoke(intptr_t callable, Params... params) {
    return (*reinterpret_cast<Callable *>(callable))(
        std::forward<Params>(params)...);
  }

  Ret (*callback_)(intptr_t, Params...);
  intptr_t callable_;
};

/// A fixed set of worker threads plus the calling thread.
///
/// Kernels must pick `grain` from the problem's shape alone (a constant, or a
/// function of the sizes), never from threadCount(): the grain fixes the
/// chunks, and the chunks fix the bits of every reduction.
class ThreadPool {
public:
  /// A pool of `threadCount` threads in all: the caller and
  /// `threadCount - 1` workers. `threadCount` < 1 is treated as 1.
  explicit ThreadPool(int threadCount);
  ~ThreadPool();

  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// The number of threads the process may use: TETRA_NUM_THREADS when it is
  /// set (a positive integer, else an error), otherwise the CPUs in the
  /// process's affinity mask (on Linux; std::thread::hardware_concurrency
  /// elsewhere), at least 1.
  static io::Expected<int> configuredThreadCount();

  /// Threads that run chunks, the caller included.
  int threadCount() const { return static_cast<int>(workers_.size()) + 1; }

  /// The chunks [begin, end) is split into: ceil((end - begin) / grain).
  static int64_t chunkCount(int64_t begin, int64_t end, int64_t grain);

  /// Calls fn(chunkBegin, chunkEnd) for every chunk
  ///   [begin + c * grain, min(end, begin + (c + 1) * grain)),
  /// c = 0 .. chunkCount - 1, each exactly once, possibly concurrently, and
  /// returns when all have returned. The chunk index of a call is
  /// (chunkBegin - begin) / grain. `grain` < 1 is treated as 1. Runs inline
  /// (chunks in order) when there is one chunk, one thread, or when called
  /// from inside another parallelFor. Calls from several outside threads
  /// are serialized.
  void parallelFor(int64_t begin, int64_t end, int64_t grain,
                   FunctionRef<void(int64_t, int64_t)> fn);

private:
  /// What the workers run: one parallelFor's chunks.
  struct Job {
    FunctionRef<void(int64_t, int64_t)> *fn = nullptr;
    int64_t begin = 0;
    int64_t end = 0;
    int64_t grain = 1;
    int64_t chunks = 0;
  };

  void workerLoop();
  /// Claims and runs chunks of `job` until none is left.
  void runChunks(const Job &job);

  std::vector<std::thread> workers_;
  /// Serializes parallelFor calls from different outside threads.
  std::mutex submitMutex_;

  /// Guards job_, generation_ (writes), activeWorkers_, stop_.
  std::mutex mutex_;
  std::condition_variable workAvailable_;
  std::condition_variable workDone_;
  Job job_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> nextChunk_{0};
  std::atomic<int64_t> chunksDone_{0};
  int activeWorkers_ = 0;
  bool stop_ = false;
};

} // namespace tetra::backend

#endif // TETRA_RUNTIME_BACKEND_THREADPOOL_H
