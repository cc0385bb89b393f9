//===- Optimizer.h - Reference norm, clipping and AdamW ---------*- C++ -*-===//
//
// The oracle for runtime/kernels/Optimizer.h, in fp64 where it sums.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_OPTIMIZER_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_OPTIMIZER_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace tetra::kernels::reference {

/// sqrt(sum over all tensors of x^2), summed in fp64.
template <typename T>
double globalNorm(const std::vector<const T *> &tensors,
                  const std::vector<int64_t> &counts) {
  double sum = 0.0;
  for (size_t t = 0; t < tensors.size(); ++t)
    for (int64_t i = 0; i < counts[t]; ++i)
      sum += static_cast<double>(tensors[t][i]) * tensors[t][i];
  return std::sqrt(sum);
}

/// The factor clipping multiplies gradients by: maxNorm / (norm + 1e-6) when
/// that is below 1, else 1 (PyTorch's clip_grad_norm_).
inline double clipFactor(double norm, double maxNorm) {
  const double factor = maxNorm / (norm + 1e-6);
  return factor < 1.0 ? factor : 1.0;
}

/// One AdamW step at `step` (1, 2, ...), in fp64:
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p)
template <typename T>
void adamw(T *param, const T *grad, T *m, T *v, int64_t count, double lr,
           double beta1, double beta2, double eps, double weightDecay,
           int64_t step) {
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  for (int64_t i = 0; i < count; ++i) {
    const double g = grad[i];
    const double mi = beta1 * m[i] + (1.0 - beta1) * g;
    const double vi = beta2 * v[i] + (1.0 - beta2) * g * g;
    const double mhat = mi / correction1, vhat = vi / correction2;
    const double p = param[i];
    param[i] = static_cast<T>(
        p - lr * (mhat / (std::sqrt(vhat) + eps) + weightDecay * p));
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
  }
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_OPTIMIZER_H
