//===- TetraToNVVM.cpp - sm_90a code for tetra GEMM kernels ---------------===//
//
// `--convert-tetra-to-nvvm{chip=sm_90a}`: every GEMM `tetra.kernel` (block-
// scaled operands, each rotated or not, quantized along K, and their
// `tetra.scaled_matmul`) becomes a `gpu.module` of three launches:
//
//   NAME__lhs, NAME__rhs  one thread per segment of the operand along K
//                         (the larger of the quantization and rotation
//                         blocks): the rotation's butterflies in a local
//                         buffer, then each block's scale and codes, from
//                         the shared QuantizationEmitter (bit for bit what
//                         runtime/numerics computes);
//   NAME__gemm            one warp per 16 x 8 tile of the result; K in
//                         chunks of 32 (the MX block): each chunk's codes,
//                         widened to E4M3 (E2M1 values are exact in E4M3)
//                         or kept E4M3/E5M2, go through one
//                         mma.sync.m16n8k32 started from zero, and the
//                         chunk's two E8M0 scales are applied to its sum in
//                         fp32 (scaleChunk), the chunks accumulated in order. For MXFP4 x
//                         MXFP4 every chunk's sum is exact, so the result is
//                         the scaled_matmul contract's bit for bit.
//
// The launch contract (grid, block, arguments) is recorded on each
// gpu.func (`tetra.launch`) for the bundle's manifest. A kernel the target
// cannot implement is an error naming the linear, the GEMM role and the
// target; nothing unsupported reaches LLVM (its NVPTX backend aborts on
// E2M1 conversions for sm_90a, which is why none are emitted: E2M1 codes are
// widened with integer arithmetic).
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
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace tetra {
#define GEN_PASS_DEF_CONVERTTETRATONVVM
#include "lowering/Conversion/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;

namespace {

/// sm_90a's GEMM launch: one warp per 16 x 8 tile, mma.sync.m16n8k32.
class NVVMGemmLowering : public GemmKernelLowering {
public:
  NVVMGemmLowering(KernelOp kernel, StringRef chip)
      : GemmKernelLowering(kernel, chip, {16, 8, 32}) {}

private:
  void buildGemm(OpBuilder &moduleBuilder) override;
};

/// A chunk's exact sum times 2^ea · 2^eb, the two E8M0 scale codes `ca`,
/// `cb` (i32). The exponent s = ea + eb is split in halves, s1 = floor(s/2)
/// and s2 = s - s1 (each in [-127, 127], so 2^si is an exact E8M0 value):
/// (sum · 2^s1) · 2^s2 is exact whenever the result is a normal fp32 and no
/// product of the dequantized values overflows, which is when the
/// scaled_matmul contract's per-element products are exact too. A NaN scale
/// (0xFF) gives NaN.
Value scaleChunk(QuantizationEmitter &e, Value sum, Value ca, Value cb) {
  Value s = e.sub(e.add(ca, cb), e.c32(254));
  Value s1 = arith::ShRSIOp::create(e.b, s, e.c32(1));
  Value s2 = e.sub(s, s1);
  Value scaled = e.mulf(e.mulf(sum, e.decodeE8M0(e.add(s1, e.c32(127)))),
                        e.decodeE8M0(e.add(s2, e.c32(127))));
  Value nanScale = arith::OrIOp::create(
      e.b, e.cmp(CmpIPredicate::eq, ca, e.c32(0xFF)),
      e.cmp(CmpIPredicate::eq, cb, e.c32(0xFF)));
  return e.select(nanScale, e.cF32Bits(0x7FC00000), scaled);
}

/// The MMA operand type an element format's codes go through.
StringRef mmaType(ElementFormat format) {
  return format == ElementFormat::E5M2 ? "e5m2" : "e4m3";
}

void NVVMGemmLowering::buildGemm(OpBuilder &moduleBuilder) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context);
  const int64_t chunks = k / 32;
  gpu::GPUFuncOp func = createGemmFunction(moduleBuilder, {n / 8, m / 16, 1},
                                           {32, 1, 1});

  Block &entry = func.getBody().front();
  ImplicitLocOpBuilder b(matmul.getLoc(), context);
  b.setInsertionPointToStart(&entry);
  QuantizationEmitter e(b);
  Value lhsCodes = entry.getArgument(0), lhsScales = entry.getArgument(1),
        rhsCodes = entry.getArgument(2), rhsScales = entry.getArgument(3),
        out = entry.getArgument(4);

  Value lane = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value g = e.divIndex(lane, 4);
  Value t = arith::RemUIOp::create(b, lane, e.cIndex(4));
  Value m0 = e.mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::y),
                        e.cIndex(16));
  Value n0 =
      e.mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::x), e.cIndex(8));

  // An element's MMA byte: E2M1 codes widened to E4M3 (exact) through the
  // magnitude table 0, .5, 1, 1.5, 2, 3, 4, 6 with the sign moved to bit 7;
  // E4M3 and E5M2 codes are the MMA's own bytes.
  auto mmaByte = [&](Value code, ElementFormat format) -> Value {
    Value c = e.zext(code, e.i32());
    if (format != ElementFormat::E2M1)
      return c;
    Value magnitude = e.zext(e.bitAnd(c, e.c32(7)), e.i64());
    Value table = e.c64(static_cast<int64_t>(0x4C4844403C383000ull));
    Value byte = e.trunc(
        e.bitAnd(e.shrui(table, e.mul(magnitude, e.c64(8))), e.c64(0xFF)),
        e.i32());
    return e.bitOr(byte, e.shl(e.bitAnd(c, e.c32(8)), e.c32(4)));
  };
  /// Four codes (k .. k+3 along K) packed in an i32, the lowest first.
  auto pack = [&](function_ref<Value(int64_t)> codeAt, ElementFormat format) {
    Value word = e.c32(0);
    for (int64_t q = 0; q < 4; ++q)
      word = e.bitOr(word, e.shl(mmaByte(codeAt(q), format), e.c32(8 * q)));
    return word;
  };

  ElementFormat lhsFormat = lhs.quant.getFormat(),
                rhsFormat = rhs.quant.getFormat();
  std::string intrinsic = ("llvm.nvvm.mma.m16n8k32.row.col.f32." +
                           mmaType(lhsFormat) + "." + mmaType(rhsFormat) +
                           ".f32")
                              .str();
  Type fragment = LLVM::LLVMStructType::getLiteral(context, {f32, f32, f32, f32});
  Value zeroF = e.cF32(0.0f);
  SmallVector<Value> rows = {e.addIndex(m0, g),
                             e.addIndex(m0, e.addIndex(g, e.cIndex(8)))};
  Value col0 = e.addIndex(n0, e.mulIndex(t, e.cIndex(2)));
  SmallVector<Value> cols = {col0, e.addIndex(col0, e.cIndex(1))};
  Value bCol = e.addIndex(n0, g);

  SmallVector<Value> sums = e.loop(
      e.cIndex(0), e.cIndex(chunks), ValueRange{zeroF, zeroF, zeroF, zeroF},
      [&](Value chunk, ValueRange acc) -> SmallVector<Value> {
        Value k0 = e.mulIndex(chunk, e.cIndex(32));
        SmallVector<Value> args;
        for (int64_t r = 0; r < 4; ++r) {
          Value row = rows[r & 1];
          Value kk = e.addIndex(
              k0, e.addIndex(e.mulIndex(t, e.cIndex(4)), e.cIndex(16 * (r >> 1))));
          args.push_back(pack(
              [&](int64_t q) {
                return memref::LoadOp::create(
                    b, lhsCodes,
                    ValueRange{lhsIndex(e, row, e.addIndex(kk, e.cIndex(q)))});
              },
              lhsFormat));
        }
        for (int64_t r = 0; r < 2; ++r) {
          Value kk = e.addIndex(
              k0, e.addIndex(e.mulIndex(t, e.cIndex(4)), e.cIndex(16 * r)));
          args.push_back(pack(
              [&](int64_t q) {
                return memref::LoadOp::create(
                    b, rhsCodes,
                    ValueRange{rhsIndex(e, e.addIndex(kk, e.cIndex(q)), bCol)});
              },
              rhsFormat));
        }
        args.append({zeroF, zeroF, zeroF, zeroF});
        Value d = LLVM::CallIntrinsicOp::create(b, fragment,
                                                b.getStringAttr(intrinsic), args)
                      .getResult(0);
        SmallVector<Value> next;
        for (int64_t r = 0; r < 4; ++r) {
          Value partial = LLVM::ExtractValueOp::create(b, d, r);
          Value row = rows[r >> 1], col = cols[r & 1];
          Value ca = e.zext(
              memref::LoadOp::create(b, lhsScales,
                                     ValueRange{lhsScaleIndex(e, row, chunk)}),
              e.i32());
          Value cb = e.zext(
              memref::LoadOp::create(b, rhsScales,
                                     ValueRange{rhsScaleIndex(e, chunk, col)}),
              e.i32());
          next.push_back(e.addf(acc[r], scaleChunk(e, partial, ca, cb)));
        }
        return next;
      });
  for (int64_t r = 0; r < 4; ++r) {
    Value row = rows[r >> 1], col = cols[r & 1];
    memref::StoreOp::create(
        b, sums[r], out,
        ValueRange{e.addIndex(e.mulIndex(row, e.cIndex(n)), col)});
  }
  gpu::ReturnOp::create(b);
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
        return NVVMGemmLowering(kernel, chip).lower(module);
      })))
    return signalPassFailure();
}

} // namespace
