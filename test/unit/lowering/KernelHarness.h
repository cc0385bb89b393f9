//===- KernelHarness.h - JIT-compiled kernels under test --------*- C++ -*-===//
//
// What the CPU code generation tests share: compiling a module of kernels
// (through driver/CpuJit.h, with a cache in the build tree so that each
// test process after the first loads objects instead of compiling), edge-case
// data, and readable reports of the first bytes that differ.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_TEST_UNIT_LOWERING_KERNELHARNESS_H
#define TETRA_TEST_UNIT_LOWERING_KERNELHARNESS_H

#include "driver/CpuJit.h"
#include "runtime/numerics/BlockQuantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tetra::testing {

using cpu::describe;
using cpu::describeScalar;
using cpu::MemRefDescriptor;

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();
inline const float kInf = std::numeric_limits<float>::infinity();

/// Compiles `source`; fails the test (fatally for the caller's ASSERT) and
/// returns null on an error. Objects are cached under the build tree.
inline std::unique_ptr<cpu::KernelLibrary>
compileOrFail(const std::string &source, bool formKernels = false) {
  cpu::JitOptions options;
  options.cacheDirectory = TETRA_UNIT_JIT_CACHE;
  options.formKernels = formKernels;
  auto library = cpu::compileKernels(source, options);
  if (!library) {
    ADD_FAILURE() << llvm::toString(library.takeError());
    return nullptr;
  }
  return std::move(*library);
}

inline uint32_t bitsOf(float x) { return numerics::floatBits(x); }

inline std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%X", value);
  return text;
}

/// The first `limit` positions where two byte vectors differ, with the
/// input value there (for codes) so that a failure says why.
inline ::testing::AssertionResult
sameBytes(const std::vector<uint8_t> &expected,
          const std::vector<uint8_t> &actual,
          const std::vector<float> *inputs = nullptr, int limit = 5) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure()
           << "sizes differ: " << expected.size() << " vs " << actual.size();
  std::ostringstream report;
  int64_t differences = 0;
  for (size_t k = 0; k < expected.size(); ++k) {
    if (expected[k] == actual[k])
      continue;
    if (differences++ < limit) {
      report << "\n  [" << k << "] expected " << hex(expected[k]) << ", got "
             << hex(actual[k]);
      if (inputs)
        report << " (input " << (*inputs)[k] << ", bits "
               << hex(bitsOf((*inputs)[k])) << ")";
    }
  }
  if (differences == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << differences << " of " << expected.size()
         << " differ:" << report.str();
}

/// Floats equal bit for bit (any NaN equals any NaN).
inline ::testing::AssertionResult sameFloats(const std::vector<float> &expected,
                                             const std::vector<float> &actual,
                                             int limit = 5) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure()
           << "sizes differ: " << expected.size() << " vs " << actual.size();
  std::ostringstream report;
  int64_t differences = 0;
  for (size_t k = 0; k < expected.size(); ++k) {
    bool same = bitsOf(expected[k]) == bitsOf(actual[k]) ||
                (std::isnan(expected[k]) && std::isnan(actual[k]));
    if (same)
      continue;
    if (differences++ < limit)
      report << "\n  [" << k << "] expected " << expected[k] << " ("
             << hex(bitsOf(expected[k])) << "), got " << actual[k] << " ("
             << hex(bitsOf(actual[k])) << ")";
  }
  if (differences == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << differences << " of " << expected.size()
         << " differ:" << report.str();
}

/// Test data whose blocks along `axis` (of `blockSize` elements) each have
/// a flavor: ordinary values at a random scale, zeros, a NaN, an Inf, fp32
/// subnormals, values near FLT_MAX, exact ties of `element` at the block's
/// scale, values that saturate, amax at the scale rules' boundaries, and
/// magnitudes spanning 30 binades.
class EdgeCaseData {
public:
  EdgeCaseData(numerics::ElementFormat element, uint64_t seed)
      : spec(numerics::formatSpec(element)), rng(seed) {}

  std::vector<float> make(const std::vector<int64_t> &shape, int axis,
                          int blockSize) {
    const numerics::AxisView view = numerics::viewAlong(shape, axis);
    std::vector<float> data(view.numElements());
    std::vector<float> block(blockSize);
    // Every flavor in turn, from a random one: a tensor of at least
    // kFlavors blocks has them all.
    int64_t flavor = rng() % kFlavors;
    for (int64_t o = 0; o < view.outer; ++o)
      for (int64_t first = 0; first < view.extent; first += blockSize)
        for (int64_t i = 0; i < view.inner; ++i) {
          fill(block, static_cast<int>(flavor++ % kFlavors));
          for (int j = 0; j < blockSize; ++j)
            data[view.index(o, first + j, i)] = block[j];
        }
    return data;
  }

