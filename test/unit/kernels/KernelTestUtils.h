//===- KernelTestUtils.h - Shared helpers of the kernel tests ---*- C++ -*-===//
//
// What every kernel test needs: reproducible random inputs, a pool with more
// threads than the machine has cores (so chunks really interleave), fp32 vs
// fp64 comparisons that print the first mismatches, central finite
// differences of an fp64 function, and a bitwise comparison for the
// determinism checks.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_TEST_UNIT_KERNELS_KERNELTESTUTILS_H
#define TETRA_TEST_UNIT_KERNELS_KERNELTESTUTILS_H

#include "runtime/backend/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace tetra::kernels::testing {

/// A pool of 4 threads shared by the tests.
inline backend::ThreadPool &testPool() {
  static backend::ThreadPool pool(4);
  return pool;
}

/// A pool of 1 thread, for the determinism comparisons.
inline backend::ThreadPool &serialPool() {
  static backend::ThreadPool pool(1);
  return pool;
}

/// SplitMix64: a tiny generator whose output is the same on every platform.
class Random {
public:
  explicit Random(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi).
  float uniform(float lo = -1.0f, float hi = 1.0f) {
    return lo + (hi - lo) * static_cast<float>((next() >> 40) * 0x1p-24);
  }
  /// Uniform integer in [0, limit).
  int32_t below(int32_t limit) {
    return static_cast<int32_t>(next() % static_cast<uint64_t>(limit));
  }

private:
  uint64_t state_;
};

inline std::vector<float> randomFloats(int64_t count, uint64_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  Random random(seed);
  std::vector<float> values(count);
  for (float &value : values)
    value = random.uniform(lo, hi);
  return values;
}

inline std::vector<int32_t> randomIds(int64_t count, int32_t limit,
                                      uint64_t seed) {
  Random random(seed);
  std::vector<int32_t> ids(count);
  for (int32_t &id : ids)
    id = random.below(limit);
  return ids;
}

inline std::vector<double> widen(const std::vector<float> &values) {
  return std::vector<double>(values.begin(), values.end());
}

/// Expects |actual - expected| <= atol + rtol * |expected| everywhere and
/// prints the first few elements that are not.
inline void expectClose(const std::vector<float> &actual,
                        const std::vector<double> &expected, double rtol,
                        double atol, const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  size_t failures = 0;
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(actual[i] - expected[i]);
    const double bound = atol + rtol * std::fabs(expected[i]);
    worst = std::max(worst, error / bound);
    if (!(error <= bound)) {
      ++failures;
      if (reported++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: " << actual[i]
                      << " vs expected " << expected[i] << " (error " << error
                      << ", bound " << bound << ")";
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": worst error / bound " << worst;
}

/// The same for two fp64 vectors (the reference against finite
/// differences).
inline void expectClose(const std::vector<double> &actual,
                        const std::vector<double> &expected, double rtol,
                        double atol, const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t failures = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(actual[i] - expected[i]);
    if (!(error <= atol + rtol * std::fabs(expected[i])) && failures++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << actual[i] << " vs expected "
                    << expected[i] << " (error " << error << ")";
  }
  EXPECT_EQ(failures, 0u) << what;
}

/// d loss / d x by central differences with step h, in fp64.
inline std::vector<double> numericalGradient(
    const std::function<double(const std::vector<double> &)> &loss,
    std::vector<double> x, double h = 1e-6) {
  std::vector<double> gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = loss(x);
    x[i] = saved - h;
    const double minus = loss(x);
    x[i] = saved;
    gradient[i] = (plus - minus) / (2 * h);
  }
  return gradient;
}

/// sum_i weights[i] * values[i]: a scalar loss whose gradient with respect
/// to `values` is `weights`.
inline double weightedSum(const std::vector<double> &values,
                          const std::vector<double> &weights) {
  double sum = 0.0;
  for (size_t i = 0; i < values.size(); ++i)
    sum += values[i] * weights[i];
  return sum;
}

/// Bitwise equality of two float vectors.
inline bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace tetra::kernels::testing

#endif // TETRA_TEST_UNIT_KERNELS_KERNELTESTUTILS_H
