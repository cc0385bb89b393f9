//===- AxisView.h - A row-major tensor seen along one axis ------*- C++ -*-===//
//
// Quantization and rotation work along one axis of a tensor of any rank. A
// row-major tensor of shape (d0, ..., dn) seen along axis a is a 3-D array
// (outer, extent, inner) with outer = d0*...*d(a-1), extent = da and
// inner = d(a+1)*...*dn; element (o, e, i) sits at (o * extent + e) * inner +
// i.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_AXISVIEW_H
#define TETRA_RUNTIME_NUMERICS_AXISVIEW_H

#include <cstdint>
#include <vector>

namespace tetra::numerics {

struct AxisView {
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t inner = 1;

  int64_t numElements() const { return outer * extent * inner; }
  int64_t index(int64_t o, int64_t e, int64_t i) const {
    return (o * extent + e) * inner + i;
  }
};

/// The view of `shape` along `axis` (0 <= axis < rank; a rank-0 tensor is
/// seen as a single element). The caller checks the axis.
inline AxisView viewAlong(const std::vector<int64_t> &shape, int axis) {
  AxisView view;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < axis)
      view.outer *= shape[d];
    else if (d == axis)
      view.extent = shape[d];
    else
      view.inner *= shape[d];
  }
  return view;
}

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_AXISVIEW_H
