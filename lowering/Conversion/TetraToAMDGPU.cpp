//===- TetraToAMDGPU.cpp - gfx950 code for tetra GEMM kernels -------------===//
//
// `--convert-tetra-to-amdgpu{chip=gfx950}`: every GEMM `tetra.kernel`
// becomes a `gpu.module` from the same plan as sm_90a (GemmKernelPlan.h):
// the same prologue launches — rotation and quantization through the shared
// QuantizationEmitter, codes and E8M0 scales in the operands' own layout —
// the same block tiles staged in LDS one step ahead, and a wave of 64 lanes
// per 32 x 32 tile of the block's result whose instructions are gfx950's
// own:
//
//   MX, steps of 128  four `v_mfma_scale_f32_16x16x128_f8f6f4` per step
//                     (2 x 2 tiles of 16 x 16): lane l holds row (column)
//                     l % 16 and the 32 codes of K chunk l / 16 — one MX
//                     block, so one E8M0 scale per lane — and gets rows
//                     4·(l / 16) + v, column l % 16 of the result;
//   MX, steps of 64   one `v_mfma_scale_f32_32x32x64_f8f6f4`: lane l holds
//                     row (column) l % 32 and K chunk l / 32, and gets rows
//                     8·(v / 4) + 4·(l / 32) + v % 4, column l % 32; steps
//                     of 32 give the upper lanes zero codes;
//   bf16              `v_mfma_f32_32x32x16_bf16` per 16 of K, lane l holding
//                     row (column) l % 32 and K 8·(l / 32) .. + 7, the
//                     32 x 32 layout above, accumulating over all of K.
//
// The scaled MFMAs (`amdgpu.scaled_mfma`) take E2M1 as format 4 (cbsz:4
// blgp:4), E4M3 as 0 and E5M2 as 1; they apply both scales and accumulate
// in fp32. gfx950 has no MFMA with E4M3 scales on blocks of 16: NVFP4 is
// refused by name. E2M1 codes are staged packed two per byte, as the MFMA
// reads them (packsE2M1), and each lane's operand is one 16-byte LDS read;
// codes come from the shared emitter, not from v_cvt_scalef32_pk_fp4
// (whose rounding of ties, saturation and NaN could not be checked against
// the numerics library without an MI355X).
//
// There is no MI355X here: this code is checked by its ISA (the MFMAs with
// the right format codes, no scratch), its metadata and its shared plan with
// the sm_90a code, which runs on an H200. The fragment layouts above are
// AMD's documented ones; they have never been executed.
//
//===----------------------------------------------------------------------===//

#include "lowering/Conversion/Passes.h"

#include "dialect/TetraOps.h"
#include "lowering/Conversion/AttentionKernelPlan.h"
#include "lowering/Conversion/GemmKernelPlan.h"
#include "lowering/Conversion/QuantizationEmitter.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tetra {
#define GEN_PASS_DEF_CONVERTTETRATOAMDGPU
#include "lowering/Conversion/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;

