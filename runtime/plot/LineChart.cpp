//===- LineChart.cpp - Loss curves side by side ---------------------------===//

#include "runtime/plot/LineChart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <limits>
#include <optional>

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
  // The smallest of 1, 2, 5, 10 times it that is not far below the raw
  // step: about `count` ticks, never fewer than count / 2 + 1.
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * magnitude >= 0.7 * raw) {
      step = factor * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double tick = std::ceil(low / step) * step; tick <= high + step * 1e-9;
       tick += step)
    ticks.push_back(std::abs(tick) < step * 1e-9 ? 0.0 : tick);
  return ticks;
}

std::vector<double> logTicks(double low, double high) {
  std::vector<double> ticks;
  const bool fine = std::log10(high / low) < 2;
  for (int e = static_cast<int>(std::floor(std::log10(low)));
       e <= static_cast<int>(std::ceil(std::log10(high))); ++e)
    for (double factor : fine ? std::vector<double>{1, 2, 5}
                              : std::vector<double>{1}) {
      const double tick = factor * std::pow(10.0, e);
      if (tick >= low * (1 - 1e-9) && tick <= high * (1 + 1e-9))
        ticks.push_back(tick);
    }
  return ticks;
}

std::vector<double> smoothed(const std::vector<double> &ys, double weight) {
  std::vector<double> out;
  double average = 0, debias = 1;
  for (double y : ys) {
    average = weight * average + (1 - weight) * y;
    debias *= weight;
    out.push_back(average / (1 - debias));
  }
  return out;
}

namespace {

constexpr Color kInk{40, 40, 40}, kGrid{226, 226, 226};

std::string tickLabel(double value) {
  // Large round numbers (tokens, steps) with a unit: 15K, 2.5M, 1.2G.
  const double magnitude = std::fabs(value);
  for (auto [scale, unit] : {std::pair{1e9, "G"}, {1e6, "M"}, {1e3, "K"}})
    if (magnitude >= 10 * scale || (magnitude >= scale && magnitude >= 1e4))
      return fmt::format("{:.4g}{}", value / scale, unit);
  return fmt::format("{:.4g}", value);
}

/// A point of the chart in the figure's coordinates.
struct Point {
  double x, y;
};

/// Whether the segment a-b meets the rectangle [x0, x1] x [y0, y1]
/// (sampled finely enough for a curve of many short segments).
bool crosses(Point a, Point b, double x0, double y0, double x1, double y1) {
  for (int i = 0; i <= 16; ++i) {
    const double t = i / 16.0;
    const double x = a.x + (b.x - a.x) * t, y = a.y + (b.y - a.y) * t;
    if (x >= x0 && x <= x1 && y >= y0 && y <= y1)
      return true;
  }
  return false;
}

} // namespace

