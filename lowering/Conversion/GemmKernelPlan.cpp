//===- GemmKernelPlan.cpp - One plan for every GPU target's GEMMs ---------===//

#include "lowering/Conversion/GemmKernelPlan.h"

#include "lowering/NumericsOf.h"
#include "runtime/numerics/Hadamard.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;

namespace {
/// Threads per block of the operand launches.
constexpr int64_t kQuantizeThreads = 128;
} // namespace

InFlightDiagnostic GemmKernelLowering::refuse(const Twine &why) {
  return kernel.emitError() << "GEMM '" << gemmName(kernel)
                            << "' cannot be compiled for " << chip << ": "
                            << why;
}



std::string tetra::conversion::gemmName(KernelOp kernel) {
  if (auto named = dyn_cast<NameLoc>(kernel.getLoc()))
    return named.getName().str();
  return kernel.getKernelName().str();
}

FailureOr<OperandPlan> GemmKernelLowering::planOperand(Value codes, Value scales,
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

void GemmKernelLowering::setLaunch(gpu::GPUFuncOp func, ArrayRef<int64_t> grid,
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

LogicalResult GemmKernelLowering::lower(ModuleOp module) {
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
  if (m % tile[0] != 0 || n % tile[1] != 0 || k % tile[2] != 0)
    return refuse("its shape " + std::to_string(m) + " x " +
                  std::to_string(n) + " x " + std::to_string(k) +
                  " is not a multiple of the " + std::to_string(tile[0]) +
                  " x " + std::to_string(tile[1]) + " x " +
                  std::to_string(tile[2]) + " MMA tile");
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

DictionaryAttr GemmKernelLowering::describeOperand(Builder &b, OperandPlan operand) {
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

DictionaryAttr GemmKernelLowering::describe(Builder &b) {
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

MemRefType tetra::conversion::flat(int64_t count, Type element) {
  return MemRefType::get({count}, element);
}

void GemmKernelLowering::buildQuantize(OpBuilder &moduleBuilder,
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
  // The rotation's local buffers, in private memory at the function's
  // entry (a GPU backend wants every stack slot static: AMDGPU cannot
  // select an alloca under a branch).
  Value rotatedValues, work, signs;
  if (rotated) {
    Attribute privateSpace = gpu::AddressSpaceAttr::get(
        context, gpu::GPUDialect::getPrivateAddressSpace());
    auto local = [&](int64_t size) -> Value {
      return memref::AllocaOp::create(
          b, MemRefType::get({size}, f32, MemRefLayoutAttrInterface{},
                             privateSpace));
    };
    rotatedValues = local(segment);
    work = local(rotationBlock);
    if (operand.rotation.getKind() == RotationKind::RandomHadamard)
      signs = local(rotationBlock);
  }
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
  if (rotated) {
    if (signs) {
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

gpu::GPUFuncOp
GemmKernelLowering::createGemmFunction(OpBuilder &moduleBuilder,
                                       ArrayRef<int64_t> grid,
                                       ArrayRef<int64_t> block) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i8 = IntegerType::get(context, 8);
  const int64_t chunks = k / 32;
  auto type = FunctionType::get(context,
                                {flat(m * k, i8), flat(m * chunks, i8),
                                 flat(k * n, i8), flat(n * chunks, i8),
                                 flat(m * n, f32)},
                                {});
  auto func = gpu::GPUFuncOp::create(moduleBuilder, matmul.getLoc(),
                                     (kernel.getKernelName() + "__gemm").str(),
                                     type);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                moduleBuilder.getUnitAttr());
  setLaunch(func, grid, block,
            {"scratch:lhs.codes", "scratch:lhs.scales", "scratch:rhs.codes",
             "scratch:rhs.scales", "result:0"});
  return func;
}

Value GemmKernelLowering::lhsIndex(QuantizationEmitter &e, Value row,
                                   Value kk) {
  return matmul.getTransposeLhs()
             ? e.addIndex(e.mulIndex(kk, e.cIndex(m)), row)
             : e.addIndex(e.mulIndex(row, e.cIndex(k)), kk);
}

Value GemmKernelLowering::rhsIndex(QuantizationEmitter &e, Value kk,
                                   Value col) {
  return matmul.getTransposeRhs()
             ? e.addIndex(e.mulIndex(col, e.cIndex(k)), kk)
             : e.addIndex(e.mulIndex(kk, e.cIndex(n)), col);
}

Value GemmKernelLowering::lhsScaleIndex(QuantizationEmitter &e, Value row,
                                        Value chunk) {
  return matmul.getTransposeLhs()
             ? e.addIndex(e.mulIndex(chunk, e.cIndex(m)), row)
             : e.addIndex(e.mulIndex(row, e.cIndex(k / 32)), chunk);
}

Value GemmKernelLowering::rhsScaleIndex(QuantizationEmitter &e, Value chunk,
                                        Value col) {
  return matmul.getTransposeRhs()
             ? e.addIndex(e.mulIndex(col, e.cIndex(k / 32)), chunk)
             : e.addIndex(e.mulIndex(chunk, e.cIndex(n)), col);
}

LogicalResult tetra::conversion::lowerGemmKernels(
    ModuleOp module, function_ref<LogicalResult(KernelOp)> lowerKernel) {
  SmallVector<KernelOp> kernels;
  module.walk([&](KernelOp kernel) { kernels.push_back(kernel); });
  bool failed = false;
  for (KernelOp kernel : kernels)
    failed |= mlir::failed(lowerKernel(kernel));
  if (failed)
    return failure();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(module.getContext()));
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (!isa<gpu::GPUModuleOp>(op))
      op.erase();
  return success();
}
