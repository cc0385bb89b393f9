//===- TetraToCPU.cpp - CPU code for tetra kernels ------------------------===//
//
// `--convert-tetra-to-cpu`: every tetra.kernel becomes a function over
// memrefs (the kernel ABI, Passes.td) whose loops compute what
// runtime/numerics computes, bit for bit: shared exponents from amax's
// integer fields, element codes from the fp32 bits, Philox4x32-10 in i32/i64
// arithmetic, NVFP4's fixed order of fp32 operations, the Hadamard
// butterflies in their defined order, and the scaled matmul's chunked
// summation. The arithmetic itself comes from the shared
// QuantizationEmitter, which every target's conversion uses. Nothing here
// calls the numerics library at run time; the library only supplies
// compile-time constants (format parameters, 1/sqrt(B)) so that there is one
// definition of them.
//
//===----------------------------------------------------------------------===//

#include "lowering/Conversion/Passes.h"

#include "dialect/TetraOps.h"
#include "lowering/Conversion/QuantizationEmitter.h"
#include "lowering/NumericsOf.h"
#include "runtime/numerics/BlockQuantize.h"
#include "runtime/numerics/ScaleFolding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace tetra {
#define GEN_PASS_DEF_CONVERTTETRATOCPU
#include "lowering/Conversion/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;
using arith::CmpFPredicate;
using arith::CmpIPredicate;

namespace {

//===----------------------------------------------------------------------===//
// Buffers: how a kernel's tensors live in memory
//===----------------------------------------------------------------------===//

/// The memref element type a tensor element type is stored as (the kernel
/// ABI), or null if the CPU target cannot store it.
Type storageType(Type elementType) {
  MLIRContext *context = elementType.getContext();
  // f32, and the kernels' own scratch (i32 flags, f64 exact sums).
  if (elementType.isF32() || elementType.isF64() || elementType.isInteger(32))
    return elementType;
  if (elementType.isBF16())
    return IntegerType::get(context, 16);
  if (isa<Float4E2M1FNType, Float8E4M3FNType, Float8E5M2Type,
          Float8E8M0FNUType>(elementType))
    return IntegerType::get(context, 8);
  return {};
}

/// A tensor of the kernel, in memory: the memref and the tensor's element
/// type (which says how to read its storage).
struct Buffer {
  Value memref;
  Type elementType;
  /// The same memory as one dimension (or rank 0), for linear indexing.
  Value flat;
};

//===----------------------------------------------------------------------===//
// KernelLowering: one tetra.kernel into one function
//===----------------------------------------------------------------------===//

class KernelLowering {
public:
  KernelLowering(KernelOp kernel, ImplicitLocOpBuilder &builder)
      : kernel(kernel), b(builder), e(builder) {}

  /// Fills `function`'s entry block (arguments already there).
  LogicalResult lower(func::FuncOp function);

private:
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerRotate(RotateOp op);
  LogicalResult lowerQuantize(QuantizeOp op);
  LogicalResult lowerDequantize(DequantizeOp op);
  LogicalResult lowerScaledMatmul(ScaledMatmulOp op);
  LogicalResult lowerElementwise(Operation *op);

  Buffer makeBuffer(Value memref, Type elementType);
  /// The buffer for `result` of sizes `sizes`: the kernel's output if it is
  /// yielded, else a new allocation (freed at the end of the kernel).
  Buffer bufferFor(Value result, ArrayRef<Value> sizes);
  Buffer allocate(RankedTensorType type, ArrayRef<Value> sizes);
  SmallVector<Value> sizesOf(const Buffer &buffer);
  Value numElements(ArrayRef<Value> sizes);
  /// (outer, extent, inner) of `sizes` along `axis` (numerics' AxisView).
  std::array<Value, 3> axisView(ArrayRef<Value> sizes, int64_t axis);

  Value loadF32(const Buffer &buffer, Value index);
  void storeF32(const Buffer &buffer, Value index, Value value);
  Value loadCode(const Buffer &buffer, Value index);
  void storeCode(const Buffer &buffer, Value index, Value code);
  /// Dequantizes codes/scales (along `axis`) into `out`, element by element
  /// as numerics::dequantize does.
  void dequantizeInto(const Buffer &codes, const Buffer &scales,
                      std::optional<Buffer> tensorScale, int64_t axis,
                      OperandQuantAttr quant, const Buffer &out);
  void copy(const Buffer &from, const Buffer &to);

  KernelOp kernel;
  ImplicitLocOpBuilder &b;
  QuantizationEmitter e;
  DenseMap<Value, Buffer> buffers;
  DenseMap<Value, Value> scalars;
  DenseMap<Value, Value> outputs; // yielded value -> output memref
  /// Row-split kernels (kernelSplitsRows): which part of the result rows
  /// this call computes, of how many (index values); null otherwise.
  Value part, parts;
  SmallVector<Value> allocations;
};

Buffer KernelLowering::makeBuffer(Value memref, Type elementType) {
  auto type = cast<MemRefType>(memref.getType());
  Value flat = memref;
  if (type.getRank() > 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < type.getRank(); ++d)
      all.push_back(d);
    flat = memref::CollapseShapeOp::create(b, memref,
                                           ArrayRef<ReassociationIndices>{all});
  }
  return {memref, elementType, flat};
}

