//===- BlockQuantize.cpp - MX and NVFP4 block quantization ----------------===//
//
// The oracle for every target's quantizer. Shared exponents are computed from
// the integer fields of amax; element codes come from encode() in Formats.cpp;
// NVFP4's scales follow a fixed order of fp32 operations (see the header and
// docs/numerics.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/numerics/BlockQuantize.h"

#include <cassert>
#include <algorithm>
#include <cmath>

namespace tetra::numerics {

namespace {

bool isFinite(float x) { return ((floatBits(x) >> 23) & 0xFF) != 0xFF; }

float magnitude(float x) { return bitsToFloat(floatBits(x) & 0x7FFFFFFF); }

/// |x| = significand * 2^(log2Floor - 23) with significand in [2^23, 2^24):
/// fp32 subnormals are normalized.
struct Normalized {
  int log2Floor;
  uint32_t significand;
};

Normalized normalize(float x) {
  const uint32_t bits = floatBits(x) & 0x7FFFFFFF;
  const uint32_t exponentField = bits >> 23;
  uint32_t significand = bits & 0x7FFFFF;
  if (exponentField != 0)
    return {static_cast<int>(exponentField) - 127, significand | 0x800000};
  int log2Floor = -126;
  while (!(significand & 0x800000)) {
    significand <<= 1;
    --log2Floor;
  }
  return {log2Floor, significand};
}

int clampExponent(int e) { return e < -127 ? -127 : (e > 127 ? 127 : e); }

struct BlockLayout {
  AxisView view;
  int64_t blocksAlongAxis;
  int blockSize;

