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

/// Threads per block of the operand launches.
constexpr int64_t kQuantizeThreads = 128;

/// One operand of the GEMM as the conversion implements it: the kernel input
/// it comes from, its rotation and its quantization along `axis`.
struct OperandPlan {
  int input = -1; ///< Index among the kernel's inputs.
  RankedTensorType type;
  int64_t axis = 0;
  RotationAttr rotation;
  QuantizeOp quantize;
  OperandQuantAttr quant;
};

/// The (linear.role) name of a kernel, for messages.
std::string gemmName(KernelOp kernel) {
  if (auto named = dyn_cast<NameLoc>(kernel.getLoc()))
    return named.getName().str();
  return kernel.getKernelName().str();
}

class NVVMLowering {
public:
  NVVMLowering(KernelOp kernel, StringRef chip) : kernel(kernel), chip(chip) {}

  /// Checks the kernel and builds its gpu.module before `kernel`'s module
  /// end. Failure: an error was emitted.
  LogicalResult lower(ModuleOp module);

private:
  InFlightDiagnostic refuse(const Twine &why) {
    return kernel.emitError()
           << "GEMM '" << gemmName(kernel) << "' cannot be compiled for "
           << chip << ": " << why;
  }
  FailureOr<OperandPlan> planOperand(Value codes, Value scales,
                                     OperandQuantAttr quant, StringRef which);
  void buildQuantize(OpBuilder &moduleBuilder, OperandPlan operand,
                     StringRef suffix);
  void buildGemm(OpBuilder &moduleBuilder);
  /// What the kernel computes, for the bundle's manifest and its checks.
  DictionaryAttr describe(Builder &b);
  DictionaryAttr describeOperand(Builder &b, OperandPlan operand);
  void setLaunch(gpu::GPUFuncOp func, ArrayRef<int64_t> grid,
                 ArrayRef<int64_t> block, ArrayRef<std::string> arguments);

  KernelOp kernel;
  StringRef chip;
  ScaledMatmulOp matmul;
  OperandPlan lhs, rhs;
  int64_t m = 0, n = 0, k = 0;
};

FailureOr<OperandPlan> NVVMLowering::planOperand(Value codes, Value scales,
                                                 OperandQuantAttr quant,
                                                 StringRef which) {
  OperandPlan plan;
  plan.quant = quant;
  ElementFormat format = quant.getFormat();
  if (format != ElementFormat::E2M1 && format != ElementFormat::E4M3 &&
      format != ElementFormat::E5M2)
    return refuse(Twine(which) + " is " + stringifyElementFormat(format) +
                  "; this target runs block-scaled FP4/FP8 operands only");
  if (!quant.getBlockScale() ||
      quant.getBlockScale().getScaleFormat() != ScaleFormat::E8M0 ||
      quant.getBlockSize() != 32)
    return refuse(Twine(which) +
                  " needs E8M0 scales on blocks of 32 (MX); NVFP4 and other "
                  "block sizes are not implemented for this target");
  plan.quantize = codes.getDefiningOp<QuantizeOp>();
  if (!plan.quantize || plan.quantize.getScales() != scales)
    return refuse(Twine(which) + "'s codes are not quantized in the kernel");
  plan.axis = plan.quantize.getAxis();
  Value input = plan.quantize.getInput();
  plan.rotation = RotationAttr::getNone(kernel.getContext());
  if (auto rotate = input.getDefiningOp<RotateOp>()) {
    if (rotate.getInverse() ||
        static_cast<int64_t>(rotate.getAxis()) != plan.axis)
      return refuse(Twine(which) +
                    " is rotated other than forward along its reduction "
                    "dimension");
    plan.rotation = rotate.getRotation();
    input = rotate.getInput();
  }
  auto argument = dyn_cast<BlockArgument>(input);
  if (!argument || argument.getOwner() != &kernel.getBodyBlock())
    return refuse(Twine(which) + " is computed inside the kernel");
  plan.input = argument.getArgNumber();
  plan.type = cast<RankedTensorType>(argument.getType());
  if (!plan.type.hasStaticShape() || !plan.type.getElementType().isF32())
    return refuse(Twine(which) + " must be a static f32 matrix");
  return plan;
}

