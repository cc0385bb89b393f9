//===- QuantizationEmitter.h - The quantization arithmetic as IR -*- C++ -*-===//
//
// The one emitter of Tetra's bit-exact quantization arithmetic, shared by
// every target's conversion (TetraToCPU, and the GPU conversions to come):
// Philox4x32-10 in i32/i64 arithmetic, element encoding from the fp32 bits
// (nearest even, ties away, stochastic), decoding of E2M1/E4M3/E5M2/E8M0,
// and the shared exponent of every scale rule from amax's integer fields.
// It builds `arith`/`math` ops only (and `scf` loops), which every target
// lowers, so the targets cannot drift apart: each computes what
// runtime/numerics computes, bit for bit. The compile-time constants come
// from runtime/numerics too (one definition).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_QUANTIZATIONEMITTER_H
#define TETRA_LOWERING_CONVERSION_QUANTIZATIONEMITTER_H

#include "dialect/TetraOps.h"
#include "runtime/numerics/BlockQuantize.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <array>
#include <cmath>
#include <optional>
#include <utility>

namespace tetra::conversion {

using mlir::function_ref;
using mlir::ImplicitLocOpBuilder;
using mlir::OpBuilder;
using mlir::SmallVector;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;
using mlir::arith::CmpFPredicate;
using mlir::arith::CmpIPredicate;
namespace arith = mlir::arith;
namespace math = mlir::math;
namespace scf = mlir::scf;

//===----------------------------------------------------------------------===//
// Formats: compile-time constants, from runtime/numerics
//===----------------------------------------------------------------------===//

/// What the generated encoder and decoder need to know about a format. Every
/// field comes from runtime/numerics, so there is one definition.
struct FormatConstants {
  numerics::ElementFormat format;
  int bits;
  int mantissaBits;
  int bias;
  int maxExponent;
  float maxFinite;
  uint32_t maxCode;        ///< The largest finite magnitude code.
  uint32_t overflowCode;   ///< What overflow and Inf give: max, or BF16's Inf.
  uint32_t nanCode;        ///< The canonical NaN (E2M1: +0).
  uint32_t maxSignificand; ///< maxFinite's 24-bit significand (for rceil).
};

inline FormatConstants constantsOf(numerics::ElementFormat format) {
  const numerics::FormatSpec &spec = numerics::formatSpec(format);
  FormatConstants constants;
  constants.format = format;
  constants.bits = spec.bits;
  constants.mantissaBits = spec.mantissaBits;
  constants.bias = spec.bias;
  constants.maxExponent = spec.maxExponent;
  constants.maxFinite = spec.maxFinite;
  auto encodeConstant = [&](float x) {
    return numerics::encode(x, 0, spec, numerics::Rounding::NearestEven);
  };
  constants.maxCode = encodeConstant(spec.maxFinite);
  constants.overflowCode = encodeConstant(INFINITY);
  constants.nanCode = encodeConstant(NAN);
  constants.maxSignificand =
      (numerics::floatBits(spec.maxFinite) & 0x7FFFFF) | 0x800000;
  return constants;
}

/// numerics' kRotationSignsTensorId: the stream random Hadamard signs use.
constexpr uint32_t kRotationSignsTensorId = numerics::kRotationSignsTensorId;

//===----------------------------------------------------------------------===//
// QuantizationEmitter: integer and fp32 arithmetic as arith/math ops
//===----------------------------------------------------------------------===//

/// Builds the scalar computations. Values are i32 unless a name says
/// otherwise; shift amounts are always clamped into range, so nothing is
/// poison.
class QuantizationEmitter {
public:
  explicit QuantizationEmitter(mlir::ImplicitLocOpBuilder &builder) : b(builder) {}

  ImplicitLocOpBuilder &b;

  Type i8() { return b.getI8Type(); }
  Type i16() { return b.getI16Type(); }
  Type i32() { return b.getI32Type(); }
  Type i64() { return b.getI64Type(); }
  Type f32() { return b.getF32Type(); }

