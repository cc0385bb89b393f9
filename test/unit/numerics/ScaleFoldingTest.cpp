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
