//===- Elementwise.h - Reference SiLU and arithmetic ------------*- C++ -*-===//
//
// The oracle for runtime/kernels/Elementwise.h, templated on the scalar type.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_ELEMENTWISE_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_ELEMENTWISE_H

#include <cmath>
#include <cstdint>

namespace tetra::kernels::reference {

/// y = x * sigmoid(x).
template <typename T> void siluForward(const T *x, T *y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double v = x[i];
    y[i] = static_cast<T>(v / (1.0 + std::exp(-v)));
  }
}

/// dx = dy * (s + x * s * (1 - s)), s = sigmoid(x).
template <typename T>
void siluBackward(const T *x, const T *dy, T *dx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double v = x[i];
    const double s = 1.0 / (1.0 + std::exp(-v));
    dx[i] = static_cast<T>(dy[i] * (s + v * s * (1.0 - s)));
  }
}

enum class BinaryOp { Add, Sub, Mul };

/// out = a op b.
template <typename T>
void binaryForward(BinaryOp op, const T *a, const T *b, T *out, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = op == BinaryOp::Add   ? a[i] + b[i]
             : op == BinaryOp::Sub ? a[i] - b[i]
                                   : a[i] * b[i];
}

/// da and db for out = a op b, given dout.
template <typename T>
void binaryBackward(BinaryOp op, const T *a, const T *b, const T *dout, T *da,
                    T *db, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    da[i] = op == BinaryOp::Mul ? dout[i] * b[i] : dout[i];
    db[i] = op == BinaryOp::Add   ? dout[i]
            : op == BinaryOp::Sub ? -dout[i]
                                  : dout[i] * a[i];
  }
}

/// y = factor * x (also the backward of itself).
template <typename T>
void scale(const T *x, T *y, int64_t count, double factor) {
  for (int64_t i = 0; i < count; ++i)
    y[i] = static_cast<T>(factor * x[i]);
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_ELEMENTWISE_H