Buffer KernelLowering::allocate(RankedTensorType type, ArrayRef<Value> sizes) {
  auto memrefType =
      MemRefType::get(type.getShape(), storageType(type.getElementType()));
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynamicSizes.push_back(sizes[d]);
  Value memref = memref::AllocOp::create(b, memrefType, dynamicSizes);
  allocations.push_back(memref);
  return makeBuffer(memref, type.getElementType());
}

Buffer KernelLowering::bufferFor(Value result, ArrayRef<Value> sizes) {
  auto type = cast<RankedTensorType>(result.getType());
  auto output = outputs.find(result);
  Buffer buffer = output != outputs.end()
                      ? makeBuffer(output->second, type.getElementType())
                      : allocate(type, sizes);
  buffers[result] = buffer;
  return buffer;
}

SmallVector<Value> KernelLowering::sizesOf(const Buffer &buffer) {
  auto type = cast<MemRefType>(buffer.memref.getType());
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(type.isDynamicDim(d)
                        ? Value(memref::DimOp::create(b, buffer.memref, d))
                        : e.cIndex(type.getDimSize(d)));
  return sizes;
}

Value KernelLowering::numElements(ArrayRef<Value> sizes) {
  Value count = e.cIndex(1);
  for (Value size : sizes)
    count = e.mulIndex(count, size);
  return count;
}

std::array<Value, 3> KernelLowering::axisView(ArrayRef<Value> sizes,
                                              int64_t axis) {
  return {numElements(sizes.take_front(axis)), sizes[axis],
          numElements(sizes.drop_front(axis + 1))};
}

Value KernelLowering::loadF32(const Buffer &buffer, Value index) {
  Value stored = memref::LoadOp::create(b, buffer.flat, index);
  if (buffer.elementType.isF32())
    return stored;
  // bf16: the bits are the top half of the fp32's (numerics::decode).
  Value bits = e.shl(e.zext(stored, e.i32()), e.c32(16));
  return e.bitcast(bits, e.f32());
}

void KernelLowering::storeF32(const Buffer &buffer, Value index, Value value) {
  if (!buffer.elementType.isF32()) {
    // bf16: numerics' encoder, nearest even, canonical NaN.
    static const FormatConstants bf16 =
        constantsOf(numerics::ElementFormat::BF16);
    Value code = e.encode(value, e.c32(0), bf16, Rounding::NearestEven, {});
    value = e.trunc(code, e.i16());
  }
  memref::StoreOp::create(b, value, buffer.flat, index);
}

Value KernelLowering::loadCode(const Buffer &buffer, Value index) {
  return e.zext(memref::LoadOp::create(b, buffer.flat, index), e.i32());
}

void KernelLowering::storeCode(const Buffer &buffer, Value index, Value code) {
  memref::StoreOp::create(b, e.trunc(code, e.i8()), buffer.flat, index);
}

void KernelLowering::copy(const Buffer &from, const Buffer &to) {
  Value count = numElements(sizesOf(from));
  e.loop(e.cIndex(0), count, [&](Value index) {
    memref::StoreOp::create(b, memref::LoadOp::create(b, from.flat, index),
                            to.flat, index);
  });
}

//===----------------------------------------------------------------------===//
// tetra.rotate
//===----------------------------------------------------------------------===//

