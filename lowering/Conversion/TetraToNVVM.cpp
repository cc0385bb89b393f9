//===- TetraToNVVM.cpp - sm_90a code for tetra GEMM kernels ---------------===//
//
// `--convert-tetra-to-nvvm{chip=sm_90a}`: every GEMM `tetra.kernel` becomes a
// `gpu.module` from the shared plan (GemmKernelPlan.h): its prologue
// launches (rotation and quantization, the same on every chip) and its GEMM
// launch, whose staged tiles the warps read with sm_90a's mma.sync:
//
//   block-scaled operands  each K chunk of 32 of a warp's 32 x 32 tile is
//                          eight mma.sync.m16n8k32 (2 x 4 tiles of 16 x 8)
//                          started from zero, E2M1 codes widened to E4M3
//                          bytes as they are staged (every E2M1 value is
//                          exact in E4M3), E4M3/E5M2 as they are; the
//                          chunk's scales apply to its sum in fp32 and the
//                          chunks accumulate in order. MX x MX: the two
//                          E8M0 scales exactly — one integer add and one
//                          fma where the thread's scale pairs are moderate,
//                          the scales' halves (scaleHalves) elsewhere — so
//                          MXFP4 x MXFP4 is the scaled_matmul contract bit
//                          for bit.
//                          With an NVFP4 operand the chunk is 16: each
//                          m16n8k32 sees one half of K, the other zeroed,
//                          and each side's factor is decodeE4M3(scale) x
//                          tensor scale (MX: 2^e), within the contract's
//                          error bound.
//   bf16 x bf16            mma.sync.m16n8k16.bf16 accumulating over all of
//                          K in fp32 (the contract's G = K), within bound.
//
// Do not chain K = 32 FP8 steps in the tensor-core accumulator: Hopper's
// FP8 accumulation keeps about 14 bits. The launch contract (grid, block,
// arguments) is recorded on each gpu.func (`tetra.launch`) for the
// bundle's manifest. A kernel the target cannot implement is an error
// naming the linear, the GEMM role and the target; nothing unsupported
// reaches LLVM (its NVPTX backend aborts on E2M1 conversions for sm_90a,
// which is why none are emitted: E2M1 codes are widened with integer
// arithmetic).
//
//===----------------------------------------------------------------------===//

#include "lowering/Conversion/Passes.h"

#include "dialect/TetraOps.h"
#include "lowering/Conversion/GemmKernelPlan.h"
#include "lowering/Conversion/QuantizationEmitter.h"
#include "lowering/NumericsOf.h"
#include "runtime/numerics/Hadamard.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace tetra {
#define GEN_PASS_DEF_CONVERTTETRATONVVM
#include "lowering/Conversion/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;

namespace {

/// sm_90a's matrix instructions on the plan's staged tiles: a warp's 32 x 32
/// tile as 2 x 4 mma.sync tiles of 16 x 8; each thread holds four results
/// of each (rows g, g + 8 and columns 2t, 2t + 1 of the tile, for lane
/// 4g + t).
class NVVMGemmLowering : public GemmKernelLowering {
public:
  NVVMGemmLowering(KernelOp kernel, StringRef chip, int64_t blockTile)
      : GemmKernelLowering(kernel, chip, /*lanes=*/32, blockTile) {}

private:
  static constexpr int64_t kTilesM = 2, kTilesN = 4;

