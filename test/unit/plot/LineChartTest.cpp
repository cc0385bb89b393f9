//===- LineChartTest.cpp - Ticks, smoothing and the legend's place --------===//

#include "runtime/plot/LineChart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

using namespace tetra::plot;

namespace {

TEST(LineChart, NiceTicksAreRoundStepsCoveringTheRange) {
  EXPECT_EQ(niceTicks(0, 10), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  // -3.5 .. 9.3: steps of 2, not of 5 (which left two ticks).
  EXPECT_EQ(niceTicks(-3.5, 9.3), (std::vector<double>{-2, 0, 2, 4, 6, 8}));
  std::vector<double> loss = niceTicks(3.43, 5.6);
  EXPECT_EQ(loss, (std::vector<double>{3.5, 4, 4.5, 5, 5.5}));
  // A flat range still gets ticks.
  EXPECT_FALSE(niceTicks(2, 2).empty());
}

TEST(LineChart, LogTicksArePowersOfTenAndTwoAndFiveOverFewDecades) {
  EXPECT_EQ(logTicks(0.5, 2000), (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(logTicks(1.5, 30), (std::vector<double>{2, 5, 10, 20}));
}

TEST(LineChart, SmoothingStartsAtTheFirstValueAndLags) {
  std::vector<double> ys = {10, 0, 0, 0};
  std::vector<double> s = smoothed(ys, 0.5);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_DOUBLE_EQ(s[0], 10); // bias-corrected: the first value itself
  EXPECT_DOUBLE_EQ(s[1], 10 * 0.25 / 0.75);
  EXPECT_GT(s[1], s[2]);
  EXPECT_GT(s[3], 0);
  EXPECT_EQ(smoothed(ys, 0), ys);
}

/// A rising curve fills the top-right corner: the legend goes to the top
/// left, where no data is (read back from the SVG: the legend's box is the
/// first rectangle filled with white at 0.9 opacity).
TEST(LineChart, TheLegendAvoidsTheCurves) {
  Series rising{"rising", {}, false, -1};
  for (int x = 0; x <= 100; ++x)
    rising.points.push_back({double(x), double(x)});
  ChartOptions options;
  const std::string path = ::testing::TempDir() + "/legend.svg";
  ASSERT_TRUE(static_cast<bool>(drawLineChart({rising}, options, path)));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string svg = text.str();
  const size_t box = svg.find("fill-opacity:0.9");
  ASSERT_NE(box, std::string::npos) << "no legend box";
  // The box's path starts with its top-left corner: "M x y".
  const size_t move = svg.find("d=\"M ", box);
  ASSERT_NE(move, std::string::npos);
  double x = 0, y = 0;
  ASSERT_EQ(std::sscanf(svg.c_str() + move + 5, "%lf %lf", &x, &y), 2);
  EXPECT_LT(x, options.width / 2) << "the legend should sit on the left";
  EXPECT_LT(y, options.height / 2) << "... at the top";
  std::remove(path.c_str());
}

} // namespace
