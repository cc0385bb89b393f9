//===- GpuKernelBody.h - A GPU kernel's body under construction -*- C++ -*-===//
//
// The helpers every kernel of the GPU library builds with (GpuStepKernels,
// AttentionKernelPlan): gpu/arith/memref/scf ops only, the same for every
// chip, so a bundle needs no device library: an fp64 log series, sqrt by
// Newton's iteration, block reductions through workgroup memory, lane
// shuffles (the CPU's fastExp, op for op, is QuantizationEmitter's).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_GPUKERNELBODY_H
#define TETRA_LOWERING_CONVERSION_GPUKERNELBODY_H

#include "lowering/Conversion/QuantizationEmitter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

namespace tetra::conversion {

namespace gpu = mlir::gpu;
namespace memref = mlir::memref;

/// exp(m - largest) widened to fp64, exactly 1 where m is the largest (-inf
/// too): the factor that rescales a sum of fastExp(x - m) to one of
/// fastExp(x - largest), where partial log-sum-exps merge (a GEMM's loss
/// parts, and the cross-entropy forward's reduction of them).
inline Value rescaleToLargest(QuantizationEmitter &e, Value m, Value largest) {
  Type f64 = e.b.getF64Type();
  return e.select(
      e.cmpf(arith::CmpFPredicate::OEQ, m, largest),
      arith::ConstantOp::create(e.b, e.b.getF64FloatAttr(1.0)),
      arith::ExtFOp::create(e.b, f64, e.fastExp(e.subf(m, largest))));
}

/// sum_d a[d] * b[d] in the CPU's order (runtime/kernels/VectorMath.h
/// dot): eight running sums over d in steps of 8, combined as a tree, then
/// the remaining terms in order.
inline Value dotInLanes(QuantizationEmitter &e, llvm::ArrayRef<Value> a,
                        llvm::ArrayRef<Value> b) {
  llvm::SmallVector<Value> acc(8, e.cF32(0.0f));
  size_t d = 0;
  for (; d + 8 <= a.size(); d += 8)
    for (size_t lane = 0; lane < 8; ++lane)
      acc[lane] = e.addf(acc[lane], e.mulf(a[d + lane], b[d + lane]));
  Value sum = e.addf(e.addf(e.addf(acc[0], acc[1]), e.addf(acc[2], acc[3])),
                     e.addf(e.addf(acc[4], acc[5]), e.addf(acc[6], acc[7])));
  for (; d < a.size(); ++d)
    sum = e.addf(sum, e.mulf(a[d], b[d]));
  return sum;
}

/// x of the lane whose index is this lane's xor `mask` (within `width`).
inline Value shuffleXor(QuantizationEmitter &e, Value x, int32_t mask,
                        int32_t width) {
  return gpu::ShuffleOp::create(e.b, x, mask, width, gpu::ShuffleMode::XOR)
      .getShuffleResult();
}
/// The same for an f64, as its two 32-bit halves.
inline Value shuffleXorF64(QuantizationEmitter &e, Value x, int32_t mask,
                           int32_t width) {
  Type i64 = e.b.getI64Type();
  Value bits = e.bitcast(x, i64);
  Value low = shuffleXor(e, e.trunc(bits, e.i32()), mask, width);
  Value high = shuffleXor(
      e, e.trunc(arith::ShRUIOp::create(e.b, bits, e.c64(32)), e.i32()), mask,
      width);
  Value joined = arith::OrIOp::create(
      e.b, arith::ShLIOp::create(e.b, e.zext(high, i64), e.c64(32)),
      e.zext(low, i64));
  return e.bitcast(joined, e.b.getF64Type());
}

/// A kernel function's body under construction, with the helpers every
/// library kernel uses.
struct Body {
  gpu::GPUFuncOp func;
  ImplicitLocOpBuilder b;
  QuantizationEmitter e;

