//===- BlockQuantize.h - MX and NVFP4 block quantization --------*- C++ -*-===//
//
// Block-scaled quantization: every block of `blockSize` consecutive elements
// along one axis shares a scale. MX formats (OCP MX v1.0) use an E8M0 power of
// two per 32 elements; NVFP4 uses an E4M3 scale per 16 elements times an fp32
// per-tensor scale. This is the oracle every target's quantizer is compared
// with, code for code and scale for scale.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_BLOCKQUANTIZE_H
#define TETRA_RUNTIME_NUMERICS_BLOCKQUANTIZE_H

#include "runtime/numerics/AxisView.h"
#include "runtime/numerics/Formats.h"
#include "runtime/numerics/Hadamard.h"
#include "runtime/numerics/Philox.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::numerics {

enum class ScaleFormat : uint8_t { E8M0, E4M3 };

/// How an E8M0 block scale 2^e is chosen from the block's largest magnitude
/// `amax` (emax = the element format's maxExponent, max = its maxFinite):
///   Floor: e = floor(log2 amax) - emax            (OCP MX v1.0; may clip)
///   Ceil:  e = ceil(log2 amax) - emax             (one binade up unless amax
///                                                  is a power of two)
///   Even:  e = floor(log2 rne(amax)) - emax, rne() rounding amax to the
///          element's mantissa width, ties to even (bumps e when amax would
///          round up into the next binade)
///   RCeil: e = ceil(log2(amax / max))             (smallest e that never
///                                                  clips; NVIDIA's RCEIL)
/// e is clamped to [-127, 127]; amax = 0 gives e = -127 (code 0x00).
/// All four are computed exactly from amax's integer fields (never through
/// an fp32 log2 or division). For Even, rounding to the largest mantissa
/// (odd) and the next binade (even) means ties carry: e is one above Floor
/// iff amax >= (2 - 2^-(m+1)) * 2^floor(log2 amax), m the mantissa bits.
///
/// How an E4M3 (NVFP4) block scale is chosen from amax and the fp32 tensor
/// scale ts (max = 6 for E2M1; every operation an fp32 one, rounded to
/// nearest even; e4m3() rounds to nearest even and saturates at 448):
///   Nearest: e4m3(amax / (ts * max))          (Tetra's: one quotient;
///                                              subnormal scales kept, so a
///                                              block far below the tensor's
///                                              amax may get scale 0)
///   Torchao: e4m3(clamp((amax / max) / ts, 2^-6, 448))
///                                             (torchao's nvfp4_quantize
///                                              with a per-tensor scale: two
///                                              quotients, the scale clamped
///                                              to E4M3's smallest normal)
/// Each rule applies to one scale format (scaleFormatOf); a format's default
/// is Floor (E8M0) or Nearest (E4M3).
enum class ScaleRule : uint8_t { Floor, Ceil, Even, RCeil, Nearest, Torchao };

std::string_view scaleRuleName(ScaleRule rule);
std::optional<ScaleRule> parseScaleRule(std::string_view name);
/// Every rule, E8M0's first, in the order above.
const std::vector<ScaleRule> &scaleRules();

/// The scale format whose blocks `rule` chooses scales for.
ScaleFormat scaleFormatOf(ScaleRule rule);
/// A scale format's rule where none is named: Floor (E8M0), Nearest (E4M3).
ScaleRule defaultScaleRule(ScaleFormat format);
/// "e8m0" or "e4m3".
std::string_view scaleFormatName(ScaleFormat format);
/// The names of a scale format's rules, in scaleRules() order, joined by
/// ", ": "floor, ceil, even, rceil" (E8M0), "nearest, torchao" (E4M3).
std::string scaleRuleNamesOf(ScaleFormat format);

struct BlockScaling {
  int blockSize = 32;
  ScaleFormat scaleFormat = ScaleFormat::E8M0;
  ScaleRule rule = ScaleRule::Floor;
};