  /// Row-major index into the scales of block `b` at (o, i).
  int64_t scaleIndex(int64_t o, int64_t b, int64_t i) const {
    return (o * blocksAlongAxis + b) * view.inner + i;
  }
};

BlockLayout layoutOf(const std::vector<int64_t> &shape, int axis,
                     int blockSize) {
  BlockLayout layout;
  layout.view = viewAlong(shape, axis);
  layout.blockSize = blockSize;
  assert(blockSize > 0 && layout.view.extent % blockSize == 0 &&
         "extent along the axis must be a multiple of the block size");
  layout.blocksAlongAxis = layout.view.extent / blockSize;
  return layout;
}

uint8_t signedZero(float x, const FormatSpec &spec) {
  return (floatBits(x) >> 31) ? static_cast<uint8_t>(1u << (spec.bits - 1)) : 0;
}

} // namespace

std::string_view scaleRuleName(ScaleRule rule) {
  switch (rule) {
  case ScaleRule::Floor:
    return "floor";
  case ScaleRule::Ceil:
    return "ceil";
  case ScaleRule::Even:
    return "even";
  case ScaleRule::RCeil:
    return "rceil";
  case ScaleRule::Nearest:
    return "nearest";
  case ScaleRule::Torchao:
    return "torchao";
  }
  return "";
}

const std::vector<ScaleRule> &scaleRules() {
  static const std::vector<ScaleRule> rules = {
      ScaleRule::Floor,   ScaleRule::Ceil,   ScaleRule::Even,
      ScaleRule::RCeil,   ScaleRule::Nearest, ScaleRule::Torchao};
  return rules;
}

std::optional<ScaleRule> parseScaleRule(std::string_view name) {
  for (ScaleRule rule : scaleRules())
    if (name == scaleRuleName(rule))
      return rule;
  return std::nullopt;
}

ScaleFormat scaleFormatOf(ScaleRule rule) {
  return rule == ScaleRule::Nearest || rule == ScaleRule::Torchao
             ? ScaleFormat::E4M3
             : ScaleFormat::E8M0;
}

ScaleRule defaultScaleRule(ScaleFormat format) {
  return format == ScaleFormat::E4M3 ? ScaleRule::Nearest : ScaleRule::Floor;
}

std::string_view scaleFormatName(ScaleFormat format) {
  return format == ScaleFormat::E4M3 ? "e4m3" : "e8m0";
}

std::string scaleRuleNamesOf(ScaleFormat format) {
  std::string names;
  for (ScaleRule rule : scaleRules())
    if (scaleFormatOf(rule) == format)
      names += std::string(names.empty() ? "" : ", ") +
               std::string(scaleRuleName(rule));
  return names;
}

const std::vector<FormatPreset> &formatPresets() {
  static const std::vector<FormatPreset> presets = {
      {"mxfp4", ElementFormat::E2M1, 32, ScaleFormat::E8M0},
      {"mxfp8_e4m3", ElementFormat::E4M3, 32, ScaleFormat::E8M0},
      {"mxfp8", ElementFormat::E4M3, 32, ScaleFormat::E8M0},
      {"mxfp8_e5m2", ElementFormat::E5M2, 32, ScaleFormat::E8M0},
      {"nvfp4", ElementFormat::E2M1, 16, ScaleFormat::E4M3},
      {"bf16", ElementFormat::BF16, 0, ScaleFormat::E8M0},
      {"f32", ElementFormat::F32, 0, ScaleFormat::E8M0},
  };
  return presets;
}

const FormatPreset *findFormatPreset(std::string_view name) {
  for (const FormatPreset &preset : formatPresets())
    if (preset.name == name)
      return &preset;
  return nullptr;
}

std::string_view formatPresetName(ElementFormat element, int blockSize,
                                  ScaleFormat scaleFormat) {
  for (const FormatPreset &preset : formatPresets())
    if (preset.element == element && preset.blockSize == blockSize &&
        (blockSize == 0 || preset.scaleFormat == scaleFormat))
      return preset.name;
  return "";
}

std::optional<BlockFormat> blockFormatPreset(std::string_view name) {
  const FormatPreset *preset = findFormatPreset(name);
  if (!preset || preset->blockSize == 0)
    return std::nullopt;
  BlockFormat format;
  format.element = preset->element;
  format.rounding = Rounding::NearestEven;
  format.scaling = {preset->blockSize, preset->scaleFormat,
                    defaultScaleRule(preset->scaleFormat)};
  return format;
}

int sharedExponent(float amax, ScaleRule rule, const FormatSpec &element) {
  amax = magnitude(amax);
  if (!isFinite(amax))
    return 127;
  if (amax == 0.0f)
    return -127;
  const Normalized value = normalize(amax);
  const int emax = element.maxExponent;
  const bool powerOfTwo = value.significand == 0x800000;
  switch (rule) {
  case ScaleRule::Floor:
    return clampExponent(value.log2Floor - emax);
  case ScaleRule::Ceil:
    return clampExponent(value.log2Floor + (powerOfTwo ? 0 : 1) - emax);
  case ScaleRule::Even: {
    // Rounding the significand to mantissaBits (ties to even) carries into
    // the next binade iff the dropped bits reach half an ulp above the largest
    // mantissa (2 - 2^-mantissaBits); that mantissa is odd, so ties carry.
    const int dropped = 23 - element.mantissaBits;
    if (dropped <= 0) // F32: nothing to round.
      return clampExponent(value.log2Floor - emax);
    const uint32_t carryThreshold =
        (0x1000000u - (1u << dropped)) + (1u << (dropped - 1));
    const bool carries = value.significand >= carryThreshold;
    return clampExponent(value.log2Floor + (carries ? 1 : 0) - emax);
  }
  case ScaleRule::RCeil: {
    // amax / 2^(log2Floor - emax) lies in [2^emax, 2^(emax+1)) and maxFinite
    // in [2^emax, 2^(emax+1)) too: one more binade iff amax's significand
    // exceeds maxFinite's.
    const uint32_t maxSignificand = normalize(element.maxFinite).significand;
    const bool clips = value.significand > maxSignificand;
    return clampExponent(value.log2Floor + (clips ? 1 : 0) - emax);
  }
  case ScaleRule::Nearest:
  case ScaleRule::Torchao:
    assert(false && "an E4M3 rule on an E8M0 scale");
    break;
  }
  return 0;
}

float finiteAmax(const float *data, int64_t count) {
  float amax = 0.0f;
  for (int64_t k = 0; k < count; ++k)
    if (isFinite(data[k]) && magnitude(data[k]) > amax)
      amax = magnitude(data[k]);
  return amax;
}

float nvfp4TensorScale(float tensorAmax, const FormatSpec &element) {
  const float tensorScale = tensorAmax / (448.0f * element.maxFinite);
  // All zeros (or so small that the quotient underflows): 1.
  return tensorScale == 0.0f ? 1.0f : tensorScale;
}

uint8_t nvfp4ScaleCode(float blockAmax, float tensorScale, ScaleRule rule,
                       const FormatSpec &element) {
  assert(scaleFormatOf(rule) == ScaleFormat::E4M3 &&
         "an E8M0 rule on an E4M3 scale");
  if (rule == ScaleRule::Nearest)
    return encodeE4M3(blockAmax / (tensorScale * element.maxFinite));
  // Torchao. The quotient is finite: the tensor scale is never 0.
  const float quotient = (blockAmax / element.maxFinite) / tensorScale;
  return encodeE4M3(std::min(std::max(quotient, 0x1p-6f), 448.0f));
}

uint8_t quantizeBlock(const float *values, int64_t firstIndex,
                      int64_t indexStride, const BlockFormat &format,
                      float tensorScale, const RandomStream &stream,
                      uint8_t *codes) {
  const FormatSpec &spec = formatSpec(format.element);
  const int blockSize = format.scaling.blockSize;
  const bool stochastic = format.rounding == Rounding::Stochastic;
  const bool nvfp4Style = format.scaling.scaleFormat == ScaleFormat::E4M3;

  float blockAmax = 0.0f;
  bool nonFinite = false;
  for (int j = 0; j < blockSize; ++j) {
    const float x = values[j];
    if (!isFinite(x))
      nonFinite = true;
    else if (magnitude(x) > blockAmax)
      blockAmax = magnitude(x);
  }
  if (nonFinite) {
    // All-zero codes; the NaN scale makes the whole block NaN.
    for (int j = 0; j < blockSize; ++j)
      codes[j] = 0;
    return nvfp4Style ? 0x7F : kE8M0NaN;
  }

  auto bitsFor = [&](int j) {
    return stochastic
               ? randomBits(stream,
                            static_cast<uint64_t>(firstIndex + j * indexStride))
               : 0u;
  };

  if (!nvfp4Style) {
    const int e = sharedExponent(blockAmax, format.scaling.rule, spec);
    for (int j = 0; j < blockSize; ++j)
      codes[j] = static_cast<uint8_t>(
          encode(values[j], e, spec, format.rounding, bitsFor(j)));
    return encodeE8M0(e);
  }

  // NVFP4: this exact sequence of fp32 operations.
  const uint8_t scale = nvfp4ScaleCode(blockAmax, tensorScale,
                                       format.scaling.rule, spec);
  const float decodedScale = decodeE4M3(scale) * tensorScale;
  for (int j = 0; j < blockSize; ++j) {
    const float x = values[j];
    codes[j] = decodedScale == 0.0f
                   ? signedZero(x, spec)
                   : static_cast<uint8_t>(encode(x / decodedScale, 0, spec,
                                                 format.rounding, bitsFor(j)));
  }
  return scale;
}

float dequantizeElement(uint8_t code, uint8_t scale, const BlockFormat &format,
                        float tensorScale) {
  const float element = decode(code, formatSpec(format.element));
  return format.scaling.scaleFormat == ScaleFormat::E4M3
             ? (element * decodeE4M3(scale)) * tensorScale
             : element * decodeE8M0(scale);
}

QuantizedTensor quantize(const float *data, const std::vector<int64_t> &shape,
                         int axis, const BlockFormat &format,
                         const RandomStream &stream) {
  const BlockLayout layout = layoutOf(shape, axis, format.scaling.blockSize);
  const AxisView &view = layout.view;
  const int blockSize = layout.blockSize;

  QuantizedTensor result;
  result.format = format;
  result.shape = shape;
  result.axis = axis;
  result.codes.assign(view.numElements(), 0);
  result.scales.assign(view.outer * layout.blocksAlongAxis * view.inner, 0);

  // NVFP4: the per-tensor scale, from the finite elements only.
  if (format.scaling.scaleFormat == ScaleFormat::E4M3)
    result.tensorScale = nvfp4TensorScale(finiteAmax(data, view.numElements()),
                                          formatSpec(format.element));

  std::vector<float> values(blockSize);
  std::vector<uint8_t> codes(blockSize);
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t b = 0; b < layout.blocksAlongAxis; ++b)
      for (int64_t i = 0; i < view.inner; ++i) {
        const int64_t firstIndex = view.index(o, b * blockSize, i);
        for (int j = 0; j < blockSize; ++j)
          values[j] = data[firstIndex + j * view.inner];
        result.scales[layout.scaleIndex(o, b, i)] =
            quantizeBlock(values.data(), firstIndex, view.inner, format,
                          result.tensorScale, stream, codes.data());
        for (int j = 0; j < blockSize; ++j)
          result.codes[firstIndex + j * view.inner] = codes[j];
      }
  return result;
}

