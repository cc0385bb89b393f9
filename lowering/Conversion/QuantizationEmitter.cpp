//===- QuantizationEmitter.cpp - The quantization arithmetic as IR --------===//

#include "lowering/Conversion/QuantizationEmitter.h"

#include "runtime/numerics/ScaleFolding.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

using namespace tetra;
using namespace tetra::conversion;

std::pair<Value, Value> QuantizationEmitter::mulHiLo(uint32_t multiplier, Value x) {
  Value product = mul(c64(multiplier), zext(x, i64()));
  return {trunc(shrui(product, c64(32)), i32()), trunc(product, i32())};
}

std::array<Value, 4> QuantizationEmitter::philox(std::array<Value, 4> counter, Value key0,
                            Value key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 = add(key0, c32(0x9E3779B9));
      key1 = add(key1, c32(0xBB67AE85));
    }
    auto [hi0, lo0] = mulHiLo(0xD2511F53, counter[0]);
    auto [hi1, lo1] = mulHiLo(0xCD9E8D57, counter[2]);
    counter = {bitXor(bitXor(hi1, counter[1]), key0), lo1,
               bitXor(bitXor(hi0, counter[3]), key1), lo0};
  }
  return counter;
}

Value QuantizationEmitter::randomBits(Value seed, Value step, Value tensorId, Value index) {
  Value block = shrui(index, c64(2));
  std::array<Value, 4> counter = {trunc(block, i32()),
                                  trunc(shrui(block, c64(32)), i32()), step,
                                  tensorId};
  std::array<Value, 4> bits =
      philox(counter, trunc(seed, i32()), trunc(shrui(seed, c64(32)), i32()));
  Value lane = trunc(bitAnd(index, c64(3)), i32());
  Value result = bits[3];
  for (int k = 2; k >= 0; --k)
    result = select(cmp(CmpIPredicate::eq, lane, c32(k)), bits[k], result);
  return result;
}

Value QuantizationEmitter::encodeE2M1NearestEven(Value x, Value scaleExponent,
                                                 const FormatConstants &format) {
  Value bits = bitcast(x, i32());
  Value magnitudeBits = bitAnd(bits, c32(0x7FFFFFFF));
  // 2^-scaleExponent: a normal fp32 but for 2^-127.
  Value powerOfTwo = select(
      cmp(CmpIPredicate::sle, scaleExponent, c32(126)),
      bitcast(shl(sub(c32(127), scaleExponent), c32(23)), f32()),
      cF32Bits(0x00400000));
  // A product below 2^-126 may round, but every such value codes to zero.
  Value y = mulf(bitcast(magnitudeBits, f32()), powerOfTwo);
  Value step = select(cmpf(CmpFPredicate::OLT, y, cF32(2.0f)),
                      cF32(0x1p22f),
                      select(cmpf(CmpFPredicate::OLT, y, cF32(4.0f)),
                             cF32(0x1p23f), cF32(0x1p24f)));
  Value v = subf(addf(y, step), step);
  // v in {0, 1/2, 1, 1.5, 2, 3, 4, 6, 8, ...}: from 1 up, the code is the
  // exponent and leading mantissa bit less those of 1/2.
  Value code = select(cmpf(CmpFPredicate::OGE, v, cF32(1.0f)),
                      sub(shrui(bitcast(v, i32()), c32(22)), c32(252)),
                      select(cmpf(CmpFPredicate::OGT, v, cF32(0.0f)), c32(1),
                             c32(0)));
  // Beyond the largest finite value (and Inf): the overflow code.
  code = select(cmpf(CmpFPredicate::UGT, v, cF32(format.maxFinite)),
                c32(format.overflowCode), code);
  Value signCode = shl(shrui(bits, c32(31)), c32(format.bits - 1));
  Value isNaN = cmp(CmpIPredicate::ugt, magnitudeBits, c32(0x7F800000));
  return select(isNaN, c32(format.nanCode), bitOr(signCode, code));
}

Value QuantizationEmitter::encodeBF16NearestEven(Value x,
                                                 const FormatConstants &format) {
  Value bits = bitcast(x, i32());
  Value rounded = shrui(
      add(add(bits, c32(0x7FFF)), bitAnd(shrui(bits, c32(16)), c32(1))),
      c32(16));
  Value isNaN =
      cmp(CmpIPredicate::ugt, bitAnd(bits, c32(0x7FFFFFFF)), c32(0x7F800000));
  return select(isNaN, c32(format.nanCode), rounded);
}

