//===- Philox.cpp - Counter-based random bits for every target ------------===//
//
// Philox4x32-10 exactly as Random123 (philox.h) defines it; checked against
// its known-answer vectors in test/unit/numerics/PhiloxTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/numerics/Philox.h"

namespace tetra::numerics {

namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57;
constexpr uint32_t kWeyl0 = 0x9E3779B9; // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85; // sqrt(3) - 1
constexpr int kRounds = 10;

void mulHiLo(uint32_t a, uint32_t b, uint32_t &hi, uint32_t &lo) {
  uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

} // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                   std::array<uint32_t, 2> key) {
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulHiLo(kMultiplier0, counter[0], hi0, lo0);
    mulHiLo(kMultiplier1, counter[2], hi1, lo1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

uint32_t tensorIdOf(std::string_view name) {
  uint32_t hash = 0x811C9DC5u;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x01000193u;
  }
  return hash;
}

uint32_t randomBits(const RandomStream &stream, uint64_t index) {
  const uint64_t block = index / 4;
  const std::array<uint32_t, 4> counter = {static_cast<uint32_t>(block),
                                           static_cast<uint32_t>(block >> 32),
                                           stream.step, stream.tensorId};
  const std::array<uint32_t, 2> key = {
      static_cast<uint32_t>(stream.seed),
      static_cast<uint32_t>(stream.seed >> 32)};
  return philox4x32(counter, key)[index % 4];
}

} // namespace tetra::numerics