  Value c32(int64_t value) {
    return arith::ConstantOp::create(
        b, b.getI32IntegerAttr(static_cast<int32_t>(value)));
  }
  Value c64(int64_t value) {
    return arith::ConstantOp::create(b, b.getI64IntegerAttr(value));
  }
  Value cIndex(int64_t value) {
    return arith::ConstantIndexOp::create(b, value);
  }
  Value cF32(float value) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(value));
  }
  Value cF32Bits(uint32_t bits) { return cF32(numerics::bitsToFloat(bits)); }
  Value cBool(bool value) {
    return arith::ConstantOp::create(b, b.getBoolAttr(value));
  }

  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
  Value bitAnd(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value bitOr(Value x, Value y) { return arith::OrIOp::create(b, x, y); }
  Value bitXor(Value x, Value y) { return arith::XOrIOp::create(b, x, y); }
  Value shl(Value x, Value y) { return arith::ShLIOp::create(b, x, y); }
  Value shrui(Value x, Value y) { return arith::ShRUIOp::create(b, x, y); }
  Value maxsi(Value x, Value y) { return arith::MaxSIOp::create(b, x, y); }
  Value minsi(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  Value maxui(Value x, Value y) { return arith::MaxUIOp::create(b, x, y); }
  Value cmp(CmpIPredicate predicate, Value x, Value y) {
    return arith::CmpIOp::create(b, predicate, x, y);
  }
  Value select(Value condition, Value x, Value y) {
    return arith::SelectOp::create(b, condition, x, y);
  }
  Value zext(Value x, Type type) { return arith::ExtUIOp::create(b, type, x); }
  Value sext(Value x, Type type) { return arith::ExtSIOp::create(b, type, x); }
  Value trunc(Value x, Type type) {
    return arith::TruncIOp::create(b, type, x);
  }
  Value bitcast(Value x, Type type) {
    return arith::BitcastOp::create(b, type, x);
  }
  Value ctlz(Value x) { return math::CountLeadingZerosOp::create(b, x); }
  Value toI64(Value index) {
    return arith::IndexCastOp::create(b, i64(), index);
  }

  Value addf(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value subf(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value mulf(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value negf(Value x) { return arith::NegFOp::create(b, x); }
  /// x y + z, rounded once.
  Value fma(Value x, Value y, Value z) {
    return math::FmaOp::create(b, x, y, z);
  }
  Value divf(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
  Value cmpf(CmpFPredicate predicate, Value x, Value y) {
    return arith::CmpFOp::create(b, predicate, x, y);
  }

  /// min(max(x, lo), hi) on signed i32.
  Value clamp(Value x, int64_t lo, int64_t hi) {
    return minsi(maxsi(x, c32(lo)), c32(hi));
  }

  /// The CPU's fastExp (runtime/kernels/VectorMath.h), operation for
  /// operation: Cephes' expf with 2^n built from the exponent bits.
  Value fastExp(Value x) {
    const float kMax = 88.3762626647949f, kMin = -87.3365447505531f;
    Value lo = cF32(kMin), hi = cF32(kMax);
    Value below = cmpf(CmpFPredicate::OLT, x, lo);
    Value above = cmpf(CmpFPredicate::OGT, x, hi);
    Value clamped = select(below, lo, select(above, hi, x));
    Value shifted = addf(mulf(clamped, cF32(1.44269504088896341f)),
                         cF32(12582912.0f));
    Value n = subf(shifted, cF32(12582912.0f));
    Value r = subf(subf(clamped, mulf(n, cF32(0.693359375f))),
                   mulf(n, cF32(-2.12194440e-4f)));
    Value p = cF32(1.9875691500e-4f);
    for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                    1.6666665459e-1f, 5.0000001201e-1f})
      p = addf(mulf(p, r), cF32(c));
    p = addf(addf(mulf(mulf(p, r), r), r), cF32(1.0f));
    Value bits = bitcast(shifted, i32());
    Value exponent = add(sub(bits, c32(0x4B400000)), c32(127));
    Value scale = bitcast(shl(exponent, c32(23)), f32());
    Value result = mulf(p, scale);
    Value isNan = cmpf(CmpFPredicate::UNO, x, x);
    return select(below, cF32(0.0f),
                  select(above, cF32(INFINITY), select(isNan, x, result)));
  }
  /// Two fp32 values as one i32 word of BF16 codes, nearest even
  /// (encode(), NaN canonical), `low` in the low half: how every BF16
  /// operand's codes are stored.
  Value bf16Pair(Value low, Value high);
  /// SiLU, x / (1 + fastExp(-x)): the CPU's silu.forward
  /// (runtime/kernels/Elementwise.cpp), op for op.
  Value silu(Value x) {
    return divf(x, addf(cF32(1.0f), fastExp(negf(x))));
  }
  /// SiLU's gradient dy (s + x s (1 - s)), s = 1 / (1 + fastExp(-x)): the
  /// CPU's silu.backward (runtime/kernels/Elementwise.cpp), op for op.
  Value siluGradient(Value x, Value dy) {
    Value s = divf(cF32(1.0f), addf(cF32(1.0f), fastExp(negf(x))));
    return mulf(dy, addf(s, mulf(mulf(x, s), subf(cF32(1.0f), s))));
  }

  //===--------------------------------------------------------------------===//
  // Philox4x32-10 (runtime/numerics/Philox.cpp)
  //===--------------------------------------------------------------------===//

  /// (hi, lo) of the 64-bit product of the constant `multiplier` and `x`.
  std::pair<Value, Value> mulHiLo(uint32_t multiplier, Value x);

  std::array<Value, 4> philox(std::array<Value, 4> counter, Value key0,
                              Value key1);

  /// numerics::randomBits({seed, step, tensorId}, index): `seed` and `index`
  /// are i64, `step` and `tensorId` i32.
  Value randomBits(Value seed, Value step, Value tensorId, Value index);

  //===--------------------------------------------------------------------===//
  // encode (runtime/numerics/Formats.cpp)
  //===--------------------------------------------------------------------===//

  /// numerics::encode(x, scaleExponent, spec, rounding, randomBits): the code
  /// (i32, low `bits` bits) of x * 2^-scaleExponent. `x` is f32,
  /// `scaleExponent` i32, `randomBits` i32 (stochastic rounding only).
  /// Nearest-even E2M1 (scaleExponent within [-127, 127], as every MX
  /// shared exponent is) and nearest-even BF16 (scaleExponent 0) take
  /// shorter paths with the same results: encodeE2M1NearestEven and
  /// encodeBF16NearestEven.
  Value encode(Value x, Value scaleExponent, const FormatConstants &format,
               Rounding rounding, Value randomBits);
  /// encode() for E2M1, nearest even, in fp32 arithmetic: y = |x| ·
  /// 2^-scaleExponent (a power of two: exact wherever the code can be
  /// nonzero), rounded to E2M1's grid by adding and subtracting 2^22, 2^23
  /// or 2^24 (fp32's own nearest-even rounding onto steps of 1/2, 1 or 2),
  /// the code read from the result's exponent and leading mantissa bit.
  /// About a quarter of the general path's integer work (which needs 64-bit
  /// shifts), the GPU prologue's bottleneck.
  Value encodeE2M1NearestEven(Value x, Value scaleExponent,
                              const FormatConstants &format);
  /// encode() for BF16, nearest even, unscaled: the fp32 bits plus 0x7FFF
  /// plus the kept lowest bit, shifted by 16 (carries give the next binade
  /// or Inf, as the general path does); NaN as the format's NaN code.
  Value encodeBF16NearestEven(Value x, const FormatConstants &format);
  /// x (f32) rounded to BF16, nearest even, as an f32 value: the CPU's
  /// numerics::decodeBF16(numerics::encodeBF16(x)), as a truncation to
  /// bf16 and back (one cvt.rn.bf16.f32 on sm_90a; a NaN stays a NaN, its
  /// payload the chip's).
  Value roundToBF16(Value x);

  //===--------------------------------------------------------------------===//
  // Shared exponents (runtime/numerics/BlockQuantize.cpp)
  //===--------------------------------------------------------------------===//

  /// numerics::sharedExponent(amax, rule, element) from the i32 bits of
  /// amax: exponent and significand fields only, no fp32 log2.
  Value sharedExponent(Value amaxBits, ScaleRule rule,
                       const FormatConstants &element);

  //===--------------------------------------------------------------------===//
  // decode (runtime/numerics/Formats.cpp)
  //===--------------------------------------------------------------------===//

  /// numerics::decode(code, spec) for E2M1, E4M3 and E5M2: exact, as
  /// significand * 2^exponent built from the fields.
  Value decode(Value code, const FormatConstants &format);

  /// numerics::decodeE8M0: 2^(code - 127); 0x00 is the subnormal 2^-127,
  /// 0xFF is NaN.
  Value decodeE8M0(Value code);
  /// The reference code of a fiber along K from its largest and smallest
  /// E8M0 codes (i32): largest - above where largest - smallest <= spread,
  /// largest is not NaN (0xFF) and the reference is within
  /// 2^±numerics::kFoldModerate of 1; else -1. numerics::fiberFolds
  /// (above kFoldAbove, spread kFoldBelow + kFoldAbove) and
  /// numerics::fiberSumsExactly (kExactSpread, kExactSpread).
  Value fiberReference(Value largest, Value smallest, int64_t above,
                       int64_t spread);

  //===--------------------------------------------------------------------===//
  // Blocks (runtime/numerics/BlockQuantize.cpp, Hadamard.cpp): what every
  // target computes per block, whatever its loops and memory look like
  //===--------------------------------------------------------------------===//

  /// |x|'s i32 bits, and whether x is finite (i1).
  std::pair<Value, Value> magnitudeOf(Value x);

  /// One block of `blockSize` elements with an E8M0 scale (MX):
  /// `load(j)` gives element j (f32; called twice per element), amax is
  /// taken over the finite ones; `storeScale` gets the scale code (the
  /// shared exponent + 127, or 0xFF for a block holding a NaN or an Inf)
  /// and `storeCodes(j, codes)` the codes of elements j .. j + group - 1
  /// (0 in such a block), `group` (dividing the block) at a time: 1 for
  /// one loop over the elements, more for wider stores.
  /// `randomBitsAt(j)` gives element j's stochastic-rounding bits (only
  /// called when `rounding` is stochastic).
  using StoreCodes = function_ref<void(Value, llvm::ArrayRef<Value>)>;
  void quantizeMXBlock(int64_t blockSize, const FormatConstants &element,
                       ScaleRule rule, Rounding rounding,
                       function_ref<Value(Value)> load,
                       function_ref<Value(Value)> randomBitsAt, int64_t group,
                       StoreCodes storeCodes,
                       function_ref<void(Value)> storeScale);

  /// The same for NVFP4 (an E4M3 block scale under the f32 `tensorScale`,
  /// chosen by `rule`: nearest or torchao), in numerics' order of fp32
  /// operations.
  void quantizeNVFP4Block(int64_t blockSize, const FormatConstants &element,
                          ScaleRule rule, Rounding rounding, Value tensorScale,
                          function_ref<Value(Value)> load,
                          function_ref<Value(Value)> randomBitsAt,
                          int64_t group, StoreCodes storeCodes,
                          function_ref<void(Value)> storeScale);

  /// The fast Walsh-Hadamard transform of `work` (a memref<B x f32>) in
  /// numerics' order: butterflies of stride 1, 2, ..., B/2 on the pairs
  /// (lo, lo + h) with (lo & h) == 0; unnormalized.
  void hadamardButterflies(Value work, int64_t blockSize);

  /// The random Hadamard signs (±1.0 f32) into `signs` (memref<B x f32>):
  /// bit 0 of randomBits(seed, step, kRotationSignsTensorId, j).
  void hadamardSigns(Value signs, int64_t blockSize, Value seed, Value step);

  //===--------------------------------------------------------------------===//
  // Loops
  //===--------------------------------------------------------------------===//

  /// Whether loops with constant bounds are unrolled as they are built:
  /// each iteration's body inlined with its index as a constant, so that a
  /// caller holding its elements in registers (SSA values) can pick element
  /// j by its constant index, and local buffers indexed only by constants
  /// become registers (LLVM's SROA). The GPU prologues unroll; the CPU's
  /// loops stay loops. The arithmetic is the same either way.
  bool unrollsLoops = false;

  /// The constant value of an index built by cIndex (or folded from one).
  static std::optional<int64_t> constantIndex(Value index) {
    return mlir::getConstantIntValue(index);
  }

  /// if (condition) then(): `then` builds inside the branch; the builder
  /// goes on after it.
  void ifThen(Value condition, function_ref<void()> then) {
    auto op = scf::IfOp::create(b, condition, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(op.thenBlock()->getTerminator());
    then();
  }

  /// for (iv = lower; iv < upper; ++iv) body(iv)
  void loop(Value lower, Value upper, function_ref<void(Value)> body) {
    if (auto bounds = unrolledBounds(lower, upper)) {
      for (int64_t i = bounds->first; i < bounds->second; ++i)
        body(cIndex(i));
      return;
    }
    auto forOp = scf::ForOp::create(b, lower, upper, cIndex(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    body(forOp.getInductionVar());
  }

  /// The same with loop-carried values: body returns the next ones.
  SmallVector<Value>
  loop(Value lower, Value upper, ValueRange initial,
       function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    if (auto bounds = unrolledBounds(lower, upper)) {
      SmallVector<Value> carried(initial.begin(), initial.end());
      for (int64_t i = bounds->first; i < bounds->second; ++i)
        carried = body(cIndex(i), carried);
      return carried;
    }
    auto forOp = scf::ForOp::create(b, lower, upper, cIndex(1), initial);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(forOp.getBody());
      SmallVector<Value> next =
          body(forOp.getInductionVar(), forOp.getRegionIterArgs());
      scf::YieldOp::create(b, next);
    }
    return SmallVector<Value>(forOp.getResults());
  }

  /// Index arithmetic; folded where loops unroll (so unrolled bodies keep
  /// constant indices).
  Value addIndex(Value x, Value y) {
    return unrollsLoops ? b.createOrFold<arith::AddIOp>(x, y)
                        : arith::AddIOp::create(b, x, y);
  }
  Value subIndex(Value x, Value y) {
    return unrollsLoops ? b.createOrFold<arith::SubIOp>(x, y)
                        : arith::SubIOp::create(b, x, y);
  }
  Value mulIndex(Value x, Value y) {
    return unrollsLoops ? b.createOrFold<arith::MulIOp>(x, y)
                        : arith::MulIOp::create(b, x, y);
  }
  Value divIndex(Value x, int64_t y) {
    return unrollsLoops ? b.createOrFold<arith::DivUIOp>(x, cIndex(y))
                        : arith::DivUIOp::create(b, x, cIndex(y));
  }

private:
  /// [lower, upper) when loops unroll and both are constants.
  std::optional<std::pair<int64_t, int64_t>> unrolledBounds(Value lower,
                                                            Value upper) {
    if (!unrollsLoops)
      return std::nullopt;
    std::optional<int64_t> from = constantIndex(lower),
                           to = constantIndex(upper);
    if (!from || !to)
      return std::nullopt;
    return std::make_pair(*from, *to);
  }
};

} // namespace tetra::conversion

#endif // TETRA_LOWERING_CONVERSION_QUANTIZATIONEMITTER_H
