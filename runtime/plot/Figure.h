//===- Figure.h - A picture drawn with cairo, written as PNG/SVG/PDF -*- C++ -*-===//
//
// What the charts draw on: a cairo context of `width` x `height` points for
// the format a path names (.png at two pixels a point, .svg, .pdf), written
// atomically (a temporary file renamed over the path, so that a failed
// write leaves no half picture); text in DejaVu Sans (Debian's
// fonts-dejavu-core) at its real case, measured before it is placed.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_PLOT_FIGURE_H
#define TETRA_RUNTIME_PLOT_FIGURE_H

#include "runtime/io/Error.h"

#include <cairo.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tetra::plot {

struct Color {
  uint8_t r = 0, g = 0, b = 0;
};

enum class FigureFormat { Png, Svg, Pdf };

/// The format `path`'s extension names; an error naming the three otherwise.
io::Expected<FigureFormat> figureFormat(const std::string &path);

/// Draws a `width` x `height` point picture with `draw` and writes it to
/// `path` in the format its extension names.
io::Status writeFigure(const std::string &path, double width, double height,
                       const std::function<void(cairo_t *)> &draw);

/// The source colour, opaque or with `alpha`.
void setColor(cairo_t *cr, Color color, double alpha = 1.0);

enum class Align { Left, Center, Right };

/// Text of `size` points whose baseline starts, is centred or ends at
/// (x, y); `bold` for titles. Returns its width.
double drawText(cairo_t *cr, double x, double y, std::string_view text,
                double size, Align align = Align::Left, bool bold = false);
/// The width `text` would take at `size` points.
double textWidth(cairo_t *cr, std::string_view text, double size,
                 bool bold = false);

} // namespace tetra::plot

#endif // TETRA_RUNTIME_PLOT_FIGURE_H
