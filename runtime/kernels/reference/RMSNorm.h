//===- RMSNorm.h - Reference RMS normalization ------------------*- C++ -*-===//
//
// The oracle for runtime/kernels/RMSNorm.h: plain loops with fp64 sums,
// templated on the scalar type. The backward recomputes everything from x
// (it keeps nothing from the forward), so it checks the fast kernel's use of
// the saved rstd as well.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_RMSNORM_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_RMSNORM_H

#include <cmath>
#include <cstdint>

namespace tetra::kernels::reference {

/// y = x / sqrt(mean(x^2) + eps) * weight, per row of [rows, dim].
template <typename T>
void rmsnormForward(const T *x, const T *weight, T *y, int64_t rows,
                    int64_t dim, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = x + r * dim;
    double sum = 0.0;
    for (int64_t c = 0; c < dim; ++c)
      sum += static_cast<double>(row[c]) * row[c];
    const double rstd = 1.0 / std::sqrt(sum / dim + eps);
    for (int64_t c = 0; c < dim; ++c)
      y[r * dim + c] = static_cast<T>(row[c] * rstd * weight[c]);
  }
}

/// dx (overwritten) and dweight (added to) for the forward above. With
/// r = rstd and g = dy * weight:
///   dx = r * g - r^3 / dim * x * sum(g * x),  dweight += sum_rows dy * x * r.
template <typename T>
void rmsnormBackward(const T *x, const T *weight, const T *dy, T *dx,
                     T *dweight, int64_t rows, int64_t dim, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = x + r * dim;
    const T *grad = dy + r * dim;
    double sum = 0.0;
    for (int64_t c = 0; c < dim; ++c)
      sum += static_cast<double>(row[c]) * row[c];
    const double rstd = 1.0 / std::sqrt(sum / dim + eps);
    double gx = 0.0;
    for (int64_t c = 0; c < dim; ++c)
      gx += static_cast<double>(grad[c]) * weight[c] * row[c];
    for (int64_t c = 0; c < dim; ++c) {
      const double g = static_cast<double>(grad[c]) * weight[c];
      dx[r * dim + c] =
          static_cast<T>(rstd * g - rstd * rstd * rstd / dim * gx * row[c]);
      dweight[c] +=
          static_cast<T>(static_cast<double>(grad[c]) * row[c] * rstd);
    }
  }
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_RMSNORM_H
