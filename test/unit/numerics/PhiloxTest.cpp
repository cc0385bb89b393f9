//===- PhiloxTest.cpp - Philox4x32-10 against Random123 -------------------===//

#include "runtime/numerics/Philox.h"

#include <gtest/gtest.h>

#include <set>

using namespace tetra::numerics;

namespace {
using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;
} // namespace

// Random123's kat_vectors, "philox4x32 10".
TEST(PhiloxTest, KnownAnswerZero) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (Counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(PhiloxTest, KnownAnswerAllOnes) {
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                       {0xffffffff, 0xffffffff}),
            (Counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
}

TEST(PhiloxTest, KnownAnswerPi) {
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                       {0xa4093822, 0x299f31d0}),
            (Counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, StreamLayout) {
  const RandomStream stream{0x0123456789ABCDEFull, 17, 0xBEEF};
  const Key key{0x89ABCDEF, 0x01234567};
  for (uint64_t index :
       {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4},
        uint64_t{1001}, (uint64_t{5} << 34) + 6}) {
    const uint64_t block = index / 4;
    const Counter counter{static_cast<uint32_t>(block),
                          static_cast<uint32_t>(block >> 32), 17, 0xBEEF};
    EXPECT_EQ(randomBits(stream, index), philox4x32(counter, key)[index % 4])
        << index;
  }
}

TEST(PhiloxTest, StreamsAreIndependent) {
  // Changing any part of the key or counter changes the bits.
  const RandomStream base{7, 1, 2};
  const RandomStream streams[] = {
      {8, 1, 2}, {7ull | (1ull << 40), 1, 2}, {7, 2, 2}, {7, 1, 3}};
  for (const RandomStream &other : streams) {
    int same = 0;
    for (uint64_t i = 0; i < 256; ++i)
      same += randomBits(base, i) == randomBits(other, i);
    EXPECT_LT(same, 2);
  }
  std::set<uint32_t> distinct;
  for (uint64_t i = 0; i < 1024; ++i)
    distinct.insert(randomBits(base, i));
  EXPECT_EQ(distinct.size(), 1024u);
  // Deterministic: the same element twice gives the same bits.
  EXPECT_EQ(randomBits(base, 12345), randomBits(base, 12345));
}

TEST(PhiloxTest, BitsAreBalanced) {
  // Each of the 32 bit positions over 2^16 draws: mean 2^15, sd 128; accept
  // 6 sd.
  const RandomStream stream{31337, 0, 0};
  int ones[32] = {};
  constexpr int kDraws = 1 << 16;
  for (uint64_t i = 0; i < kDraws; ++i) {
    const uint32_t bits = randomBits(stream, i);
    for (int b = 0; b < 32; ++b)
      ones[b] += (bits >> b) & 1;
  }
  for (int b = 0; b < 32; ++b)
    EXPECT_NEAR(ones[b], kDraws / 2, 6 * 128) << "bit " << b;
}

// The one naming of stochastic-rounding streams: FNV-1a (32 bits) of the
// tensor's name, as published (offset basis for "", 0xe40c292c for "a").
TEST(TensorId, IsFnv1aOfTheName) {
  EXPECT_EQ(tensorIdOf(""), 0x811C9DC5u);
  EXPECT_EQ(tensorIdOf("a"), 0xE40C292Cu);
  EXPECT_NE(tensorIdOf("layers.0.attn.wq.fprop.x"),
            tensorIdOf("layers.0.attn.wq.fprop.w"));
}