LogicalResult KernelLowering::lowerRotate(RotateOp op) {
  Buffer input = buffers.lookup(op.getInput());
  SmallVector<Value> sizes = sizesOf(input);
  Buffer output = bufferFor(op.getResult(), sizes);
  RotationAttr rotation = op.getRotation();
  if (rotation.isNone()) {
    copy(input, output);
    return success();
  }
  const int64_t blockSize = rotation.getBlockSize();
  // The constant numerics multiplies by: 1/sqrt(B) as an fp32.
  const float inverseSqrt = numerics::hadamardMatrix(blockSize)[0];
  const bool random = rotation.getKind() == RotationKind::RandomHadamard;
  const bool inverse = op.getInverse();

  // The random signs, one per position in the block, drawn once.
  Value signs;
  if (random) {
    signs = memref::AllocaOp::create(b, MemRefType::get({blockSize}, e.f32()));
    Value step = rotation.getSchedule() == SignSchedule::PerStep
                     ? e.trunc(scalars.lookup(op.getStep()), e.i32())
                     : e.c32(0);
    Value seed = e.c64(static_cast<int64_t>(rotation.getSeed()));
    e.hadamardSigns(signs, blockSize, seed, step);
  }
  Value work =
      memref::AllocaOp::create(b, MemRefType::get({blockSize}, e.f32()));

  std::array<Value, 3> view = axisView(sizes, op.getAxis());
  Value outer = view[0], extent = view[1], inner = view[2];
  Value blocks = e.divIndex(extent, blockSize);
  Value zero = e.cIndex(0);
  e.loop(zero, outer, [&](Value o) {
    e.loop(zero, blocks, [&](Value block) {
      e.loop(zero, inner, [&](Value i) {
        Value first = e.mulIndex(block, e.cIndex(blockSize));
        auto indexOf = [&](Value j) {
          Value row = e.addIndex(e.mulIndex(o, extent), e.addIndex(first, j));
          return e.addIndex(e.mulIndex(row, inner), i);
        };
        // Gather, times the signs for the forward random rotation.
        e.loop(zero, e.cIndex(blockSize), [&](Value j) {
          Value x = loadF32(input, indexOf(j));
          if (random && !inverse)
            x = e.mulf(x, memref::LoadOp::create(b, signs, j));
          memref::StoreOp::create(b, x, work, j);
        });
        e.hadamardButterflies(work, blockSize);
        // Scale by 1/sqrt(B), then the signs for the inverse; scatter.
        e.loop(zero, e.cIndex(blockSize), [&](Value j) {
          Value x =
              e.mulf(memref::LoadOp::create(b, work, j), e.cF32(inverseSqrt));
          if (random && inverse)
            x = e.mulf(x, memref::LoadOp::create(b, signs, j));
          storeF32(output, indexOf(j), x);
        });
      });
    });
  });
  return success();
}

//===----------------------------------------------------------------------===//
// tetra.quantize
//===----------------------------------------------------------------------===//

LogicalResult KernelLowering::lowerQuantize(QuantizeOp op) {
  OperandQuantAttr quant = op.getQuant();
  const FormatConstants element = constantsOf(numericsOf(quant.getFormat()));
  const bool nvfp4 =
      quant.getBlockScale().getScaleFormat() == ScaleFormat::E4M3;
  const int64_t blockSize = quant.getBlockSize();
  const int64_t axis = op.getAxis();
  const Rounding rounding = quant.getRounding();
  const bool stochastic = rounding == Rounding::Stochastic;

  Buffer input = buffers.lookup(op.getInput());
  SmallVector<Value> sizes = sizesOf(input);
  Buffer codes = bufferFor(op.getCodes(), sizes);
  SmallVector<Value> scaleSizes(sizes);
  scaleSizes[axis] = e.divIndex(sizes[axis], blockSize);
  Buffer scales = bufferFor(op.getScales(), scaleSizes);

  Value seed, step, tensorId;
  if (stochastic) {
    seed = scalars.lookup(op.getSeed());
    step = e.trunc(scalars.lookup(op.getStep()), e.i32());
    tensorId = e.c32(static_cast<uint32_t>(op.getTensorId()));
  }
  auto randomBitsAt = [&](Value index) -> Value {
    return stochastic ? e.randomBits(seed, step, tensorId, e.toI64(index))
                      : Value();
  };

  // NVFP4's per-tensor scale: amax over the finite elements / (448 * max).
  Value tensorScale;
  if (nvfp4) {
    Value zero = e.cIndex(0);
    Value amaxBits = e.loop(
        zero, numElements(sizes), ValueRange{e.c32(0)},
        [&](Value index, ValueRange carried) -> SmallVector<Value> {
          auto [magnitude, finite] = e.magnitudeOf(loadF32(input, index));
          return {e.select(finite, e.maxui(carried[0], magnitude), carried[0])};
        })[0];
    Value quotient = e.divf(e.bitcast(amaxBits, e.f32()),
                            e.cF32(448.0f * element.maxFinite));
    tensorScale = e.select(e.cmpf(CmpFPredicate::OEQ, quotient, e.cF32(0.0f)),
                           e.cF32(1.0f), quotient);
    Buffer tensorScaleBuffer = bufferFor(op.getTensorScale(), {});
    memref::StoreOp::create(b, tensorScale, tensorScaleBuffer.flat,
                            ValueRange{});
  }

  std::array<Value, 3> view = axisView(sizes, axis);
  Value outer = view[0], extent = view[1], inner = view[2];
  Value blocks = e.divIndex(extent, blockSize);
  Value zero = e.cIndex(0);
  Value blockEnd = e.cIndex(blockSize);
  e.loop(zero, outer, [&](Value o) {
    e.loop(zero, blocks, [&](Value block) {
      e.loop(zero, inner, [&](Value i) {
        Value first = e.mulIndex(block, blockEnd);
        auto indexOf = [&](Value j) {
          Value row = e.addIndex(e.mulIndex(o, extent), e.addIndex(first, j));
          return e.addIndex(e.mulIndex(row, inner), i);
        };
        Value scaleIndex = e.addIndex(
            e.mulIndex(e.addIndex(e.mulIndex(o, blocks), block), inner), i);
        auto load = [&](Value j) { return loadF32(input, indexOf(j)); };
        auto bitsAt = [&](Value j) { return randomBitsAt(indexOf(j)); };
        auto storeElement = [&](Value j, ArrayRef<Value> code) {
          storeCode(codes, indexOf(j), code[0]);
        };
        auto storeScale = [&](Value code) {
          storeCode(scales, scaleIndex, code);
        };
        if (nvfp4)
          e.quantizeNVFP4Block(blockSize, element,
                               quant.getBlockScale().getRule(), rounding,
                               tensorScale, load, bitsAt, /*group=*/1,
                               storeElement, storeScale);
        else
          e.quantizeMXBlock(blockSize, element,
                            quant.getBlockScale().getRule(), rounding, load,
                            bitsAt, /*group=*/1, storeElement, storeScale);
      });
    });
  });
  return success();
}

