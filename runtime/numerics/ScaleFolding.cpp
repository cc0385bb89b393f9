//===- ScaleFolding.cpp - When sm_90a folds MX scales into codes ----------===//

#include "runtime/numerics/ScaleFolding.h"

#include "runtime/numerics/AxisView.h"
#include "runtime/numerics/Hadamard.h"

#include <algorithm>

using namespace tetra::numerics;

void FoldCount::add(const FoldCount &other) {
  fibers += other.fibers;
  foldingFibers += other.foldingFibers;
  groups += other.groups;
  foldingGroups += other.foldingGroups;
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
  const int64_t blocks = view.extent / format.scaling.blockSize;
  count.fibers = view.outer * view.inner;
  bool groupFolds = true;
  for (int64_t fiber = 0; fiber < count.fibers; ++fiber) {
    const int64_t o = fiber / view.inner, i = fiber % view.inner;
    int largest = 0, smallest = 0xFF;
    for (int64_t b = 0; b < blocks; ++b) {
      const int code = quantized.scales[(o * blocks + b) * view.inner + i];
      largest = std::max(largest, code);
      smallest = std::min(smallest, code);
    }
    const bool folds = fiberFolds(largest, smallest);
    count.foldingFibers += folds;
    groupFolds = groupFolds && folds;
    if ((fiber + 1) % group == 0 || fiber + 1 == count.fibers) {
      ++count.groups;
      count.foldingGroups += groupFolds;
      groupFolds = true;
    }
  }
  return count;
}
