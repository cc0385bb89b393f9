//===- Formats.cpp - Element and scale formats, bit for bit ---------------===//
//
// Encoding works on the integer fields of the fp32 input: the value is
// significand * 2^lsbExponent with a 24-bit significand (implicit bit
// included; subnormal inputs have no implicit bit), the scale exponent is
// subtracted from lsbExponent, and rounding drops the low bits of the
// significand. No floating-point arithmetic takes part, so a GPU kernel can
// reproduce every code with integer instructions. See docs/numerics.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/numerics/Formats.h"

#include <cassert>
#include <cmath>
#include <cstring>

namespace tetra::numerics {

namespace {

// clang-format off
// {format,            exp, man, bias, emax, maxFinite,      inf,   NaN,   bits}
constexpr FormatSpec kE2M1 =
    {ElementFormat::E2M1, 2,  1,    1,    2, 6.0f,           false, false,  4};
constexpr FormatSpec kE4M3 =
    {ElementFormat::E4M3, 4,  3,    7,    8, 448.0f,         false, true,   8};
constexpr FormatSpec kE5M2 =
    {ElementFormat::E5M2, 5,  2,   15,   15, 57344.0f,       true,  true,   8};
// maxFinite: (2 - 2^-7) * 2^127, the BF16 0x7F7F; FLT_MAX, (2 - 2^-23) * 2^127.
constexpr FormatSpec kBF16 =
    {ElementFormat::BF16, 8,  7,  127,  127, 3.38953139e38f, true,  true,  16};
constexpr FormatSpec kF32 =
    {ElementFormat::F32,  8, 23,  127,  127, 3.40282347e38f, true,  true,  32};
// clang-format on

/// The FP4/FP8 formats saturate on overflow and on Inf (like `satfinite`);
/// BF16 and F32 follow IEEE and overflow to Inf.
bool saturates(const FormatSpec &spec) {
  return spec.format == ElementFormat::E2M1 ||
         spec.format == ElementFormat::E4M3 ||
         spec.format == ElementFormat::E5M2;
}

/// The magnitude code (sign bit clear) of the largest finite value.
uint32_t maxFiniteCode(const FormatSpec &spec) {
  switch (spec.format) {
  case ElementFormat::E2M1:
    return 0x7;
  case ElementFormat::E4M3:
    return 0x7E;
  case ElementFormat::E5M2:
    return 0x7B;
  case ElementFormat::BF16:
    return 0x7F7F;
  case ElementFormat::F32:
    return 0x7F7FFFFF;
  }
  return 0;
}

/// The magnitude code of +Inf (BF16, F32; E5M2's Inf is never produced by
/// encode, which saturates).
uint32_t infinityCode(const FormatSpec &spec) {
  return ((1u << spec.exponentBits) - 1) << spec.mantissaBits;
}

/// The canonical NaN; E2M1 has none and gives +0.
uint32_t canonicalNaNCode(const FormatSpec &spec) {
  switch (spec.format) {
  case ElementFormat::E2M1:
    return 0x0;
  case ElementFormat::E4M3:
  case ElementFormat::E5M2:
    return 0x7F;
  case ElementFormat::BF16:
    return 0x7FC0;
  case ElementFormat::F32:
    return 0x7FC00000;
  }
  return 0;
}

int bitLength(uint32_t value) {
  int length = 0;
  while (value) {
    ++length;
    value >>= 1;
  }
  return length;
}

/// Whether dropping the low `discarded` (> 0) bits of `significand`, keeping
/// `kept`, rounds the magnitude up (away from zero).
bool roundsUp(uint32_t significand, int64_t discarded, uint64_t kept,
              Rounding rounding, uint32_t randomBits) {
  if (rounding == Rounding::Stochastic) {
    // The discarded bits in units of 2^-32 ulp, truncated.
    uint32_t fraction32 =
        discarded >= 64
            ? 0
            : static_cast<uint32_t>(
                  (static_cast<uint64_t>(significand) << 32) >> discarded);
    return randomBits < fraction32;
  }
  // significand < 2^24, so beyond 25 discarded bits it is below half an ulp.
  if (discarded > 25)
    return false;
  uint64_t remainder = significand & ((uint64_t{1} << discarded) - 1);
  uint64_t half = uint64_t{1} << (discarded - 1);
  if (remainder != half)
    return remainder > half;
  return rounding == Rounding::NearestAway || (kept & 1) != 0;
}

} // namespace

const FormatSpec &formatSpec(ElementFormat format) {
  switch (format) {
  case ElementFormat::E2M1:
    return kE2M1;
  case ElementFormat::E4M3:
    return kE4M3;
  case ElementFormat::E5M2:
    return kE5M2;
  case ElementFormat::BF16:
    return kBF16;
  case ElementFormat::F32:
    return kF32;
  }
  return kF32;
}

std::string_view formatName(ElementFormat format) {
  switch (format) {
  case ElementFormat::E2M1:
    return "e2m1";
  case ElementFormat::E4M3:
    return "e4m3";
  case ElementFormat::E5M2:
    return "e5m2";
  case ElementFormat::BF16:
    return "bf16";
  case ElementFormat::F32:
    return "f32";
  }
  return "";
}

std::optional<ElementFormat> parseElementFormat(std::string_view name) {
  for (ElementFormat format :
       {ElementFormat::E2M1, ElementFormat::E4M3, ElementFormat::E5M2,
        ElementFormat::BF16, ElementFormat::F32})
    if (name == formatName(format))
      return format;
  return std::nullopt;
}

std::string_view roundingName(Rounding rounding) {
  switch (rounding) {
  case Rounding::NearestEven:
    return "nearest_even";
  case Rounding::NearestAway:
    return "nearest_away";
  case Rounding::Stochastic:
    return "stochastic";
  }
  return "";
}

std::optional<Rounding> parseRounding(std::string_view name) {
  for (Rounding rounding :
       {Rounding::NearestEven, Rounding::NearestAway, Rounding::Stochastic})
    if (name == roundingName(rounding))
      return rounding;
  return std::nullopt;
}

uint32_t encode(float x, int scaleExponent, const FormatSpec &spec,
                Rounding rounding, uint32_t randomBits) {
  const uint32_t bits = floatBits(x);
  const uint32_t signCode = (bits >> 31) << (spec.bits - 1);
  const uint32_t exponentField = (bits >> 23) & 0xFF;
  const uint32_t fraction = bits & 0x7FFFFF;

  if (exponentField == 0xFF) {
    if (fraction != 0)
      return canonicalNaNCode(spec);
    return signCode |
           (saturates(spec) ? maxFiniteCode(spec) : infinityCode(spec));
  }
  if (exponentField == 0 && fraction == 0)
    return signCode;

  // |x| * 2^-scaleExponent = significand * 2^lsbExponent, exactly.
  uint32_t significand;
  int64_t lsbExponent;
  if (exponentField == 0) {
    significand = fraction;
    lsbExponent = -149;
  } else {
    significand = fraction | 0x800000;
    lsbExponent = static_cast<int64_t>(exponentField) - 150;
  }
  lsbExponent -= scaleExponent;

  // The target binade: the value's own, or the subnormal one.
  const int64_t valueExponent = lsbExponent + bitLength(significand) - 1;
  const int64_t minExponent = 1 - spec.bias;
  const int64_t binade =
      valueExponent > minExponent ? valueExponent : minExponent;
  const int64_t ulpExponent = binade - spec.mantissaBits;
  const int64_t discarded = ulpExponent - lsbExponent;

  // The magnitude in units of the target ulp, 2^ulpExponent. Below
  // 2^(mantissaBits + 1) before rounding; rounding may carry into the next
  // binade, which the code arithmetic below absorbs.
  uint64_t magnitude;
  if (discarded <= 0) {
    magnitude = static_cast<uint64_t>(significand) << -discarded;
  } else {
    magnitude = discarded >= 32 ? 0 : significand >> discarded;
    if (roundsUp(significand, discarded, magnitude, rounding, randomBits))
      ++magnitude;
  }

  // Subnormal codes are the magnitude itself; each binade above adds
  // 2^mantissaBits (the implicit bit is the exponent field's first step).
  const uint64_t code =
      (static_cast<uint64_t>(binade - minExponent) << spec.mantissaBits) +
      magnitude;
  if (code > maxFiniteCode(spec))
    return signCode |
           (saturates(spec) ? maxFiniteCode(spec) : infinityCode(spec));
  return signCode | static_cast<uint32_t>(code);
}

float decode(uint32_t code, const FormatSpec &spec) {
  if (spec.format == ElementFormat::F32)
    return bitsToFloat(code);
  if (spec.format == ElementFormat::BF16)
    return bitsToFloat((code & 0xFFFF) << 16);

  const uint32_t signMask = 1u << (spec.bits - 1);
  const bool negative = (code & signMask) != 0;
  const uint32_t magnitude = code & (signMask - 1);
  const uint32_t exponentField = magnitude >> spec.mantissaBits;
  const uint32_t mantissa = magnitude & ((1u << spec.mantissaBits) - 1);

  const float nan = bitsToFloat(0x7FC00000);
  if (spec.format == ElementFormat::E4M3 && magnitude == 0x7F)
    return nan;
  if (spec.format == ElementFormat::E5M2 && exponentField == 0x1F) {
    if (mantissa != 0)
      return nan;
    return negative ? -INFINITY : INFINITY;
  }

  // Exact: at most 4 significant bits and an exponent inside fp32's range.
  float value;
  if (exponentField == 0)
    value = std::ldexp(static_cast<float>(mantissa),
                       1 - spec.bias - spec.mantissaBits);
  else
    value = std::ldexp(static_cast<float>(mantissa | (1u << spec.mantissaBits)),
                       static_cast<int>(exponentField) - spec.bias -
                           spec.mantissaBits);
  return negative ? -value : value;
}

uint8_t encodeE2M1(float x, Rounding rounding, uint32_t randomBits) {
  return static_cast<uint8_t>(encode(x, 0, kE2M1, rounding, randomBits));
}
float decodeE2M1(uint8_t code) { return decode(code, kE2M1); }

uint8_t encodeE4M3(float x, Rounding rounding, uint32_t randomBits) {
  return static_cast<uint8_t>(encode(x, 0, kE4M3, rounding, randomBits));
}
float decodeE4M3(uint8_t code) { return decode(code, kE4M3); }

uint8_t encodeE5M2(float x, Rounding rounding, uint32_t randomBits) {
  return static_cast<uint8_t>(encode(x, 0, kE5M2, rounding, randomBits));
}
float decodeE5M2(uint8_t code) { return decode(code, kE5M2); }

uint16_t encodeBF16(float x, Rounding rounding, uint32_t randomBits) {
  return static_cast<uint16_t>(encode(x, 0, kBF16, rounding, randomBits));
}
float decodeBF16(uint16_t code) { return decode(code, kBF16); }

uint8_t encodeE8M0(int exponent) {
  if (exponent < -127)
    exponent = -127;
  if (exponent > 127)
    exponent = 127;
  return static_cast<uint8_t>(exponent + 127);
}

float decodeE8M0(uint8_t code) {
  if (code == kE8M0NaN)
    return bitsToFloat(0x7FC00000);
  // 2^-127 (code 0) is an fp32 subnormal; ldexp is exact for all 255 values.
  return std::ldexp(1.0f, e8m0Exponent(code));
}

int e8m0Exponent(uint8_t code) { return static_cast<int>(code) - 127; }

uint32_t floatBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float bitsToFloat(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

} // namespace tetra::numerics