/// What one quantizer does, rotation aside.
struct BlockFormat {
  ElementFormat element = ElementFormat::E2M1;
  BlockScaling scaling;
  Rounding rounding = Rounding::NearestEven;
};

/// What a policy asks of one GEMM operand: rotate, then block-quantize.
struct OperandQuantization {
  BlockFormat format;
  Rotation rotation;
};

/// A named format — the one list the policy language, `tetra quantize` and
/// the dialect's attributes share: its element format and, for a block
/// format, its block size and scale format (scale rule floor, rounding to
/// nearest even, no rotation). An alias follows the name it stands for
/// (mxfp8 = mxfp8_e4m3), so a format's first preset is its canonical name.
struct FormatPreset {
  std::string_view name;
  ElementFormat element;
  int blockSize; ///< 0: no block scale (bf16, f32)
  ScaleFormat scaleFormat;
};

/// mxfp4 (E2M1, 32, E8M0), mxfp8_e4m3 and its alias mxfp8, mxfp8_e5m2
/// (32, E8M0), nvfp4 (E2M1, 16, E4M3 + an fp32 tensor scale), bf16, f32.
const std::vector<FormatPreset> &formatPresets();

/// The preset called `name`, or null.
const FormatPreset *findFormatPreset(std::string_view name);

/// A format's canonical preset name, or "" where it has none.
std::string_view formatPresetName(ElementFormat element, int blockSize,
                                  ScaleFormat scaleFormat);

/// A block preset's format (mxfp4, mxfp8_e4m3, mxfp8, mxfp8_e5m2, nvfp4);
/// none for another name, bf16 and f32 included.
std::optional<BlockFormat> blockFormatPreset(std::string_view name);

/// The E8M0 exponent `e` for a block whose largest magnitude is `amax`
/// (finite, >= 0; the sign is ignored, and a non-finite amax gives 127), per
/// `rule` and the element format `element`.
int sharedExponent(float amax, ScaleRule rule, const FormatSpec &element);

/// A block-quantized tensor: codes and scales kept apart, one byte each,
/// unpacked (packing two E2M1 codes per byte is a target's business).
struct QuantizedTensor {
  BlockFormat format;
  std::vector<int64_t> shape;
  int axis = 0;
  /// One code per element, same shape and order as the input.
  std::vector<uint8_t> codes;
  /// One scale per block: the input's shape with shape[axis] / blockSize,
  /// row-major. E8M0 codes for MX, E4M3 codes for NVFP4.
  std::vector<uint8_t> scales;
  /// NVFP4's fp32 per-tensor scale: amax(tensor) / (448 * 6), or 1 when the
  /// tensor is all zeros (or the quotient underflows to 0). 1 for MX formats.
  float tensorScale = 1.0f;
};

/// Quantizes a row-major tensor of `shape` along `axis` (the extent along
/// `axis` must be a multiple of the block size; the caller checks).
///
/// MX (E8M0 scales): e = sharedExponent(amaxBlock, rule, element), the scale
/// code is encodeE8M0(e), and element code = encode(x, e, element, rounding,
/// bits): the scale is an exact exponent offset, no fp32 division.
///
/// NVFP4 (E4M3 scales), in exactly this order of fp32 operations (each one
/// rounded to nearest even), with max = the element's maxFinite (6 for E2M1):
///   1. tensorAmax   = max |x| over the finite elements (exact)
///   2. tensorScale  = tensorAmax / (448.0f * max)   (448 * 6 = 2688, exact);
///                     if that is 0 (all zeros, or underflow): 1.0f
///   3. per block: amaxBlock = max |x| over the block (exact)
///   4. scale code   = encodeE4M3(amaxBlock / (tensorScale * max))
///                     (product, then quotient; RNE, saturating at 448) —
///                     the Nearest rule; under Torchao
///                     encodeE4M3(clamp((amaxBlock / max) / tensorScale,
///                     2^-6, 448)) (two quotients)
///   5. decodedScale = decodeE4M3(scale code) * tensorScale
///   6. element code = encode(x / decodedScale, 0, element, rounding, bits),
///                     or +-0 (x's sign) if decodedScale is 0.
///
/// NaN and Inf: a block containing a NaN or an Inf gets a NaN scale (E8M0
/// 0xFF, E4M3 0x7F) and all-zero codes, so that it dequantizes to NaN and the
/// trainer can report it; the other blocks are unaffected. For NVFP4 the
/// tensor amax ignores non-finite values (the finite values of a NaN block
/// still count).
///
/// Stochastic rounding draws randomBits(stream, i) for the element at
/// row-major index i of the whole tensor.
QuantizedTensor quantize(const float *data, const std::vector<int64_t> &shape,
                         int axis, const BlockFormat &format,
                         const RandomStream &stream = {});