namespace {

/// gfx950's matrix instructions on the plan's staged tiles.
class AMDGPUGemmLowering : public GemmKernelLowering {
public:
  AMDGPUGemmLowering(KernelOp kernel, StringRef chip, int64_t blockTile)
      : GemmKernelLowering(kernel, chip, /*lanes=*/64, blockTile) {}

private:
  LogicalResult checkTarget() override {
    for (const OperandPlan *operand : {&lhs, &rhs})
      if (operand->kind == OperandKind::NVFP4)
        return refuse(std::string(operand == &lhs ? "the left" : "the right") +
                      " operand is NVFP4: gfx950's scaled MFMA takes E8M0 "
                      "scales on blocks of 32, not E4M3 scales on blocks of "
                      "16");
    return success();
  }
  /// 16x16x128 tiles when K comes in steps of 128.
  bool smallTiles() const {
    return lhs.kind != OperandKind::BF16 && tiling.stepK == 128;
  }
  SmallVector<Value> initialAccumulators(QuantizationEmitter &e) override {
    auto zero = [&](int64_t size) -> Value {
      VectorType type = VectorType::get({size}, e.f32());
      return arith::ConstantOp::create(
          e.b, DenseElementsAttr::get(type, e.b.getF32FloatAttr(0.0f)));
    };
    if (smallTiles())
      return SmallVector<Value>(4, zero(4));
    return {zero(16)};
  }
  /// The exact pass's: the same vectors of i32.
  SmallVector<Value> exactAccumulators(QuantizationEmitter &e) override {
    SmallVector<Value> accumulators;
    for (Value zero : initialAccumulators(e)) {
      auto type = VectorType::get(cast<VectorType>(zero.getType()).getShape(),
                                  e.i32());
      accumulators.push_back(arith::ConstantOp::create(
          e.b, DenseElementsAttr::get(type, e.b.getI32IntegerAttr(0))));
    }
    return accumulators;
  }
  SmallVector<Value> accumulateStep(QuantizationEmitter &e,
                                    const StagedStep &step,
                                    ValueRange accumulators) override;
  void storeAccumulators(
      QuantizationEmitter &e, const StagedStep &step, ValueRange accumulators,
      function_ref<void(Value, Value, Value)> store) override;
  std::string instruction() override {
    if (lhs.kind == OperandKind::BF16)
      return "v_mfma_f32_32x32x16_bf16";
    return smallTiles() ? "v_mfma_scale_f32_16x16x128_f8f6f4"
                        : "v_mfma_scale_f32_32x32x64_f8f6f4";
  }
  /// E2M1 codes staged two per byte: the scaled MFMA reads them so.
  bool packsE2M1() const override { return true; }
  /// gfx950 (CDNA4) has 160 KB of LDS per CU, all of it addressable by one
  /// workgroup.
  int64_t sharedLimit() const override { return 160 * 1024; }
  /// An MI355X's compute units.
  int64_t multiprocessors() const override { return 256; }
  /// A lane's 32 codes of one MX block (K elements kk .. kk + 31 of a
  /// staged row) as the MFMA's operand vector: FP8 codes as they are, E2M1
  /// as nibbles (staged so, or packed here), the lowest element in the
  /// lowest bits; zero where `inside` is false.
  Value blockOperand(QuantizationEmitter &e, const StagedStep &step,
                     bool left, Value row, Value kk, Value inside);
  /// `words` i32 words of a staged row from K-element kk on, in one
  /// aligned vector load.
  Value stagedVector(QuantizationEmitter &e, const StagedStep &step, bool left,
                     Value row, Value kk, int64_t words);
};

/// The MFMA element type of an element format's codes.
Type mfmaElementType(MLIRContext *context, ElementFormat format) {
  switch (format) {
  case ElementFormat::E2M1:
    return Float4E2M1FNType::get(context);
  case ElementFormat::E4M3:
    return Float8E4M3FNType::get(context);
  default:
    return Float8E5M2Type::get(context);
  }
}

Value AMDGPUGemmLowering::stagedVector(QuantizationEmitter &e,
                                       const StagedStep &step, bool left,
                                       Value row, Value kk, int64_t words) {
  // 16-byte aligned: pitches, tile offsets and lane offsets are multiples
  // of 16 bytes, so these are ds_read_b128.
  return vector::LoadOp::create(
      e.b, VectorType::get({words}, e.i32()), step.words,
      ValueRange{stagedIndex(e, step, left ? 0 : 1, row, kk)},
      /*nontemporal=*/false, e.b.getI64IntegerAttr(16));
}

Value AMDGPUGemmLowering::blockOperand(QuantizationEmitter &e,
                                       const StagedStep &step, bool left,
                                       Value row, Value kk, Value inside) {
  const OperandPlan &operand = left ? lhs : rhs;
  const bool e2m1 = operand.quant.getFormat() == ElementFormat::E2M1;
  // FP8 codes as they are (8 words), E2M1 codes staged packed (4).
  Value words = stagedVector(e, step, left, row, kk, e2m1 ? 4 : 8);
  if (inside) {
    auto type = cast<VectorType>(words.getType());
    Value zero = arith::ConstantOp::create(
        e.b, DenseElementsAttr::get(type, e.b.getI32IntegerAttr(0)));
    words = e.select(inside, words, zero);
  }
  MLIRContext *context = kernel.getContext();
  return vector::BitCastOp::create(
      e.b,
      VectorType::get({32}, mfmaElementType(context, operand.quant.getFormat())),
      words);
}

SmallVector<Value>
AMDGPUGemmLowering::accumulateStep(QuantizationEmitter &e,
                                   const StagedStep &step,
                                   ValueRange accumulators) {
  MLIRContext *context = kernel.getContext();
  auto scale = [&](Value code) {
    return e.bitcast(e.trunc(code, e.i8()), Float8E8M0FNUType::get(context));
  };
  // The exact pass (step.exact): each MFMA from zero under the scales
  // 2^(code - ref) — its sum is then a quarter of the pair's integer sum
  // (numerics::exactInteger), exact in fp32 (below 2^21 units) — times 4
  // into the i32 accumulators. A fiber that does not sum exactly (ref -1)
  // takes scale 1: results the plan does not store.
  auto exactScale = [&](Value code, int side, Value at) {
    return scale(e.add(exactOffset(e, step, side, at, code), e.c32(127)));
  };
  auto scaledMfma = [&](Value &c, int64_t size, Value a, Value b, Value rowCode,
                        Value row, Value colCode, Value col) {
    if (!step.exact) {
      c = amdgpu::ScaledMFMAOp::create(e.b, c.getType(), size, size,
                                       size == 16 ? 128 : 64, a, b, c,
                                       scale(rowCode), scale(colCode), 0, 0);
      return;
    }
    auto type = VectorType::get(cast<VectorType>(c.getType()).getShape(),
                                e.f32());
    Value zero = arith::ConstantOp::create(
        e.b, DenseElementsAttr::get(type, e.b.getF32FloatAttr(0.0f)));
    Value sum = amdgpu::ScaledMFMAOp::create(
        e.b, type, size, size, size == 16 ? 128 : 64, a, b, zero,
        exactScale(rowCode, 0, row), exactScale(colCode, 1, col), 0, 0);
    Value four = arith::ConstantOp::create(
        e.b, DenseElementsAttr::get(type, e.b.getF32FloatAttr(4.0f)));
    c = arith::AddIOp::create(
        e.b, c,
        arith::FPToSIOp::create(e.b, c.getType(), e.mulf(sum, four)));
  };
  SmallVector<Value> acc(accumulators);
  if (lhs.kind == OperandKind::BF16) {
    Value r = arith::RemUIOp::create(e.b, step.lane, e.cIndex(32));
    Value half = e.divIndex(step.lane, 32);
    auto operand = [&](bool left, Value kk) {
      Value words = stagedVector(
          e, step, left, e.addIndex(left ? step.warpRow : step.warpCol, r), kk,
          4);
      return vector::BitCastOp::create(
          e.b, VectorType::get({8}, BFloat16Type::get(context)), words);
    };
    for (int64_t q = 0; q < tiling.stepK / 16; ++q) {
      Value kk = e.addIndex(e.cIndex(16 * q), e.mulIndex(half, e.cIndex(8)));
      acc[0] = amdgpu::MFMAOp::create(e.b, acc[0].getType(), 32, 32, 16, 1,
                                      operand(true, kk), operand(false, kk),
                                      acc[0]);
    }
    return acc;
  }
  if (smallTiles()) {
    Value r = arith::RemUIOp::create(e.b, step.lane, e.cIndex(16));
    Value group = e.divIndex(step.lane, 16);
    Value kk = e.mulIndex(group, e.cIndex(32));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        Value row = e.addIndex(step.warpRow, e.addIndex(r, e.cIndex(16 * i)));
        Value col = e.addIndex(step.warpCol, e.addIndex(r, e.cIndex(16 * j)));
        scaledMfma(acc[2 * i + j], 16,
                   blockOperand(e, step, true, row, kk, nullptr),
                   blockOperand(e, step, false, col, kk, nullptr),
                   lhsScaleCode(e, step, row, group), row,
                   rhsScaleCode(e, step, col, group), col);
      }
    return acc;
  }
  Value r = arith::RemUIOp::create(e.b, step.lane, e.cIndex(32));
  Value half = e.divIndex(step.lane, 32);
  Value row = e.addIndex(step.warpRow, r), col = e.addIndex(step.warpCol, r);
  for (int64_t q = 0; q < std::max<int64_t>(1, tiling.stepK / 64); ++q) {
    // A step of 32: the upper lanes give zero codes under the lower lanes'
    // scales, adding nothing (and NaN exactly where the lower half has it).
    Value inside = nullptr;
    Value blockInStep = e.addIndex(e.cIndex(2 * q), half);
    if (tiling.stepK == 32) {
      inside = arith::CmpIOp::create(e.b, CmpIPredicate::eq, half,
                                     e.cIndex(0));
      blockInStep = e.cIndex(0);
    }
    Value kk = e.mulIndex(blockInStep, e.cIndex(32));
    scaledMfma(acc[0], 32, blockOperand(e, step, true, row, kk, inside),
               blockOperand(e, step, false, col, kk, inside),
               lhsScaleCode(e, step, row, blockInStep), row,
               rhsScaleCode(e, step, col, blockInStep), col);
  }
  return acc;
}