void NVVMLowering::setLaunch(gpu::GPUFuncOp func, ArrayRef<int64_t> grid,
                             ArrayRef<int64_t> block,
                             ArrayRef<std::string> arguments) {
  Builder b(func.getContext());
  SmallVector<Attribute> names;
  for (const std::string &name : arguments)
    names.push_back(b.getStringAttr(name));
  func->setAttr("tetra.launch",
                b.getDictionaryAttr(
                    {b.getNamedAttr("grid", b.getDenseI64ArrayAttr(grid)),
                     b.getNamedAttr("block", b.getDenseI64ArrayAttr(block)),
                     b.getNamedAttr("arguments", b.getArrayAttr(names))}));
}

LogicalResult NVVMLowering::lower(ModuleOp module) {
  kernel.getBody().walk([&](ScaledMatmulOp found) { matmul = found; });
  if (!matmul)
    return success(); // not a GEMM kernel: the CPU runs it
  if (kernel.getNumResults() != 1 ||
      kernel.getBodyBlock().getTerminator()->getOperand(0) !=
          matmul.getResult())
    return refuse("its result must be the f32 product itself");
  FailureOr<OperandPlan> left =
      planOperand(matmul.getLhs(), matmul.getLhsScales(), matmul.getLhsQuant(),
                  "the left operand");
  if (failed(left))
    return failure();
  FailureOr<OperandPlan> right =
      planOperand(matmul.getRhs(), matmul.getRhsScales(), matmul.getRhsQuant(),
                  "the right operand");
  if (failed(right))
    return failure();
  lhs = *left;
  rhs = *right;
  auto resultType = cast<RankedTensorType>(matmul.getResult().getType());
  m = resultType.getDimSize(0);
  n = resultType.getDimSize(1);
  k = lhs.type.getDimSize(matmul.getLhsReductionDim());
  if (m % 16 != 0 || n % 8 != 0 || k % 32 != 0)
    return refuse("its shape " + std::to_string(m) + " x " +
                  std::to_string(n) + " x " + std::to_string(k) +
                  " is not a multiple of the 16 x 8 x 32 MMA tile");
  for (const OperandPlan *operand : {&lhs, &rhs}) {
    int64_t extent = operand->type.getDimSize(operand->axis);
    int64_t segment =
        std::max<int64_t>(32, operand->rotation.isNone()
                                  ? 32
                                  : operand->rotation.getBlockSize());
    if (extent % segment != 0)
      return refuse("a rotation block does not divide K");
  }
  OpBuilder builder(module.getContext());
  builder.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(builder, kernel.getLoc(),
                                            kernel.getKernelName());
  gpuModule->setAttr("tetra.gemm", describe(builder));
  OpBuilder inner = OpBuilder::atBlockBegin(gpuModule.getBody());
  buildQuantize(inner, lhs, "lhs");
  buildQuantize(inner, rhs, "rhs");
  buildGemm(inner);
  return success();
}

DictionaryAttr NVVMLowering::describeOperand(Builder &b, OperandPlan operand) {
  OperandQuantAttr quant = operand.quant;
  RotationAttr rotation = operand.rotation;
  SmallVector<NamedAttribute> rotationFields = {
      b.getNamedAttr("kind",
                     b.getStringAttr(rotation.isNone()
                                         ? "none"
                                         : stringifyRotationKind(
                                               rotation.getKind())))};
  if (!rotation.isNone()) {
    rotationFields.push_back(
        b.getNamedAttr("block", b.getI64IntegerAttr(rotation.getBlockSize())));
    rotationFields.push_back(b.getNamedAttr(
        "schedule",
        b.getStringAttr(stringifySignSchedule(rotation.getSchedule()))));
    rotationFields.push_back(b.getNamedAttr(
        "seed", b.getI64IntegerAttr(static_cast<int64_t>(rotation.getSeed()))));
  }
  return b.getDictionaryAttr({
      b.getNamedAttr("input", b.getI64IntegerAttr(operand.input)),
      b.getNamedAttr("shape", b.getDenseI64ArrayAttr(operand.type.getShape())),
      b.getNamedAttr("axis", b.getI64IntegerAttr(operand.axis)),
      b.getNamedAttr("format", b.getStringAttr(stringifyElementFormat(
                                   quant.getFormat()))),
      b.getNamedAttr("block", b.getI64IntegerAttr(quant.getBlockSize())),
      b.getNamedAttr("scale", b.getStringAttr("e8m0")),
      b.getNamedAttr("rule", b.getStringAttr(stringifyScaleRule(
                                 quant.getBlockScale().getRule()))),
      b.getNamedAttr("rounding",
                     b.getStringAttr(stringifyRounding(quant.getRounding()))),
      b.getNamedAttr("tensor_id",
                     b.getI64IntegerAttr(static_cast<int64_t>(
                         operand.quantize.getTensorId()))),
      b.getNamedAttr("rotation", b.getDictionaryAttr(rotationFields)),
  });
}

