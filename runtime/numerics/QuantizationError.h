//===- QuantizationError.h - Sampled SQNR of a GEMM operand -----*- C++ -*-===//
//
// How much a policy's quantizer loses on one GEMM operand, measured on a
// sample of the operand: the energies of x and of x - q(x), where q(x) is
// exactly what fakeQuantize() would produce for those elements on the whole
// tensor (same rotation signs, same stochastic-rounding bits, same NVFP4
// tensor scale). The trainer logs their ratio, in dB, per GEMM role. See
// docs/numerics.md, section 8.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_QUANTIZATIONERROR_H
#define TETRA_RUNTIME_NUMERICS_QUANTIZATIONERROR_H

#include "runtime/numerics/BlockQuantize.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tetra::numerics {

/// The energies of a quantized operand over a sample, in fp64, over the
/// sampled elements where both x and q(x) are finite:
///   signal = sum x^2,  noise = sum (x - q(x))^2.
struct ErrorEnergy {
  double signal = 0;
  double noise = 0;
  /// Sampled elements counted in signal and noise.
  int64_t elements = 0;
  /// Sampled elements left out because x or q(x) is NaN or Inf (a block with
  /// a NaN or an Inf dequantizes to NaN; BF16 overflows to Inf).
  int64_t nonFinite = 0;

  /// Adds another sample's energies and counts (e.g. several micro-batches).
  void add(const ErrorEnergy &other);
  /// 10 log10(signal / noise). nullopt when noise is 0 (lossless: F32, or
  /// values the format holds exactly) or signal is 0 (nothing but zeros, or
  /// nothing counted): no finite SQNR to report.
  std::optional<double> sqnrDecibels() const;
};

/// The error of `quantization` on the row-major tensor `data` of `shape`
/// along `axis` (the operand's reduction dimension), over every
/// `fiberStride`-th fiber. A fiber is the shape[axis] elements at one
/// position of the other axes: seen along the axis as (outer, extent, inner)
/// (AxisView.h), fiber f = o * inner + i holds the elements (o, 0..extent-1,
/// i); fibers 0, fiberStride, 2 * fiberStride, ... are sampled (1 = all).
///
/// q(x) is what the operand looks like to the compiled GEMM, in the original
/// basis, exactly (bit for bit) as on the whole tensor:
/// - Block formats (MX, NVFP4): fakeQuantize(): rotate along the axis (random
///   Hadamard signs drawn for stream.step), quantize with `stream` (the
///   stochastic-rounding bits keyed by element indices of the whole tensor;
///   NVFP4's tensor scale from the whole rotated tensor's finite amax),
///   dequantize, rotate back.
/// - BF16: rotate, round to BF16 to nearest even (roundTripBF16), rotate
///   back. The compiled kernels cast with arith.truncf, which rounds to
///   nearest even whatever the policy's rounding says, so the rounding mode
///   and `stream` are not used.
/// - F32: q(x) = x (noise 0). A rotation changes the basis, not the values
///   the GEMM multiplies; its fp32 round trip is not quantization error.
/// Every fiber is quantized independently (rotation and scale blocks lie
/// along the axis), so a sampled fiber gets exactly the values it gets in the
/// whole tensor. Cost: the sampled fibers, plus, for NVFP4 only, one pass
/// over the whole tensor for its amax (rotating every fiber if the
/// quantization rotates).
///
/// Sums run over the sampled fibers in ascending order, and within a fiber
/// along the axis. The extent along `axis` must be a multiple of the block
/// sizes (rotation and scale), and fiberStride >= 1; the caller checks, as
/// for quantize(). `data` is not modified.
ErrorEnergy quantizationError(const float *data,
                              const std::vector<int64_t> &shape, int axis,
                              const OperandQuantization &quantization,
                              const RandomStream &stream = {},
                              int64_t fiberStride = 1);

/// The smallest fiber stride whose sample (ceil(fibers / stride) fibers of
/// shape[axis] elements) holds at most `maxElements` elements; at least one
/// fiber is sampled whatever `maxElements` is. 1 for an empty tensor.
int64_t fiberStrideFor(const std::vector<int64_t> &shape, int axis,
                       int64_t maxElements);

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_QUANTIZATIONERROR_H
