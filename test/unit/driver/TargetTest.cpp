//===- TargetTest.cpp - The one registry of targets -----------------------===//

#include "driver/Target.h"

#include <gtest/gtest.h>

using namespace tetra;

TEST(Target, NamesRoundTrip) {
  for (const TargetInfo &info : allTargets()) {
    std::optional<Target> parsed = parseTarget(info.name);
    ASSERT_TRUE(parsed.has_value()) << info.name;
    EXPECT_EQ(*parsed, info.target);
    EXPECT_STREQ(targetName(info.target), info.name);
  }
  EXPECT_FALSE(parseTarget("sm_90").has_value());
  EXPECT_FALSE(parseTarget("").has_value());
  EXPECT_EQ(targetNameList(), "cpu, sm_90a or gfx950");
  EXPECT_FALSE(targetInfo(Target::Cpu).gpu);
  EXPECT_TRUE(targetInfo(Target::Gfx950).gpu);
}