//===----------------------------------------------------------------------===//
// tetra.dequantize and tetra.scaled_matmul
//===----------------------------------------------------------------------===//

void KernelLowering::dequantizeInto(const Buffer &codes, const Buffer &scales,
                                    std::optional<Buffer> tensorScale,
                                    int64_t axis, OperandQuantAttr quant,
                                    const Buffer &out) {
  const FormatConstants element = constantsOf(numericsOf(quant.getFormat()));
  static const FormatConstants e4m3 =
      constantsOf(numerics::ElementFormat::E4M3);
  const int64_t blockSize = quant.getBlockSize();
  Value globalScale;
  if (tensorScale)
    globalScale = memref::LoadOp::create(b, tensorScale->flat, ValueRange{});

  SmallVector<Value> sizes = sizesOf(codes);
  std::array<Value, 3> view = axisView(sizes, axis);
  Value outer = view[0], extent = view[1], inner = view[2];
  Value blocks = e.divIndex(extent, blockSize);
  Value zero = e.cIndex(0);
  e.loop(zero, outer, [&](Value o) {
    e.loop(zero, extent, [&](Value position) {
      e.loop(zero, inner, [&](Value i) {
        Value index = e.addIndex(
            e.mulIndex(e.addIndex(e.mulIndex(o, extent), position), inner), i);
        Value scaleIndex =
            e.addIndex(e.mulIndex(e.addIndex(e.mulIndex(o, blocks),
                                             e.divIndex(position, blockSize)),
                                  inner),
                       i);
        Value value = e.decode(loadCode(codes, index), element);
        Value scaleCode = loadCode(scales, scaleIndex);
        if (globalScale)
          value = e.mulf(e.mulf(value, e.decode(scaleCode, e4m3)), globalScale);
        else
          value = e.mulf(value, e.decodeE8M0(scaleCode));
        storeF32(out, index, value);
      });
    });
  });
}

LogicalResult KernelLowering::lowerDequantize(DequantizeOp op) {
  Buffer codes = buffers.lookup(op.getCodes());
  Buffer out = bufferFor(op.getResult(), sizesOf(codes));
  std::optional<Buffer> tensorScale;
  if (op.getTensorScale())
    tensorScale = buffers.lookup(op.getTensorScale());
  dequantizeInto(codes, buffers.lookup(op.getScales()), tensorScale,
                 op.getAxis(), op.getQuant(), out);
  return success();
}