io::Status drawLineChart(const std::vector<Series> &series,
                         const ChartOptions &options,
                         const std::string &path) {
  // The curves as drawn: transformed (log), smoothed, non-finite points
  // splitting them.
  struct Curve {
    std::vector<std::vector<std::pair<double, double>>> raw, shown;
    /// The band as drawn: (x, low, high), where every point is finite.
    std::vector<std::array<double, 3>> band;
    Color color;
    bool dashed;
  };
  std::vector<Curve> curves;
  double xMin = std::numeric_limits<double>::infinity(), xMax = -xMin;
  double yMin = xMin, yMax = -xMin;
  for (size_t i = 0; i < series.size(); ++i) {
    const Series &s = series[i];
    Curve curve;
    curve.color = kPalette[(s.color >= 0 ? s.color : static_cast<int>(i)) % 8];
    curve.dashed = s.dashed;
    std::vector<std::pair<double, double>> piece;
    auto close = [&] {
      if (piece.empty())
        return;
      curve.raw.push_back(piece);
      std::vector<double> ys;
      for (auto [x, y] : piece)
        ys.push_back(y);
      if (options.smooth > 0) {
        ys = smoothed(ys, options.smooth);
        for (size_t p = 0; p < piece.size(); ++p)
          piece[p].second = ys[p];
      }
      curve.shown.push_back(piece);
      piece.clear();
    };
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (options.logY && y <= 0)) {
        close();
        continue;
      }
      const double v = options.logY ? std::log10(y) : y;
      piece.push_back({x, v});
      xMin = std::min(xMin, x);
      xMax = std::max(xMax, x);
      yMin = std::min(yMin, v);
      yMax = std::max(yMax, v);
    }
    close();
    // The band, where the curve has one and all of it can be drawn.
    bool drawable = s.band.size() == s.points.size() && !s.band.empty();
    std::vector<double> lows, highs;
    for (size_t p = 0; drawable && p < s.band.size(); ++p) {
      auto [low, high] = s.band[p];
      drawable = std::isfinite(s.points[p].first) && std::isfinite(low) &&
                 std::isfinite(high) && (!options.logY || low > 0);
      lows.push_back(options.logY && drawable ? std::log10(low) : low);
      highs.push_back(options.logY && drawable ? std::log10(high) : high);
    }
    if (drawable) {
      if (options.smooth > 0) {
        lows = smoothed(lows, options.smooth);
        highs = smoothed(highs, options.smooth);
      }
      for (size_t p = 0; p < lows.size(); ++p) {
        curve.band.push_back({s.points[p].first, lows[p], highs[p]});
        yMin = std::min(yMin, lows[p]);
        yMax = std::max(yMax, highs[p]);
      }
    }
    curves.push_back(std::move(curve));
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
  const double air = 0.04 * (yMax - yMin);
  yMin -= air;
  yMax += air;
  std::vector<double> xTicks = niceTicks(xMin, xMax);
  std::vector<double> yTicks; // in the axis's values (10^v on a log axis)
  if (options.logY) {
    yTicks = logTicks(std::pow(10.0, yMin), std::pow(10.0, yMax));
    if (yTicks.size() < 4) // under a decade or so: plain ticks, placed by log
      yTicks = niceTicks(std::pow(10.0, yMin), std::pow(10.0, yMax));
  } else {
    yTicks = niceTicks(yMin, yMax);
    yMin = std::min(yMin, yTicks.front());
    yMax = std::max(yMax, yTicks.back());
  }

  return writeFigure(path, options.width, options.height, [&](cairo_t *cr) {
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    const double left = 74, top = 44, bottom = 54;
    double right = 20;

    // The legend: its entries' size, then a place that hides no data.
    const double entryHeight = 17, swatch = 26, pad = 8, fontSize = 11;
    double nameWidth = 0;
    for (const Series &s : series)
      nameWidth = std::max(nameWidth, textWidth(cr, s.name, fontSize));
    const double legendWidth = pad + swatch + 6 + nameWidth + pad;
    const double legendHeight = pad + entryHeight * series.size() + pad / 2;

    auto place = [&](double plotWidth, double plotHeight) {
      auto px = [=](double x) {
        return left + (x - xMin) / (xMax - xMin) * plotWidth;
      };
      auto py = [=](double v) {
        return top + plotHeight - (v - yMin) / (yMax - yMin) * plotHeight;
      };
      return std::make_pair(px, py);
    };
    double plotWidth = options.width - left - right;
    const double plotHeight = options.height - top - bottom;
    auto [px0, py0] = place(plotWidth, plotHeight);
    // The corners first, then any height along the right and left edges.
    const double rightX = left + plotWidth - legendWidth - 8, leftX = left + 8;
    const double topY = top + 8, bottomY = top + plotHeight - legendHeight - 8;
    std::vector<Point> candidates = {
        {rightX, topY}, {leftX, topY}, {rightX, bottomY}, {leftX, bottomY}};
    for (double x : {rightX, leftX})
      for (double y = topY + 10; y < bottomY; y += 10)
        candidates.push_back({x, y});
    std::optional<Point> legend;
    for (Point corner : candidates) {
      bool hides = false;
      for (const Curve &curve : curves)
        for (const auto &piece : curve.raw)
          for (size_t p = 0; p < piece.size() && !hides; ++p) {
            const Point a{px0(piece[p].first), py0(piece[p].second)};
            const Point b = p + 1 < piece.size()
                                ? Point{px0(piece[p + 1].first),
                                        py0(piece[p + 1].second)}
                                : a;
            hides = crosses(a, b, corner.x - 2, corner.y - 2,
                            corner.x + legendWidth + 2,
                            corner.y + legendHeight + 2);
          }
      if (!hides) {
        legend = corner;
        break;
      }
    }
    if (!legend) { // beside the plot, which narrows
      right += legendWidth + 12;
      plotWidth = options.width - left - right;
      legend = Point{left + plotWidth + 12, top};
    }
    const auto placed = place(plotWidth, plotHeight);
    const auto &px = placed.first;
    const auto &py = placed.second;

    // Grid, ticks and their labels.
    cairo_set_line_width(cr, 0.8);
    for (double tick : yTicks) {
      const double v = options.logY ? std::log10(tick) : tick;
      if (v < yMin - 1e-12 || v > yMax + 1e-12)
        continue;
      setColor(cr, kGrid);
      cairo_move_to(cr, left, py(v));
      cairo_line_to(cr, left + plotWidth, py(v));
      cairo_stroke(cr);
      setColor(cr, kInk);
      drawText(cr, left - 7, py(v) + 4, tickLabel(tick), 10, Align::Right);
    }
    for (double tick : xTicks) {
      setColor(cr, kGrid);
      cairo_move_to(cr, px(tick), top);
      cairo_line_to(cr, px(tick), top + plotHeight);
      cairo_stroke(cr);
      setColor(cr, kInk);
      drawText(cr, px(tick), top + plotHeight + 15, tickLabel(tick), 10,
               Align::Center);
    }
    setColor(cr, kInk);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, left, top, plotWidth, plotHeight);
    cairo_stroke(cr);
    drawText(cr, left + plotWidth / 2, options.height - 14, options.xLabel,
             11.5, Align::Center);
    cairo_save(cr);
    cairo_translate(cr, 18, top + plotHeight / 2);
    cairo_rotate(cr, -M_PI / 2);
    drawText(cr, 0, 0,
             options.yLabel + (options.logY ? " (log scale)" : ""), 11.5,
             Align::Center);
    cairo_restore(cr);
    drawText(cr, options.width / 2, 26, options.title, 14, Align::Center,
             /*bold=*/true);

    // The curves, clipped to the plot; a smoothed curve over its raw one.
    cairo_save(cr);
    cairo_rectangle(cr, left, top, plotWidth, plotHeight);
    cairo_clip(cr);
    auto stroke = [&](const std::vector<std::pair<double, double>> &piece,
                      Color color, double width, double alpha, bool dashed) {
      setColor(cr, color, alpha);
      cairo_set_line_width(cr, width);
      const double dash[2] = {6, 4};
      cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
      for (size_t p = 0; p < piece.size(); ++p)
        (p ? cairo_line_to : cairo_move_to)(cr, px(piece[p].first),
                                            py(piece[p].second));
      cairo_stroke(cr);
    };
    // A dot on every point of a sparse curve (an evaluation every N steps),
    // whole even on the plot's edge.
    auto dots = [&](const std::vector<std::pair<double, double>> &piece,
                    Color color) {
      setColor(cr, color);
      for (auto [x, v] : piece) {
        cairo_new_sub_path(cr);
        cairo_arc(cr, px(x), py(v), 3.2, 0, 2 * M_PI);
      }
      cairo_fill(cr);
    };
    for (const Curve &curve : curves) {
      if (curve.band.empty())
        continue;
      setColor(cr, curve.color, 0.16);
      for (size_t p = 0; p < curve.band.size(); ++p)
        (p ? cairo_line_to : cairo_move_to)(cr, px(curve.band[p][0]),
                                            py(curve.band[p][2]));
      for (size_t p = curve.band.size(); p-- > 0;)
        cairo_line_to(cr, px(curve.band[p][0]), py(curve.band[p][1]));
      cairo_close_path(cr);
      cairo_fill(cr);
    }
    for (const Curve &curve : curves) {
      if (options.smooth > 0)
        for (const auto &piece : curve.raw)
          stroke(piece, curve.color, 1.0, 0.25, curve.dashed);
      for (const auto &piece : curve.shown)
        stroke(piece, curve.color, 1.8, 1.0, curve.dashed);
    }
    cairo_restore(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    for (const Curve &curve : curves) {
      size_t points = 0;
      for (const auto &piece : curve.shown)
        points += piece.size();
      if (curve.dashed || points * 12 < plotWidth / 4)
        for (const auto &piece : curve.shown)
          dots(piece, curve.color);
    }

    // The legend: a framed box, a swatch and the name per series.
    if (!series.empty()) {
      cairo_rectangle(cr, legend->x, legend->y, legendWidth, legendHeight);
      cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
      cairo_fill_preserve(cr);
      setColor(cr, kGrid);
      cairo_set_line_width(cr, 0.8);
      cairo_stroke(cr);
      for (size_t i = 0; i < series.size(); ++i) {
        const double y = legend->y + pad + entryHeight * i + entryHeight / 2;
        const Curve &curve = curves[i];
        setColor(cr, curve.color);
        if (curve.dashed) {
          const double dash[2] = {6, 4};
          cairo_set_dash(cr, dash, 2, 0);
          cairo_set_line_width(cr, 2.5);
          cairo_move_to(cr, legend->x + pad, y - 3);
          cairo_line_to(cr, legend->x + pad + swatch, y - 3);
          cairo_stroke(cr);
          cairo_set_dash(cr, nullptr, 0, 0);
        } else { // a filled bar: the run's colour, exactly
          cairo_rectangle(cr, legend->x + pad, y - 6, swatch, 5);
          cairo_fill(cr);
        }
        setColor(cr, kInk);
        drawText(cr, legend->x + pad + swatch + 6, y, series[i].name,
                 fontSize);
      }
    }
  });
}

} // namespace tetra::plot
