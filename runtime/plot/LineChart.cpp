//===- LineChart.cpp - Loss curves side by side ---------------------------===//

#include "runtime/plot/LineChart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tetra::plot {

const Color kPalette[8] = {{31, 119, 180},  {214, 39, 40},   {44, 160, 44},
                           {255, 127, 14},  {148, 103, 189}, {140, 86, 75},
                           {227, 119, 194}, {23, 190, 207}};

std::vector<double> niceTicks(double low, double high, int count) {
  if (!(high > low))
    high = low + 1;
  double raw = (high - low) / std::max(1, count);
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * magnitude >= raw) {
      step = factor * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double tick = std::ceil(low / step) * step; tick <= high + step * 1e-9;
       tick += step)
    ticks.push_back(std::abs(tick) < step * 1e-9 ? 0.0 : tick);
  return ticks;
}

namespace {

std::string tickLabel(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

} // namespace

Canvas drawLineChart(const std::vector<Series> &series,
                     const ChartOptions &options) {
  Canvas canvas(options.width, options.height);
  const Color ink{40, 40, 40}, grid{225, 225, 225}, paper{255, 255, 255};
  const int left = 110, right = 30, top = 60, bottom = 80;
  const int plotWidth = options.width - left - right;
  const int plotHeight = options.height - top - bottom;

  double xMin = std::numeric_limits<double>::infinity(), xMax = -xMin;
  double yMin = xMin, yMax = -xMin;
  for (const Series &s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y))
        continue;
      xMin = std::min(xMin, x);
      xMax = std::max(xMax, x);
      yMin = std::min(yMin, y);
      yMax = std::max(yMax, y);
    }
  if (!std::isfinite(xMin)) {
    xMin = 0;
    xMax = 1;
    yMin = 0;
    yMax = 1;
  }
  if (yMax == yMin) {
    yMin -= 0.5;
    yMax += 0.5;
  }
  if (xMax == xMin)
    xMax = xMin + 1;
  // Some air above and below the curves, so that none runs along an edge.
  const double margin = 0.04 * (yMax - yMin);
  yMin -= margin;
  yMax += margin;
  std::vector<double> xTicks = niceTicks(xMin, xMax);
  std::vector<double> yTicks = niceTicks(yMin, yMax);
  yMin = std::min(yMin, yTicks.front());
  yMax = std::max(yMax, yTicks.back());

  auto px = [&](double x) {
    return left + (x - xMin) / (xMax - xMin) * plotWidth;
  };
  auto py = [&](double y) {
    return top + plotHeight - (y - yMin) / (yMax - yMin) * plotHeight;
  };

  for (double tick : yTicks) {
    int y = static_cast<int>(std::lround(py(tick)));
    canvas.line(left, y, left + plotWidth, y, grid);
    std::string label = tickLabel(tick);
    canvas.text(left - 10 - Canvas::textWidth(label), y - 7, label, ink);
  }
  for (double tick : xTicks) {
    int x = static_cast<int>(std::lround(px(tick)));
    canvas.line(x, top, x, top + plotHeight, grid);
    std::string label = tickLabel(tick);
    canvas.text(x - Canvas::textWidth(label) / 2, top + plotHeight + 10, label,
                ink);
  }
  canvas.line(left, top, left, top + plotHeight, ink, 2);
  canvas.line(left, top + plotHeight, left + plotWidth, top + plotHeight, ink,
              2);
  canvas.text(left + (plotWidth - Canvas::textWidth(options.xLabel)) / 2,
              options.height - 35, options.xLabel, ink);
  canvas.text(10, top - 30, options.yLabel, ink);
  canvas.text((options.width - Canvas::textWidth(options.title, 3)) / 2, 12,
              options.title, ink, 3);

  for (size_t i = 0; i < series.size(); ++i) {
    const Series &s = series[i];
    Color color = kPalette[(s.color >= 0 ? s.color : static_cast<int>(i)) % 8];
    bool havePrevious = false;
    double previousX = 0, previousY = 0;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        havePrevious = false;
        continue;
      }
      double cx = px(x), cy = py(y);
      if (havePrevious)
        canvas.line(previousX, previousY, cx, cy, color, 2, s.dashed ? 8 : 0);
      else
        canvas.fillRect(static_cast<int>(cx) - 1, static_cast<int>(cy) - 1,
                        static_cast<int>(cx) + 2, static_cast<int>(cy) + 2,
                        color);
      previousX = cx;
      previousY = cy;
      havePrevious = true;
    }
  }
  // Legend, top right, one row per series, on a framed box that hides the
  // curves under it.
  int nameWidth = 0;
  for (const Series &s : series)
    nameWidth = std::max(nameWidth, Canvas::textWidth(s.name));
  int legendX = left + plotWidth - 20 - nameWidth - 50;
  int boxLeft = legendX - 10, boxRight = left + plotWidth - 10;
  int boxTop = top + 7,
      boxBottom = top + 15 + static_cast<int>(series.size()) * 24;
  canvas.fillRect(boxLeft, boxTop, boxRight, boxBottom, paper);
  canvas.line(boxLeft, boxTop, boxRight, boxTop, grid);
  canvas.line(boxLeft, boxBottom, boxRight, boxBottom, grid);
  canvas.line(boxLeft, boxTop, boxLeft, boxBottom, grid);
  canvas.line(boxRight, boxTop, boxRight, boxBottom, grid);
  for (size_t i = 0; i < series.size(); ++i) {
    const Series &s = series[i];
    Color color = kPalette[(s.color >= 0 ? s.color : static_cast<int>(i)) % 8];
    int legendY = top + 15 + static_cast<int>(i) * 24;
    canvas.line(legendX, legendY + 7, legendX + 36, legendY + 7, color, 3,
                s.dashed ? 8 : 0);
    canvas.text(legendX + 46, legendY, s.name, ink);
  }
  return canvas;
}

} // namespace tetra::plot
