//===- ScaleFolding.cpp - Folded MX scales, and exact sums ----------------===//

#include "runtime/numerics/ScaleFolding.h"

#include "runtime/numerics/AxisView.h"
#include "runtime/numerics/Hadamard.h"

#include <algorithm>
#include <utility>

using namespace tetra::numerics;

void FoldCount::add(const FoldCount &other) {
  fibers += other.fibers;
  foldingFibers += other.foldingFibers;
  groups += other.groups;
  foldingGroups += other.foldingGroups;
  exactFibers += other.exactFibers;
  exactGroups += other.exactGroups;
}

int tetra::numerics::exactInteger(uint8_t e2m1, int offset) {
  static constexpr int kTwice[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  const int magnitude = kTwice[e2m1 & 7] << offset;
  return e2m1 & 8 ? -magnitude : magnitude;
}

namespace {
/// The largest and smallest scale code of each fiber of `q` along its axis.
std::vector<std::pair<int, int>> fiberExtremes(const QuantizedTensor &q) {
  const AxisView view = viewAlong(q.shape, q.axis);
  const int64_t blocks = view.extent / q.format.scaling.blockSize;
  std::vector<std::pair<int, int>> extremes(view.outer * view.inner,
                                            {0, 0xFF});
  for (int64_t fiber = 0; fiber < view.outer * view.inner; ++fiber) {
    const int64_t o = fiber / view.inner, i = fiber % view.inner;
    for (int64_t b = 0; b < blocks; ++b) {
      const int code = q.scales[(o * blocks + b) * view.inner + i];
      extremes[fiber].first = std::max(extremes[fiber].first, code);
      extremes[fiber].second = std::min(extremes[fiber].second, code);
    }
  }
  return extremes;
}
bool isMXFP4(const BlockFormat &format) {
  return format.element == ElementFormat::E2M1 &&
         format.scaling.scaleFormat == ScaleFormat::E8M0 &&
         format.scaling.blockSize == 32;
}
} // namespace

std::vector<bool> tetra::numerics::exactFibers(const QuantizedTensor &q) {
  const AxisView view = viewAlong(q.shape, q.axis);
  std::vector<bool> exact(view.outer * view.inner, false);
  if (!isMXFP4(q.format))
    return exact;
  const auto extremes = fiberExtremes(q);
  for (size_t f = 0; f < exact.size(); ++f)
    exact[f] = view.extent <= kExactMaxK &&
               fiberSumsExactly(extremes[f].first, extremes[f].second);
  return exact;
}

float tetra::numerics::contractSum(const float *a, int64_t aStride,
                                   const float *b, int64_t bStride, int64_t k,
                                   int64_t chunk, bool exact) {
  if (exact) {
    double sum = 0;
    for (int64_t i = 0; i < k; ++i)
      sum += static_cast<double>(a[i * aStride]) * b[i * bStride];
    return static_cast<float>(sum);
  }
  float accumulator = 0.0f;
  for (int64_t first = 0; first < k; first += chunk) {
    float partial = 0.0f;
    for (int64_t i = first; i < first + chunk && i < k; ++i) {
      volatile float product = a[i * aStride] * b[i * bStride];
      partial = partial + product;
    }
    accumulator = accumulator + partial;
  }
  return accumulator;
}

FoldCount tetra::numerics::countFoldable(const float *data,
                                         const std::vector<int64_t> &shape,
                                         int axis,
                                         const OperandQuantization &quantization,
                                         const RandomStream &stream,
                                         int64_t group) {
  FoldCount count;
  const BlockFormat &format = quantization.format;
  if (format.scaling.scaleFormat != ScaleFormat::E8M0)
    return count;
  int64_t elements = 1;
  for (int64_t size : shape)
    elements *= size;
  std::vector<float> rotated(data, data + elements);
  const AxisView view = viewAlong(shape, axis);
  if (quantization.rotation.kind != RotationKind::None)
    rotate(rotated.data(), view, quantization.rotation, stream.step);
  const QuantizedTensor quantized =
      quantize(rotated.data(), shape, axis, format, stream);
  const auto extremes = fiberExtremes(quantized);
  const std::vector<bool> exact = exactFibers(quantized);
  count.fibers = view.outer * view.inner;
  bool groupFolds = true, groupExact = true;
  for (int64_t fiber = 0; fiber < count.fibers; ++fiber) {
    const bool folds =
        fiberFolds(extremes[fiber].first, extremes[fiber].second);
    count.foldingFibers += folds;
    count.exactFibers += exact[fiber];
    groupFolds = groupFolds && folds;
    groupExact = groupExact && exact[fiber];
    if ((fiber + 1) % group == 0 || fiber + 1 == count.fibers) {
      ++count.groups;
      count.foldingGroups += groupFolds;
      count.exactGroups += groupExact;
      groupFolds = groupExact = true;
    }
  }
  return count;
}