Value QuantizationEmitter::roundToBF16(Value x) {
  return arith::ExtFOp::create(
      b, f32(), arith::TruncFOp::create(b, b.getBF16Type(), x).getResult());
}

Value QuantizationEmitter::encode(Value x, Value scaleExponent, const FormatConstants &format,
             Rounding rounding, Value randomBits) {
  if (rounding == Rounding::NearestEven) {
    if (format.format == numerics::ElementFormat::E2M1)
      return encodeE2M1NearestEven(x, scaleExponent, format);
    if (format.format == numerics::ElementFormat::BF16 &&
        mlir::matchPattern(scaleExponent, mlir::m_Zero()))
      return encodeBF16NearestEven(x, format);
  }
  Value bits = bitcast(x, i32());
  Value signCode = shl(shrui(bits, c32(31)), c32(format.bits - 1));
  Value exponentField = bitAnd(shrui(bits, c32(23)), c32(0xFF));
  Value fraction = bitAnd(bits, c32(0x7FFFFF));
  Value fractionZero = cmp(CmpIPredicate::eq, fraction, c32(0));
  Value exponentAllOnes = cmp(CmpIPredicate::eq, exponentField, c32(0xFF));
  Value exponentZero = cmp(CmpIPredicate::eq, exponentField, c32(0));
  Value isNaN = arith::AndIOp::create(
      b, exponentAllOnes, cmp(CmpIPredicate::ne, fraction, c32(0)));
  Value isInf = arith::AndIOp::create(b, exponentAllOnes, fractionZero);
  Value isZero = arith::AndIOp::create(b, exponentZero, fractionZero);

  // |x| * 2^-scaleExponent = significand * 2^lsb, exactly.
  Value significand =
      select(exponentZero, fraction, bitOr(fraction, c32(0x800000)));
  Value lsb =
      sub(select(exponentZero, c32(-149), sub(exponentField, c32(150))),
          scaleExponent);
  Value bitLength = sub(c32(32), ctlz(significand));
  Value valueExponent = add(lsb, sub(bitLength, c32(1)));
  const int minExponent = 1 - format.bias;
  Value binade = maxsi(valueExponent, c32(minExponent));
  Value discarded = sub(sub(binade, c32(format.mantissaBits)), lsb);

  Value significand64 = zext(significand, i64());
  // discarded <= 0: exact, shifted left (by at most the mantissa width).
  Value leftShift = sext(clamp(sub(c32(0), discarded), 0, 63), i64());
  Value exact = shl(significand64, leftShift);
  // discarded > 0: truncated, then rounded up by one per the mode.
  Value rightShift = sext(clamp(discarded, 1, 63), i64());
  Value truncated = select(cmp(CmpIPredicate::sge, discarded, c32(32)),
                           c64(0), shrui(significand64, rightShift));
  Value roundsUp;
  if (rounding == Rounding::Stochastic) {
    Value fraction32 =
        trunc(shrui(shl(significand64, c64(32)), rightShift), i32());
    fraction32 = select(cmp(CmpIPredicate::sge, discarded, c32(64)), c32(0),
                        fraction32);
    roundsUp = cmp(CmpIPredicate::ult, randomBits, fraction32);
  } else {
    // Beyond 25 discarded bits the value is below half an ulp.
    Value nearShift = minsi(rightShift, c64(26));
    Value remainder =
        bitAnd(significand64, sub(shl(c64(1), nearShift), c64(1)));
    Value half = shl(c64(1), sub(nearShift, c64(1)));
    Value above = cmp(CmpIPredicate::ugt, remainder, half);
    Value tie = cmp(CmpIPredicate::eq, remainder, half);
    Value tieRoundsUp =
        rounding == Rounding::NearestAway
            ? cBool(true)
            : cmp(CmpIPredicate::ne, bitAnd(truncated, c64(1)), c64(0));
    roundsUp = arith::AndIOp::create(
        b, cmp(CmpIPredicate::sle, discarded, c32(25)),
        arith::OrIOp::create(b, above,
                             arith::AndIOp::create(b, tie, tieRoundsUp)));
  }
  Value rounded = add(truncated, zext(roundsUp, i64()));
  Value magnitude =
      select(cmp(CmpIPredicate::sle, discarded, c32(0)), exact, rounded);

  // Subnormal codes are the magnitude; each binade above adds
  // 2^mantissaBits. Carries land on the right code.
  Value binadeOffset = sext(sub(binade, c32(minExponent)), i64());
  Value code = add(shl(binadeOffset, c64(format.mantissaBits)), magnitude);
  Value overflows = cmp(CmpIPredicate::ugt, code, c64(format.maxCode));
  Value magnitudeCode =
      select(overflows, c32(format.overflowCode), trunc(code, i32()));
  Value result = bitOr(signCode, magnitudeCode);
  result = select(isZero, signCode, result);
  result = select(isInf, bitOr(signCode, c32(format.overflowCode)), result);
  return select(isNaN, c32(format.nanCode), result);
}

