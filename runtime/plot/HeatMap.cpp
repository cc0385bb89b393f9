//===- HeatMap.cpp - A table of values as colours -------------------------===//

#include "runtime/plot/HeatMap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tetra::plot {

namespace {

constexpr Color kLow{178, 24, 43}, kMiddle{247, 247, 247}, kHigh{33, 102, 172};
constexpr Color kEmpty{200, 200, 200}, kInk{30, 30, 30};

Color mix(Color a, Color b, double t) {
  auto channel = [&](uint8_t x, uint8_t y) {
    return static_cast<uint8_t>(std::lround(x + (y - x) * t));
  };
  return {channel(a.r, b.r), channel(a.g, b.g), channel(a.b, b.b)};
}

std::string label(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

} // namespace

Color heatColor(double value, double low, double high) {
  double t = high > low ? (value - low) / (high - low) : 0.5;
  t = std::clamp(t, 0.0, 1.0);
  return t < 0.5 ? mix(kLow, kMiddle, 2 * t) : mix(kMiddle, kHigh, 2 * t - 1);
}

Canvas drawHeatMap(const HeatMapData &data) {
  constexpr int kCellWidth = 108, kCellHeight = 26, kMargin = 24;
  constexpr int kBarWidth = 24, kBarHeight = 200;
  int rowLabel = 0;
  for (const std::string &row : data.rows)
    rowLabel = std::max(rowLabel, Canvas::textWidth(row, 2));
  const int left = kMargin + rowLabel + 12;
  const int top = kMargin + Canvas::textHeight(2) + 16 + Canvas::textHeight(2) +
                  10; // title, column labels
  const int columns = static_cast<int>(data.columns.size());
  const int rows = static_cast<int>(data.rows.size());
  const int barLeft = left + columns * kCellWidth + 32;
  const int width = barLeft + kBarWidth + 12 +
                    Canvas::textWidth("-000.0 " + data.unit, 2) + kMargin;
  const int height =
      std::max(top + rows * kCellHeight, top + kBarHeight + 40) + kMargin;
  Canvas canvas(width, height);

  // The scale spans the lowest value to the 90th percentile, so that a few
  // far higher cells (BF16 operands beside MXFP4 ones) do not flatten the
  // rest; the cells above it take the top colour ("+" on the bar).
  std::vector<double> finite;
  for (const auto &row : data.values)
    for (const std::optional<double> &value : row)
      if (value && std::isfinite(*value))
        finite.push_back(*value);
  std::sort(finite.begin(), finite.end());
  double low = finite.empty() ? 0 : finite.front();
  double high = finite.empty() ? 0 : finite[(finite.size() - 1) * 9 / 10];
  if (high <= low && !finite.empty())
    high = finite.back();
  const bool clipped = !finite.empty() && finite.back() > high;

  canvas.text(kMargin, kMargin, data.title, kInk, 2);
  const int columnLabels = kMargin + Canvas::textHeight(2) + 16;
  for (int c = 0; c < columns; ++c) {
    const int x = left + c * kCellWidth +
                  (kCellWidth - Canvas::textWidth(data.columns[c], 2)) / 2;
    canvas.text(x, columnLabels, data.columns[c], kInk, 2);
  }
  for (int r = 0; r < rows; ++r) {
    const int y = top + r * kCellHeight;
    canvas.text(left - 12 - Canvas::textWidth(data.rows[r], 2),
                y + (kCellHeight - Canvas::textHeight(2)) / 2, data.rows[r],
                kInk, 2);
    for (int c = 0; c < columns; ++c) {
      const int x = left + c * kCellWidth;
      const std::optional<double> value =
          c < static_cast<int>(data.values[r].size()) ? data.values[r][c]
                                                      : std::nullopt;
      const Color fill = value ? heatColor(*value, low, high) : kEmpty;
      canvas.fillRect(x + 1, y + 1, x + kCellWidth - 1, y + kCellHeight - 1,
                      fill);
      if (value) {
        const std::string text = label(*value);
        // Dark text on light cells, white on dark ones.
        const int luma = (299 * fill.r + 587 * fill.g + 114 * fill.b) / 1000;
        canvas.text(x + (kCellWidth - Canvas::textWidth(text, 2)) / 2,
                    y + (kCellHeight - Canvas::textHeight(2)) / 2, text,
                    luma > 140 ? kInk : Color{255, 255, 255}, 2);
      }
    }
  }

  // The colour bar: high at the top.
  for (int i = 0; i < kBarHeight; ++i) {
    const double value = high - (high - low) * i / (kBarHeight - 1);
    canvas.fillRect(barLeft, top + i, barLeft + kBarWidth, top + i + 1,
                    heatColor(value, low, high));
  }
  canvas.text(barLeft + kBarWidth + 8, top,
              label(high) + (clipped ? "+ " : " ") + data.unit, kInk, 2);
  canvas.text(barLeft + kBarWidth + 8, top + kBarHeight - Canvas::textHeight(2),
              label(low) + " " + data.unit, kInk, 2);
  canvas.text(barLeft, top + kBarHeight + 12, "no value", kInk, 2);
  canvas.fillRect(barLeft + Canvas::textWidth("no value ", 2),
                  top + kBarHeight + 10,
                  barLeft + Canvas::textWidth("no value ", 2) + 18,
                  top + kBarHeight + 28, kEmpty);
  return canvas;
}

} // namespace tetra::plot
