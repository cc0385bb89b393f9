//===- Hadamard.h - Block Hadamard rotations --------------------*- C++ -*-===//
//
// The rotations a policy can put in front of a quantizer: a normalized
// Sylvester Hadamard matrix H_B (B = 16, 32, 64, 128) applied to every block of
// B consecutive elements along the GEMM's reduction dimension, optionally with
// random signs: x_block <- H_B * diag(s) * x_block. H_B is symmetric and
// orthogonal, so rotating both operands of A*B^T along K leaves the product
// unchanged in exact arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_HADAMARD_H
#define TETRA_RUNTIME_NUMERICS_HADAMARD_H

#include "runtime/numerics/AxisView.h"
#include "runtime/numerics/Philox.h"

#include <cstdint>
#include <vector>

namespace tetra::numerics {

enum class RotationKind : uint8_t { None, Hadamard, RandomHadamard };
/// When random Hadamard signs are drawn: once for the run, or every step.
enum class SignSchedule : uint8_t { Fixed, PerStep };

struct Rotation {
  RotationKind kind = RotationKind::None;
  int blockSize = 0; ///< 16, 32, 64 or 128 (0 for None).
  SignSchedule schedule = SignSchedule::Fixed;
  uint64_t seed = 0; ///< RandomHadamard only.
};

bool isValidRotationBlock(int blockSize);

/// The dense normalized Sylvester matrix H_B, row-major, entries +-1/sqrt(B):
/// H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]] / sqrt(2).
std::vector<float> hadamardMatrix(int blockSize);

/// The sign vector s (+1/-1) of a random Hadamard rotation of `blockSize`:
///   s[j] = (randomBits({seed, schedule == PerStep ? step : 0,
///                       kRotationSignsTensorId}, j) & 1) ? -1 : +1
/// Both operands of one GEMM draw the same signs (the tensor id is fixed),
/// which is what keeps their product unchanged.
/// For a kind other than RandomHadamard: blockSize signs, all +1.
constexpr uint32_t kRotationSignsTensorId = 0x48414431; // "HAD1"
std::vector<float> randomHadamardSigns(const Rotation &rotation, uint32_t step);

/// Rotates `data`, a row-major tensor seen as `view` (see AxisView), in place
/// along the view's axis. The extent along the axis must be a multiple of the
/// block size; a RotationKind::None rotation leaves the data untouched.
///
/// The arithmetic order is part of the definition (targets reproduce it):
/// multiply by the signs, then the fast Walsh-Hadamard butterflies in fp32
/// with stride h = 1, 2, 4, ..., B/2 (pairs (i, i+h): a+b, a-b), then one
/// multiply by the fp32 constant 1/sqrt(B) (exact for B = 16, 64; the fp32
/// nearest to 1/sqrt(B), bits 0x3E3504F3 and 0x3DB504F3, for B = 32, 128).
/// hadamardMatrix() uses the same constant.
/// `inverse` applies the transpose (diag(s) * H_B), undoing the rotation:
/// the same butterflies, the multiply by 1/sqrt(B), then the signs.
void rotate(float *data, const AxisView &view, const Rotation &rotation,
            uint32_t step = 0, bool inverse = false);

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_HADAMARD_H
