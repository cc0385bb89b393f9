//===- Figure.cpp - A picture drawn with cairo, written as PNG/SVG/PDF ----===//

#include "runtime/plot/Figure.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>

#include <cstdio>
#include <string>

namespace tetra::plot {

namespace {

constexpr double kPixelsPerPoint = 2.0; ///< PNG resolution.

bool endsWith(const std::string &text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void selectFont(cairo_t *cr, double size, bool bold) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD
                              : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

} // namespace

io::Expected<FigureFormat> figureFormat(const std::string &path) {
  if (endsWith(path, ".png"))
    return FigureFormat::Png;
  if (endsWith(path, ".svg"))
    return FigureFormat::Svg;
  if (endsWith(path, ".pdf"))
    return FigureFormat::Pdf;
  return io::Error("'" + path +
                   "': the picture's name must end in .png, .svg or .pdf");
}

io::Status writeFigure(const std::string &path, double width, double height,
                       const std::function<void(cairo_t *)> &draw) {
  io::Expected<FigureFormat> format = figureFormat(path);
  if (!format)
    return format.error();
  const std::string temporary = path + ".tmp";
  cairo_surface_t *surface = nullptr;
  switch (*format) {
  case FigureFormat::Png:
    surface = cairo_image_surface_create(
        CAIRO_FORMAT_RGB24, static_cast<int>(width * kPixelsPerPoint),
        static_cast<int>(height * kPixelsPerPoint));
    break;
  case FigureFormat::Svg:
    surface = cairo_svg_surface_create(temporary.c_str(), width, height);
    break;
  case FigureFormat::Pdf:
    surface = cairo_pdf_surface_create(temporary.c_str(), width, height);
    break;
  }
  cairo_t *cr = cairo_create(surface);
  if (*format == FigureFormat::Png)
    cairo_scale(cr, kPixelsPerPoint, kPixelsPerPoint);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  draw(cr);
  cairo_status_t status = cairo_status(cr);
  cairo_destroy(cr);
  if (status == CAIRO_STATUS_SUCCESS && *format == FigureFormat::Png)
    status = cairo_surface_write_to_png(surface, temporary.c_str());
  cairo_surface_finish(surface);
  if (status == CAIRO_STATUS_SUCCESS)
    status = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  if (status != CAIRO_STATUS_SUCCESS) {
    std::remove(temporary.c_str());
    return io::Error("cannot write '" + path +
                     "': " + cairo_status_to_string(status));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return io::Error("cannot write '" + path + "'");
  }
  return io::success();
}

void setColor(cairo_t *cr, Color color, double alpha) {
  cairo_set_source_rgba(cr, color.r / 255.0, color.g / 255.0, color.b / 255.0,
                        alpha);
}

double textWidth(cairo_t *cr, std::string_view text, double size, bool bold) {
  selectFont(cr, size, bold);
  cairo_text_extents_t extents;
  cairo_text_extents(cr, std::string(text).c_str(), &extents);
  return extents.x_advance;
}

double drawText(cairo_t *cr, double x, double y, std::string_view text,
                double size, Align align, bool bold) {
  const double width = textWidth(cr, text, size, bold);
  double start = align == Align::Left     ? x
                 : align == Align::Center ? x - width / 2
                                          : x - width;
  cairo_move_to(cr, start, y);
  cairo_show_text(cr, std::string(text).c_str());
  cairo_new_path(cr);
  return width;
}

} // namespace tetra::plot
