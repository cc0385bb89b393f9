//===- Matmul.h - Reference fp32 matrix product -----------------*- C++ -*-===//
//
// The oracle for runtime/kernels/Matmul.h: a triple loop with fp64 sums,
// templated on the scalar type.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_MATMUL_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_MATMUL_H

#include <cstdint>

namespace tetra::kernels::reference {

/// C [m, n] = op(A) op(B) (+ C when accumulate). op(A) is [m, k]: A is stored
/// [m, k], or [k, m] when transA. op(B) is [k, n]: B is stored [k, n], or
/// [n, k] when transB.
template <typename T>
void matmul(const T *a, const T *b, T *c, int64_t m, int64_t n, int64_t k,
            bool transA, bool transB, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = accumulate ? static_cast<double>(c[i * n + j]) : 0.0;
      for (int64_t r = 0; r < k; ++r) {
        const double x = transA ? a[r * m + i] : a[i * k + r];
        const double y = transB ? b[j * k + r] : b[r * n + j];
        sum += x * y;
      }
      c[i * n + j] = static_cast<T>(sum);
    }
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_MATMUL_H
