//===- ScaleFoldingTest.cpp - When sm_90a folds MX scales into codes ------===//

#include "runtime/numerics/ScaleFolding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace tetra::numerics;

namespace {

OperandQuantization mxfp4() {
  return OperandQuantization{*blockFormatPreset("mxfp4"), Rotation{}};
}

// The window: ref = max - 6, every code within [ref - 5, ref + 6], so a
// spread of 11 binades folds and 12 does not; a NaN scale never folds; the
// reference must be within 2^±45 of 1.
TEST(ScaleFolding, Window) {
  EXPECT_TRUE(fiberFolds(127, 127));
  EXPECT_TRUE(fiberFolds(130, 119));  // spread 11
  EXPECT_FALSE(fiberFolds(130, 118)); // spread 12
  EXPECT_FALSE(fiberFolds(0xFF, 0xFF));
  EXPECT_TRUE(fiberFolds(127 + 6 + 45, 127 + 6 + 45));
  EXPECT_FALSE(fiberFolds(127 + 6 + 46, 127 + 6 + 46));
  EXPECT_TRUE(fiberFolds(127 + 6 - 45, 127 + 6 - 45));
  EXPECT_FALSE(fiberFolds(127 + 6 - 46, 127 + 6 - 46));
}

// 256 rows of two blocks along K (axis 1): row r's second block 2^11
// times its first folds, 2^12 does not. Rows fold or not one by one; a
// group of 128 folds when all of its rows do.
TEST(ScaleFolding, RowsAndGroups) {
  const std::vector<int64_t> shape = {256, 64};
  std::vector<float> data(256 * 64, 1.0f);
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t k = 32; k < 64; ++k)
      data[r * 64 + k] = std::ldexp(1.0f, r == 200 ? 12 : 11);
  FoldCount count = countFoldable(data.data(), shape, 1, mxfp4());
  EXPECT_EQ(count.fibers, 256);
  EXPECT_EQ(count.foldingFibers, 255);
  EXPECT_EQ(count.groups, 2);
  EXPECT_EQ(count.foldingGroups, 1);

  // A NaN makes its block's scale NaN: that row does not fold.
  data[5 * 64 + 3] = std::numeric_limits<float>::quiet_NaN();
  count = countFoldable(data.data(), shape, 1, mxfp4());
  EXPECT_EQ(count.foldingFibers, 254);
  EXPECT_EQ(count.foldingGroups, 0);
}

// Along axis 0 the fibers are the columns, in K-major order: column j is
// fiber j, and groups are 128 consecutive columns.
TEST(ScaleFolding, ColumnsAlongAxisZero) {
  const std::vector<int64_t> shape = {64, 256};
  std::vector<float> data(64 * 256, 1.0f);
  for (int64_t k = 32; k < 64; ++k)
    data[k * 256 + 7] = std::ldexp(1.0f, 20);
  FoldCount count = countFoldable(data.data(), shape, 0, mxfp4());
  EXPECT_EQ(count.fibers, 256);
  EXPECT_EQ(count.foldingFibers, 255);
  EXPECT_EQ(count.groups, 2);
  EXPECT_EQ(count.foldingGroups, 1);
}

// The prologue's rotation comes first: a Hadamard block of 32 spreads one
// large element over its block, which is what the scales then see.
TEST(ScaleFolding, RotatedFirst) {
  const std::vector<int64_t> shape = {1, 64};
  std::vector<float> data(64, 0.0f);
  data[0] = 1.0f;
  data[32] = std::ldexp(1.0f, 14); // 14 binades apart: no fold
  EXPECT_EQ(countFoldable(data.data(), shape, 1, mxfp4()).foldingFibers, 0);
  OperandQuantization rotated = mxfp4();
  rotated.rotation.kind = RotationKind::Hadamard;
  rotated.rotation.blockSize = 64; // mixes both blocks: equal scales
  EXPECT_EQ(countFoldable(data.data(), shape, 1, rotated).foldingFibers, 1);
}

// Only E8M0 scales fold: NVFP4 counts nothing.
TEST(ScaleFolding, OnlyE8M0) {
  const std::vector<int64_t> shape = {128, 32};
  std::vector<float> data(128 * 32, 1.0f);
  OperandQuantization nvfp4{*blockFormatPreset("nvfp4"), Rotation{}};
  FoldCount count = countFoldable(data.data(), shape, 1, nvfp4);
  EXPECT_EQ(count.fibers, 0);
  EXPECT_EQ(count.groups, 0);
}

} // namespace

