//===- Hadamard.cpp - Block Hadamard rotations ----------------------------===//
//
// The fast Walsh-Hadamard transform in a fixed fp32 arithmetic order (signs,
// butterflies with stride 1, 2, ..., B/2, one multiply by 1/sqrt(B)), so that
// every target reproduces the rotated values bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/numerics/Hadamard.h"

#include "runtime/numerics/Formats.h"

#include <cassert>

namespace tetra::numerics {

namespace {

/// 1/sqrt(B) rounded to the nearest fp32: exact for 16 and 64; for 32 and 128
/// the fp32 nearest to sqrt(2)/8 and sqrt(2)/16 (bits 0x3E3504F3, 0x3DB504F3).
float inverseSqrt(int blockSize) {
  switch (blockSize) {
  case 16:
    return 0.25f;
  case 32:
    return bitsToFloat(0x3E3504F3);
  case 64:
    return 0.125f;
  case 128:
    return bitsToFloat(0x3DB504F3);
  }
  assert(false && "invalid Hadamard block size");
  return 0.0f;
}

/// Unnormalized in-place Walsh-Hadamard butterflies over `size` values.
void butterflies(float *block, int size) {
  for (int stride = 1; stride < size; stride *= 2)
    for (int start = 0; start < size; start += 2 * stride)
      for (int i = start; i < start + stride; ++i) {
        float a = block[i];
        float b = block[i + stride];
        block[i] = a + b;
        block[i + stride] = a - b;
      }
}

} // namespace

bool isValidRotationBlock(int blockSize) {
  return blockSize == 16 || blockSize == 32 || blockSize == 64 ||
         blockSize == 128;
}

std::vector<float> hadamardMatrix(int blockSize) {
  assert(isValidRotationBlock(blockSize));
  const float entry = inverseSqrt(blockSize);
  std::vector<float> matrix(static_cast<size_t>(blockSize) * blockSize);
  // Sylvester: H[i][j] = (-1)^popcount(i & j) / sqrt(B).
  for (int i = 0; i < blockSize; ++i)
    for (int j = 0; j < blockSize; ++j) {
      bool negative = __builtin_parity(static_cast<unsigned>(i & j));
      matrix[static_cast<size_t>(i) * blockSize + j] =
          negative ? -entry : entry;
    }
  return matrix;
}

std::vector<float> randomHadamardSigns(const Rotation &rotation,
                                       uint32_t step) {
  std::vector<float> signs(rotation.blockSize > 0 ? rotation.blockSize : 0,
                           1.0f);
  if (rotation.kind != RotationKind::RandomHadamard)
    return signs;
  const RandomStream stream = {
      rotation.seed, rotation.schedule == SignSchedule::PerStep ? step : 0,
      kRotationSignsTensorId};
  for (size_t j = 0; j < signs.size(); ++j)
    if (randomBits(stream, j) & 1)
      signs[j] = -1.0f;
  return signs;
}

void rotate(float *data, const AxisView &view, const Rotation &rotation,
            uint32_t step, bool inverse) {
  if (rotation.kind == RotationKind::None)
    return;
  const int size = rotation.blockSize;
  assert(isValidRotationBlock(size) && view.extent % size == 0);
  const float scale = inverseSqrt(size);
  const bool random = rotation.kind == RotationKind::RandomHadamard;
  const std::vector<float> signs = randomHadamardSigns(rotation, step);

  std::vector<float> block(size);
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t start = 0; start < view.extent; start += size)
      for (int64_t i = 0; i < view.inner; ++i) {
        for (int j = 0; j < size; ++j)
          block[j] = data[view.index(o, start + j, i)];
        // Forward: H * diag(s) * x. Inverse: diag(s) * H * x.
        if (random && !inverse)
          for (int j = 0; j < size; ++j)
            block[j] *= signs[j];
        butterflies(block.data(), size);
        for (int j = 0; j < size; ++j)
          block[j] *= scale;
        if (random && inverse)
          for (int j = 0; j < size; ++j)
            block[j] *= signs[j];
        for (int j = 0; j < size; ++j)
          data[view.index(o, start + j, i)] = block[j];
      }
}

} // namespace tetra::numerics