Value QuantizationEmitter::sharedExponent(Value amaxBits, ScaleRule rule,
                     const FormatConstants &element) {
  Value magnitude = bitAnd(amaxBits, c32(0x7FFFFFFF));
  Value exponentField = shrui(magnitude, c32(23));
  Value fraction = bitAnd(magnitude, c32(0x7FFFFF));
  Value subnormal = cmp(CmpIPredicate::eq, exponentField, c32(0));
  // A subnormal's leading one sits at bit 31 - ctlz; normalizing it
  // shifts it up to bit 23.
  Value shift = clamp(sub(ctlz(fraction), c32(8)), 0, 31);
  Value significand =
      select(subnormal, shl(fraction, shift), bitOr(fraction, c32(0x800000)));
  Value log2Floor =
      select(subnormal, sub(c32(-126), shift), sub(exponentField, c32(127)));

  Value carries;
  switch (rule) {
  case ScaleRule::Floor:
    carries = cBool(false);
    break;
  case ScaleRule::Ceil:
    carries = cmp(CmpIPredicate::ne, significand, c32(0x800000));
    break;
  case ScaleRule::Even: {
    const int dropped = 23 - element.mantissaBits;
    const uint32_t threshold =
        (0x1000000u - (1u << dropped)) + (1u << (dropped - 1));
    carries = cmp(CmpIPredicate::uge, significand, c32(threshold));
    break;
  }
  case ScaleRule::RCeil:
    carries =
        cmp(CmpIPredicate::ugt, significand, c32(element.maxSignificand));
    break;
  case ScaleRule::Nearest:
  case ScaleRule::Torchao:
    llvm_unreachable("an E4M3 scale rule on an E8M0 scale");
  }
  Value exponent = clamp(
      sub(add(log2Floor, zext(carries, i32())), c32(element.maxExponent)),
      -127, 127);
  exponent =
      select(cmp(CmpIPredicate::eq, magnitude, c32(0)), c32(-127), exponent);
  return select(cmp(CmpIPredicate::uge, magnitude, c32(0x7F800000)), c32(127),
                exponent);
}

Value QuantizationEmitter::decode(Value code, const FormatConstants &format) {
  const int m = format.mantissaBits;
  const uint32_t signMask = 1u << (format.bits - 1);
  Value negative =
      cmp(CmpIPredicate::ne, bitAnd(code, c32(signMask)), c32(0));
  Value magnitude = bitAnd(code, c32(signMask - 1));
  Value exponentField = shrui(magnitude, c32(m));
  Value mantissa = bitAnd(magnitude, c32((1u << m) - 1));
  Value subnormal = cmp(CmpIPredicate::eq, exponentField, c32(0));
  Value significand =
      select(subnormal, mantissa, bitOr(mantissa, c32(1u << m)));
  Value exponent = select(subnormal, c32(1 - format.bias - m),
                          sub(exponentField, c32(format.bias + m)));
  Value powerOfTwo = bitcast(shl(add(exponent, c32(127)), c32(23)), f32());
  Value value =
      mulf(arith::UIToFPOp::create(b, f32(), significand), powerOfTwo);
  value = select(negative, arith::NegFOp::create(b, value), value);

  Value nan = cF32Bits(0x7FC00000);
  if (format.format == numerics::ElementFormat::E4M3)
    value = select(cmp(CmpIPredicate::eq, magnitude, c32(0x7F)), nan, value);
  if (format.format == numerics::ElementFormat::E5M2) {
    Value infinity =
        select(negative, cF32Bits(0xFF800000), cF32Bits(0x7F800000));
    Value special =
        select(cmp(CmpIPredicate::ne, mantissa, c32(0)), nan, infinity);
    value = select(cmp(CmpIPredicate::eq, exponentField, c32(0x1F)), special,
                   value);
  }
  return value;
}

