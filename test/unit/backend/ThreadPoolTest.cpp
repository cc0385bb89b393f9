//===- ThreadPoolTest.cpp - The deterministic thread pool -----------------===//

#include "runtime/backend/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace tetra::backend;

namespace {

/// A float sum over [0, n) done the way kernels do reductions: one partial
/// per chunk, partials added in chunk order.
float chunkedSum(ThreadPool &pool, const std::vector<float> &values,
                 int64_t grain) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<float> partial(ThreadPool::chunkCount(0, n, grain));
  pool.parallelFor(0, n, grain, [&](int64_t begin, int64_t end) {
    float sum = 0.0f;
    for (int64_t i = begin; i < end; ++i)
      sum += values[i];
    partial[begin / grain] = sum;
  });
  float total = 0.0f;
  for (float value : partial)
    total += value;
  return total;
}

} // namespace

TEST(ThreadPoolTest, EveryChunkRunsOnceWithTheDocumentedBounds) {
  for (int threads : {1, 2, 5})
    for (int64_t grain : {1, 3, 64, 1000}) {
      ThreadPool pool(threads);
      const int64_t begin = -7, end = 250;
      std::vector<std::atomic<int>> seen(end - begin);
      std::mutex mutex;
      std::set<std::pair<int64_t, int64_t>> chunks;
      pool.parallelFor(begin, end, grain, [&](int64_t b, int64_t e) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          chunks.insert({b, e});
        }
        for (int64_t i = b; i < e; ++i)
          seen[i - begin]++;
      });
      for (auto &count : seen)
        EXPECT_EQ(count.load(), 1);
      EXPECT_EQ(static_cast<int64_t>(chunks.size()),
                ThreadPool::chunkCount(begin, end, grain));
      for (const auto &[b, e] : chunks) {
        EXPECT_EQ((b - begin) % grain, 0);
        EXPECT_EQ(e, std::min(end, b + grain));
      }
    }
}

TEST(ThreadPoolTest, EmptyAndDegenerateRanges) {
  ThreadPool pool(3);
  int calls = 0;
  pool.parallelFor(5, 5, 1, [&](int64_t, int64_t) { ++calls; });
  pool.parallelFor(5, 2, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  // A grain below 1 counts as 1.
  std::atomic<int> elements{0};
  pool.parallelFor(0, 10, 0, [&](int64_t b, int64_t e) {
    EXPECT_EQ(e - b, 1);
    elements += static_cast<int>(e - b);
  });
  EXPECT_EQ(elements.load(), 10);
  EXPECT_EQ(ThreadPool::chunkCount(0, 10, 0), 10);
  EXPECT_EQ(ThreadPool::chunkCount(0, 10, 3), 4);
}

TEST(ThreadPoolTest, ThreadCount) {
  EXPECT_EQ(ThreadPool(1).threadCount(), 1);
  EXPECT_EQ(ThreadPool(4).threadCount(), 4);
  EXPECT_EQ(ThreadPool(0).threadCount(), 1);
}

TEST(ThreadPoolTest, ConfiguredThreadCountReadsTheEnvironment) {
  const char *saved = std::getenv("TETRA_NUM_THREADS");
  const std::string savedValue = saved ? saved : "";

  ::setenv("TETRA_NUM_THREADS", "3", 1);
  tetra::io::Expected<int> three = ThreadPool::configuredThreadCount();
  ASSERT_TRUE(three);
  EXPECT_EQ(*three, 3);
  for (const char *bad : {"0", "-2", "many", "4x", ""}) {
    ::setenv("TETRA_NUM_THREADS", bad, 1);
    tetra::io::Expected<int> count = ThreadPool::configuredThreadCount();
    ASSERT_FALSE(count) << bad;
    EXPECT_NE(count.error().message().find("TETRA_NUM_THREADS"),
              std::string::npos);
  }
  ::unsetenv("TETRA_NUM_THREADS");
  tetra::io::Expected<int> cpus = ThreadPool::configuredThreadCount();
  ASSERT_TRUE(cpus);
  EXPECT_GE(*cpus, 1);

  if (saved)
    ::setenv("TETRA_NUM_THREADS", savedValue.c_str(), 1);
}

TEST(ThreadPoolTest, ChunkedReductionsHaveTheSameBitsWithAnyThreadCount) {
  std::vector<float> values(100003);
  uint32_t state = 12345;
  for (float &value : values) {
    state = state * 1664525u + 1013904223u;
    value =
        std::ldexp(static_cast<float>(state >> 8), -24 + (state % 17)) - 64.0f;
  }
  ThreadPool one(1), two(2), seven(7);
  for (int64_t grain : {1000, 4096}) {
    const float reference = chunkedSum(one, values, grain);
    for (int repeat = 0; repeat < 5; ++repeat) {
      const float a = chunkedSum(two, values, grain);
      const float b = chunkedSum(seven, values, grain);
      EXPECT_EQ(std::memcmp(&a, &reference, sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(&b, &reference, sizeof(float)), 0);
    }
  }
}

TEST(ThreadPoolTest, NestedParallelForRunsInline) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  std::atomic<int> offThread{0};
  pool.parallelFor(0, 8, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    int64_t previous = -1;
    pool.parallelFor(0, 100, 7, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != outer)
        ++offThread;
      // Inline means in order.
      EXPECT_GT(b, previous);
      previous = b;
      total += e - b;
    });
  });
  EXPECT_EQ(total.load(), 800);
  EXPECT_EQ(offThread.load(), 0);
}

TEST(ThreadPoolTest, TheCallerParticipates) {
  // With one chunk per thread and chunks that wait for each other, the job
  // finishes only if the caller runs a chunk too.
  ThreadPool pool(2);
  std::atomic<int> arrived{0};
  std::atomic<bool> callerRan{false};
  const std::thread::id caller = std::this_thread::get_id();
  pool.parallelFor(0, 2, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() == caller)
      callerRan = true;
    ++arrived;
    while (arrived.load() < 2)
      std::this_thread::yield();
  });
  EXPECT_TRUE(callerRan.load());
}

TEST(ThreadPoolTest, ManySmallJobsAndConcurrentCallers) {
  ThreadPool pool(3);
  auto work = [&](int64_t seed) {
    for (int job = 0; job < 2000; ++job) {
      std::atomic<int64_t> sum{0};
      pool.parallelFor(0, 37, 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          sum += i * seed;
      });
      ASSERT_EQ(sum.load(), 666 * seed);
    }
  };
  std::thread other(work, 3);
  work(1);
  other.join();
}
