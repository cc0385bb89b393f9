//===- Canvas.cpp - An RGB raster, lines, text, and PNG output ------------===//

#include "runtime/plot/Canvas.h"

#include "runtime/io/AtomicFile.h"

#include <algorithm>
#include <cmath>

namespace tetra::plot {

Canvas::Canvas(int width, int height, Color background)
    : width_(width), height_(height),
      rgb_(static_cast<size_t>(width) * height * 3) {
  fillRect(0, 0, width, height, background);
}

Color Canvas::pixel(int x, int y) const {
  const uint8_t *p = &rgb_[(static_cast<size_t>(y) * width_ + x) * 3];
  return {p[0], p[1], p[2]};
}

void Canvas::set(int x, int y, Color color) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_)
    return;
  uint8_t *p = &rgb_[(static_cast<size_t>(y) * width_ + x) * 3];
  p[0] = color.r;
  p[1] = color.g;
  p[2] = color.b;
}

void Canvas::fillRect(int x0, int y0, int x1, int y1, Color color) {
  for (int y = std::max(0, y0); y < std::min(height_, y1); ++y)
    for (int x = std::max(0, x0); x < std::min(width_, x1); ++x)
      set(x, y, color);
}

void Canvas::line(double x0, double y0, double x1, double y1, Color color,
                  int thickness, int dash) {
  double length = std::hypot(x1 - x0, y1 - y0);
  int steps = std::max(1, static_cast<int>(std::ceil(length * 2)));
  int half = thickness / 2;
  for (int i = 0; i <= steps; ++i) {
    double t = static_cast<double>(i) / steps;
    if (dash > 0 && static_cast<int>(t * length / dash) % 2 == 1)
      continue;
    int x = static_cast<int>(std::lround(x0 + t * (x1 - x0)));
    int y = static_cast<int>(std::lround(y0 + t * (y1 - y0)));
    fillRect(x - half, y - half, x - half + thickness, y - half + thickness,
             color);
  }
}

void Canvas::text(int x, int y, std::string_view text, Color color, int scale) {
  for (char c : text) {
    if (c != ' ') {
      const char *const *rows = glyphRows(c);
      for (int row = 0; row < 7; ++row)
        for (int column = 0; column < 5; ++column) {
          bool on = rows ? rows[row][column] == '#'
                         : (row == 0 || row == 6 || column == 0 || column == 4);
          if (on)
            fillRect(x + column * scale, y + row * scale,
                     x + (column + 1) * scale, y + (row + 1) * scale, color);
        }
    }
    x += 6 * scale;
  }
}

namespace {

uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc = 0) {
  static uint32_t table[256] = {};
  if (!table[1])
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

void putBig32(std::vector<uint8_t> &out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<uint8_t>(value >> shift));
}

void chunk(std::vector<uint8_t> &png, const char type[4],
           const std::vector<uint8_t> &data) {
  putBig32(png, static_cast<uint32_t>(data.size()));
  size_t start = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), data.begin(), data.end());
  putBig32(png, crc32(&png[start], png.size() - start));
}

} // namespace

std::vector<uint8_t> Canvas::encodePng() const {
  // Scanlines with filter type 0, then a zlib stream of stored blocks.
  std::vector<uint8_t> raw;
  raw.reserve((static_cast<size_t>(width_) * 3 + 1) * height_);
  for (int y = 0; y < height_; ++y) {
    raw.push_back(0);
    const uint8_t *row = &rgb_[static_cast<size_t>(y) * width_ * 3];
    raw.insert(raw.end(), row, row + static_cast<size_t>(width_) * 3);
  }
  std::vector<uint8_t> zlib = {0x78, 0x01};
  for (size_t offset = 0; offset < raw.size() || offset == 0;) {
    size_t size = std::min<size_t>(65535, raw.size() - offset);
    bool last = offset + size == raw.size();
    zlib.push_back(last ? 1 : 0);
    zlib.push_back(static_cast<uint8_t>(size));
    zlib.push_back(static_cast<uint8_t>(size >> 8));
    zlib.push_back(static_cast<uint8_t>(~size));
    zlib.push_back(static_cast<uint8_t>(~size >> 8));
    zlib.insert(zlib.end(), raw.begin() + offset, raw.begin() + offset + size);
    offset += size;
    if (last)
      break;
  }
  uint32_t a = 1, b = 0; // Adler-32 of the uncompressed data.
  for (uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  putBig32(zlib, (b << 16) | a);

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> header;
  putBig32(header, static_cast<uint32_t>(width_));
  putBig32(header, static_cast<uint32_t>(height_));
  header.insert(header.end(), {8, 2, 0, 0, 0}); // 8-bit RGB
  chunk(png, "IHDR", header);
  chunk(png, "IDAT", zlib);
  chunk(png, "IEND", {});
  return png;
}

io::Status Canvas::writePng(const std::string &path) const {
  std::vector<uint8_t> png = encodePng();
  return io::writeFileAtomically(
      path,
      std::string_view(reinterpret_cast<const char *>(png.data()), png.size()));
}

} // namespace tetra::plot