// Exact sums: ref = max - 3, every code within [ref, ref + 3] — a spread
// of 3 binades sums exactly, 4 does not; no NaN scale; the reference within
// 2^±45 of 1.
TEST(ExactSums, Window) {
  EXPECT_TRUE(fiberSumsExactly(127, 127));
  EXPECT_TRUE(fiberSumsExactly(130, 127));  // spread 3
  EXPECT_FALSE(fiberSumsExactly(131, 127)); // spread 4
  EXPECT_FALSE(fiberSumsExactly(0xFF, 0xFF));
  EXPECT_TRUE(fiberSumsExactly(127 + 3 + 45, 127 + 3 + 45));
  EXPECT_FALSE(fiberSumsExactly(127 + 3 + 46, 127 + 3 + 46));
  EXPECT_TRUE(fiberSumsExactly(127 + 3 - 45, 127 + 3 - 45));
  EXPECT_FALSE(fiberSumsExactly(127 + 3 - 46, 127 + 3 - 46));
}

// Each E2M1 code as the integer 2 · value · 2^offset: the eight magnitudes,
// the sign in bit 3 (negative zero is 0), and the largest, 12 · 8 = 96,
// which an int8 holds.
TEST(ExactSums, Integers) {
  const int twice[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  for (int code = 0; code < 16; ++code)
    for (int offset = 0; offset <= kExactSpread; ++offset) {
      const int expected = (code & 8 ? -1 : 1) * (twice[code & 7] << offset);
      EXPECT_EQ(exactInteger(code, offset), expected) << code << " " << offset;
      EXPECT_EQ(2.0 * decodeE2M1(code) * std::ldexp(1.0, offset),
                exactInteger(code, offset));
    }
  EXPECT_EQ(exactInteger(7, 3), 96);
  EXPECT_EQ(exactInteger(15, 3), -96);
  EXPECT_EQ(exactInteger(8, 2), 0);
}

// Fibers of an MXFP4 tensor: rows whose block scales lie within 3 binades
// sum exactly; a NaN block, or a 4-binade spread, does not; any format
// other than MXFP4 has none. FoldCount counts them beside the folds.
TEST(ExactSums, Fibers) {
  const std::vector<int64_t> shape = {4, 64};
  std::vector<float> data(4 * 64, 1.0f);
  for (int64_t k = 32; k < 64; ++k) {
    data[1 * 64 + k] = 8.0f;  // 3 binades: exact
    data[2 * 64 + k] = 16.0f; // 4: not
  }
  data[3 * 64 + 5] = std::numeric_limits<float>::quiet_NaN();
  const QuantizedTensor q = quantize(data.data(), shape, 1, mxfp4().format);
  EXPECT_EQ(exactFibers(q), (std::vector<bool>{true, true, false, false}));
  FoldCount count = countFoldable(data.data(), shape, 1, mxfp4(), {}, 2);
  EXPECT_EQ(count.exactFibers, 2);
  EXPECT_EQ(count.exactGroups, 1);
  EXPECT_EQ(count.foldingFibers, 3);
  const QuantizedTensor q8 =
      quantize(data.data(), shape, 1, *blockFormatPreset("mxfp8_e4m3"));
  EXPECT_EQ(exactFibers(q8), std::vector<bool>(4, false));
}

// The contract's result: chunked, each chunk from +0 and the chunks added in
// fp32 — where three chunks of 2^24, 1 and 1 lose both ones (ties to even)
// — or, for a pair that sums exactly, the exact sum rounded once (2^24 + 2).
TEST(ExactSums, ContractSum) {
  std::vector<float> a(96, 0.0f), b(96, 1.0f);
  a[0] = std::ldexp(1.0f, 24);
  a[32] = 1.0f;
  a[64] = 1.0f;
  EXPECT_EQ(contractSum(a.data(), 1, b.data(), 1, 96, 32, false),
            std::ldexp(1.0f, 24));
  EXPECT_EQ(contractSum(a.data(), 1, b.data(), 1, 96, 32, true),
            std::ldexp(1.0f, 24) + 2.0f);
  // Strides: the same values every other element.
  std::vector<float> spread(192, 0.0f);
  for (int i = 0; i < 96; ++i)
    spread[2 * i] = a[i];
  EXPECT_EQ(contractSum(spread.data(), 2, b.data(), 1, 96, 32, true),
            std::ldexp(1.0f, 24) + 2.0f);
}
