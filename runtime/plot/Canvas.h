//===- Canvas.h - An RGB raster, lines, text, and PNG output ----*- C++ -*-===//
//
// Just enough drawing for loss curves, with no dependency: an RGB canvas,
// anti-aliasing-free thick lines and dashes, filled rectangles, text in a
// built-in 5x7 font at integer scales, and a PNG writer (zlib stream of
// stored deflate blocks: larger than compressed, readable by everything).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_PLOT_CANVAS_H
#define TETRA_RUNTIME_PLOT_CANVAS_H

#include "runtime/io/Error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::plot {

struct Color {
  uint8_t r = 0, g = 0, b = 0;
};

class Canvas {
public:
  Canvas(int width, int height, Color background = {255, 255, 255});

  int width() const { return width_; }
  int height() const { return height_; }
  Color pixel(int x, int y) const;
  void set(int x, int y, Color color);

  void fillRect(int x0, int y0, int x1, int y1, Color color);
  /// A line `thickness` pixels wide; `dash` > 0 draws dashes of that length.
  void line(double x0, double y0, double x1, double y1, Color color,
            int thickness = 1, int dash = 0);
  /// Text with its top-left corner at (x, y); each font pixel is `scale`
  /// pixels. Lower case is drawn as capitals; unknown characters as a box.
  void text(int x, int y, std::string_view text, Color color, int scale = 2);
  static int textWidth(std::string_view text, int scale = 2) {
    return static_cast<int>(text.size()) * 6 * scale;
  }
  static int textHeight(int scale = 2) { return 7 * scale; }

  /// The canvas as a PNG file (8-bit RGB), written atomically.
  io::Status writePng(const std::string &path) const;
  /// The PNG bytes.
  std::vector<uint8_t> encodePng() const;

private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

/// The 5x7 glyph of `c` as seven rows of "#"/" ", or null.
const char *const *glyphRows(char c);

} // namespace tetra::plot

#endif // TETRA_RUNTIME_PLOT_CANVAS_H
