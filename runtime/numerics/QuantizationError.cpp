//===- QuantizationError.cpp - Sampled SQNR of a GEMM operand -------------===//
//
// Each sampled fiber is copied out, rotated as one row (rotate() works block
// by block along the axis with the same signs for every block), quantized
// block by block with quantizeBlock() given the blocks' element indices in
// the whole tensor and the whole tensor's NVFP4 scale, dequantized with
// dequantizeElement() and rotated back: the same calls, on the same values,
// as fakeQuantize() on the whole tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/numerics/QuantizationError.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace tetra::numerics {

void ErrorEnergy::add(const ErrorEnergy &other) {
  signal += other.signal;
  noise += other.noise;
  elements += other.elements;
  nonFinite += other.nonFinite;
}

std::optional<double> ErrorEnergy::sqnrDecibels() const {
  if (noise == 0 || signal == 0)
    return std::nullopt;
  return 10.0 * std::log10(signal / noise);
}

ErrorEnergy quantizationError(const float *data,
                              const std::vector<int64_t> &shape, int axis,
                              const OperandQuantization &quantization,
                              const RandomStream &stream, int64_t fiberStride) {
  assert(fiberStride >= 1 && "the fiber stride must be positive");
  const AxisView view = viewAlong(shape, axis);
  const int64_t extent = view.extent;
  const int64_t fibers = view.outer * view.inner;
  // One fiber as a tensor of its own, seen along its only axis.
  const AxisView fiberView{1, extent, 1};
  const BlockFormat &format = quantization.format;
  const Rotation &rotation = quantization.rotation;
  const ElementFormat element = format.element;
  const bool blockScaled =
      element != ElementFormat::BF16 && element != ElementFormat::F32;
  const int blockSize = format.scaling.blockSize;
  assert((!blockScaled || (blockSize > 0 && extent % blockSize == 0)) &&
         "extent along the axis must be a multiple of the block size");

  std::vector<float> original(extent), values(extent);
  auto copyFiber = [&](int64_t f, std::vector<float> &to) {
    const int64_t o = f / view.inner, i = f % view.inner;
    for (int64_t e = 0; e < extent; ++e)
      to[e] = data[view.index(o, e, i)];
  };

  // NVFP4: the tensor scale of the whole rotated tensor.
  float tensorScale = 1.0f;
  if (blockScaled && format.scaling.scaleFormat == ScaleFormat::E4M3) {
    float tensorAmax = 0.0f;
    if (rotation.kind == RotationKind::None) {
      tensorAmax = finiteAmax(data, view.numElements());
    } else {
      for (int64_t f = 0; f < fibers; ++f) {
        copyFiber(f, values);
        rotate(values.data(), fiberView, rotation, stream.step);
        tensorAmax = std::max(tensorAmax, finiteAmax(values.data(), extent));
      }
    }
    tensorScale = nvfp4TensorScale(tensorAmax, formatSpec(element));
  }

  ErrorEnergy energy;
  std::vector<uint8_t> codes(blockScaled ? blockSize : 0);
  for (int64_t f = 0; f < fibers; f += fiberStride) {
    copyFiber(f, original);
    values = original;
    if (element != ElementFormat::F32) {
      rotate(values.data(), fiberView, rotation, stream.step);
      if (element == ElementFormat::BF16) {
        roundTripBF16(values.data(), extent);
      } else {
        const int64_t o = f / view.inner, i = f % view.inner;
        for (int64_t first = 0; first < extent; first += blockSize) {
          float *block = values.data() + first;
          const uint8_t scale =
              quantizeBlock(block, view.index(o, first, i), view.inner, format,
                            tensorScale, stream, codes.data());
          for (int j = 0; j < blockSize; ++j)
            block[j] = dequantizeElement(codes[j], scale, format, tensorScale);
        }
      }
      rotate(values.data(), fiberView, rotation, stream.step,
             /*inverse=*/true);
    }
    for (int64_t e = 0; e < extent; ++e) {
      const double x = original[e], q = values[e];
      if (!std::isfinite(x) || !std::isfinite(q)) {
        ++energy.nonFinite;
        continue;
      }
      ++energy.elements;
      energy.signal += x * x;
      energy.noise += (x - q) * (x - q);
    }
  }
  return energy;
}

int64_t fiberStrideFor(const std::vector<int64_t> &shape, int axis,
                       int64_t maxElements) {
  const AxisView view = viewAlong(shape, axis);
  const int64_t fibers = view.outer * view.inner;
  if (fibers <= 0 || view.extent <= 0)
    return 1;
  const int64_t maxFibers = std::max<int64_t>(1, maxElements / view.extent);
  // ceil(fibers / maxFibers): the smallest s with ceil(fibers / s) <=
  // maxFibers.
  return (fibers + maxFibers - 1) / maxFibers;
}

} // namespace tetra::numerics
