//===- Rope.h - Reference rotary position embedding -------------*- C++ -*-===//
//
// The oracle for runtime/kernels/Rope.h: every angle computed from scratch in
// fp64, templated on the scalar type.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_ROPE_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_ROPE_H

#include <cmath>
#include <cstdint>

namespace tetra::kernels::reference {

/// x is [batch, seq, heads * headDim]; in every head the pair (2i, 2i+1) at
/// position p is rotated by sign * p * theta^(-2i / headDim). sign = -1 is
/// the backward (the transpose of a rotation is the rotation back).
template <typename T>
void rope(const T *x, T *y, int64_t batch, int64_t seq, int64_t heads,
          int64_t headDim, double theta, int sign = 1) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < headDim / 2; ++i) {
          const double angle =
              sign * p *
              std::pow(theta, -2.0 * i / static_cast<double>(headDim));
          const double c = std::cos(angle), s = std::sin(angle);
          const int64_t at = ((b * seq + p) * heads + h) * headDim + 2 * i;
          const double x0 = x[at], x1 = x[at + 1];
          y[at] = static_cast<T>(x0 * c - x1 * s);
          y[at + 1] = static_cast<T>(x0 * s + x1 * c);
        }
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_ROPE_H