DictionaryAttr NVVMLowering::describe(Builder &b) {
  int64_t lhsCount = m * k, rhsCount = k * n;
  return b.getDictionaryAttr({
      b.getNamedAttr("gemm", b.getStringAttr(gemmName(kernel))),
      b.getNamedAttr("role", b.getStringAttr(matmul.getRole()
                                                 ? stringifyRole(*matmul.getRole())
                                                 : "")),
      b.getNamedAttr("m", b.getI64IntegerAttr(m)),
      b.getNamedAttr("n", b.getI64IntegerAttr(n)),
      b.getNamedAttr("k", b.getI64IntegerAttr(k)),
      b.getNamedAttr("transpose_lhs", b.getBoolAttr(matmul.getTransposeLhs())),
      b.getNamedAttr("transpose_rhs", b.getBoolAttr(matmul.getTransposeRhs())),
      b.getNamedAttr("lhs", describeOperand(b, lhs)),
      b.getNamedAttr("rhs", describeOperand(b, rhs)),
      b.getNamedAttr(
          "scratch",
          b.getDictionaryAttr(
              {b.getNamedAttr("lhs.codes", b.getI64IntegerAttr(lhsCount)),
               b.getNamedAttr("lhs.scales", b.getI64IntegerAttr(lhsCount / 32)),
               b.getNamedAttr("rhs.codes", b.getI64IntegerAttr(rhsCount)),
               b.getNamedAttr("rhs.scales",
                              b.getI64IntegerAttr(rhsCount / 32))})),
  });
}

/// The flat memref type of `count` elements of `element`.
MemRefType flat(int64_t count, Type element) {
  return MemRefType::get({count}, element);
}

