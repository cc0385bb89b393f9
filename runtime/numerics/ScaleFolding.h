//===- ScaleFolding.h - Folded MX scales, and exact sums --------*- C++ -*-===//
//
// sm_90a's MXFP4 x MXFP4 GEMM (docs/passes.md, "Scale folding") folds the
// E8M0 block scales of a result tile into its staged E4M3 codes when every
// fiber along K of the tile — each row of its lhs tile and each column of
// its rhs tile — has codes within a window of 12 binades around a reference:
// ref = max - kFoldAbove, every code in [ref - kFoldBelow, ref + kFoldAbove],
// none NaN, and ref within 2^±kFoldModerate of 1. Folded, the kernel is the
// fast path; unfolded, the step-by-step one (both bit for bit the contract).
// This header is the one definition of that window: the kernel plan
// (lowering/Conversion/GemmKernelPlan.cpp) builds its check from it, and the
// trainer's QuantizationMeter counts, with countFoldable(), how many tiles of
// the real operands would fold.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_SCALEFOLDING_H
#define TETRA_RUNTIME_NUMERICS_SCALEFOLDING_H

#include "runtime/numerics/BlockQuantize.h"

#include <cstdint>
#include <vector>

namespace tetra::numerics {

/// The window: a fold by d = code - ref in [-kFoldBelow, kFoldAbove] keeps
/// every E2M1 value times 2^d a normal E4M3 value (2^-6 .. 384).
constexpr int kFoldBelow = 5;
constexpr int kFoldAbove = 6;
/// The reference's exponent (ref - 127) is within [-kFoldModerate,
/// kFoldModerate], so 2^(ref(row) + ref(col)) is a normal fp32.
constexpr int kFoldModerate = 45;

/// Whether a fiber whose largest and smallest E8M0 codes are these folds.
constexpr bool fiberFolds(int largest, int smallest) {
  const int exponent = largest - kFoldAbove - 127;
  return largest != 0xFF && largest - smallest <= kFoldBelow + kFoldAbove &&
         exponent >= -kFoldModerate && exponent <= kFoldModerate;
}

/// Exact sums: a fiber's codes lie in [ref, ref + kExactSpread] with
/// ref = max - kExactSpread, so 2 * E2M1 * 2^(code - ref) is an integer of
/// magnitude <= 12 * 8 = 96 (an int8), and a pair's products (<= 9216)
/// summed over K <= kExactMaxK stay below 2^31 (an int32).
constexpr int kExactSpread = 3;
constexpr int64_t kExactMaxK = 131072;

/// Whether a fiber whose largest and smallest E8M0 codes are these sums
/// exactly (its reference, largest - kExactSpread, within 2^±kFoldModerate
/// of 1: a pair's 2^(ref + ref - 256) is then a normal fp32).
constexpr bool fiberSumsExactly(int largest, int smallest) {
  const int exponent = largest - kExactSpread - 127;
  return largest != 0xFF && largest - smallest <= kExactSpread &&
         exponent >= -kFoldModerate && exponent <= kFoldModerate;
}

/// The integer an E2M1 code (sign in bit 3) stands for in a block whose
/// scale code is `offset` above its fiber's exact reference (0..3):
/// 2 * value * 2^offset.
int exactInteger(uint8_t e2m1, int offset);

/// For each fiber of `q` along its axis (K-major order, as countFoldable),
/// whether it sums exactly: false throughout unless `q` is MXFP4 (E2M1
/// codes, E8M0 scales on blocks of 32).
std::vector<bool> exactFibers(const QuantizedTensor &q);

/// One result of the scaled matmul contract (TetraKernelOps.td) from the
/// dequantized fp32 values of its row and column: a[i * aStride] and
/// b[i * bStride], i < k. `exact` (both fibers sum exactly): the sum in
/// fp64 — exact for such a pair — rounded once to fp32; else chunks of
/// `chunk` each summed from +0 in k order (fp32 multiply, then add), the
/// chunks added in order to +0.
float contractSum(const float *a, int64_t aStride, const float *b,
                  int64_t bStride, int64_t k, int64_t chunk, bool exact);

/// Fibers along the axis that fold, and groups of `group` consecutive
/// fibers (a GEMM tile's rows or columns, in K-major order: fiber
/// o * inner + i) whose fibers all fold. Empty (all zero) unless the
/// quantization is MX with E8M0 scales.
struct FoldCount {
  int64_t fibers = 0, foldingFibers = 0;
  int64_t groups = 0, foldingGroups = 0;
  /// The same for exact sums (fiberSumsExactly).
  int64_t exactFibers = 0, exactGroups = 0;
  void add(const FoldCount &other);
};

/// Counts the folding fibers of `data` (row-major, `shape`) quantized along
/// `axis` by `quantization` exactly as the GEMM's prologue does: rotated
/// (signs for stream.step), then block-quantized with `stream`.
FoldCount countFoldable(const float *data, const std::vector<int64_t> &shape,
                        int axis, const OperandQuantization &quantization,
                        const RandomStream &stream = {}, int64_t group = 128);

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_SCALEFOLDING_H
