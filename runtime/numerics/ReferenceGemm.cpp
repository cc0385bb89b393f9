//===- ReferenceGemm.cpp - The quantized GEMM oracle ----------------------===//
//
// fp64 products accumulated in k order. Quantized operands are dequantized in
// fp64, exactly: a code times its scale (times NVFP4's tensor scale) has at
// most 24 + 4 + 24 < 53 significant bits, so no rounding happens before the
// sum.
//
//===----------------------------------------------------------------------===//

#include "runtime/numerics/ReferenceGemm.h"

#include <cassert>

namespace tetra::numerics {

namespace {

/// The exact fp64 values of a quantized tensor of shape {rows, K} quantized
/// along axis 1.
std::vector<double> dequantizeExactly(const QuantizedTensor &tensor) {
  assert(tensor.shape.size() == 2 && tensor.axis == 1);
  const FormatSpec &spec = formatSpec(tensor.format.element);
  const int64_t rows = tensor.shape[0];
  const int64_t k = tensor.shape[1];
  const int blockSize = tensor.format.scaling.blockSize;
  const int64_t blocksPerRow = k / blockSize;
  const bool nvfp4Style =
      tensor.format.scaling.scaleFormat == ScaleFormat::E4M3;

  std::vector<double> values(rows * k);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t scaleCode = tensor.scales[r * blocksPerRow + c / blockSize];
      const double element = decode(tensor.codes[r * k + c], spec);
      const double scale = nvfp4Style
                               ? static_cast<double>(decodeE4M3(scaleCode)) *
                                     static_cast<double>(tensor.tensorScale)
                               : static_cast<double>(decodeE8M0(scaleCode));
      values[r * k + c] = element * scale;
    }
  return values;
}

std::vector<double> gemm(const double *a, const double *b, int64_t m, int64_t n,
                         int64_t k) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t row = 0; row < m; ++row)
    for (int64_t col = 0; col < n; ++col) {
      double sum = 0.0;
      for (int64_t r = 0; r < k; ++r)
        sum += a[row * k + r] * b[col * k + r];
      c[row * n + col] = sum;
    }
  return c;
}

} // namespace

std::vector<double> referenceGemm(const float *a, const float *b, int64_t m,
                                  int64_t n, int64_t k) {
  std::vector<double> wideA(a, a + m * k);
  std::vector<double> wideB(b, b + n * k);
  return gemm(wideA.data(), wideB.data(), m, n, k);
}

std::vector<double> referenceGemm(const QuantizedTensor &a,
                                  const QuantizedTensor &b) {
  assert(a.shape.size() == 2 && b.shape.size() == 2 &&
         a.shape[1] == b.shape[1] && a.axis == 1 && b.axis == 1);
  const std::vector<double> wideA = dequantizeExactly(a);
  const std::vector<double> wideB = dequantizeExactly(b);
  return gemm(wideA.data(), wideB.data(), a.shape[0], b.shape[0], a.shape[1]);
}

std::vector<double>
quantizedGemm(const float *a, const float *b, int64_t m, int64_t n, int64_t k,
              const OperandQuantization &lhs, const OperandQuantization &rhs,
              const RandomStream &lhsStream, const RandomStream &rhsStream) {
  std::vector<float> rotatedA(a, a + m * k);
  std::vector<float> rotatedB(b, b + n * k);
  rotate(rotatedA.data(), viewAlong({m, k}, 1), lhs.rotation, lhsStream.step);
  rotate(rotatedB.data(), viewAlong({n, k}, 1), rhs.rotation, rhsStream.step);
  const QuantizedTensor quantizedA =
      quantize(rotatedA.data(), {m, k}, 1, lhs.format, lhsStream);
  const QuantizedTensor quantizedB =
      quantize(rotatedB.data(), {n, k}, 1, rhs.format, rhsStream);
  return referenceGemm(quantizedA, quantizedB);
}

} // namespace tetra::numerics