void NVVMLowering::buildQuantize(OpBuilder &moduleBuilder,
                                 OperandPlan operand, StringRef suffix) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i8 = IntegerType::get(context, 8),
       i64 = IntegerType::get(context, 64);
  ArrayRef<int64_t> shape = operand.type.getShape();
  int64_t count = shape[0] * shape[1];
  const int64_t block = 32;
  int64_t extent = shape[operand.axis];
  int64_t outer = operand.axis == 0 ? 1 : shape[0];
  int64_t innerSize = operand.axis == 0 ? shape[1] : 1;
  const bool rotated = !operand.rotation.isNone();
  const int64_t rotationBlock =
      rotated ? operand.rotation.getBlockSize() : block;
  const int64_t segment = std::max(block, rotationBlock);
  const int64_t segments = extent / segment;
  const int64_t threads = outer * segments * innerSize;

  auto type = FunctionType::get(
      context, {flat(count, f32), flat(count, i8), flat(count / block, i8), i64, i64},
      {});
  auto func = gpu::GPUFuncOp::create(
      moduleBuilder, operand.quantize.getLoc(),
      (kernel.getKernelName() + "__" + suffix).str(), type);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                moduleBuilder.getUnitAttr());
  setLaunch(func, {(threads + kQuantizeThreads - 1) / kQuantizeThreads, 1, 1},
            {kQuantizeThreads, 1, 1},
            {"input:" + std::to_string(operand.input),
             ("scratch:" + suffix + ".codes").str(),
             ("scratch:" + suffix + ".scales").str(), "scalar:seed",
             "scalar:step"});

  Block &entry = func.getBody().front();
  ImplicitLocOpBuilder b(operand.quantize.getLoc(), context);
  b.setInsertionPointToStart(&entry);
  QuantizationEmitter e(b);
  Value input = entry.getArgument(0), codes = entry.getArgument(1),
        scales = entry.getArgument(2);
  Value seed = entry.getArgument(3);
  Value step32 = e.trunc(entry.getArgument(4), e.i32());

  Value thread = e.addIndex(
      e.mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::x),
                 e.cIndex(kQuantizeThreads)),
      gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  Value inRange = arith::CmpIOp::create(b, CmpIPredicate::ult, thread,
                                        e.cIndex(threads));
  auto guard = scf::IfOp::create(b, inRange, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&guard.getThenRegion().front());

  Value i = arith::RemUIOp::create(b, thread, e.cIndex(innerSize));
  Value rest = e.divIndex(thread, innerSize);
  Value seg = arith::RemUIOp::create(b, rest, e.cIndex(segments));
  Value o = e.divIndex(rest, segments);
  Value first = e.mulIndex(seg, e.cIndex(segment));
  auto indexOf = [&](Value j) {
    Value row =
        e.addIndex(e.mulIndex(o, e.cIndex(extent)), e.addIndex(first, j));
    return e.addIndex(e.mulIndex(row, e.cIndex(innerSize)), i);
  };

  // The rotated segment, in a local buffer (signs and butterflies per
  // rotation block, then 1/sqrt(B)).
  Value rotatedValues;
  if (rotated) {
    rotatedValues = memref::AllocaOp::create(b, MemRefType::get({segment}, f32));
    Value work =
        memref::AllocaOp::create(b, MemRefType::get({rotationBlock}, f32));
    Value signs;
    if (operand.rotation.getKind() == RotationKind::RandomHadamard) {
      signs =
          memref::AllocaOp::create(b, MemRefType::get({rotationBlock}, f32));
      Value signStep =
          operand.rotation.getSchedule() == SignSchedule::PerStep ? step32
                                                                  : e.c32(0);
      e.hadamardSigns(signs, rotationBlock,
                      e.c64(static_cast<int64_t>(operand.rotation.getSeed())),
                      signStep);
    }
    const float inverseSqrt = numerics::hadamardMatrix(rotationBlock)[0];
    for (int64_t r = 0; r < segment / rotationBlock; ++r) {
      Value base = e.cIndex(r * rotationBlock);
      e.loop(e.cIndex(0), e.cIndex(rotationBlock), [&](Value j) {
        Value x = memref::LoadOp::create(b, input,
                                         ValueRange{indexOf(e.addIndex(base, j))});
        if (signs)
          x = e.mulf(x, memref::LoadOp::create(b, signs, j));
        memref::StoreOp::create(b, x, work, j);
      });
      e.hadamardButterflies(work, rotationBlock);
      e.loop(e.cIndex(0), e.cIndex(rotationBlock), [&](Value j) {
        Value x = e.mulf(memref::LoadOp::create(b, work, j), e.cF32(inverseSqrt));
        memref::StoreOp::create(b, x, rotatedValues, e.addIndex(base, j));
      });
    }
  }

  const FormatConstants element =
      constantsOf(numericsOf(operand.quant.getFormat()));
  const int64_t blocksAlong = extent / block;
  Value tensorId =
      e.c32(static_cast<uint32_t>(operand.quantize.getTensorId()));
  for (int64_t q = 0; q < segment / block; ++q) {
    Value base = e.cIndex(q * block);
    Value blockIndex =
        e.addIndex(e.mulIndex(seg, e.cIndex(segment / block)), e.cIndex(q));
    Value scaleIndex = e.addIndex(
        e.mulIndex(e.addIndex(e.mulIndex(o, e.cIndex(blocksAlong)), blockIndex),
                   e.cIndex(innerSize)),
        i);
    auto load = [&](Value j) -> Value {
      Value at = e.addIndex(base, j);
      if (rotated)
        return memref::LoadOp::create(b, rotatedValues, at);
      return memref::LoadOp::create(b, input, ValueRange{indexOf(at)});
    };
    auto bitsAt = [&](Value j) -> Value {
      return e.randomBits(seed, step32, tensorId,
                          e.toI64(indexOf(e.addIndex(base, j))));
    };
    auto storeCode = [&](Value j, Value code) {
      memref::StoreOp::create(b, e.trunc(code, i8), codes,
                              ValueRange{indexOf(e.addIndex(base, j))});
    };
    auto storeScale = [&](Value code) {
      memref::StoreOp::create(b, e.trunc(code, i8), scales,
                              ValueRange{scaleIndex});
    };
    e.quantizeMXBlock(block, element, operand.quant.getBlockScale().getRule(),
                      operand.quant.getRounding(), load, bitsAt, storeCode,
                      storeScale);
  }
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b);
}

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

