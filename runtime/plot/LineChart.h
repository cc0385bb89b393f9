//===- LineChart.h - Loss curves side by side -------------------*- C++ -*-===//
//
// A line chart with axes and their units, "nice" ticks (linear or
// logarithmic), a title and a legend placed where it hides no data (the
// first plot corner none of the curves crosses, else the first such height
// along the right or left edge, else beside the plot):
// what `tetra plot` draws for several runs' curves, as PNG, SVG or PDF.
// Smoothing draws each curve's exponential moving average over the raw
// curve, which stays faintly behind it.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_PLOT_LINECHART_H
#define TETRA_RUNTIME_PLOT_LINECHART_H

#include "runtime/plot/Figure.h"

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
  /// Per point (low, high), or none: a spread (the seeds' lowest and
  /// highest values), filled faintly in the curve's color behind it;
  /// smoothed and transformed as the curve is.
  std::vector<std::pair<double, double>> band;
};

struct ChartOptions {
  std::string title;
  std::string xLabel = "step";
  std::string yLabel = "loss";
  double width = 760, height = 460; ///< Points (a PNG has 2 pixels a point).
  bool logY = false;                ///< A base-10 y axis (y > 0 only).
  /// The weight of the past in each curve's moving average, in [0, 1);
  /// 0 draws the curves as they are.
  double smooth = 0;
};

/// The series' colors, in order (series i gets kPalette[i % size]).
extern const Color kPalette[8];

/// Draws the chart into `path` (.png, .svg or .pdf). Non-finite points,
/// and with logY points at or below zero, are skipped; an empty input still
/// draws the axes.
io::Status drawLineChart(const std::vector<Series> &series,
                         const ChartOptions &options, const std::string &path);

/// Tick positions covering [low, high]: about `count` steps of 1, 2 or 5
/// times a power of ten.
std::vector<double> niceTicks(double low, double high, int count = 6);

/// Ticks of a logarithmic axis over [low, high] (both > 0): the powers of
/// ten, with 2 and 5 times them where the range spans under two decades.
std::vector<double> logTicks(double low, double high);

/// The exponential moving average of ys with the past weighing `weight`,
/// bias-corrected so that it starts at the first value (TensorBoard's).
std::vector<double> smoothed(const std::vector<double> &ys, double weight);

} // namespace tetra::plot

#endif // TETRA_RUNTIME_PLOT_LINECHART_H