void AMDGPUGemmLowering::storeAccumulators(
    QuantizationEmitter &e, const StagedStep &step, ValueRange carried,
    function_ref<void(Value, Value, Value)> store) {
  // Exact sums as the nearest fp32.
  SmallVector<Value> accumulators(carried);
  if (step.exact)
    for (Value &sum : accumulators)
      sum = arith::SIToFPOp::create(
          e.b,
          VectorType::get(cast<VectorType>(sum.getType()).getShape(), e.f32()),
          sum);
  if (smallTiles()) {
    Value r = arith::RemUIOp::create(e.b, step.lane, e.cIndex(16));
    Value group = e.divIndex(step.lane, 16);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t v = 0; v < 4; ++v) {
          Value row = e.addIndex(
              step.warpRow, e.addIndex(e.mulIndex(group, e.cIndex(4)),
                                       e.cIndex(16 * i + v)));
          Value col =
              e.addIndex(step.warpCol, e.addIndex(r, e.cIndex(16 * j)));
          store(vector::ExtractOp::create(e.b, accumulators[2 * i + j],
                                          ArrayRef<int64_t>{v}),
                row, col);
        }
    return;
  }
  Value r = arith::RemUIOp::create(e.b, step.lane, e.cIndex(32));
  Value half = e.divIndex(step.lane, 32);
  for (int64_t v = 0; v < 16; ++v) {
    Value row = e.addIndex(
        step.warpRow, e.addIndex(e.mulIndex(half, e.cIndex(4)),
                                 e.cIndex(8 * (v / 4) + v % 4)));
    store(vector::ExtractOp::create(e.b, accumulators[0], ArrayRef<int64_t>{v}),
          row, e.addIndex(step.warpCol, r));
  }
}