Value QuantizationEmitter::decodeE8M0(Value code) {
  Value bits = select(cmp(CmpIPredicate::eq, code, c32(0)), c32(0x00400000),
                      shl(code, c32(23)));
  bits =
      select(cmp(CmpIPredicate::eq, code, c32(0xFF)), c32(0x7FC00000), bits);
  return bitcast(bits, f32());
}

Value QuantizationEmitter::fiberReference(Value largest, Value smallest,
                                          int64_t above, int64_t spread) {
  const int64_t moderate = numerics::kFoldModerate;
  Value ref = sub(largest, c32(above));
  Value exponent = sub(ref, c32(127));
  Value ok = bitAnd(
      bitAnd(cmp(CmpIPredicate::sle, sub(largest, smallest), c32(spread)),
             cmp(CmpIPredicate::ne, largest, c32(0xFF))),
      bitAnd(cmp(CmpIPredicate::sge, exponent, c32(-moderate)),
             cmp(CmpIPredicate::sle, exponent, c32(moderate))));
  return select(ok, ref, c32(-1));
}

std::pair<Value, Value> QuantizationEmitter::magnitudeOf(Value x) {
  Value magnitude = bitAnd(bitcast(x, i32()), c32(0x7FFFFFFF));
  return {magnitude, cmp(CmpIPredicate::ult, magnitude, c32(0x7F800000))};
}

/// amax over the finite elements of a block, and whether it holds a NaN or
/// an Inf.
static std::pair<Value, Value>
blockAmax(QuantizationEmitter &e, int64_t blockSize,
          function_ref<Value(Value)> load) {
  SmallVector<Value> amax = e.loop(
      e.cIndex(0), e.cIndex(blockSize), ValueRange{e.c32(0), e.cBool(false)},
      [&](Value j, ValueRange carried) -> SmallVector<Value> {
        auto [magnitude, finite] = e.magnitudeOf(load(j));
        return {e.select(finite, e.maxui(carried[0], magnitude), carried[0]),
                arith::OrIOp::create(
                    e.b, carried[1],
                    arith::XOrIOp::create(e.b, finite, e.cBool(true)))};
      });
  return {amax[0], amax[1]};
}

/// `encodeAt(j)` for every element of a block, handed to `storeCodes`
/// `group` at a time (group 1: one loop over the elements).
static void encodeBlock(QuantizationEmitter &e, int64_t blockSize,
                        int64_t group, function_ref<Value(Value)> encodeAt,
                        QuantizationEmitter::StoreCodes storeCodes) {
  if (group == 1) {
    e.loop(e.cIndex(0), e.cIndex(blockSize), [&](Value j) {
      Value code = encodeAt(j);
      storeCodes(j, code);
    });
    return;
  }
  e.loop(e.cIndex(0), e.cIndex(blockSize / group), [&](Value g) {
    Value first = e.mulIndex(g, e.cIndex(group));
    SmallVector<Value> codes;
    for (int64_t q = 0; q < group; ++q)
      codes.push_back(encodeAt(e.addIndex(first, e.cIndex(q))));
    storeCodes(first, codes);
  });
}

void QuantizationEmitter::quantizeMXBlock(
    int64_t blockSize, const FormatConstants &element, ScaleRule rule,
    Rounding rounding, function_ref<Value(Value)> load,
    function_ref<Value(Value)> randomBitsAt, int64_t group,
    StoreCodes storeCodes, function_ref<void(Value)> storeScale) {
  auto [amaxBits, nonFiniteBlock] = blockAmax(*this, blockSize, load);
  Value nonFinite = nonFiniteBlock;
  Value exponent = sharedExponent(amaxBits, rule, element);
  storeScale(select(nonFinite, c32(0xFF), add(exponent, c32(127))));
  encodeBlock(*this, blockSize, group, [&](Value j) {
    Value bits = rounding == Rounding::Stochastic ? randomBitsAt(j) : Value();
    Value code = encode(load(j), exponent, element, rounding, bits);
    return select(nonFinite, c32(0), code);
  }, storeCodes);
}

