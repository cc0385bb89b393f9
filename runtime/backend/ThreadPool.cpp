//===- ThreadPool.cpp - Deterministic parallelFor -------------------------===//
//
// One job at a time. The caller publishes a job (a generation number, the
// range, the grain and the callable) under the mutex and wakes the workers;
// every thread, the caller included, then claims chunk indices from an atomic
// counter until none is left. A worker joins a job only under the mutex and
// only while chunks remain, and the caller declares the job finished only
// under the mutex once every chunk is done and no worker is inside it, so a
// late worker can never run a chunk of a job that has already returned.
//
// Workers spin briefly (yielding) before they sleep so that back-to-back
// kernel launches do not pay a condition-variable wake-up each.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#ifdef __linux__
#include <sched.h>
#endif

namespace tetra::backend {

namespace {

/// True on workers, and on a caller while it runs its share of a job: a
/// parallelFor from such a thread runs inline.
thread_local bool insideParallelFor = false;

/// How long an idle worker polls for the next job before it sleeps.
constexpr std::chrono::microseconds kSpinTime(200);

/// The CPUs this process may run on.
int availableCpus() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0)
      return count;
  }
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace

ThreadPool::ThreadPool(int threadCount) {
  const int workers = std::max(1, threadCount) - 1;
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  workAvailable_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

io::Expected<int> ThreadPool::configuredThreadCount() {
  const char *text = std::getenv("TETRA_NUM_THREADS");
  if (!text)
    return availableCpus();
  char *end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 4096)
    return io::Error("TETRA_NUM_THREADS='" + std::string(text) +
                     "' is not a thread count (an integer in 1..4096)");
  return static_cast<int>(value);
}

int64_t ThreadPool::chunkCount(int64_t begin, int64_t end, int64_t grain) {
  if (end <= begin)
    return 0;
  grain = std::max<int64_t>(1, grain);
  return (end - begin + grain - 1) / grain;
}

void ThreadPool::runChunks(const Job &job) {
  int64_t done = 0;
  for (;;) {
    const int64_t chunk = nextChunk_.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.chunks)
      break;
    const int64_t chunkBegin = job.begin + chunk * job.grain;
    const int64_t chunkEnd = std::min(job.end, chunkBegin + job.grain);
    (*job.fn)(chunkBegin, chunkEnd);
    ++done;
  }
  if (done)
    chunksDone_.fetch_add(done, std::memory_order_acq_rel);
}

void ThreadPool::workerLoop() {
  insideParallelFor = true;
  uint64_t seen = 0;
  for (;;) {
    // Poll for a new generation for a while, then sleep on the condition.
    const auto spinUntil = std::chrono::steady_clock::now() + kSpinTime;
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spinUntil)
      std::this_thread::yield();

    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      workAvailable_.wait(lock, [&] {
        return stop_ || generation_.load(std::memory_order_relaxed) != seen;
      });
      if (stop_)
        return;
      seen = generation_.load(std::memory_order_relaxed);
      // Join only while chunks remain: the caller cannot finish the job (and
      // reuse job_) while activeWorkers_ > 0.
      if (nextChunk_.load(std::memory_order_relaxed) >= job_.chunks)
        continue;
      job = job_;
      ++activeWorkers_;
    }
    runChunks(job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--activeWorkers_ == 0)
        workDone_.notify_all();
    }
  }
}

void ThreadPool::parallelFor(int64_t begin, int64_t end, int64_t grain,
                             FunctionRef<void(int64_t, int64_t)> fn) {
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = chunkCount(begin, end, grain);
  if (chunks == 0)
    return;
  if (chunks == 1 || workers_.empty() || insideParallelFor) {
    for (int64_t chunkBegin = begin; chunkBegin < end; chunkBegin += grain)
      fn(chunkBegin, std::min(end, chunkBegin + grain));
    return;
  }

  std::lock_guard<std::mutex> submit(submitMutex_);
  Job job;
  job.fn = &fn;
  job.begin = begin;
  job.end = end;
  job.grain = grain;
  job.chunks = chunks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = job;
    nextChunk_.store(0, std::memory_order_relaxed);
    chunksDone_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  workAvailable_.notify_all();

  insideParallelFor = true;
  runChunks(job);
  insideParallelFor = false;

  // The last chunks are usually almost done: poll before sleeping.
  const auto spinUntil = std::chrono::steady_clock::now() + kSpinTime;
  while (chunksDone_.load(std::memory_order_acquire) < chunks &&
         std::chrono::steady_clock::now() < spinUntil)
    std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mutex_);
  workDone_.wait(lock, [&] {
    return chunksDone_.load(std::memory_order_acquire) == chunks &&
           activeWorkers_ == 0;
  });
}

} // namespace tetra::backend