LogicalResult KernelLowering::lowerScaledMatmul(ScaledMatmulOp op) {
  // Dequantize each block-scaled operand into fp32 first.
  auto valuesOf = [&](Value operand, Value scales, Value tensorScale,
                      OperandQuantAttr quant, unsigned axis) -> Buffer {
    Buffer buffer = buffers.lookup(operand);
    if (!quant.getBlockScale())
      return buffer;
    auto type = cast<RankedTensorType>(operand.getType());
    Buffer values = allocate(type.clone(e.f32()), sizesOf(buffer));
    std::optional<Buffer> global;
    if (tensorScale)
      global = buffers.lookup(tensorScale);
    dequantizeInto(buffer, buffers.lookup(scales), global, axis, quant, values);
    return values;
  };
  Buffer lhs = valuesOf(op.getLhs(), op.getLhsScales(), op.getLhsTensorScale(),
                        op.getLhsQuant(), op.getLhsReductionDim());
  Buffer rhs = valuesOf(op.getRhs(), op.getRhsScales(), op.getRhsTensorScale(),
                        op.getRhsQuant(), op.getRhsReductionDim());

  SmallVector<Value> lhsSizes = sizesOf(lhs), rhsSizes = sizesOf(rhs);
  const bool transposeLhs = op.getTransposeLhs();
  const bool transposeRhs = op.getTransposeRhs();
  Value m = lhsSizes[transposeLhs ? 1 : 0];
  Value k = lhsSizes[transposeLhs ? 0 : 1];
  Value n = rhsSizes[transposeRhs ? 0 : 1];
  Buffer result = bufferFor(op.getResult(), {m, n});
  Value zero = e.cIndex(0);

  // The right operand as [K, N], so that the innermost loop runs along a
  // row of the result and a row of it: contiguous, and vectorizable.
  if (transposeRhs) {
    Buffer rows =
        allocate(RankedTensorType::get(
                     {ShapedType::kDynamic, ShapedType::kDynamic}, e.f32()),
                 {k, n});
    e.loop(zero, n, [&](Value column) {
      e.loop(zero, k, [&](Value kk) {
        Value value = memref::LoadOp::create(
            b, rhs.flat, e.addIndex(e.mulIndex(column, k), kk));
        memref::StoreOp::create(b, value, rows.flat,
                                e.addIndex(e.mulIndex(kk, n), column));
      });
    });
    rhs = rows;
  }

  // Chunks of G along K; without a block-scaled operand, one chunk of K
  // (no division, so K = 0 is fine too). Every result element is
  //   sum = (((0 + partial_0) + partial_1) + ...),
  //   partial_c = (((0 + a_0 b_0) + a_1 b_1) + ...) over chunk c in order,
  // in fp32: the loops below run over whole rows of the result at once but
  // keep, for each element, exactly that sequence of operations.
  int64_t chunkSize = op.getAccumulationChunk();
  const bool oneChunk = ShapedType::isDynamic(chunkSize);
  Value chunk = oneChunk ? k : e.cIndex(chunkSize);
  Value chunks = oneChunk ? e.cIndex(1) : e.divIndex(k, chunkSize);
  // Exact sums (MXFP4 x MXFP4: numerics/ScaleFolding.h): per row of the
  // lhs and column of the rhs whether its fiber sums exactly (1 or 0,
  // numerics::fiberSumsExactly over its E8M0 codes); a result whose row and
  // column both do is the chunks' sum in fp64 — exact for such a pair —
  // rounded once to fp32.
  auto mxfp4 = [](OperandQuantAttr quant) {
    return quant.getBlockScale() && quant.getFormat() == ElementFormat::E2M1 &&
           quant.getBlockScale().getScaleFormat() == ScaleFormat::E8M0 &&
           quant.getBlockSize() == 32;
  };
  const bool exactSums = mxfp4(op.getLhsQuant()) && mxfp4(op.getRhsQuant());
  auto exactFibers = [&](Value scales, unsigned axis, Value fibers) {
    Buffer codes = buffers.lookup(scales);
    const std::array<Value, 3> view = axisView(sizesOf(codes), axis);
    Value blocks = view[1], inner = view[2];
    Buffer flags = allocate(
        RankedTensorType::get({ShapedType::kDynamic}, e.i32()), {fibers});
    using namespace numerics;
    Value fits = e.cmp(CmpIPredicate::ule, k, e.cIndex(kExactMaxK));
    e.loop(zero, fibers, [&](Value fiber) {
      Value o = arith::DivUIOp::create(b, fiber, inner);
      Value i = arith::RemUIOp::create(b, fiber, inner);
      SmallVector<Value> range = e.loop(
          zero, blocks, {e.c32(0), e.c32(0xFF)},
          [&](Value block, ValueRange extremes) -> SmallVector<Value> {
            Value code = loadCode(
                codes,
                e.addIndex(e.mulIndex(e.addIndex(e.mulIndex(o, blocks), block),
                                      inner),
                           i));
            return {arith::MaxUIOp::create(b, extremes[0], code),
                    arith::MinUIOp::create(b, extremes[1], code)};
          });
      Value ok = e.cmp(CmpIPredicate::sge,
                       e.fiberReference(range[0], range[1], kExactSpread,
                                        kExactSpread),
                       e.c32(0));
      memref::StoreOp::create(b, e.zext(arith::AndIOp::create(b, ok, fits),
                                        e.i32()),
                              flags.flat, fiber);
    });
    return flags;
  };
  std::optional<Buffer> rowExact, colExact;
  if (exactSums) {
    rowExact = exactFibers(op.getLhsScales(), op.getLhsReductionDim(), m);
    colExact = exactFibers(op.getRhsScales(), op.getRhsReductionDim(), n);
  }
  // Rows go in groups of kRows (then one at a time for the rest), columns in
  // tiles of kColumns: for each group and tile, kRows partial rows of the
  // tile stay in L1 while the right operand's rows stream past, each of its
  // elements loaded once per group.
  constexpr int64_t kRows = 4, kColumns = 256, kLanes = 8;
  Buffer partial =
      allocate(RankedTensorType::get({kRows, kColumns}, e.f32()), {});
  // Exact sums: the chunks' sums in fp64, per element of the partial rows.
  std::optional<Buffer> wide;
  if (exactSums)
    wide = allocate(RankedTensorType::get({kRows, kColumns}, b.getF64Type()), {});
  auto rowsFrom = [&](Value firstRow, int64_t rows) {
    e.loop(
        zero, e.divIndex(e.addIndex(n, e.cIndex(kColumns - 1)), kColumns),
        [&](Value tile) {
          Value columnBegin = e.mulIndex(tile, e.cIndex(kColumns));
          Value columnEnd = arith::MinUIOp::create(
              b, e.addIndex(columnBegin, e.cIndex(kColumns)), n);
          SmallVector<Value> resultBase, partialBase;
          for (int64_t r = 0; r < rows; ++r) {
            resultBase.push_back(
                e.mulIndex(e.addIndex(firstRow, e.cIndex(r)), n));
            // Partial rows are indexed by the column itself: base -
            // columnBegin.
            partialBase.push_back(
                arith::SubIOp::create(b, e.cIndex(r * kColumns), columnBegin));
          }
          auto fill = [&](Value memref, ArrayRef<Value> bases) {
            e.loop(columnBegin, columnEnd, [&](Value column) {
              for (Value base : bases)
                memref::StoreOp::create(b, e.cF32(0.0f), memref,
                                        e.addIndex(base, column));
            });
          };
          fill(result.flat, resultBase);
          if (wide)
            e.loop(columnBegin, columnEnd, [&](Value column) {
              for (Value base : partialBase)
                memref::StoreOp::create(b, arith::ConstantOp::create(b, b.getF64FloatAttr(0.0)), wide->flat,
                                        e.addIndex(base, column));
            });
          e.loop(zero, chunks, [&](Value c) {
            fill(partial.flat, partialBase);
            Value first = e.mulIndex(c, chunk);
            e.loop(zero, chunk, [&](Value offset) {
              Value kk = e.addIndex(first, offset);
              SmallVector<Value> a;
              for (int64_t r = 0; r < rows; ++r) {
                Value row = e.addIndex(firstRow, e.cIndex(r));
                a.push_back(memref::LoadOp::create(
                    b, lhs.flat,
                    transposeLhs ? e.addIndex(e.mulIndex(kk, m), row)
                                 : e.addIndex(e.mulIndex(row, k), kk)));
              }
              Value rhsBase = e.mulIndex(kk, n);
              // kLanes columns at a time as vector ops (lane-wise IEEE
              // fp32: the scalar tail's operations), then the rest.
              auto vectorType = VectorType::get({kLanes}, e.f32());
              SmallVector<Value> aLanes;
              for (Value value : a)
                aLanes.push_back(
                    vector::BroadcastOp::create(b, vectorType, value));
              Value width = arith::SubIOp::create(b, columnEnd, columnBegin);
              Value vectorEnd =
                  e.addIndex(columnBegin, e.mulIndex(e.divIndex(width, kLanes),
                                                     e.cIndex(kLanes)));
              auto lanes = scf::ForOp::create(b, columnBegin, vectorEnd,
                                              e.cIndex(kLanes));
              {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPointToStart(lanes.getBody());
                Value column = lanes.getInductionVar();
                Value bValues = vector::LoadOp::create(
                    b, vectorType, rhs.flat,
                    ValueRange{e.addIndex(rhsBase, column)});
                for (int64_t r = 0; r < rows; ++r) {
                  Value at = e.addIndex(partialBase[r], column);
                  Value carried = vector::LoadOp::create(
                      b, vectorType, partial.flat, ValueRange{at});
                  vector::StoreOp::create(
                      b, e.addf(carried, e.mulf(aLanes[r], bValues)),
                      partial.flat, ValueRange{at});
                }
              }
              e.loop(vectorEnd, columnEnd, [&](Value column) {
                Value bValue = memref::LoadOp::create(
                    b, rhs.flat, e.addIndex(rhsBase, column));
                for (int64_t r = 0; r < rows; ++r) {
                  Value at = e.addIndex(partialBase[r], column);
                  Value carried = memref::LoadOp::create(b, partial.flat, at);
                  memref::StoreOp::create(b,
                                          e.addf(carried, e.mulf(a[r], bValue)),
                                          partial.flat, at);
                }
              });
            });
            e.loop(columnBegin, columnEnd, [&](Value column) {
              for (int64_t r = 0; r < rows; ++r) {
                Value at = e.addIndex(resultBase[r], column);
                Value sum = memref::LoadOp::create(b, result.flat, at);
                Value add = memref::LoadOp::create(
                    b, partial.flat, e.addIndex(partialBase[r], column));
                memref::StoreOp::create(b, e.addf(sum, add), result.flat, at);
                if (wide) {
                  Value wideAt = e.addIndex(partialBase[r], column);
                  Value carried = memref::LoadOp::create(b, wide->flat, wideAt);
                  memref::StoreOp::create(
                      b,
                      arith::AddFOp::create(
                          b, carried, arith::ExtFOp::create(b, b.getF64Type(), add)),
                      wide->flat, wideAt);
                }
              }
            });
          });
          if (!wide)
            return;
          // Exact pairs: the fp64 sum rounded once.
          e.loop(columnBegin, columnEnd, [&](Value column) {
            Value columnExact =
                memref::LoadOp::create(b, colExact->flat, column);
            for (int64_t r = 0; r < rows; ++r) {
              Value row = e.addIndex(firstRow, e.cIndex(r));
              Value both = e.cmp(
                  CmpIPredicate::ne,
                  arith::AndIOp::create(
                      b, memref::LoadOp::create(b, rowExact->flat, row),
                      columnExact),
                  e.c32(0));
              Value at = e.addIndex(resultBase[r], column);
              Value chunked = memref::LoadOp::create(b, result.flat, at);
              Value exact = arith::TruncFOp::create(
                  b, e.f32(),
                  memref::LoadOp::create(
                      b, wide->flat, e.addIndex(partialBase[r], column)));
              memref::StoreOp::create(b, e.select(both, exact, chunked),
                                      result.flat, at);
            }
          });
        });
  };
  // A row-split kernel's call computes the groups [part·G/parts,
  // (part+1)·G/parts), the last part also the rows after the groups.
  Value groups = e.divIndex(m, kRows);
  Value groupBegin = zero, groupEnd = groups;
  Value restBegin = e.mulIndex(groups, e.cIndex(kRows));
  if (part && outputs.count(op.getResult())) {
    auto share = [&](Value index) {
      return arith::DivUIOp::create(b, e.mulIndex(index, groups), parts);
    };
    groupBegin = share(part);
    groupEnd = share(e.addIndex(part, e.cIndex(1)));
    Value last = e.cmp(CmpIPredicate::eq, e.addIndex(part, e.cIndex(1)), parts);
    restBegin = e.select(last, restBegin, m);
  }
  e.loop(groupBegin, groupEnd, [&](Value group) {
    rowsFrom(e.mulIndex(group, e.cIndex(kRows)), kRows);
  });
  e.loop(restBegin, m, [&](Value row) { rowsFrom(row, 1); });
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise: bf16 casts and the model's elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult KernelLowering::lowerElementwise(Operation *op) {
  for (Value value : llvm::concat<Value>(op->getOperands(), op->getResults())) {
    Type element = cast<RankedTensorType>(value.getType()).getElementType();
    if (!element.isF32() && !element.isBF16())
      return op->emitOpError()
             << "on " << element
             << " tensors cannot be compiled for the CPU (f32 and bf16 only)";
  }
  if (auto truncate = dyn_cast<arith::TruncFOp>(op))
    if (truncate.getRoundingmodeAttr() &&
        *truncate.getRoundingmode() != arith::RoundingMode::to_nearest_even)
      return op->emitOpError("rounds other than to nearest even, which the "
                             "CPU target does not implement");

  SmallVector<Buffer> inputs;
  for (Value operand : op->getOperands())
    inputs.push_back(buffers.lookup(operand));
  SmallVector<Value> sizes = sizesOf(inputs.front());
  Buffer output = bufferFor(op->getResult(0), sizes);
  e.loop(e.cIndex(0), numElements(sizes), [&](Value index) {
    SmallVector<Value> x;
    for (const Buffer &input : inputs)
      x.push_back(loadF32(input, index));
    Value y;
    if (isa<arith::TruncFOp, arith::ExtFOp>(op))
      y = x[0]; // the rounding happens in storeF32
    else if (isa<AddOp>(op))
      y = e.addf(x[0], x[1]);
    else if (isa<SubOp>(op))
      y = e.subf(x[0], x[1]);
    else if (isa<MulOp>(op))
      y = e.mulf(x[0], x[1]);
    else if (auto scale = dyn_cast<ScaleOp>(op))
      y = e.mulf(x[0], e.cF32(static_cast<float>(
                           scale.getFactor().convertToDouble())));
    else if (isa<SiluGradOp>(op)) // the library's silu.backward, op for op
      y = e.siluGradient(x[0], x[1]);
    else // silu: x / (1 + exp(-x))
      y = e.divf(
          x[0], e.addf(e.cF32(1.0f),
                       math::ExpOp::create(b, arith::NegFOp::create(b, x[0]))));
    storeF32(output, index, y);
  });
  return success();
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

LogicalResult KernelLowering::lowerOp(Operation *op) {
  if (auto rotate = dyn_cast<RotateOp>(op))
    return lowerRotate(rotate);
  if (auto quantize = dyn_cast<QuantizeOp>(op))
    return lowerQuantize(quantize);
  if (auto dequantize = dyn_cast<DequantizeOp>(op))
    return lowerDequantize(dequantize);
  if (auto matmul = dyn_cast<ScaledMatmulOp>(op))
    return lowerScaledMatmul(matmul);
  if (isa<arith::TruncFOp, arith::ExtFOp, AddOp, SubOp, MulOp, ScaleOp, SiluOp,
          SiluGradOp>(op) &&
      isa<RankedTensorType>(op->getResult(0).getType()))
    return lowerElementwise(op);
  return op->emitOpError(
      "cannot be compiled for the CPU: kernels may hold tetra.rotate, "
      "tetra.quantize, tetra.dequantize, tetra.scaled_matmul, bf16 casts "
      "and elementwise ops");
}

LogicalResult KernelLowering::lower(func::FuncOp function) {
  Block &body = kernel.getBodyBlock();
  Block &entry = function.getBody().front();
  unsigned numInputs = body.getNumArguments();
  for (auto [argument, value] : llvm::zip(
           body.getArguments(), entry.getArguments().take_front(numInputs))) {
    if (auto type = dyn_cast<RankedTensorType>(argument.getType()))
      buffers[argument] = makeBuffer(value, type.getElementType());
    else
      scalars[argument] = value;
  }

  if (kernelSplitsRows(kernel)) {
    unsigned count = entry.getNumArguments();
    part = arith::IndexCastOp::create(b, b.getIndexType(),
                                      entry.getArgument(count - 2));
    parts = arith::IndexCastOp::create(b, b.getIndexType(),
                                       entry.getArgument(count - 1));
  }

  // Results computed by the kernel's own ops are written in place into the
  // outputs; anything else (an input, a value yielded twice) is copied.
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<std::pair<Value, Value>> copies;
  for (auto [value, output] :
       llvm::zip(yield.getValues(),
                 entry.getArguments().drop_front(numInputs).take_front(
                     yield.getNumOperands()))) {
    if (isa<BlockArgument>(value) || outputs.count(value))
      copies.emplace_back(value, output);
    else
      outputs[value] = output;
  }

  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() != 0)
      return op.emitOpError("with regions cannot be compiled for the CPU");
    if (failed(lowerOp(&op)))
      return failure();
  }
  for (auto [value, output] : copies) {
    Type element = cast<RankedTensorType>(value.getType()).getElementType();
    copy(buffers.lookup(value), makeBuffer(output, element));
  }
  for (Value allocation : allocations)
    memref::DeallocOp::create(b, allocation);
  func::ReturnOp::create(b);
  return success();
}

