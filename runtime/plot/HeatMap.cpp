//===- HeatMap.cpp - A table of values as colours -------------------------===//

#include "runtime/plot/HeatMap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <string>

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
  return fmt::format("{:.1f}", value);
}

} // namespace

Color heatColor(double value, double low, double high) {
  double t = high > low ? (value - low) / (high - low) : 0.5;
  t = std::clamp(t, 0.0, 1.0);
  return t < 0.5 ? mix(kLow, kMiddle, 2 * t) : mix(kMiddle, kHigh, 2 * t - 1);
}

io::Status drawHeatMap(const HeatMapData &data, const std::string &path) {
  constexpr double kCellWidth = 64, kCellHeight = 17, kMargin = 16;
  constexpr double kBarWidth = 14, kBarHeight = 160, kFont = 9.5;
  const int columns = static_cast<int>(data.columns.size());
  const int rows = static_cast<int>(data.rows.size());

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

  // Text is measured on a scratch surface before the size is known.
  cairo_surface_t *scratch =
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *measure = cairo_create(scratch);
  double rowLabel = 0;
  for (const std::string &row : data.rows)
    rowLabel = std::max(rowLabel, textWidth(measure, row, kFont));
  const double barLabel =
      textWidth(measure, label(high) + "+ " + data.unit, kFont);
  const double titleWidth = textWidth(measure, data.title, 13, true);
  cairo_destroy(measure);
  cairo_surface_destroy(scratch);

  const double left = kMargin + rowLabel + 8;
  const double top = kMargin + 22 + 18; // the title, the column labels
  const double barLeft = left + columns * kCellWidth + 22;
  const double width = std::max(barLeft + kBarWidth + 8 + barLabel + kMargin,
                                kMargin + titleWidth + kMargin);
  const double height =
      std::max(top + rows * kCellHeight, top + kBarHeight + 34) + kMargin;

  return writeFigure(path, width, height, [&](cairo_t *cr) {
    setColor(cr, kInk);
    drawText(cr, kMargin, kMargin + 12, data.title, 13, Align::Left,
             /*bold=*/true);
    for (int c = 0; c < columns; ++c)
      drawText(cr, left + (c + 0.5) * kCellWidth, top - 6, data.columns[c],
               kFont, Align::Center);
    for (int r = 0; r < rows; ++r) {
      const double y = top + r * kCellHeight;
      setColor(cr, kInk);
      drawText(cr, left - 8, y + kCellHeight / 2 + 3.5, data.rows[r], kFont,
               Align::Right);
      for (int c = 0; c < columns; ++c) {
        const double x = left + c * kCellWidth;
        const std::optional<double> value =
            c < static_cast<int>(data.values[r].size()) ? data.values[r][c]
                                                        : std::nullopt;
        const Color fill = value ? heatColor(*value, low, high) : kEmpty;
        setColor(cr, fill);
        cairo_rectangle(cr, x + 0.5, y + 0.5, kCellWidth - 1, kCellHeight - 1);
        cairo_fill(cr);
        if (value) {
          // Dark text on light cells, white on dark ones.
          const int luma = (299 * fill.r + 587 * fill.g + 114 * fill.b) / 1000;
          setColor(cr, luma > 140 ? kInk : Color{255, 255, 255});
          drawText(cr, x + kCellWidth / 2, y + kCellHeight / 2 + 3.5,
                   label(*value), kFont, Align::Center);
        }
      }
    }
    // The colour bar: high at the top, a gradient of the scale's colours.
    cairo_pattern_t *gradient =
        cairo_pattern_create_linear(0, top, 0, top + kBarHeight);
    for (int i = 0; i <= 20; ++i) {
      const Color color = heatColor(high - (high - low) * i / 20, low, high);
      cairo_pattern_add_color_stop_rgb(gradient, i / 20.0, color.r / 255.0,
                                       color.g / 255.0, color.b / 255.0);
    }
    cairo_set_source(cr, gradient);
    cairo_rectangle(cr, barLeft, top, kBarWidth, kBarHeight);
    cairo_fill(cr);
    cairo_pattern_destroy(gradient);
    setColor(cr, kInk);
    drawText(cr, barLeft + kBarWidth + 6, top + 8,
             label(high) + (clipped ? "+ " : " ") + data.unit, kFont);
    drawText(cr, barLeft + kBarWidth + 6, top + kBarHeight,
             label(low) + " " + data.unit, kFont);
    const double noValue = textWidth(cr, "no value ", kFont);
    drawText(cr, barLeft, top + kBarHeight + 24, "no value", kFont);
    setColor(cr, kEmpty);
    cairo_rectangle(cr, barLeft + noValue, top + kBarHeight + 14, 14, 13);
    cairo_fill(cr);
  });
}

} // namespace tetra::plot