void QuantizationEmitter::quantizeNVFP4Block(
    int64_t blockSize, const FormatConstants &element, ScaleRule rule,
    Rounding rounding, Value tensorScale, function_ref<Value(Value)> load,
    function_ref<Value(Value)> randomBitsAt, int64_t group,
    StoreCodes storeCodes, function_ref<void(Value)> storeScale) {
  static const FormatConstants e4m3 =
      constantsOf(numerics::ElementFormat::E4M3);
  auto [amaxBits, nonFiniteBlock] = blockAmax(*this, blockSize, load);
  Value nonFinite = nonFiniteBlock;
  Value amaxBlock = bitcast(amaxBits, f32());
  Value scaleValue;
  if (rule == ScaleRule::Torchao) {
    // (amax / max) / tensorScale, clamped to [2^-6, 448] (finite: the
    // tensor scale is never 0).
    Value quotient =
        divf(divf(amaxBlock, cF32(element.maxFinite)), tensorScale);
    Value low = cF32(0x1p-6f), high = cF32(448.0f);
    Value raised =
        select(cmpf(CmpFPredicate::OLT, quotient, low), low, quotient);
    scaleValue =
        select(cmpf(CmpFPredicate::OGT, raised, high), high, raised);
  } else {
    assert(rule == ScaleRule::Nearest && "an e8m0 rule on an NVFP4 block");
    scaleValue = divf(amaxBlock, mulf(tensorScale, cF32(element.maxFinite)));
  }
  Value scaleCode =
      encode(scaleValue, c32(0), e4m3, Rounding::NearestEven, {});
  Value decodedScale = mulf(decode(scaleCode, e4m3), tensorScale);
  Value scaleIsZero = cmpf(CmpFPredicate::OEQ, decodedScale, cF32(0.0f));
  storeScale(select(nonFinite, c32(e4m3.nanCode), scaleCode));
  encodeBlock(*this, blockSize, group, [&](Value j) {
    Value x = load(j);
    Value signedZero =
        shl(shrui(bitcast(x, i32()), c32(31)), c32(element.bits - 1));
    Value bits = rounding == Rounding::Stochastic ? randomBitsAt(j) : Value();
    Value code = encode(divf(x, decodedScale), c32(0), element, rounding, bits);
    code = select(scaleIsZero, signedZero, code);
    return select(nonFinite, c32(0), code);
  }, storeCodes);
}

void QuantizationEmitter::hadamardButterflies(Value work, int64_t blockSize) {
  namespace memref = mlir::memref;
  for (int64_t h = 1; h < blockSize; h *= 2) {
    const int64_t log2h = llvm::Log2_64(h);
    loop(cIndex(0), cIndex(blockSize / 2), [&](Value pair) {
      // Constant indices where the loop unrolls.
      auto index = [&](auto op, Value x, int64_t y) -> Value {
        using Op = decltype(op);
        return unrollsLoops ? b.createOrFold<Op>(x, cIndex(y))
                            : Op::create(b, x, cIndex(y));
      };
      Value high = index(arith::ShLIOp(), index(arith::ShRUIOp(), pair, log2h),
                         log2h + 1);
      Value lo = addIndex(high, index(arith::AndIOp(), pair, h - 1));
      Value hi = addIndex(lo, cIndex(h));
      Value x = memref::LoadOp::create(b, work, lo);
      Value y = memref::LoadOp::create(b, work, hi);
      memref::StoreOp::create(b, addf(x, y), work, lo);
      memref::StoreOp::create(b, subf(x, y), work, hi);
    });
  }
}

void QuantizationEmitter::hadamardSigns(Value signs, int64_t blockSize,
                                        Value seed, Value step) {
  Value tensorId = c32(kRotationSignsTensorId);
  loop(cIndex(0), cIndex(blockSize), [&](Value j) {
    Value bits = randomBits(seed, step, tensorId, toI64(j));
    Value negative = cmp(CmpIPredicate::ne, bitAnd(bits, c32(1)), c32(0));
    mlir::memref::StoreOp::create(b, select(negative, cF32(-1.0f), cF32(1.0f)),
                                  signs, j);
  });
}

Value QuantizationEmitter::bf16Pair(Value low, Value high) {
  const FormatConstants bf16 = constantsOf(numerics::ElementFormat::BF16);
  Value codes[2];
  for (auto [i, x] : llvm::enumerate(std::array<Value, 2>{low, high}))
    codes[i] = encode(x, c32(0), bf16, Rounding::NearestEven, c32(0));
  return bitOr(bitAnd(codes[0], c32(0xFFFF)), shl(codes[1], c32(16)));
}