/// The kernel's function type under the ABI: inputs, then one memref per
/// result; tensors as memrefs of their storage type.
FailureOr<FunctionType> kernelFunctionType(KernelOp kernel) {
  SmallVector<Type> arguments;
  auto addTensor = [&](Type type, StringRef what) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return kernel.emitOpError() << what << " of type " << type
                                  << " cannot be passed to a CPU kernel";
    Type storage = storageType(tensor.getElementType());
    if (!storage)
      return kernel.emitOpError()
             << what << " of type " << type
             << " cannot be stored by the CPU target (f32, bf16, FP4/FP8 "
                "codes and scales only)";
    arguments.push_back(MemRefType::get(tensor.getShape(), storage));
    return success();
  };
  for (Type type : kernel.getInputs().getTypes()) {
    if (isa<IntegerType, IndexType>(type)) {
      arguments.push_back(type);
      continue;
    }
    if (failed(addTensor(type, "an input")))
      return failure();
  }
  for (Type type : kernel.getResultTypes())
    if (failed(addTensor(type, "a result")))
      return failure();
  if (kernelSplitsRows(kernel)) {
    // part, parts
    arguments.push_back(IntegerType::get(kernel.getContext(), 64));
    arguments.push_back(IntegerType::get(kernel.getContext(), 64));
  }
  return FunctionType::get(kernel.getContext(), arguments, {});
}