std::vector<float> dequantize(const QuantizedTensor &tensor) {
  const BlockLayout layout =
      layoutOf(tensor.shape, tensor.axis, tensor.format.scaling.blockSize);
  const AxisView &view = layout.view;

  std::vector<float> values(view.numElements());
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t e = 0; e < view.extent; ++e)
      for (int64_t i = 0; i < view.inner; ++i) {
        const int64_t index = view.index(o, e, i);
        const uint8_t scale =
            tensor.scales[layout.scaleIndex(o, e / layout.blockSize, i)];
        values[index] = dequantizeElement(tensor.codes[index], scale,
                                          tensor.format, tensor.tensorScale);
      }
  return values;
}

void fakeQuantize(float *data, const std::vector<int64_t> &shape, int axis,
                  const OperandQuantization &quantization,
                  const RandomStream &stream) {
  const AxisView view = viewAlong(shape, axis);
  rotate(data, view, quantization.rotation, stream.step);
  const QuantizedTensor quantized =
      quantize(data, shape, axis, quantization.format, stream);
  const std::vector<float> values = dequantize(quantized);
  for (size_t k = 0; k < values.size(); ++k)
    data[k] = values[k];
  rotate(data, view, quantization.rotation, stream.step, /*inverse=*/true);
}

void roundTripBF16(float *data, int64_t count) {
  for (int64_t k = 0; k < count; ++k)
    data[k] = decodeBF16(encodeBF16(data[k]));
}

} // namespace tetra::numerics