  SmallVector<Value> initialAccumulators(QuantizationEmitter &e) override {
    return SmallVector<Value>(kTilesM * kTilesN * 4, e.cF32(0.0f));
  }
  SmallVector<Value> accumulateStep(QuantizationEmitter &e,
                                    const StagedStep &step,
                                    ValueRange accumulators) override;
  void storeAccumulators(
      QuantizationEmitter &e, const StagedStep &step, ValueRange accumulators,
      function_ref<void(Value, Value, Value)> store) override;
  Value stageWord(QuantizationEmitter &e, Value word,
                  const OperandPlan &operand) override;
  std::string instruction() override {
    return lhs.kind == OperandKind::BF16 ? "mma.sync.m16n8k16.bf16"
                                         : "mma.sync.m16n8k32." +
                                               mmaType(lhs) + "." +
                                               mmaType(rhs);
  }
  static std::string mmaType(const OperandPlan &operand) {
    return operand.quant.getFormat() == ElementFormat::E5M2 ? "e5m2" : "e4m3";
  }
  SmallVector<Value> accumulateBlockScaled(QuantizationEmitter &e,
                                           const StagedStep &step,
                                           ValueRange accumulators);
  SmallVector<Value> accumulateBF16(QuantizationEmitter &e,
                                    const StagedStep &step,
                                    ValueRange accumulators);
  /// The warp's A and B fragments of the K elements from k0 on, `perWord`
  /// of them a 32-bit register (g = lane / 4, t = lane % 4): A register r
  /// holds row g (+8 for odd r), K perWord·t (+4·perWord for r >= 2); B
  /// register r holds column g, K perWord·t (+4·perWord for r = 1).
  std::pair<SmallVector<std::array<Value, 4>>, SmallVector<std::array<Value, 2>>>
  loadFragments(QuantizationEmitter &e, const StagedStep &step, Value k0,
                Value g, Value t, int64_t perWord) {
    SmallVector<std::array<Value, 4>> a(kTilesM);
    SmallVector<std::array<Value, 2>> b(kTilesN);
    for (int64_t i = 0; i < kTilesM; ++i)
      for (int64_t r = 0; r < 4; ++r) {
        Value row = e.addIndex(step.warpRow,
                               e.addIndex(g, e.cIndex(16 * i + 8 * (r & 1))));
        Value kk = e.addIndex(k0, e.addIndex(e.mulIndex(t, e.cIndex(perWord)),
                                             e.cIndex(4 * perWord * (r >> 1))));
        a[i][r] = lhsWord(e, step, row, kk);
      }
    for (int64_t j = 0; j < kTilesN; ++j)
      for (int64_t r = 0; r < 2; ++r) {
        Value col = e.addIndex(step.warpCol, e.addIndex(g, e.cIndex(8 * j)));
        Value kk = e.addIndex(k0, e.addIndex(e.mulIndex(t, e.cIndex(perWord)),
                                             e.cIndex(4 * perWord * r)));
        b[j][r] = rhsWord(e, step, col, kk);
      }
    return {a, b};
  }
  /// `acc` plus each of the chunk's sums (`partials`, one per result of
  /// the thread) times its row's and column's scales (their codes, i32).
  SmallVector<Value> addScaled(QuantizationEmitter &e, const StagedStep &step,
                               ArrayRef<Value> partials, ArrayRef<Value> acc,
                               ArrayRef<Value> rowCode,
                               ArrayRef<Value> colCode);
  /// The row (column) inside the block's tile of the thread's result `r`
  /// (0..3) of mma tile (i, j).
  Value resultRow(QuantizationEmitter &e, const StagedStep &step, int64_t i,
                  int64_t r) {
    Value g = e.divIndex(step.lane, 4);
    return e.addIndex(step.warpRow,
                      e.addIndex(g, e.cIndex(16 * i + 8 * (r >> 1))));
  }
  Value resultCol(QuantizationEmitter &e, const StagedStep &step, int64_t j,
                  int64_t r) {
    Value t = arith::RemUIOp::create(e.b, step.lane, e.cIndex(4));
    return e.addIndex(step.warpCol, e.addIndex(e.mulIndex(t, e.cIndex(2)),
                                               e.cIndex(8 * j + (r & 1))));
  }
};

/// The halves of an E8M0 scale 2^a (code `code`, i32): 2^floor(a/2) and
/// 2^ceil(a/2), each an exact E8M0 value; NaN for the NaN code 0xFF. For
/// two MX scales, (A1·B1) and (A2·B2) are exact fp32 powers of two
/// (exponents in [-128, 127]) whose product is 2^(a+b), so a chunk's exact
/// sum times them, in that order, is exact whenever the result is a normal
/// fp32 and no product of dequantized values overflows — which is when the
/// scaled_matmul contract's per-element products are exact too.
std::pair<Value, Value> scaleHalves(QuantizationEmitter &e, Value code) {
  Value a = e.sub(code, e.c32(127));
  Value lower = arith::ShRSIOp::create(e.b, a, e.c32(1));
  Value upper = e.sub(a, lower);
  Value nan = e.cmp(CmpIPredicate::eq, code, e.c32(0xFF));
  auto power = [&](Value exponent) {
    return e.select(nan, e.cF32Bits(0x7FC00000),
                    e.decodeE8M0(e.add(exponent, e.c32(127))));
  };
  return {power(lower), power(upper)};
}

/// Four E2M1 codes (one per byte of `word`) widened to their E4M3 bytes
/// (exact), all four at once: magnitude m (3 bits) gives 0 for m = 0, 0x30
/// (0.5) for m = 1 and 0x30 + 4m for m >= 2 (1, 1.5, 2, 3, 4, 6); the sign
/// moves from bit 3 to bit 7. No carry crosses a byte.
Value widenE2M1(QuantizationEmitter &e, Value word) {
  Value m = e.bitAnd(word, e.c32(0x07070707));
  Value sign = e.shl(e.bitAnd(word, e.c32(0x08080808)), e.c32(4));
  // 0xFF in each byte whose magnitude is >= 2 (>= 1).
  auto atLeast = [&](int64_t bound) {
    Value bit = e.bitAnd(e.shrui(e.add(m, e.c32(0x01010101 * (8 - bound))),
                                 e.c32(3)),
                         e.c32(0x01010101));
    return e.mul(bit, e.c32(0xFF));
  };
  Value two = atLeast(2), one = atLeast(1);
  Value large = e.bitAnd(e.add(e.shl(m, e.c32(2)), e.c32(0x30303030)), two);
  Value half = e.bitAnd(e.c32(0x30303030),
                        e.bitAnd(one, e.bitXor(two, e.c32(-1))));
  return e.bitOr(e.bitOr(large, half), sign);
}

Value NVVMGemmLowering::stageWord(QuantizationEmitter &e, Value word,
                                  const OperandPlan &operand) {
  if (operand.quant.getFormat() != ElementFormat::E2M1)
    return word;
  return widenE2M1(e, word);
}

SmallVector<Value>
NVVMGemmLowering::accumulateStep(QuantizationEmitter &e,
                                 const StagedStep &step,
                                 ValueRange accumulators) {
  return lhs.kind == OperandKind::BF16
             ? accumulateBF16(e, step, accumulators)
             : accumulateBlockScaled(e, step, accumulators);
}

SmallVector<Value>
NVVMGemmLowering::accumulateBlockScaled(QuantizationEmitter &e,
                                        const StagedStep &step,
                                        ValueRange accumulators) {
  MLIRContext *context = kernel.getContext();
  Type f32 = e.f32();
  Type fragment =
      LLVM::LLVMStructType::getLiteral(context, {f32, f32, f32, f32});
  const std::string intrinsic = "llvm.nvvm.mma.m16n8k32.row.col.f32." +
                                mmaType(lhs) + "." + mmaType(rhs) + ".f32";
  Value g = e.divIndex(step.lane, 4);
  Value t = arith::RemUIOp::create(e.b, step.lane, e.cIndex(4));
  Value zeroF = e.cF32(0.0f), zeroWord = e.c32(0);
  const int64_t halves = tiling.chunk == 16 ? 2 : 1;

  SmallVector<Value> acc(accumulators);
  for (int64_t q = 0; q < tiling.stepK / 32; ++q) {
    auto fragments = loadFragments(e, step, e.cIndex(q * 32), g, t, 4);
    auto &a = fragments.first;
    auto &bw = fragments.second;
    for (int64_t h = 0; h < halves; ++h) {
      // With 16-element chunks, half h of K: the other half's registers 0.
      auto keep = [&](Value word, int64_t half) {
        return halves == 1 || half == h ? word : zeroWord;
      };
      // The scale codes of the thread's rows and columns for this chunk.
      auto blockOf = [&](const OperandPlan &operand) {
        return e.cIndex(operand.block() == 16 ? 2 * q + h : q);
      };
      SmallVector<Value> rowCode(kTilesM * 2), colCode(kTilesN * 2);
      for (int64_t i = 0; i < kTilesM; ++i)
        for (int64_t half = 0; half < 2; ++half)
          rowCode[2 * i + half] = lhsScaleCode(
              e, step, resultRow(e, step, i, 2 * half), blockOf(lhs));
      for (int64_t j = 0; j < kTilesN; ++j)
        for (int64_t c = 0; c < 2; ++c)
          colCode[2 * j + c] =
              rhsScaleCode(e, step, resultCol(e, step, j, c), blockOf(rhs));
      // The chunk's sums, all eight MMAs first.
      SmallVector<Value> partials;
      for (int64_t i = 0; i < kTilesM; ++i)
        for (int64_t j = 0; j < kTilesN; ++j) {
          SmallVector<Value> args = {keep(a[i][0], 0), keep(a[i][1], 0),
                                     keep(a[i][2], 1), keep(a[i][3], 1),
                                     keep(bw[j][0], 0), keep(bw[j][1], 1),
                                     zeroF, zeroF, zeroF, zeroF};
          Value d = LLVM::CallIntrinsicOp::create(
                        e.b, fragment, e.b.getStringAttr(intrinsic), args)
                        .getResult(0);
          for (int64_t r = 0; r < 4; ++r)
            partials.push_back(LLVM::ExtractValueOp::create(e.b, d, r));
        }
      acc = addScaled(e, step, partials, acc, rowCode, colCode);
    }
  }
  return acc;
}

SmallVector<Value> NVVMGemmLowering::addScaled(QuantizationEmitter &e,
                                               const StagedStep &step,
                                               ArrayRef<Value> partials,
                                               ArrayRef<Value> acc,
                                               ArrayRef<Value> rowCode,
                                               ArrayRef<Value> colCode) {
  // Each result r of mma tile (i, j), with its row's and column's index
  // among the thread's rows and columns.
  auto each = [&](function_ref<Value(Value, Value, int64_t, int64_t)> add) {
    SmallVector<Value> next(acc.size());
    for (int64_t i = 0; i < kTilesM; ++i)
      for (int64_t j = 0; j < kTilesN; ++j)
        for (int64_t r = 0; r < 4; ++r) {
          int64_t at = (i * kTilesN + j) * 4 + r;
          next[at] = add(partials[at], acc[at], 2 * i + (r >> 1),
                         2 * j + (r & 1));
        }
    return next;
  };
  auto fma = [&](Value x, Value y, Value z) -> Value {
    return math::FmaOp::create(e.b, x, y, z);
  };
  if (lhs.kind != OperandKind::MX || rhs.kind != OperandKind::MX) {
    // An NVFP4 side: decodeE4M3(code) x tensor scale (MX: 2^e), rounded.
    const FormatConstants e4m3 = constantsOf(numerics::ElementFormat::E4M3);
    auto factor = [&](const OperandPlan &operand, Value code,
                      Value tensorScale) -> Value {
      if (operand.kind == OperandKind::MX)
        return e.decodeE8M0(code);
      return e.mulf(e.decode(code, e4m3), tensorScale);
    };
    SmallVector<Value> rowFactor, colFactor;
    for (Value code : rowCode)
      rowFactor.push_back(factor(lhs, code, step.lhsTensorScale));
    for (Value code : colCode)
      colFactor.push_back(factor(rhs, code, step.rhsTensorScale));
    return each([&](Value partial, Value sum, int64_t row, int64_t col) {
      return fma(e.mulf(partial, rowFactor[row]), colFactor[col], sum);
    });
  }
  // MX x MX, exactly. Where every scale pair of the thread's results is
  // 2^s with s in [-90, 90] and none is NaN, 2^s is a normal fp32 built by
  // one integer add ((ca << 23) + ((cb - 127) << 23)), and every nonzero
  // sum times it is a normal fp32 (E5M2 sums lie in [2^-32, 2^37)): one
  // fma, exact product, the sum rounded once. Elsewhere the scale's halves
  // (scaleHalves), with the same result wherever both are exact.
  auto extreme = [&](ArrayRef<Value> codes, bool largest) {
    Value found = codes.front();
    for (Value code : codes.drop_front())
      found = largest ? e.maxsi(found, code) : e.minsi(found, code);
    return found;
  };
  Value maxRow = extreme(rowCode, true), maxCol = extreme(colCode, true);
  Value safe = e.cmp(CmpIPredicate::sge,
                     e.add(extreme(rowCode, false), extreme(colCode, false)),
                     e.c32(254 - 90));
  for (Value bound : {e.cmp(CmpIPredicate::sle, e.add(maxRow, maxCol),
                            e.c32(254 + 90)),
                      e.cmp(CmpIPredicate::sle, maxRow, e.c32(254)),
                      e.cmp(CmpIPredicate::sle, maxCol, e.c32(254))})
    safe = arith::AndIOp::create(e.b, safe, bound);
  SmallVector<Type> types(acc.size(), e.f32());
  auto branch = scf::IfOp::create(e.b, types, safe, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(e.b);
    e.b.setInsertionPointToStart(&branch.getThenRegion().front());
    SmallVector<Value> rowBits, colBits;
    for (Value code : rowCode)
      rowBits.push_back(e.shl(code, e.c32(23)));
    for (Value code : colCode)
      colBits.push_back(e.shl(e.sub(code, e.c32(127)), e.c32(23)));
    scf::YieldOp::create(
        e.b, each([&](Value partial, Value sum, int64_t row, int64_t col) {
          return fma(partial, e.bitcast(e.add(rowBits[row], colBits[col]), e.f32()),
                     sum);
        }));
    e.b.setInsertionPointToStart(&branch.getElseRegion().front());
    SmallVector<std::pair<Value, Value>> rowHalves, colHalves;
    for (Value code : rowCode)
      rowHalves.push_back(scaleHalves(e, code));
    for (Value code : colCode)
      colHalves.push_back(scaleHalves(e, code));
    scf::YieldOp::create(
        e.b, each([&](Value partial, Value sum, int64_t row, int64_t col) {
          auto [a1, a2] = rowHalves[row];
          auto [b1, b2] = colHalves[col];
          return fma(e.mulf(partial, e.mulf(a1, b1)), e.mulf(a2, b2), sum);
        }));
  }
  return SmallVector<Value>(branch.getResults());
}

SmallVector<Value> NVVMGemmLowering::accumulateBF16(QuantizationEmitter &e,
                                                    const StagedStep &step,
                                                    ValueRange accumulators) {
  MLIRContext *context = kernel.getContext();
  Type f32 = e.f32();
  Type fragment =
      LLVM::LLVMStructType::getLiteral(context, {f32, f32, f32, f32});
  Value g = e.divIndex(step.lane, 4);
  Value t = arith::RemUIOp::create(e.b, step.lane, e.cIndex(4));
  SmallVector<Value> acc(accumulators);
  for (int64_t q = 0; q < tiling.stepK / 16; ++q) {
    auto fragments = loadFragments(e, step, e.cIndex(q * 16), g, t, 2);
    auto &a = fragments.first;
    auto &bw = fragments.second;
    for (int64_t i = 0; i < kTilesM; ++i)
      for (int64_t j = 0; j < kTilesN; ++j) {
        Value *c = &acc[(i * kTilesN + j) * 4];
        SmallVector<Value> args = {a[i][0], a[i][1], a[i][2], a[i][3],
                                   bw[j][0], bw[j][1], c[0], c[1], c[2], c[3]};
        Value d = LLVM::CallIntrinsicOp::create(
                      e.b, fragment,
                      e.b.getStringAttr("llvm.nvvm.mma.m16n8k16.row.col.bf16"),
                      args)
                      .getResult(0);
        for (int64_t r = 0; r < 4; ++r)
          c[r] = LLVM::ExtractValueOp::create(e.b, d, r);
      }
  }
  return acc;
}

void NVVMGemmLowering::storeAccumulators(
    QuantizationEmitter &e, const StagedStep &step, ValueRange accumulators,
    function_ref<void(Value, Value, Value)> store) {
  for (int64_t i = 0; i < kTilesM; ++i)
    for (int64_t j = 0; j < kTilesN; ++j)
      for (int64_t r = 0; r < 4; ++r)
        store(accumulators[(i * kTilesN + j) * 4 + r],
              resultRow(e, step, i, r), resultCol(e, step, j, r));
}

class ConvertTetraToNVVM
    : public tetra::impl::ConvertTetraToNVVMBase<ConvertTetraToNVVM> {
public:
  using ConvertTetraToNVVMBase::ConvertTetraToNVVMBase;
  void runOnOperation() override;
};

void ConvertTetraToNVVM::runOnOperation() {
  ModuleOp module = getOperation();
  if (chip != "sm_90a") {
    module.emitError() << "convert-tetra-to-nvvm: chip '" << chip
                       << "' is not supported (sm_90a)";
    return signalPassFailure();
  }
  if (failed(lowerGemmKernels(module, [&](KernelOp kernel) {
        return NVVMGemmLowering(kernel, chip, blockTile).lower(module);
      })))
    return signalPassFailure();
}

} // namespace