/// The values the codes stand for, in fp32: decode(code) * decodeE8M0(scale)
/// for MX; (decode(code) * decodeE4M3(scale)) * tensorScale for NVFP4 (the
/// first product is exact, the second rounds). For MX with E2M1, E4M3 and
/// E5M2 elements the product is exact unless it reaches 2^128: a block whose
/// largest value rounds up to 2^128 (E2M1 under Ceil, Even or RCeil: |x| >=
/// 1.75 * 2^127) dequantizes that value to Inf; referenceGemm(), in fp64,
/// does not overflow.
std::vector<float> dequantize(const QuantizedTensor &tensor);

/// The pieces quantize() and dequantize() are made of, for code that
/// quantizes part of a tensor and must get exactly what quantize() gets for
/// those elements (QuantizationError.h). quantize() is these calls in order.

/// The largest |x| over the finite values of `data` (0 if there are none):
/// NVFP4's tensor amax (quantize()'s step 1).
float finiteAmax(const float *data, int64_t count);

/// NVFP4's fp32 tensor scale (step 2) for a tensor whose finite amax is
/// `tensorAmax`: tensorAmax / (448.0f * element.maxFinite), or 1.0f if that
/// is 0.
float nvfp4TensorScale(float tensorAmax, const FormatSpec &element);

/// NVFP4's scale code (step 4) for a block whose finite amax is `blockAmax`
/// under `tensorScale`, by `rule` (Nearest or Torchao).
uint8_t nvfp4ScaleCode(float blockAmax, float tensorScale, ScaleRule rule,
                       const FormatSpec &element);

/// Quantizes one block exactly as quantize() does within a tensor: the
/// `format.scaling.blockSize` values `values[j]` are the elements at
/// row-major indices `firstIndex + j * indexStride` of the whole tensor (the
/// indices key the stochastic-rounding bits), `tensorScale` is the whole
/// tensor's (NVFP4; ignored for E8M0 scales). Writes the element codes to
/// `codes[j]` (all zero for a block with a NaN or an Inf) and returns the
/// block's scale code.
uint8_t quantizeBlock(const float *values, int64_t firstIndex,
                      int64_t indexStride, const BlockFormat &format,
                      float tensorScale, const RandomStream &stream,
                      uint8_t *codes);

/// The fp32 value of element code `code` in a block with scale code `scale`,
/// as dequantize() computes it (above).
float dequantizeElement(uint8_t code, uint8_t scale, const BlockFormat &format,
                        float tensorScale);

/// Rotate along `axis`, quantize, dequantize, rotate back: what the operand
/// looks like to the GEMM, expressed in the original basis. In place.
/// `stream.step` also selects per-step random Hadamard signs.
void fakeQuantize(float *data, const std::vector<int64_t> &shape, int axis,
                  const OperandQuantization &quantization,
                  const RandomStream &stream = {});

/// Round-trips through BF16 (round to nearest even), in place.
void roundTripBF16(float *data, int64_t count);

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_BLOCKQUANTIZE_H