class ConvertTetraToCPU
    : public tetra::impl::ConvertTetraToCPUBase<ConvertTetraToCPU> {
public:
  void runOnOperation() override;
};

} // namespace

bool tetra::kernelSplitsRows(KernelOp kernel) {
  auto yield = cast<YieldOp>(kernel.getBodyBlock().getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  auto matmul = yield.getOperand(0).getDefiningOp<ScaledMatmulOp>();
  return matmul && matmul->getParentOp() == kernel.getOperation();
}

void ConvertTetraToCPU::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<KernelOp> kernels;
  module.walk([&](KernelOp kernel) { kernels.push_back(kernel); });

  llvm::StringSet<> names;
  SmallVector<Operation *> generated;
  for (KernelOp kernel : kernels) {
    if (!names.insert(kernel.getKernelName()).second) {
      kernel.emitOpError() << "has the name '" << kernel.getKernelName()
                           << "' of another kernel in the module";
      return signalPassFailure();
    }
    FailureOr<FunctionType> type = kernelFunctionType(kernel);
    if (failed(type))
      return signalPassFailure();
    ImplicitLocOpBuilder builder(kernel.getLoc(), module.getContext());
    builder.setInsertionPointToEnd(module.getBody());
    auto function =
        func::FuncOp::create(builder, kernel.getKernelName(), *type);
    function->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
    Block *entry = function.addEntryBlock();
    builder.setInsertionPointToStart(entry);
    KernelLowering lowering(kernel, builder);
    if (failed(lowering.lower(function)))
      return signalPassFailure();
    generated.push_back(function);
  }

  // What is left is the host side, which the runtime's schedule runs: the
  // kernel module holds the kernels only.
  llvm::SmallPtrSet<Operation *, 16> keep(generated.begin(), generated.end());
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (!keep.contains(&op))
      op.erase();
}
