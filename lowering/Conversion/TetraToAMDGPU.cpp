//===- TetraToAMDGPU.cpp - gfx950 code for tetra GEMM kernels -------------===//
//
// `--convert-tetra-to-amdgpu{chip=gfx950}`: every GEMM `tetra.kernel`
// becomes a `gpu.module` from the same plan as sm_90a (GemmKernelPlan.h):
// the same two operand launches — rotation and quantization through the
// shared QuantizationEmitter, codes and E8M0 scales in the operands' own
// layout — and a GEMM launch whose innermost instruction is gfx950's own:
//
//   NAME__gemm  one wave of 64 lanes per 32 x 32 tile of the result; K in
//               steps of 64 (the last step's upper lanes give zero codes when
//               K is an odd number of chunks). Lane l holds row (column)
//               l % 32 of A (B) and
//               the 32 elements of K chunk 2·step + l / 32 — one MX block,
//               so one E8M0 scale per lane — as vector<32 x E2M1/E4M3/E5M2>,
//               and `amdgpu.scaled_mfma 32x32x64` applies both scales and
//               accumulates into the tile's 16 f32 per lane (row
//               8·(v / 4) + 4·(l / 32) + v % 4, column l % 32): the
//               `v_mfma_scale_f32_32x32x64_f8f6f4` instruction, E2M1 as
//               format 4 (cbsz:4 blgp:4), E4M3 0, E5M2 1.
//
// There is no MI355X here: this code is checked by its ISA (the scaled
// MFMA with the right format codes, no scratch), its metadata and its
// shared plan with the sm_90a code, which runs on an H200. The fragment
// layout above is AMD's documented one for 32 x 32 MFMAs; it has never
// been executed.
//
//===----------------------------------------------------------------------===//

#include "lowering/Conversion/Passes.h"

#include "dialect/TetraOps.h"
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

/// gfx950's GEMM launch: one wave per 32 x 32 tile, scaled MFMA 32x32x64.
class AMDGPUGemmLowering : public GemmKernelLowering {
public:
  AMDGPUGemmLowering(KernelOp kernel, StringRef chip)
      : GemmKernelLowering(kernel, chip, {32, 32, 32}) {}

private:
  void buildGemm(OpBuilder &moduleBuilder) override;
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

void AMDGPUGemmLowering::buildGemm(OpBuilder &moduleBuilder) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context);
  const int64_t chunks = k / 32;
  gpu::GPUFuncOp func = createGemmFunction(moduleBuilder, {n / 32, m / 32, 1},
                                           {64, 1, 1});

  Block &entry = func.getBody().front();
  ImplicitLocOpBuilder b(matmul.getLoc(), context);
  b.setInsertionPointToStart(&entry);
  QuantizationEmitter e(b);
  Value lhsCodes = entry.getArgument(0), lhsScales = entry.getArgument(1),
        rhsCodes = entry.getArgument(2), rhsScales = entry.getArgument(3),
        out = entry.getArgument(4);

  Value lane = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value r = arith::RemUIOp::create(b, lane, e.cIndex(32));
  Value half = e.divIndex(lane, 32);
  Value m0 = e.mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::y),
                        e.cIndex(32));
  Value n0 =
      e.mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::x), e.cIndex(32));
  Value row = e.addIndex(m0, r), col = e.addIndex(n0, r);

  /// The lane's 32 codes of one MX block as the MFMA's operand vector:
  /// packed into i32 words, the lowest element in the lowest bits (8 E2M1
  /// codes or 4 FP8 codes per word), then reinterpreted.
  auto operand = [&](function_ref<Value(Value)> codeAt,
                     ElementFormat format) -> Value {
    const int64_t bits = format == ElementFormat::E2M1 ? 4 : 8;
    const int64_t perWord = 32 / bits;
    SmallVector<Value> words;
    for (int64_t w = 0; w < 32 / perWord; ++w) {
      Value word = e.c32(0);
      for (int64_t q = 0; q < perWord; ++q) {
        Value code = e.zext(codeAt(e.cIndex(w * perWord + q)), e.i32());
        word = e.bitOr(word, e.shl(code, e.c32(bits * q)));
      }
      words.push_back(word);
    }
    Value packed = vector::FromElementsOp::create(
        b, VectorType::get({static_cast<int64_t>(words.size())}, e.i32()),
        words);
    return vector::BitCastOp::create(
        b, VectorType::get({32}, mfmaElementType(context, format)), packed);
  };
  auto scaleOf = [&](Value memref, Value index) -> Value {
    Value code = memref::LoadOp::create(b, memref, ValueRange{index});
    return arith::BitcastOp::create(b, Float8E8M0FNUType::get(context), code);
  };

  VectorType accumulator = VectorType::get({16}, f32);
  Value zero = arith::ConstantOp::create(
      b, DenseElementsAttr::get(accumulator, b.getF32FloatAttr(0.0f)));
  // K in steps of 64; when K is an odd number of chunks, the upper lanes of
  // the last step give zero codes (under a scale of 1), adding nothing.
  Value sums = e.loop(
      e.cIndex(0), e.cIndex((k + 63) / 64), ValueRange{zero},
      [&](Value step, ValueRange acc) -> SmallVector<Value> {
        Value chunk = e.addIndex(e.mulIndex(step, e.cIndex(2)), half);
        Value inside = arith::CmpIOp::create(b, CmpIPredicate::ult, chunk,
                                             e.cIndex(chunks));
        chunk = arith::MinUIOp::create(b, chunk, e.cIndex(chunks - 1));
        Value k0 = e.mulIndex(chunk, e.cIndex(32));
        Value zeroCode = arith::ConstantOp::create(b, b.getI8IntegerAttr(0));
        auto codeOf = [&](Value memref, Value index) -> Value {
          return e.select(inside,
                          memref::LoadOp::create(b, memref, ValueRange{index}),
                          zeroCode);
        };
        Value a = operand(
            [&](Value j) { return codeOf(lhsCodes, lhsIndex(e, row, e.addIndex(k0, j))); },
            lhs.quant.getFormat());
        Value bv = operand(
            [&](Value j) { return codeOf(rhsCodes, rhsIndex(e, e.addIndex(k0, j), col)); },
            rhs.quant.getFormat());
        Value d = amdgpu::ScaledMFMAOp::create(
            b, accumulator, 32, 32, 64, a, bv, acc[0],
            scaleOf(lhsScales, lhsScaleIndex(e, row, chunk)),
            scaleOf(rhsScales, rhsScaleIndex(e, chunk, col)), 0, 0);
        return {d};
      })[0];
  for (int64_t v = 0; v < 16; ++v) {
    Value outRow = e.addIndex(
        m0, e.addIndex(e.mulIndex(half, e.cIndex(4)),
                       e.cIndex(8 * (v / 4) + v % 4)));
    Value value = vector::ExtractOp::create(b, sums, ArrayRef<int64_t>{v});
    memref::StoreOp::create(
        b, value, out,
        ValueRange{e.addIndex(e.mulIndex(outRow, e.cIndex(n)), col)});
  }
  gpu::ReturnOp::create(b);
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
        return AMDGPUGemmLowering(kernel, chip).lower(module);
      })))
    return signalPassFailure();
}

} // namespace