  explicit Body(gpu::GPUFuncOp func)
      : func(func), b(func.getLoc(), func.getContext()), e(b) {
    b.setInsertionPointToStart(&func.getBody().front());
  }
  void finish() { gpu::ReturnOp::create(b); }

  Value arg(unsigned i) { return func.getArgument(i); }
  Value thread() { return gpu::ThreadIdOp::create(b, gpu::Dimension::x); }
  Value block(gpu::Dimension d = gpu::Dimension::x) {
    return gpu::BlockIdOp::create(b, d);
  }
  /// blockIdx.x * threads + threadIdx.x.
  Value global(int64_t threads) {
    return e.addIndex(e.mulIndex(block(), e.cIndex(threads)), thread());
  }

  Value load(Value memory, Value index) {
    return memref::LoadOp::create(b, memory, ValueRange{index});
  }
  void store(Value value, Value memory, Value index) {
    memref::StoreOp::create(b, value, memory, ValueRange{index});
  }
  Value index(Value integer) {
    return arith::IndexCastOp::create(b, b.getIndexType(), integer);
  }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, CmpIPredicate::ult, x, y);
  }
  /// lo <= x < hi, unsigned.
  Value within(Value x, Value lo, Value hi) {
    return e.bitAnd(arith::CmpIOp::create(b, CmpIPredicate::uge, x, lo),
                    ult(x, hi));
  }
  Value cF64(double value) {
    return arith::ConstantOp::create(b, b.getF64FloatAttr(value));
  }
  Value toF64(Value x) { return arith::ExtFOp::create(b, b.getF64Type(), x); }
  Value toF32(Value x) {
    return arith::TruncFOp::create(b, b.getF32Type(), x);
  }
  /// sqrt(x) with no division and no device library (GPU conversions turn
  /// llvm.sqrt into device-library calls, which a bundle cannot make): 1/sqrt
  /// by Newton's iteration in fp64 from the halved exponent (four steps take
  /// its 3.4 % first error below 1e-15), times x. An f32 x gets the f32
  /// neighbour of that root whose rounding interval holds sqrt(x), decided
  /// exactly (a midpoint of two f32 values squares exactly in fp64): the
  /// correctly rounded root, as the CPU's std::sqrt. 0 for 0 (either sign),
  /// NaN below it; Inf and NaN stay.
  Value sqrt(Value x) {
    const bool single = x.getType().isF32();
    Value wide = single ? toF64(x) : x;
    Type i64 = b.getI64Type();
    Value bits = e.bitcast(wide, i64);
    Value y = e.bitcast(
        arith::SubIOp::create(b, e.c64(0x5FE6EB50C7B537A9ll),
                              arith::ShRUIOp::create(b, bits, e.c64(1))),
        b.getF64Type());
    Value half = e.mulf(cF64(0.5), wide);
    for (int step = 0; step < 4; ++step)
      y = e.mulf(y, e.subf(cF64(1.5), e.mulf(half, e.mulf(y, y))));
    Value y64 = e.mulf(wide, y);
    // One Newton step on the root itself, r + (x - r^2) / 2r with 1/r = y:
    // the fp64 root within an ulp or two. (The f32 result below was checked
    // against std::sqrt for every positive finite f32, with and without the
    // steps fused into fma: no difference.)
    y64 = e.addf(y64, e.mulf(e.mulf(cF64(0.5), y),
                             e.subf(wide, e.mulf(y64, y64))));
    Value root = y64;
    if (single) {
      Value r = toF32(y64);
      Value rBits = e.bitcast(r, e.i32());
      Value up = e.bitcast(e.add(rBits, e.c32(1)), e.f32());
      Value down = e.bitcast(e.sub(rBits, e.c32(1)), e.f32());
      Value r64 = toF64(r);
      Value upper = e.mulf(cF64(0.5), e.addf(r64, toF64(up)));
      Value lower = e.mulf(cF64(0.5), e.addf(r64, toF64(down)));
      r = e.select(e.cmpf(CmpFPredicate::OLT, e.mulf(upper, upper), wide), up,
                   e.select(e.cmpf(CmpFPredicate::OGT, e.mulf(lower, lower),
                                   wide),
                            down, r));
      root = toF64(r);
    }
    Value positive = e.cmpf(CmpFPredicate::OGT, wide, cF64(0.0));
    Value finite = e.cmpf(CmpFPredicate::OLT, wide, cF64(INFINITY));
    root = e.select(
        e.bitAnd(positive, finite), root,
        e.select(e.cmpf(CmpFPredicate::OEQ, wide, cF64(0.0)), wide,
                 e.select(e.cmpf(CmpFPredicate::OEQ, wide, cF64(INFINITY)),
                          wide, cF64(NAN))));
    return single ? toF32(root) : root;
  }

  /// if (condition) then();
  void ifThen(Value condition, function_ref<void()> then) {
    e.ifThen(condition, then);
  }

  /// condition ? then() : otherwise, as a branch: then() runs only where the
  /// condition holds (a block-uniform condition: work the other blocks skip).
  SmallVector<Value> ifElse(Value condition,
                            function_ref<SmallVector<Value>()> then,
                            ValueRange otherwise) {
    auto op = scf::IfOp::create(b, mlir::TypeRange(otherwise), condition,
                                /*addThenBlock=*/true, /*addElseBlock=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    scf::YieldOp::create(b, then());
    b.setInsertionPointToStart(op.elseBlock());
    scf::YieldOp::create(b, otherwise);
    return SmallVector<Value>(op.getResults());
  }

  /// log(x) in fp64 for a positive normal x: x = m 2^k with m in
  /// [sqrt(1/2), sqrt(2)), log m = 2 atanh((m - 1) / (m + 1)) by its series
  /// (|s| < 0.172: eleven terms reach fp64's precision).
  Value logF64(Value x) {
    Type i64 = b.getI64Type();
    Value bits = e.bitcast(x, i64);
    Value k = arith::SubIOp::create(
        b,
        arith::AndIOp::create(b, arith::ShRUIOp::create(b, bits, e.c64(52)),
                              e.c64(0x7FF)),
        e.c64(1023));
    Value m = e.bitcast(
        arith::OrIOp::create(b,
                             arith::AndIOp::create(b, bits,
                                                   e.c64(0x000FFFFFFFFFFFFFll)),
                             e.c64(0x3FF0000000000000ll)),
        b.getF64Type());
    Value large = e.cmpf(CmpFPredicate::OGT, m, cF64(std::sqrt(2.0)));
    m = e.select(large, e.mulf(m, cF64(0.5)), m);
    k = e.select(large, arith::AddIOp::create(b, k, e.c64(1)), k);
    Value s = e.divf(e.subf(m, cF64(1.0)), e.addf(m, cF64(1.0)));
    Value s2 = e.mulf(s, s);
    Value t = cF64(1.0 / 23.0);
    for (int odd = 21; odd >= 1; odd -= 2)
      t = e.addf(e.mulf(t, s2), cF64(1.0 / odd));
    Value kf = arith::SIToFPOp::create(b, b.getF64Type(), k);
    return e.addf(e.mulf(kf, cF64(std::log(2.0))),
                  e.mulf(e.mulf(cF64(2.0), s), t));
  }

  /// base^n in fp64 for an i64 n >= 0, by squaring.
  Value powF64(Value base, Value n) {
    SmallVector<Value> result = e.loop(
        e.cIndex(0), e.cIndex(63), ValueRange{cF64(1.0), base},
        [&](Value bit, ValueRange carried) -> SmallVector<Value> {
          Value shift = arith::IndexCastOp::create(b, b.getI64Type(), bit);
          Value set = arith::CmpIOp::create(
              b, CmpIPredicate::ne,
              arith::AndIOp::create(
                  b, arith::ShRUIOp::create(b, n, shift), e.c64(1)),
              e.c64(0));
          return {e.select(set, e.mulf(carried[0], carried[1]), carried[0]),
                  e.mulf(carried[1], carried[1])};
        });
    return result[0];
  }

  /// for (i = begin; i < end; i += stride) with loop-carried values
  /// (`each` returns the next ones; none: a plain loop): a block's threads
  /// striding over a row.
  SmallVector<Value>
  strided(Value begin, Value end, int64_t stride, ValueRange init,
          function_ref<SmallVector<Value>(Value, ValueRange)> each) {
    auto loop = scf::ForOp::create(b, begin, end, e.cIndex(stride), init);
    OpBuilder::InsertionGuard guard(b);
    if (init.empty()) { // the loop has its terminator already
      b.setInsertionPoint(loop.getBody()->getTerminator());
      each(loop.getInductionVar(), {});
    } else {
      b.setInsertionPointToEnd(loop.getBody());
      scf::YieldOp::create(
          b, each(loop.getInductionVar(), loop.getRegionIterArgs()));
    }
    return SmallVector<Value>(loop.getResults());
  }

  /// The block's threads' values combined in a fixed tree through
  /// `shared` (one slot per thread); every thread gets the result.
  Value reduce(Value x, Value shared, int64_t threads,
               function_ref<Value(Value, Value)> combine) {
    Value tid = thread();
    store(x, shared, tid);
    gpu::BarrierOp::create(b);
    for (int64_t half = threads / 2; half >= 1; half /= 2) {
      ifThen(ult(tid, e.cIndex(half)), [&] {
        store(combine(load(shared, tid),
                      load(shared, e.addIndex(tid, e.cIndex(half)))),
              shared, tid);
      });
      gpu::BarrierOp::create(b);
    }
    Value result = load(shared, e.cIndex(0));
    gpu::BarrierOp::create(b);
    return result;
  }
  /// The block's threads' i32 values summed up to and including each
  /// thread's (Hillis-Steele through `shared`, one slot per thread).
  Value inclusiveScan(Value x, Value shared, int64_t threads) {
    Value tid = thread();
    store(x, shared, tid);
    gpu::BarrierOp::create(b);
    for (int64_t d = 1; d < threads; d *= 2) {
      Value reaches = arith::CmpIOp::create(b, CmpIPredicate::uge, tid,
                                            e.cIndex(d));
      Value before =
          load(shared, e.select(reaches, e.subIndex(tid, e.cIndex(d)), tid));
      Value sum = e.add(load(shared, tid), e.select(reaches, before, e.c32(0)));
      gpu::BarrierOp::create(b);
      store(sum, shared, tid);
      gpu::BarrierOp::create(b);
    }
    return load(shared, tid);
  }
  /// A workgroup array of `count` elements (a static allocation), on an
  /// `align`-byte boundary where given.
  Value sharedArray(int64_t count, Type element, int64_t align = 0) {
    mlir::Attribute workgroup = gpu::AddressSpaceAttr::get(
        b.getContext(), gpu::AddressSpace::Workgroup);
    Value array = func.addWorkgroupAttribution(
        mlir::MemRefType::get({count}, element, nullptr, workgroup),
        func.getLoc());
    if (align > 0)
      func.setWorkgroupAttributionAttr(func.getNumWorkgroupAttributions() - 1,
                                       b.getStringAttr("llvm.align"),
                                       b.getI64IntegerAttr(align));
    return array;
  }
  /// Every thread of the block waits for the others' shared-memory writes.
  void barrier() { gpu::BarrierOp::create(b); }
  Value shuffleXorF64(Value x, int32_t mask, int32_t width) {
    return conversion::shuffleXorF64(e, x, mask, width);
  }
  Value shuffleXor(Value x, int32_t mask, int32_t width) {
    return conversion::shuffleXor(e, x, mask, width);
  }
};

} // namespace tetra::conversion

#endif // TETRA_LOWERING_CONVERSION_GPUKERNELBODY_H
