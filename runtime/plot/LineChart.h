//===- LineChart.h - Loss curves side by side -------------------*- C++ -*-===//
//
// A line chart with axes, "nice" ticks, a legend and a title: what
// `tetra plot` draws for several runs' loss curves.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_PLOT_LINECHART_H
#define TETRA_RUNTIME_PLOT_LINECHART_H

#include "runtime/plot/Canvas.h"

#include <string>
#include <utility>
#include <vector>

namespace tetra::plot {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points; ///< (x, y), x increasing
  bool dashed = false;
  /// Index into kPalette; -1: the series' position (an evaluation curve
  /// takes its training curve's color).
  int color = -1;
};

struct ChartOptions {
  std::string title;
  std::string xLabel = "step";
  std::string yLabel = "loss";
  int width = 1100;
  int height = 650;
};

/// The series' colors, in order (series i gets kPalette[i % size]).
extern const Color kPalette[8];

/// Draws the chart. Non-finite points are skipped; an empty input still
/// draws the axes.
Canvas drawLineChart(const std::vector<Series> &series,
                     const ChartOptions &options);

/// Tick positions covering [low, high]: about `count` steps of 1, 2 or 5
/// times a power of ten.
std::vector<double> niceTicks(double low, double high, int count = 6);

} // namespace tetra::plot

#endif // TETRA_RUNTIME_PLOT_LINECHART_H
