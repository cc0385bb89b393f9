//===- CrossEntropy.h - Reference softmax cross-entropy ---------*- C++ -*-===//
//
// The oracle for runtime/kernels/CrossEntropy.h: fp64 log-sum-exp with the
// maximum subtracted, templated on the scalar type. Targets must be in range.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_CROSSENTROPY_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_CROSSENTROPY_H

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tetra::kernels::reference {

namespace detail {

template <typename T> double logSumExp(const T *row, int64_t vocab) {
  double maximum = -INFINITY;
  for (int64_t c = 0; c < vocab; ++c)
    maximum = std::max(maximum, static_cast<double>(row[c]));
  double sum = 0.0;
  for (int64_t c = 0; c < vocab; ++c)
    sum += std::exp(row[c] - maximum);
  return maximum + std::log(sum);
}

} // namespace detail

/// mean over rows of logsumexp(logits[r]) - logits[r][targets[r]].
template <typename T>
double crossEntropyForward(const T *logits, const int32_t *targets,
                           int64_t rows, int64_t vocab) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = logits + r * vocab;
    total += detail::logSumExp(row, vocab) - row[targets[r]];
  }
  return total / rows;
}

/// dlogits = (softmax(logits) - onehot(targets)) * dloss / rows.
template <typename T>
void crossEntropyBackward(const T *logits, const int32_t *targets, double dloss,
                          T *dlogits, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = logits + r * vocab;
    const double lse = detail::logSumExp(row, vocab);
    for (int64_t c = 0; c < vocab; ++c) {
      const double p = std::exp(row[c] - lse) - (c == targets[r] ? 1.0 : 0.0);
      dlogits[r * vocab + c] = static_cast<T>(p * dloss / rows);
    }
  }
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_CROSSENTROPY_H