class ConvertTetraToAMDGPU
    : public tetra::impl::ConvertTetraToAMDGPUBase<ConvertTetraToAMDGPU> {
public:
  using ConvertTetraToAMDGPUBase::ConvertTetraToAMDGPUBase;
  void runOnOperation() override;
};

void ConvertTetraToAMDGPU::runOnOperation() {
  ModuleOp module = getOperation();
  if (chip != "gfx950") {
    module.emitError() << "convert-tetra-to-amdgpu: chip '" << chip
                       << "' is not supported (gfx950)";
    return signalPassFailure();
  }
  if (failed(lowerGemmKernels(module, [&](KernelOp kernel) {
        return AMDGPUGemmLowering(kernel, chip, blockTile).lower(module);
      })))
    return signalPassFailure();
}

} // namespace

//===----------------------------------------------------------------------===//
// Attention's matrix instruction (AttentionKernelPlan.h)
//===----------------------------------------------------------------------===//

namespace {

/// v_mfma_f32_16x16x4_f32 (exact fp32 products), lane l = i + 16 j holding
/// A's (i, j), B's (j, i) and the accumulators (4 j + r, i), r < 4.
class AMDGPUAttentionTile final : public AttentionMatrixTile {
public:
  int64_t lanes() const override { return 64; }
  int64_t tileN() const override { return 16; }
  int64_t tileK() const override { return 4; }
  int64_t aValues() const override { return 1; }
  int64_t bValues() const override { return 1; }
  int64_t cValues() const override { return 4; }
  std::pair<Value, Value> aAt(QuantizationEmitter &e, Value lane,
                              int64_t) const override {
    return {column(e, lane), e.divIndex(lane, 16)};
  }
  std::pair<Value, Value> bAt(QuantizationEmitter &e, Value lane,
                              int64_t) const override {
    return {e.divIndex(lane, 16), column(e, lane)};
  }
  std::pair<Value, Value> cAt(QuantizationEmitter &e, Value lane,
                              int64_t r) const override {
    return {e.addIndex(e.mulIndex(e.divIndex(lane, 16), e.cIndex(4)),
                       e.cIndex(r)),
            column(e, lane)};
  }
  int64_t rowSlots() const override { return 4; }
  int64_t rowSlot(int64_t r) const override { return r; }
  SmallVector<int32_t> rowPartners() const override { return {1, 2, 4, 8}; }
  int64_t sharedBytes() const override { return 64 * 1024; }
  /// v_exp_f32.
  Value exp2(QuantizationEmitter &e, Value x) const override {
    return LLVM::CallIntrinsicOp::create(
               e.b, e.f32(), e.b.getStringAttr("llvm.amdgcn.exp2.f32"),
               ValueRange{x})
        .getResult(0);
  }

  SmallVector<Value> multiply(QuantizationEmitter &e, ArrayRef<Value> a,
                              ArrayRef<Value> b,
                              ArrayRef<Value> c) const override {
    auto type = VectorType::get({4}, e.f32());
    Value acc = vector::FromElementsOp::create(e.b, type, c);
    Value d = amdgpu::MFMAOp::create(e.b, type, 16, 16, 4, 1, a[0], b[0], acc);
    SmallVector<Value> result;
    for (int64_t r = 0; r < 4; ++r)
      result.push_back(vector::ExtractOp::create(e.b, d, r));
    return result;
  }

private:
  static Value column(QuantizationEmitter &e, Value lane) {
    return arith::RemUIOp::create(e.b, lane, e.cIndex(16));
  }
};

} // namespace

std::unique_ptr<AttentionMatrixTile>
tetra::conversion::createAMDGPUAttentionTile() {
  return std::make_unique<AMDGPUAttentionTile>();
}