void NVVMLowering::buildGemm(OpBuilder &moduleBuilder) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i8 = IntegerType::get(context, 8);
  const bool transposeLhs = matmul.getTransposeLhs();
  const bool transposeRhs = matmul.getTransposeRhs();
  const int64_t chunks = k / 32;
  auto type = FunctionType::get(
      context,
      {flat(m * k, i8), flat(m * chunks, i8), flat(k * n, i8),
       flat(n * chunks, i8), flat(m * n, f32)},
      {});
  auto func = gpu::GPUFuncOp::create(moduleBuilder, matmul.getLoc(),
                                     (kernel.getKernelName() + "__gemm").str(),
                                     type);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                moduleBuilder.getUnitAttr());
  setLaunch(func, {n / 8, m / 16, 1}, {32, 1, 1},
            {"scratch:lhs.codes", "scratch:lhs.scales", "scratch:rhs.codes",
             "scratch:rhs.scales", "result:0"});

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
  auto lhsIndex = [&](Value row, Value col) { // A(row, col), col along K
    return transposeLhs ? e.addIndex(e.mulIndex(col, e.cIndex(m)), row)
                        : e.addIndex(e.mulIndex(row, e.cIndex(k)), col);
  };
  auto rhsIndex = [&](Value kk, Value col) { // B(kk, col)
    return transposeRhs ? e.addIndex(e.mulIndex(col, e.cIndex(k)), kk)
                        : e.addIndex(e.mulIndex(kk, e.cIndex(n)), col);
  };
  auto lhsScaleIndex = [&](Value row, Value chunk) {
    return transposeLhs ? e.addIndex(e.mulIndex(chunk, e.cIndex(m)), row)
                        : e.addIndex(e.mulIndex(row, e.cIndex(chunks)), chunk);
  };
  auto rhsScaleIndex = [&](Value chunk, Value col) {
    return transposeRhs ? e.addIndex(e.mulIndex(col, e.cIndex(chunks)), chunk)
                        : e.addIndex(e.mulIndex(chunk, e.cIndex(n)), col);
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
                    ValueRange{lhsIndex(row, e.addIndex(kk, e.cIndex(q)))});
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
                    ValueRange{rhsIndex(e.addIndex(kk, e.cIndex(q)), bCol)});
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
                                     ValueRange{lhsScaleIndex(row, chunk)}),
              e.i32());
          Value cb = e.zext(
              memref::LoadOp::create(b, rhsScales,
                                     ValueRange{rhsScaleIndex(chunk, col)}),
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
  SmallVector<KernelOp> kernels;
  module.walk([&](KernelOp kernel) { kernels.push_back(kernel); });
  bool failed = false;
  for (KernelOp kernel : kernels)
    failed |= mlir::failed(NVVMLowering(kernel, chip).lower(module));
  if (failed)
    return signalPassFailure();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(&getContext()));
  // What is left besides the GPU modules is the host side and the kernels
  // the CPU runs; the GPU modules are this pass's output.
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (!isa<gpu::GPUModuleOp>(op))
      op.erase();
}

} // namespace