  static constexpr int kFlavors = 15;

private:
  float uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(rng);
  }
  int integer(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  }
  float signed_(float x) { return (rng() & 1) ? -x : x; }
  float codeValue(uint32_t code) { return numerics::decode(code, spec); }
  uint32_t maxCode() {
    return numerics::encode(spec.maxFinite, 0, spec,
                            numerics::Rounding::NearestEven);
  }

  void fill(std::vector<float> &block, int flavor) {
    const int size = static_cast<int>(block.size());
    const int scale = integer(-60, 60);
    auto ordinary = [&](int exponent) {
      for (float &x : block)
        x = signed_(uniform(0.0f, 1.0f) * std::ldexp(1.0f, exponent));
    };
    switch (flavor) {
    case 0:
      ordinary(scale);
      break;
    case 1: // all +0
      std::fill(block.begin(), block.end(), 0.0f);
      break;
    case 2: // signed zeros and one tiny subnormal
      for (float &x : block)
        x = signed_(0.0f);
      block[integer(0, size - 1)] = signed_(numerics::bitsToFloat(1));
      break;
    case 3: // one NaN
      ordinary(scale);
      block[integer(0, size - 1)] = kNaN;
      break;
    case 4: // one +Inf or -Inf
      ordinary(scale);
      block[integer(0, size - 1)] = signed_(kInf);
      break;
    case 5: // fp32 subnormals only
      for (float &x : block)
        x = signed_(numerics::bitsToFloat(rng() & 0x7FFFFF));
      break;
    case 6: // the smallest normals and the largest subnormals
      for (float &x : block)
        x = signed_(std::ldexp(uniform(0.5f, 2.0f), -126));
      break;
    case 7: // near FLT_MAX, with FLT_MAX itself
      for (float &x : block)
        x = signed_(std::ldexp(uniform(1.0f, 2.0f), 127));
      block[integer(0, size - 1)] = std::numeric_limits<float>::max();
      break;
    case 8: // exact codes and midpoints between codes, at scale 2^s
    case 9: {
      const uint32_t top = maxCode();
      for (float &x : block) {
        const uint32_t code = rng() % top;
        const double low = codeValue(code), high = codeValue(code + 1);
        const double value = (rng() & 1) ? (low + high) / 2 : low;
        x = signed_(static_cast<float>(std::ldexp(value, scale)));
      }
      block[integer(0, size - 1)] = std::ldexp(spec.maxFinite, scale);
      break;
    }
    case 10: // saturates under floor: amax in (max, 2^(emax+1))
      ordinary(scale + spec.maxExponent);
      block[integer(0, size - 1)] = signed_(std::ldexp(
          uniform(spec.maxFinite, std::ldexp(2.0f, spec.maxExponent)), scale));
      break;
    case 11: { // amax at the rules' boundaries
      const int m = spec.mantissaBits;
      const float candidates[] = {
          std::ldexp(1.0f, spec.maxExponent),
          spec.maxFinite,
          std::nextafter(spec.maxFinite, kInf),
          static_cast<float>(
              std::ldexp(2.0 - std::ldexp(1.0, -(m + 1)), spec.maxExponent)),
          std::nextafter(
              static_cast<float>(std::ldexp(2.0 - std::ldexp(1.0, -(m + 1)),
                                            spec.maxExponent)),
              0.0f),
          std::nextafter(std::ldexp(2.0f, spec.maxExponent), 0.0f),
          std::ldexp(1.5f, spec.maxExponent)};
      const float amax =
          candidates[rng() % (sizeof(candidates) / sizeof(candidates[0]))];
      for (float &x : block)
        x = signed_(uniform(0.0f, amax) * std::ldexp(1.0f, scale));
      block[integer(0, size - 1)] = signed_(std::ldexp(amax, scale));
      break;
    }
    case 12: // huge: the scale exponent clamps at +127
      ordinary(integer(110, 127));
      break;
    case 13: // tiny: the scale exponent clamps at -127
      ordinary(integer(-149, -120));
      break;
    default: // 30 binades in one block: many codes underflow
      for (float &x : block)
        x = signed_(std::ldexp(uniform(1.0f, 2.0f), scale - integer(0, 30)));
      break;
    }
  }

  const numerics::FormatSpec &spec;
  std::mt19937_64 rng;
};

} // namespace tetra::testing

#endif // TETRA_TEST_UNIT_LOWERING_KERNELHARNESS_H
