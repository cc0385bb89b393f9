//===- HeatMap.h - A table of values as colours -----------------*- C++ -*-===//
//
// A heat map: rows x columns of cells coloured by value on a diverging
// scale (low red, middle white, high blue; an empty cell grey) from the
// lowest value to the 90th percentile (higher cells take the top colour),
// each cell labelled with its value, a colour bar with the scale's ends and
// unit; as PNG, SVG or PDF.
// What `tetra plot --heatmap` draws of the per-linear SQNR: linears by GEMM
// role and operand, so that the layers and GEMMs that degrade stand out.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_PLOT_HEATMAP_H
#define TETRA_RUNTIME_PLOT_HEATMAP_H

#include "runtime/plot/Figure.h"

#include <optional>
#include <string>
#include <vector>

namespace tetra::plot {

struct HeatMapData {
  std::string title;
  std::string unit = "dB";
  std::vector<std::string> rows, columns;
  /// [row][column]; none: no value (an operand left unquantized).
  std::vector<std::vector<std::optional<double>>> values;
};

/// The colour of `value` on the scale from `low` to `high`.
Color heatColor(double value, double low, double high);

/// Draws the map into `path` (.png, .svg or .pdf; its size follows the
/// rows and columns).
io::Status drawHeatMap(const HeatMapData &data, const std::string &path);

} // namespace tetra::plot

#endif // TETRA_RUNTIME_PLOT_HEATMAP_H
