//===- Formats.h - Element and scale formats, bit for bit -------*- C++ -*-===//
//
// The single definition of every number format Tetra quantizes to: E2M1 (FP4),
// E4M3 and E5M2 (OCP FP8), BF16, and the E8M0 block scale. Every target (CPU,
// sm_90a, gfx950) is tested against these functions code for code.
//
// Rounding is defined on the integer bits of the fp32 input, never through an
// intermediate floating-point product, so that a GPU kernel can reproduce it
// exactly with integer instructions. See docs/numerics.md.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_FORMATS_H
#define TETRA_RUNTIME_NUMERICS_FORMATS_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace tetra::numerics {

/// Element formats a tensor can be quantized to.
enum class ElementFormat : uint8_t { E2M1, E4M3, E5M2, BF16, F32 };

/// How a value that falls between two representable neighbours is resolved.
enum class Rounding : uint8_t {
  NearestEven, ///< IEEE round-to-nearest, ties to the even code.
  NearestAway, ///< Round-to-nearest, ties away from zero.
  Stochastic,  ///< Round up with probability equal to the discarded fraction.
};

/// The parameters of a small binary floating-point format (sign, exponent,
/// mantissa; no implicit bit stored).
struct FormatSpec {
  ElementFormat format;
  int exponentBits;
  int mantissaBits;
  int bias;
  /// Exponent of the largest finite binade (E2M1: 2, E4M3: 8, E5M2: 15).
  int maxExponent;
  /// The largest finite magnitude (E2M1: 6, E4M3: 448, E5M2: 57344).
  float maxFinite;
  bool hasInfinity; ///< E5M2 and BF16 (and the F32 spec).
  bool hasNaN;      ///< All but E2M1.
  int bits;         ///< Total width: 4, 8 or 16 (32 for F32).
};

/// The spec of a format. F32 is not a quantization target; its spec
/// describes IEEE binary32 (bias 127, maxFinite FLT_MAX) so that generic code
/// can ask, and encode() with it is the identity on finite values at scale
/// exponent 0.
const FormatSpec &formatSpec(ElementFormat format);

std::string_view formatName(ElementFormat format);
std::optional<ElementFormat> parseElementFormat(std::string_view name);
std::string_view roundingName(Rounding rounding);
std::optional<Rounding> parseRounding(std::string_view name);

/// Quantizes `x * 2^-scaleExponent` to `spec`, returning the code in the low
/// `spec.bits` bits (sign in the top bit of the format).
///
/// - E2M1, E4M3, E5M2: finite values beyond maxFinite saturate to
///   +-maxFinite, and +-Inf saturates to +-maxFinite too, like the hardware's
///   `satfinite` conversions. (Block quantization treats Inf differently: see
///   BlockQuantize.h.)
/// - BF16 is a plain IEEE cast: Inf stays Inf, a finite value that rounds
///   beyond the largest BF16 becomes Inf (NearestEven/NearestAway; with
///   Stochastic, when it rounds up from the largest finite BF16). BF16
///   subnormals are produced, never flushed.
/// - NaN gives the format's canonical NaN (E4M3 0x7F, E5M2 0x7F, BF16 0x7FC0);
///   E2M1 has no NaN and gives +0 (the block scale carries the NaN).
/// - Zero keeps its sign; results that round to zero keep the input's sign.
/// - `randomBits` is used only for Rounding::Stochastic: the value rounds away
///   from zero iff `randomBits < fraction32`, where `fraction32` is the
///   discarded magnitude below one unit in the last place of the target,
///   expressed in units of 2^-32 ulp and truncated (see docs/numerics.md):
///   with the 24-bit significand m and D > 0 discarded bits,
///   fraction32 = low 32 bits of ((uint64_t)m << 32) >> D, and 0 for D >= 64.
///   Exactly representable values never move.
uint32_t encode(float x, int scaleExponent, const FormatSpec &spec,
                Rounding rounding, uint32_t randomBits = 0);

/// Decodes a code of `spec` to fp32 exactly (every E2M1/E4M3/E5M2/BF16 value
/// is an fp32 value). E2M1 has no NaN; E4M3 codes 0x7F/0xFF are NaN; E5M2
/// 0x7C/0xFC are +-Inf and 0x7D-0x7F/0xFD-0xFF NaN. FP8 NaN codes decode to
/// the fp32 NaN 0x7FC00000; BF16 decodes as `code << 16`, payload and all.
/// Bits above `spec.bits` are ignored.
float decode(uint32_t code, const FormatSpec &spec);

/// Convenience wrappers, scale exponent 0, round-to-nearest-even unless told.
uint8_t encodeE2M1(float x, Rounding rounding = Rounding::NearestEven,
                   uint32_t randomBits = 0);
float decodeE2M1(uint8_t code);
uint8_t encodeE4M3(float x, Rounding rounding = Rounding::NearestEven,
                   uint32_t randomBits = 0);
float decodeE4M3(uint8_t code);
uint8_t encodeE5M2(float x, Rounding rounding = Rounding::NearestEven,
                   uint32_t randomBits = 0);
float decodeE5M2(uint8_t code);
uint16_t encodeBF16(float x, Rounding rounding = Rounding::NearestEven,
                    uint32_t randomBits = 0);
float decodeBF16(uint16_t code);

/// E8M0: an unsigned power of two 2^(code - 127), code 0xFF = NaN.
/// `exponent` is clamped to [-127, 127].
uint8_t encodeE8M0(int exponent);
float decodeE8M0(uint8_t code);
/// The exponent of a non-NaN E8M0 code: code - 127.
int e8m0Exponent(uint8_t code);
constexpr uint8_t kE8M0NaN = 0xFF;

/// Bit casts, kept here so no file needs to reach for memcpy.
uint32_t floatBits(float x);
float bitsToFloat(uint32_t bits);

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_FORMATS_H
