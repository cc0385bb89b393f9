//===- GemmKernelPlan.cpp - One plan for every GPU target's GEMMs ---------===//

#include "lowering/Conversion/GemmKernelPlan.h"
#include "lowering/Conversion/GpuKernelBody.h"

#include "dialect/LLVMFormatters.h"
#include "lowering/Conversion/GpuStepKernels.h"

#include "lowering/NumericsOf.h"
#include "runtime/numerics/Hadamard.h"
#include "runtime/numerics/ScaleFolding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Diagnostics.h"

#include <functional>
#include <set>
#include <string>

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;

namespace {
/// Threads per block of the prologue launches.
constexpr int64_t kPrologueThreads = 128;
/// Codes a prologue thread stores at once (one 16-byte store).
constexpr int64_t kCodesPerStore = 16;
/// Padding of a staged tile's K-major rows (StagedLayout::Padded).
constexpr int64_t kRowPadding = 16;
/// The K from which a GEMM takes smaller tiles to fill the chip
/// (chooseTiling).
constexpr int64_t kFillChipK = 4096;
/// A split GEMM's partial tiles cost 4 · S · M · N fp32 bytes written and
/// read against 2 · blockM · blockN · K flops a block: per unit of a
/// block's time, 4 · rate / bandwidth · S · tiles / K, with a
/// multiprocessor's sustained BF16 rate over the memory's bandwidth taken
/// as 5 TFLOP/s over 4 TB/s — an estimate for an H200 (about 660 of its
/// 989 dense TFLOP/s over 132 multiprocessors; 4 of its 4.8 TB/s), not a
/// measurement — so 5.
constexpr double kSplitSumCost = 5.0;
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

MemRefType tetra::conversion::flat(int64_t count, Type element) {
  return MemRefType::get({count}, element);
}

//===----------------------------------------------------------------------===//
// What the plan accepts
//===----------------------------------------------------------------------===//

FailureOr<OperandPlan>
GemmKernelLowering::planOperand(Value operand, Value scales,
                                OperandQuantAttr quant, StringRef which) {
  OperandPlan plan(operand.getLoc());
  plan.quant = quant;
  plan.side = which == "the left operand" ? "lhs" : "rhs";
  ElementFormat format = quant.getFormat();
  Value input;
  if (format == ElementFormat::BF16) {
    // tetra.materialize-quantization's round trip: extf(truncf(x)).
    auto extend = operand.getDefiningOp<arith::ExtFOp>();
    auto truncate =
        extend ? extend.getIn().getDefiningOp<arith::TruncFOp>() : nullptr;
    if (!truncate)
      return refuse(Twine(which) + " is not rounded to bf16 in the kernel");
    if (quant.getRounding() != Rounding::NearestEven)
      return refuse(Twine(which) +
                    " rounds to bf16 other than to nearest even");
    plan.kind = OperandKind::BF16;
    plan.loc = truncate.getLoc();
    plan.axis = which == "the left operand" ? matmul.getLhsReductionDim()
                                            : matmul.getRhsReductionDim();
    input = truncate.getIn();
  } else if (format == ElementFormat::F32) {
    return refuse(Twine(which) +
                  " is f32, which this target's tensor cores do not "
                  "multiply exactly; use bf16 or a block format");
  } else {
    BlockScaleAttr blockScale = quant.getBlockScale();
    if (blockScale && blockScale.getScaleFormat() == ScaleFormat::E8M0 &&
        quant.getBlockSize() == 32 &&
        (format == ElementFormat::E2M1 || format == ElementFormat::E4M3 ||
         format == ElementFormat::E5M2))
      plan.kind = OperandKind::MX;
    else if (blockScale && blockScale.getScaleFormat() == ScaleFormat::E4M3 &&
             quant.getBlockSize() == 16 && format == ElementFormat::E2M1)
      plan.kind = OperandKind::NVFP4;
    else
      return refuse(fmt::format(
          "{} is {} on blocks of {}; GPU targets run MX (E8M0 scales on blocks "
          "of 32), NVFP4 (E2M1, E4M3 scales on blocks of 16) and bf16",
          which, stringifyElementFormat(format), quant.getBlockSize()));
    auto quantize = operand.getDefiningOp<QuantizeOp>();
    if (!quantize || quantize.getScales() != scales)
      return refuse(Twine(which) + "'s codes are not quantized in the kernel");
    plan.loc = quantize.getLoc();
    plan.axis = quantize.getAxis();
    plan.tensorId = static_cast<uint32_t>(quantize.getTensorId());
    input = quantize.getInput();
  }
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

void GemmKernelLowering::chooseTiling() {
  GemmTiling &t = tiling;
  auto largest = [](int64_t extent, std::initializer_list<int64_t> sizes,
                    int64_t limit) {
    for (int64_t size : sizes)
      if (size <= limit && extent % size == 0)
        return size;
    return int64_t{0};
  };
  t.blockM = largest(m, {128, 64, 32}, blockTile);
  t.blockN = largest(n, {256, 128, 64, 32}, widestTileN());
  // A GEMM whose tiles each sum a long K (kFillChipK or more: a Wgrad's sum
  // over the batch's tokens) and whose largest tiles leave multiprocessors
  // idle (a small weight's: 640 x 640 is 25 tiles of 128 x 128 for 132 of
  // them) takes smaller ones: the longer side halved, down to 64, until the
  // tiles fill the chip. Each result's sum over K is the same whatever its
  // tile; a short K keeps the largest tiles (the launch is short anyway).
  auto tiles = [&] { return (m / t.blockM) * (n / t.blockN); };
  const bool bf16 = lhs.kind == OperandKind::BF16;
  // A tile wider than the option (a chip's widestTileN) only where its
  // blocks fill the chip without a split of K: a BF16 Wgrad of a small
  // weight keeps blockTile-wide tiles and splits (below) — on the H200 a
  // 640 x 1792 Wgrad over 32768 tokens took 0.149 ms as 70 tiles of 128 x
  // 128 split 8 ways (sm_90a's specialized launch), 0.187 as 35 of 128 x
  // 256 split 16 ways.
  if (t.blockN > blockTile && k >= kFillChipK && tiles() < multiprocessors())
    t.blockN = largest(n, {128, 64, 32}, blockTile);
  // BF16 splits K instead (chosen below, once the step is known): its
  // largest tiles stay, and their blocks fill the chip.
  while (!bf16 && k >= kFillChipK && tiles() < multiprocessors()) {
    int64_t &longer = t.blockN >= t.blockM ? t.blockN : t.blockM;
    if (longer <= 64)
      break;
    longer /= 2;
  }
  t.chunk = bf16 ? k : std::min(lhs.block(), rhs.block());
  t.layout = stagedLayout();
  // The longest step whose two staged buffers fit the chip's limit.
  for (int64_t stepK : bf16 ? std::initializer_list<int64_t>{64, 32}
                            : std::initializer_list<int64_t>{128, 64, 32}) {
    if (k % stepK != 0)
      continue;
    t.stepK = stepK;
    for (int side = 0; side < 2; ++side) {
      const OperandPlan &operand = side == 0 ? lhs : rhs;
      t.packed[side] =
          packsE2M1() && operand.quant.getFormat() == ElementFormat::E2M1;
      const int64_t rowBytes = t.packed[side]
                                   ? stepK / 2
                                   : stepK * operand.elementBytes();
      t.pitch[side] =
          rowBytes + (t.layout == StagedLayout::Padded ? kRowPadding : 0);
      assert((t.layout == StagedLayout::Padded ||
              (rowBytes >= 32 && rowBytes <= 128)) &&
             "swizzled rows are 32, 64 or 128 bytes");
    }
    if (sharedBytes() <= sharedLimit())
      break;
  }
  t.threads = blockThreads();
  // A BF16 GEMM whose tiles each sum a long K and leave multiprocessors
  // idle (a small weight's Wgrad over the batch's tokens: 640 x 640 is 25
  // tiles of 128 x 128) splits K across 2 to 16 blocks a tile, each summing
  // at least kFillChipK / 4 of it. Its time, in units of one block summing
  // all of K: the waves of blocks, ceil(tiles · S / multiprocessors) / S,
  // plus the partial tiles' writes and reads, kSplitSumCost · S · tiles /
  // K; the cheapest split (the smaller on a tie).
  if (bf16 && k >= kFillChipK && tiles() < multiprocessors()) {
    auto cost = [&](int64_t s) {
      const int64_t waves =
          (tiles() * s + multiprocessors() - 1) / multiprocessors();
      return static_cast<double>(waves) / static_cast<double>(s) +
             kSplitSumCost * static_cast<double>(s * tiles()) /
                 static_cast<double>(k);
    };
    for (int64_t s = 2; s <= 16; s *= 2)
      if ((k / t.stepK) % s == 0 && k / s >= kFillChipK / 4 &&
          cost(s) < cost(t.splitK))
        t.splitK = s;
  }
}

bool GemmKernelLowering::sumsExactly() const {
  auto mxfp4 = [](const OperandPlan &operand) {
    return operand.kind == OperandKind::MX && operand.block() == 32 &&
           operand.quant.getFormat() == ElementFormat::E2M1;
  };
  return mxfp4(lhs) && mxfp4(rhs) && k <= numerics::kExactMaxK;
}

LogicalResult GemmKernelLowering::lower(ModuleOp module) {
  kernel.getBody().walk([&](ScaledMatmulOp found) { matmul = found; });
  if (!matmul)
    return lowerElementwiseKernel(kernel, module);
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
  if (lhs.scaled() != rhs.scaled())
    return refuse("it multiplies a bf16 operand with a block-scaled one; GPU "
                  "targets run both operands block-scaled or both bf16");
  if (failed(checkTarget()))
    return failure();
  if (blockTile != 32 && blockTile != 64 && blockTile != 128)
    return refuse(
        fmt::format("block-tile must be 32, 64 or 128, not {}", blockTile));
  auto resultType = cast<RankedTensorType>(matmul.getResult().getType());
  m = resultType.getDimSize(0);
  n = resultType.getDimSize(1);
  k = lhs.type.getDimSize(matmul.getLhsReductionDim());
  if (m % 32 != 0 || n % 32 != 0 || k % 32 != 0)
    return refuse(fmt::format("its shape {} x {} x {} is not a multiple of the "
                              "32 x 32 x 32 warp tile",
                              m, n, k));
  for (const OperandPlan *operand : {&lhs, &rhs}) {
    int64_t extent = operand->type.getDimSize(operand->axis);
    if (!operand->rotation.isNone() &&
        extent % operand->rotation.getBlockSize() != 0)
      return refuse("a rotation block does not divide K");
  }
  chooseTiling();
  for (OperandPlan *operand : {&lhs, &rhs})
    operand->mnMajor = operand->kind == OperandKind::BF16 &&
                       operand->rotation.isNone() && operand->axis == 0 &&
                       readsMNMajorBF16();
  OpBuilder builder(module.getContext());
  builder.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(builder, kernel.getLoc(),
                                            kernel.getKernelName());
  gpuModule->setAttr("tetra.gemm", describe(builder));
  OpBuilder inner = OpBuilder::atBlockBegin(gpuModule.getBody());
  for (const OperandPlan *operand : {&lhs, &rhs}) {
    buildPrologue(inner, *operand);
    if (foldsScales() || sumsExactly())
      buildFold(inner, *operand);
  }
  buildGemm(inner);
  if (tiling.splitK > 1)
    buildSplitSum(inner);
  if (resultIsAddedTo()) {
    if (tiling.splitK > 1)
      buildSplitSum(inner, /*plusAddend=*/true);
    else
      buildGemm(inner, Epilogue::PlusAddend);
  }
  // The logits of a cross-entropy: the variant that also writes each row's
  // partial log-sum-exps.
  if (feedsCrossEntropy())
    buildGemm(inner, Epilogue::AndLossParts);
  return success();
}

bool GemmKernelLowering::feedsCrossEntropy() const {
  if (rowSlabs().width == 0 || tiling.splitK > 1 || sumsExactly())
    return false;
  SmallVector<Value> views{kernel->getResult(0)};
  for (size_t i = 0; i < views.size(); ++i)
    for (Operation *user : views[i].getUsers()) {
      if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user))
        views.push_back(user->getResult(0));
      else if (auto loss = dyn_cast<CrossEntropyOp>(user);
               loss && loss->getOperand(0) == views[i])
        return true;
    }
  return false;
}

void GemmKernelLowering::storeLossParts(
    QuantizationEmitter &e, Value lane,
    ArrayRef<std::pair<Value, Value>> results, Value parts) {
  ImplicitLocOpBuilder &b = e.b;
  const RowSlabs slabs = rowSlabs();
  const int64_t perRow = n / slabs.width;
  Type f64 = b.getF64Type();
  auto toF64 = [&](Value x) {
    return arith::ExtFOp::create(b, f64, x).getResult();
  };
  auto larger = [&](Value x, Value y) {
    return e.select(e.cmpf(arith::CmpFPredicate::OGT, x, y), x, y);
  };
  // Each of the thread's rows: its largest value m, then the sum of
  // fastExp(x - m) in the order of storeAccumulators, in fp32 (at most
  // 2 · tilesN() terms, each at most 1: conversions to fp64 a term took
  // as long as the exponentials), then in fp64 across the lanes.
  std::map<int64_t, SmallVector<size_t>> slots;
  for (size_t v = 0; v < results.size(); ++v)
    slots[slabs.slotOf(static_cast<int64_t>(v))].push_back(v);
  int32_t writers = 0;
  for (int32_t mask : slabs.laneMasks)
    writers |= mask;
  Value writes =
      e.cmp(arith::CmpIPredicate::eq,
            arith::AndIOp::create(b, lane, e.cIndex(writers)), e.cIndex(0));
  for (const auto &[slot, values] : slots) {
    Value top = results[values.front()].first;
    for (size_t v : values)
      top = larger(results[v].first, top);
    Value sum32 = e.fastExp(e.subf(results[values.front()].first, top));
    for (size_t v : ArrayRef(values).drop_front())
      sum32 = e.addf(sum32, e.fastExp(e.subf(results[v].first, top)));
    Value sum = toF64(sum32);
    // The lanes holding the rest of the row's slab: the same merge in every
    // lane (IEEE addition commutes), so each ends with the same bits.
    for (int32_t mask : slabs.laneMasks) {
      Value otherTop = shuffleXor(e, top, mask, 32);
      Value otherSum = shuffleXorF64(e, sum, mask, 32);
      Value both = larger(otherTop, top);
      sum = e.addf(e.mulf(sum, rescaleToLargest(e, top, both)),
                   e.mulf(otherSum, rescaleToLargest(e, otherTop, both)));
      top = both;
    }
    // Row r's slab of column c: part r * perRow + c / width, where the
    // slot's first value lies.
    Value at = results[values.front()].second;
    Value row = e.divIndex(at, n);
    Value slab =
        e.divIndex(arith::RemUIOp::create(b, at, e.cIndex(n)), slabs.width);
    Value part = e.addIndex(e.mulIndex(row, e.cIndex(perRow)), slab);
    e.ifThen(writes, [&] {
      Value pair = vector::FromElementsOp::create(b, VectorType::get({2}, f64),
                                                  ValueRange{toF64(top), sum});
      vector::StoreOp::create(b, pair, parts,
                              ValueRange{e.mulIndex(part, e.cIndex(2))},
                              /*nontemporal=*/false, b.getI64IntegerAttr(16));
    });
  }
}

bool GemmKernelLowering::resultIsAddedTo() const {
  Value result = kernel->getResult(0);
  // Through reshapes (the schedule's buffer is the same).
  while (result.hasOneUse() &&
         isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
             *result.getUsers().begin()))
    result = result.getUsers().begin()->getResult(0);
  if (!result.hasOneUse())
    return false;
  auto reader = dyn_cast<KernelOp>(*result.getUsers().begin());
  return reader && addsItsInputs(reader);
}

bool tetra::conversion::addsItsInputs(KernelOp kernel) {
  Block &body = kernel.getBodyBlock();
  const unsigned inputs = body.getNumArguments();
  if (inputs < 2 || kernel.getNumResults() != 1 ||
      static_cast<unsigned>(std::distance(body.without_terminator().begin(),
                                          body.without_terminator().end())) !=
          inputs - 1)
    return false;
  // Add i sums the previous add (argument 0 for the first) and argument
  // i + 1 (the first in either order: IEEE addition commutes).
  Value sum = body.getArgument(0);
  for (auto [i, op] : llvm::enumerate(body.without_terminator())) {
    auto add = dyn_cast<AddOp>(op);
    Value next = body.getArgument(i + 1);
    if (!add || !((add->getOperand(0) == sum && add->getOperand(1) == next) ||
                  (i == 0 && add->getOperand(0) == next &&
                   add->getOperand(1) == sum)))
      return false;
    sum = add.getResult();
  }
  return body.getTerminator()->getOperand(0) == sum;
}

//===----------------------------------------------------------------------===//
// The description (the bundle's manifest)
//===----------------------------------------------------------------------===//

static StringRef kindName(OperandKind kind) {
  switch (kind) {
  case OperandKind::MX:
    return "mx";
  case OperandKind::NVFP4:
    return "nvfp4";
  case OperandKind::BF16:
    return "bf16";
  }
  return "";
}

DictionaryAttr GemmKernelLowering::describeOperand(Builder &b,
                                                   const OperandPlan &operand) {
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
  StringRef scale = operand.kind == OperandKind::MX      ? "e8m0"
                    : operand.kind == OperandKind::NVFP4 ? "e4m3"
                                                         : "none";
  StringRef rule = operand.scaled()
                       ? stringifyScaleRule(quant.getBlockScale().getRule())
                       : StringRef("none");
  return b.getDictionaryAttr({
      b.getNamedAttr("input", b.getI64IntegerAttr(operand.input)),
      b.getNamedAttr("shape", b.getDenseI64ArrayAttr(operand.type.getShape())),
      b.getNamedAttr("axis", b.getI64IntegerAttr(operand.axis)),
      b.getNamedAttr("kind", b.getStringAttr(kindName(operand.kind))),
      b.getNamedAttr("format", b.getStringAttr(stringifyElementFormat(
                                   quant.getFormat()))),
      b.getNamedAttr("block", b.getI64IntegerAttr(operand.block())),
      b.getNamedAttr("scale", b.getStringAttr(scale)),
      b.getNamedAttr("rule", b.getStringAttr(rule)),
      b.getNamedAttr("rounding",
                     b.getStringAttr(stringifyRounding(quant.getRounding()))),
      b.getNamedAttr("tensor_id",
                     b.getI64IntegerAttr(static_cast<int64_t>(operand.tensorId))),
      b.getNamedAttr("rotation", b.getDictionaryAttr(rotationFields)),
      // The scratch codes and scales: [M or N][K], [M or N][K / block]
      // (k_major), or the input's own [K][M or N] (mn_major: BF16 alone).
      b.getNamedAttr("scratch_layout",
                     b.getStringAttr(operand.mnMajor ? "mn_major" : "k_major")),
      b.getNamedAttr("scratch_encoding",
                     b.getStringAttr(scratchEncoding(operand))),
  });
}

DictionaryAttr GemmKernelLowering::describe(Builder &b) {
  SmallVector<NamedAttribute> scratch;
  for (const OperandPlan *operand : {&lhs, &rhs}) {
    auto add = [&](StringRef what, int64_t bytes) {
      scratch.push_back(b.getNamedAttr(operand->side + "." + what.str(),
                                       b.getI64IntegerAttr(bytes)));
    };
    add("codes", operand->count() * operand->elementBytes());
    if (operand->scaled())
      add("scales", operand->count() / operand->block());
    if (operand->kind == OperandKind::NVFP4) {
      add("amax", 4);
      add("tensor_scale", 4);
    }
    if (foldsScales()) {
      add("fold_refs", 4 * operand->count() / k);
      add("folded", operand->count());
    }
    if (sumsExactly())
      add("exact_refs", 4 * operand->count() / k);
    if (sumsExactly() && copyStaged())
      add("exact", operand->count());
  }
  if (tiling.splitK > 1)
    scratch.push_back(b.getNamedAttr(
        "partials", b.getI64IntegerAttr(4 * tiling.splitK * m * n)));
  SmallVector<NamedAttribute> planFields = {
      b.getNamedAttr("block_tile",
                     b.getDenseI64ArrayAttr({tiling.blockM, tiling.blockN})),
      b.getNamedAttr("group_tile", b.getDenseI64ArrayAttr(groupTile())),
      b.getNamedAttr("threads", b.getI64IntegerAttr(tiling.threads)),
      b.getNamedAttr("step_k", b.getI64IntegerAttr(tiling.stepK)),
      b.getNamedAttr("split_k", b.getI64IntegerAttr(tiling.splitK)),
      b.getNamedAttr("chunk", b.getI64IntegerAttr(tiling.chunk)),
      b.getNamedAttr("staged_bytes",
                     b.getI64IntegerAttr(stagedBuffers() * stageBytes())),
      b.getNamedAttr("staged_buffers", b.getI64IntegerAttr(stagedBuffers())),
      b.getNamedAttr("staging",
                     b.getStringAttr(specializesWarps() ? "warp_specialized"
                                     : copyStaged()     ? "async_copy"
                                                        : "registers")),
      b.getNamedAttr("pitch", b.getDenseI64ArrayAttr(
                                  {tiling.pitch[0], tiling.pitch[1]})),
      b.getNamedAttr("instruction", b.getStringAttr(instruction())),
      b.getNamedAttr("folds_scales", b.getBoolAttr(foldsScales())),
      b.getNamedAttr("sums_exactly", b.getBoolAttr(sumsExactly())),
  };
  if (sumsExactly())
    planFields.push_back(b.getNamedAttr("exact_instruction",
                                        b.getStringAttr(exactInstruction())));
  DictionaryAttr plan = b.getDictionaryAttr(planFields);
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
      b.getNamedAttr("plan", plan),
      b.getNamedAttr("scratch", b.getDictionaryAttr(scratch)),
  });
}

//===----------------------------------------------------------------------===//
// The prologue: rotation and quantization, one thread per segment along K
//===----------------------------------------------------------------------===//

/// A kPlusAddendSuffix variant: its last two arguments, the result and
/// the addend, are distinct buffers (the add's output and one of its
/// inputs, live at once), so the epilogue's loads of the addend may be
/// issued ahead of its stores of the result.
static void markAddendVariant(gpu::GPUFuncOp variant) {
  markVariant(variant);
  const unsigned count = variant.getNumArguments();
  for (unsigned i : {count - 2, count - 1})
    variant.setArgAttr(i, "llvm.noalias",
                       UnitAttr::get(variant.getContext()));
}

void tetra::conversion::markVariant(gpu::GPUFuncOp variant) {
  NamedAttrList fields(variant->getAttrOfType<DictionaryAttr>("tetra.launch"));
  fields.set("variant", BoolAttr::get(variant.getContext(), true));
  variant->setAttr("tetra.launch", fields.getDictionary(variant.getContext()));
}

gpu::GPUFuncOp tetra::conversion::createLaunch(OpBuilder &moduleBuilder, Location loc,
                            const std::string &name,
                            ArrayRef<std::pair<std::string, Type>> arguments,
                            ArrayRef<int64_t> grid, ArrayRef<int64_t> block) {
  SmallVector<Type> types;
  SmallVector<Attribute> names;
  for (const auto &[argument, type] : arguments) {
    types.push_back(type);
    names.push_back(moduleBuilder.getStringAttr(argument));
  }
  auto func = gpu::GPUFuncOp::create(
      moduleBuilder, loc, name,
      FunctionType::get(moduleBuilder.getContext(), types, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                moduleBuilder.getUnitAttr());
  // Every buffer starts on a 16-byte boundary (the arena's offsets are
  // multiples of 64, the runtime's allocations of 256): the backends may
  // then widen neighbouring loads and stores into 16-byte ones.
  for (auto [index, type] : llvm::enumerate(types))
    if (isa<MemRefType>(type))
      func.setArgAttr(index, "llvm.align", moduleBuilder.getI64IntegerAttr(16));
  // The block size, for the backends' register allocation (reqntid,
  // amdgpu-flat-work-group-size).
  func->setAttr(func.getKnownBlockSizeAttrName(),
                moduleBuilder.getDenseI32ArrayAttr(
                    {static_cast<int32_t>(block[0]),
                     static_cast<int32_t>(block[1]),
                     static_cast<int32_t>(block[2])}));
  func->setAttr(
      "tetra.launch",
      moduleBuilder.getDictionaryAttr(
          {moduleBuilder.getNamedAttr("grid",
                                      moduleBuilder.getDenseI64ArrayAttr(grid)),
           moduleBuilder.getNamedAttr(
               "block", moduleBuilder.getDenseI64ArrayAttr(block)),
           moduleBuilder.getNamedAttr("arguments",
                                      moduleBuilder.getArrayAttr(names))}));
  return func;
}

namespace {

/// One thread's segment of an operand along K (the larger of the scale
/// block and the rotation block): where its elements lie, and their
/// values after the rotation.
struct Segment {
  Value o, seg, i; ///< outer index, segment along the axis, inner index
  int64_t length = 0, extent = 0, innerSize = 0;
  function_ref<Value(Value)> indexOf; ///< flat index of element j
  /// Element j's index in the scratch buffers, which hold every operand
  /// K-major (its rows along K: [M or N][K]), whatever its own layout.
  function_ref<Value(Value)> kMajorIndexOf;
  Value kMajorRow; ///< The segment's row (o·innerSize + i) in them.
  function_ref<Value(Value)> value;   ///< element j, rotated
};

/// Builds `func`'s body: a thread per segment of `operand` (its input is
/// argument 0, the seed and step the last two), the rotation in private
/// buffers, then `body` for each thread in range.
void buildSegmentThreads(gpu::GPUFuncOp func, const OperandPlan &operand,
                         int64_t block,
                         function_ref<void(QuantizationEmitter &, Segment &)> body) {
  MLIRContext *context = func.getContext();
  Type f32 = Float32Type::get(context);
  ArrayRef<int64_t> shape = operand.type.getShape();
  const int64_t extent = shape[operand.axis];
  const int64_t outer = operand.axis == 0 ? 1 : shape[0];
  const int64_t innerSize = operand.axis == 0 ? shape[1] : 1;
  const bool rotated = !operand.rotation.isNone();
  const int64_t rotationBlock =
      rotated ? operand.rotation.getBlockSize() : block;
  const int64_t segment = std::max(block, rotationBlock);
  const int64_t segments = extent / segment;
  const int64_t threads = outer * segments * innerSize;

  Block &entry = func.getBody().front();
  ImplicitLocOpBuilder b(operand.loc, context);
  b.setInsertionPointToStart(&entry);
  QuantizationEmitter e(b);
  Value input = entry.getArgument(0);
  Value step32 =
      e.trunc(entry.getArgument(entry.getNumArguments() - 1), e.i32());

  Value thread = e.addIndex(
      e.mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::x),
                 e.cIndex(kPrologueThreads)),
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
  // Every loop below unrolls: the segment lives in registers, loaded once.
  e.unrollsLoops = true;

  Segment s;
  s.length = segment;
  s.extent = extent;
  s.innerSize = innerSize;
  s.i = arith::RemUIOp::create(b, thread, e.cIndex(innerSize));
  Value rest = e.divIndex(thread, innerSize);
  s.seg = arith::RemUIOp::create(b, rest, e.cIndex(segments));
  s.o = e.divIndex(rest, segments);
  Value first = e.mulIndex(s.seg, e.cIndex(segment));
  auto indexOf = [&](Value j) {
    Value row =
        e.addIndex(e.mulIndex(s.o, e.cIndex(extent)), e.addIndex(first, j));
    return e.addIndex(e.mulIndex(row, e.cIndex(innerSize)), s.i);
  };
  s.indexOf = indexOf;
  s.kMajorRow = e.addIndex(e.mulIndex(s.o, e.cIndex(innerSize)), s.i);
  auto kMajorIndexOf = [&](Value j) {
    return e.addIndex(e.mulIndex(s.kMajorRow, e.cIndex(extent)),
                      e.addIndex(first, j));
  };
  s.kMajorIndexOf = kMajorIndexOf;

  // The segment's elements, each loaded once: 16 bytes a load where they
  // are contiguous (the segment starts at a multiple of 32 elements of a
  // 16-byte aligned buffer), else one at a time.
  SmallVector<Value> loaded;
  if (innerSize == 1) {
    for (int64_t j = 0; j < segment; j += 4) {
      Value quad = vector::LoadOp::create(
          b, VectorType::get({4}, f32), input, ValueRange{indexOf(e.cIndex(j))},
          /*nontemporal=*/false, b.getI64IntegerAttr(16));
      for (int64_t q = 0; q < 4; ++q)
        loaded.push_back(
            vector::ExtractOp::create(b, quad, ArrayRef<int64_t>{q}));
    }
  } else {
    for (int64_t j = 0; j < segment; ++j)
      loaded.push_back(
          memref::LoadOp::create(b, input, ValueRange{indexOf(e.cIndex(j))}));
  }
  auto elementAt = [&](Value j) -> int64_t {
    std::optional<int64_t> constant = QuantizationEmitter::constantIndex(j);
    assert(constant && "an unrolled segment's index is a constant");
    return *constant;
  };

  // The rotated segment, in a local buffer indexed by constants only, which
  // LLVM keeps in registers (signs and butterflies per rotation block, then
  // 1/sqrt(B)).
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
        Value x = loaded[elementAt(e.addIndex(base, j))];
        if (signs)
          x = e.mulf(x, memref::LoadOp::create(b, signs, j));
        memref::StoreOp::create(b, x, work, j);
      });
      e.hadamardButterflies(work, rotationBlock);
      e.loop(e.cIndex(0), e.cIndex(rotationBlock), [&](Value j) {
        Value x =
            e.mulf(memref::LoadOp::create(b, work, j), e.cF32(inverseSqrt));
        memref::StoreOp::create(b, x, rotatedValues, e.addIndex(base, j));
      });
    }
  }
  auto value = [&](Value j) -> Value {
    if (rotated)
      return memref::LoadOp::create(b, rotatedValues, j);
    return loaded[elementAt(j)];
  };
  s.value = value;
  body(e, s);
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b);
}

} // namespace

void GemmKernelLowering::buildPrologue(OpBuilder &moduleBuilder,
                                       const OperandPlan &operand) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i8 = IntegerType::get(context, 8),
       i32 = IntegerType::get(context, 32),
       i64 = IntegerType::get(context, 64);
  const std::string name = (kernel.getKernelName() + "__" + operand.side).str();
  const std::string scratch = "scratch:" + operand.side;
  const int64_t count = operand.count();
  const int64_t block = operand.scaled() ? operand.block() : 32;
  const int64_t extent = operand.type.getDimSize(operand.axis);
  const int64_t segment = std::max(
      block, operand.rotation.isNone() ? block
                                       : operand.rotation.getBlockSize());
  const int64_t threads = count / segment;
  const SmallVector<int64_t> grid = {
      (threads + kPrologueThreads - 1) / kPrologueThreads, 1, 1};
  const SmallVector<int64_t> threadBlock = {kPrologueThreads, 1, 1};
  const std::pair<std::string, Type> input = {
      fmt::format("input:{}", operand.input), flat(count, f32)};
  const std::pair<std::string, Type> seed = {"scalar:seed", i64},
                                     step = {"scalar:step", i64};
  // Element j's stochastic-rounding bits, j counted from `base` in the
  // segment (the launch's seed and step are its last two arguments).
  auto randomBitsAt = [&](QuantizationEmitter &e, Segment &s,
                          gpu::GPUFuncOp func, Value base) {
    Value seedValue = func.getArgument(func.getNumArguments() - 2);
    Value step32 =
        e.trunc(func.getArgument(func.getNumArguments() - 1), e.i32());
    Value id = e.c32(static_cast<uint32_t>(operand.tensorId));
    return [&e, &s, seedValue, step32, id, base](Value j) -> Value {
      return e.randomBits(seedValue, step32, id,
                          e.toI64(s.indexOf(e.addIndex(base, j))));
    };
  };
  // Each scale block of a thread's segment through `quantizeBlock` (the
  // emitter's MX or NVFP4 block): its elements, their stochastic-rounding
  // bits, and where its codes (kCodesPerStore at a time: 16-byte stores of
  // the thread's contiguous K-major run, into `codes` as i32 words) and
  // its scale go.
  using Load = function_ref<Value(Value)>;
  using StoreCodes = QuantizationEmitter::StoreCodes;
  using StoreScale = function_ref<void(Value)>;
  auto quantizeBlocks =
      [&](QuantizationEmitter &e, Segment &s, gpu::GPUFuncOp func,
          Value codes, Value scales,
          function_ref<void(Load, Load, StoreCodes, StoreScale)> quantizeBlock) {
        const int64_t blocksAlong = extent / block;
        for (int64_t q = 0; q < segment / block; ++q) {
          Value base = e.cIndex(q * block);
          Value blockIndex = e.addIndex(
              e.mulIndex(s.seg, e.cIndex(segment / block)), e.cIndex(q));
          Value scaleIndex = e.addIndex(
              e.mulIndex(s.kMajorRow, e.cIndex(blocksAlong)), blockIndex);
          auto bits = randomBitsAt(e, s, func, base);
          quantizeBlock(
              [&](Value j) { return s.value(e.addIndex(base, j)); }, bits,
              [&](Value j, ArrayRef<Value> group) {
                SmallVector<Value> words;
                for (int64_t w = 0; w < kCodesPerStore / 4; ++w) {
                  Value word = e.c32(0);
                  for (int64_t c = 0; c < 4; ++c)
                    word = e.bitOr(word, e.shl(e.bitAnd(group[4 * w + c],
                                                        e.c32(0xFF)),
                                               e.c32(8 * c)));
                  words.push_back(scratchCodes(e, word, operand));
                }
                Value vector = vector::FromElementsOp::create(
                    e.b, VectorType::get({kCodesPerStore / 4}, e.i32()), words);
                vector::StoreOp::create(
                    e.b, vector, codes,
                    ValueRange{e.divIndex(s.kMajorIndexOf(e.addIndex(base, j)), 4)},
                    /*nontemporal=*/false, e.b.getI64IntegerAttr(16));
              },
              [&](Value code) {
                memref::StoreOp::create(e.b, e.trunc(code, e.i8()), scales,
                                        ValueRange{scaleIndex});
              });
        }
      };

  switch (operand.kind) {
  case OperandKind::BF16: {
    if (operand.rotation.isNone() && (operand.axis == 1 || operand.mnMajor)) {
      buildRoundingPrologue(moduleBuilder, operand);
      return;
    }
    gpu::GPUFuncOp func = createLaunch(
        moduleBuilder, operand.loc, name,
        {input, {scratch + ".codes", flat(count / 2, i32)}, seed, step}, grid,
        threadBlock);
    buildSegmentThreads(func, operand, block, [&](QuantizationEmitter &e,
                                                  Segment &s) {
      // Eight bf16 codes (16 bytes) a store.
      Value codes = func.getArgument(1);
      e.loop(e.cIndex(0), e.cIndex(s.length / 8), [&](Value g) {
        Value first = e.mulIndex(g, e.cIndex(8));
        SmallVector<Value> words;
        for (int64_t w = 0; w < 4; ++w)
          words.push_back(
              e.bf16Pair(s.value(e.addIndex(first, e.cIndex(2 * w))),
                         s.value(e.addIndex(first, e.cIndex(2 * w + 1)))));
        vector::StoreOp::create(
            e.b,
            vector::FromElementsOp::create(e.b, VectorType::get({4}, e.i32()),
                                           words),
            codes, ValueRange{e.divIndex(s.kMajorIndexOf(first), 2)},
            /*nontemporal=*/false, e.b.getI64IntegerAttr(16));
      });
    });
    return;
  }
  case OperandKind::MX: {
    gpu::GPUFuncOp func = createLaunch(
        moduleBuilder, operand.loc, name,
        {input,
         {scratch + ".codes", flat(count / 4, i32)},
         {scratch + ".scales", flat(count / block, i8)},
         seed,
         step},
        grid, threadBlock);
    const FormatConstants element =
        constantsOf(numericsOf(operand.quant.getFormat()));
    buildSegmentThreads(func, operand, block, [&](QuantizationEmitter &e,
                                                  Segment &s) {
      quantizeBlocks(e, s, func, func.getArgument(1), func.getArgument(2),
                     [&](auto load, auto bits, auto storeCode, auto storeScale) {
                       e.quantizeMXBlock(
                           block, element,
                           operand.quant.getBlockScale().getRule(),
                           operand.quant.getRounding(), load, bits,
                           kCodesPerStore, storeCode, storeScale);
                     });
    });
    return;
  }
  case OperandKind::NVFP4: {
    // The tensor's amax over the rotated values: cleared, then an atomic
    // maximum of the finite magnitudes' bits (order-independent).
    const std::pair<std::string, Type> amax = {scratch + ".amax",
                                               flat(1, i32)};
    gpu::GPUFuncOp clear = createLaunch(moduleBuilder, operand.loc,
                                        name + "_amax_clear", {amax}, {1, 1, 1},
                                        {1, 1, 1});
    {
      ImplicitLocOpBuilder b(operand.loc, context);
      b.setInsertionPointToStart(&clear.getBody().front());
      QuantizationEmitter e(b);
      memref::StoreOp::create(b, e.c32(0), clear.getArgument(0),
                              ValueRange{e.cIndex(0)});
      gpu::ReturnOp::create(b);
    }
    gpu::GPUFuncOp amaxLaunch =
        createLaunch(moduleBuilder, operand.loc, name + "_amax",
                     {input, amax, seed, step}, grid, threadBlock);
    buildSegmentThreads(amaxLaunch, operand, block,
                        [&](QuantizationEmitter &e, Segment &s) {
                          Value top = e.loop(
                              e.cIndex(0), e.cIndex(s.length),
                              ValueRange{e.c32(0)},
                              [&](Value j, ValueRange carried)
                                  -> SmallVector<Value> {
                                auto [magnitude, finite] =
                                    e.magnitudeOf(s.value(j));
                                return {e.select(
                                    finite, e.maxui(carried[0], magnitude),
                                    carried[0])};
                              })[0];
                          memref::AtomicRMWOp::create(
                              e.b, arith::AtomicRMWKind::maxu, top,
                              amaxLaunch.getArgument(1),
                              ValueRange{e.cIndex(0)});
                        });
    gpu::GPUFuncOp func = createLaunch(
        moduleBuilder, operand.loc, name,
        {input,
         amax,
         {scratch + ".codes", flat(count / 4, i32)},
         {scratch + ".scales", flat(count / block, i8)},
         {scratch + ".tensor_scale", flat(1, f32)},
         seed,
         step},
        grid, threadBlock);
    const FormatConstants element = constantsOf(numerics::ElementFormat::E2M1);
    buildSegmentThreads(func, operand, block, [&](QuantizationEmitter &e,
                                                  Segment &s) {
      Value codes = func.getArgument(2), scales = func.getArgument(3);
      // numerics::nvfp4TensorScale: amax / (448 * 6), or 1 when that is 0.
      Value amaxValue = e.bitcast(
          memref::LoadOp::create(e.b, func.getArgument(1),
                                 ValueRange{e.cIndex(0)}),
          e.f32());
      Value quotient =
          e.divf(amaxValue, e.cF32(448.0f * static_cast<float>(
                                                element.maxFinite)));
      Value tensorScale =
          e.select(e.cmpf(CmpFPredicate::OEQ, quotient, e.cF32(0.0f)),
                   e.cF32(1.0f), quotient);
      Value first = arith::CmpIOp::create(
          e.b, CmpIPredicate::eq,
          e.addIndex(s.seg, e.addIndex(s.o, s.i)), e.cIndex(0));
      auto write = scf::IfOp::create(e.b, first, /*withElseRegion=*/false);
      {
        OpBuilder::InsertionGuard guard(e.b);
        e.b.setInsertionPointToStart(&write.getThenRegion().front());
        memref::StoreOp::create(e.b, tensorScale, func.getArgument(4),
                                ValueRange{e.cIndex(0)});
      }
      quantizeBlocks(e, s, func, codes, scales,
                     [&](auto load, auto bits, auto storeCode, auto storeScale) {
                       e.quantizeNVFP4Block(block, element,
                                            operand.quant.getBlockScale()
                                                .getRule(),
                                            operand.quant.getRounding(),
                                            tensorScale, load, bits,
                                            kCodesPerStore, storeCode,
                                            storeScale);
                     });
    });
    return;
  }
  }
}

/// A launch's thread (block x · kPrologueThreads + thread x), the
/// builder's point then inside `if thread < threads`.
static Value guardedThread(QuantizationEmitter &e, int64_t threads) {
  Value thread = e.addIndex(
      e.mulIndex(gpu::BlockIdOp::create(e.b, gpu::Dimension::x),
                 e.cIndex(kPrologueThreads)),
      gpu::ThreadIdOp::create(e.b, gpu::Dimension::x));
  auto guard = scf::IfOp::create(
      e.b, arith::CmpIOp::create(e.b, CmpIPredicate::ult, thread,
                                 e.cIndex(threads)),
      /*withElseRegion=*/false);
  e.b.setInsertionPointToStart(&guard.getThenRegion().front());
  return thread;
}

void GemmKernelLowering::buildRoundingPrologue(OpBuilder &moduleBuilder,
                                               const OperandPlan &operand) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32),
       i64 = IntegerType::get(context, 64);
  const int64_t count = operand.count();
  // A thread per eight elements: two 16-byte loads, one 16-byte store.
  const int64_t threads = count / 8;
  gpu::GPUFuncOp func = createLaunch(
      moduleBuilder, operand.loc,
      (kernel.getKernelName() + "__" + operand.side).str(),
      {{fmt::format("input:{}", operand.input), flat(count, f32)},
       {"scratch:" + operand.side + ".codes", flat(count / 2, i32)},
       {"scalar:seed", i64},
       {"scalar:step", i64}},
      {(threads + kPrologueThreads - 1) / kPrologueThreads, 1, 1},
      {kPrologueThreads, 1, 1});
  func->setAttr(kRoundsToBF16, UnitAttr::get(context));
  Block &entry = func.getBody().front();
  ImplicitLocOpBuilder b(operand.loc, context);
  b.setInsertionPointToStart(&entry);
  QuantizationEmitter e(b);
  e.unrollsLoops = true;
  Value thread = guardedThread(e, threads);
  Value first = e.mulIndex(thread, e.cIndex(8));
  SmallVector<Value> values;
  for (int64_t half = 0; half < 2; ++half) {
    Value quad = vector::LoadOp::create(
        b, VectorType::get({4}, f32), func.getArgument(0),
        ValueRange{e.addIndex(first, e.cIndex(4 * half))},
        /*nontemporal=*/false, b.getI64IntegerAttr(16));
    for (int64_t q = 0; q < 4; ++q)
      values.push_back(vector::ExtractOp::create(b, quad, ArrayRef<int64_t>{q}));
  }
  SmallVector<Value> words;
  for (int64_t w = 0; w < 4; ++w)
    words.push_back(e.bf16Pair(values[2 * w], values[2 * w + 1]));
  vector::StoreOp::create(
      b, vector::FromElementsOp::create(b, VectorType::get({4}, i32), words),
      func.getArgument(1), ValueRange{e.mulIndex(thread, e.cIndex(4))},
      /*nontemporal=*/false, b.getI64IntegerAttr(16));
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b);
}

//===----------------------------------------------------------------------===//
// Scale folding: each fiber's reference code, then its folded codes
//===----------------------------------------------------------------------===//

void GemmKernelLowering::buildFold(OpBuilder &moduleBuilder,
                                   const OperandPlan &operand) {
  MLIRContext *context = kernel.getContext();
  Type i8 = IntegerType::get(context, 8), i32 = IntegerType::get(context, 32);
  const std::string name = (kernel.getKernelName() + "__" + operand.side).str();
  const std::string scratch = "scratch:" + operand.side;
  const int64_t count = operand.count(), block = operand.block();
  const int64_t fibers = count / k, perFiber = k / block, blocks = count / block;
  using Buffer = std::pair<std::string, Type>;
  const Buffer codes = {scratch + ".codes", flat(count / 4, i32)},
               scales = {scratch + ".scales", flat(blocks, i8)},
               refs = {scratch + ".fold_refs", flat(fibers, i32)},
               folded = {scratch + ".folded", flat(count / 4, i32)},
               exactRefs = {scratch + ".exact_refs", flat(fibers, i32)},
               exact = {scratch + ".exact", flat(count / 4, i32)};
  // Exact integers where the exact pass copies them (copyStaged); else it
  // reads the codes and scales and only the references are needed.
  const bool folds = foldsScales(), exacts = sumsExactly(),
             integers = exacts && copyStaged();
  // The launches' arguments: the fold's, then the exact sums'.
  auto pick = [&](std::initializer_list<Buffer> always,
                  std::initializer_list<Buffer> folding,
                  std::initializer_list<Buffer> exactly) {
    SmallVector<Buffer> buffers(always);
    if (folds)
      buffers.append(folding);
    if (exacts)
      buffers.append(exactly);
    return buffers;
  };
  // A launch of a thread per item below `items`, each running `body` with
  // its arguments by name.
  auto threadPerItem = [&](const std::string &launch,
                           ArrayRef<Buffer> arguments, int64_t items,
                           function_ref<void(QuantizationEmitter &,
                                             function_ref<Value(const Buffer &)>,
                                             Value)>
                               body) {
    gpu::GPUFuncOp func = createLaunch(
        moduleBuilder, operand.loc, launch, arguments,
        {(items + kPrologueThreads - 1) / kPrologueThreads, 1, 1},
        {kPrologueThreads, 1, 1});
    ImplicitLocOpBuilder b(operand.loc, context);
    b.setInsertionPointToStart(&func.getBody().front());
    QuantizationEmitter e(b);
    Value item = e.addIndex(
        e.mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::x),
                   e.cIndex(kPrologueThreads)),
        gpu::ThreadIdOp::create(b, gpu::Dimension::x));
    auto guard = scf::IfOp::create(
        b, e.cmp(CmpIPredicate::ult, item, e.cIndex(items)),
        /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      auto argument = [&](const Buffer &buffer) -> Value {
        for (auto [i, candidate] : llvm::enumerate(arguments))
          if (candidate.first == buffer.first)
            return func.getArgument(i);
        llvm_unreachable("not an argument of the launch");
      };
      body(e, argument, item);
    }
    gpu::ReturnOp::create(b);
  };

  // A thread per fiber: its largest and smallest code (16 at a time where
  // the fiber allows), and its reference codes where it folds (sums
  // exactly), else -1.
  threadPerItem(
      name + "_fold_refs", pick({scales}, {refs}, {exactRefs}), fibers,
      [&](QuantizationEmitter &e, function_ref<Value(const Buffer &)> argument,
          Value fiber) {
        ImplicitLocOpBuilder &b = e.b;
        Value first = e.mulIndex(fiber, e.cIndex(perFiber));
        const int64_t width = perFiber % 16 == 0 ? 16 : 1;
        SmallVector<Value> range = e.loop(
            e.cIndex(0), e.cIndex(perFiber / width), {e.c32(0), e.c32(255)},
            [&](Value v, ValueRange extremes) -> SmallVector<Value> {
              Value at = e.addIndex(first, e.mulIndex(v, e.cIndex(width)));
              Value largest, smallest;
              if (width == 1) {
                largest = smallest = e.zext(
                    memref::LoadOp::create(b, argument(scales), ValueRange{at}),
                    i32);
              } else {
                Value codes = vector::LoadOp::create(
                    b, VectorType::get({width}, i8), argument(scales),
                    ValueRange{at}, /*nontemporal=*/false,
                    b.getI64IntegerAttr(16));
                largest = e.zext(vector::ReductionOp::create(
                                     b, vector::CombiningKind::MAXUI, codes),
                                 i32);
                smallest = e.zext(vector::ReductionOp::create(
                                      b, vector::CombiningKind::MINUI, codes),
                                  i32);
              }
              return {arith::MaxUIOp::create(b, extremes[0], largest),
                      arith::MinUIOp::create(b, extremes[1], smallest)};
            });
        // numerics::fiberFolds and fiberSumsExactly, the windows' one
        // definition.
        using namespace numerics;
        auto reference = [&](int64_t above, int64_t spread) {
          return e.fiberReference(range[0], range[1], above, spread);
        };
        if (folds)
          memref::StoreOp::create(b, reference(kFoldAbove, kFoldBelow + kFoldAbove),
                                  argument(refs), ValueRange{fiber});
        if (exacts)
          memref::StoreOp::create(b, reference(kExactSpread, kExactSpread),
                                  argument(exactRefs), ValueRange{fiber});
      });

  // A thread per scale block: its codes folded by code - ref where its
  // fiber folds, else as they are; and as integers by code - ref where its
  // fiber sums exactly (else by 0: results the exact pass never stores).
  if (!folds && !integers)
    return;
  threadPerItem(
      name + "_fold",
      pick({codes, scales}, {refs, folded},
           integers ? std::initializer_list<Buffer>{exactRefs, exact}
                    : std::initializer_list<Buffer>{}),
      blocks,
      [&](QuantizationEmitter &e, function_ref<Value(const Buffer &)> argument,
          Value blockIndex) {
        ImplicitLocOpBuilder &b = e.b;
        Value code = e.zext(memref::LoadOp::create(b, argument(scales),
                                                   ValueRange{blockIndex}),
                            i32);
        Value fiber = e.divIndex(blockIndex, perFiber);
        auto offsetFrom = [&](const Buffer &references) {
          Value ref =
              memref::LoadOp::create(b, argument(references), ValueRange{fiber});
          return e.select(e.cmp(CmpIPredicate::sge, ref, e.c32(0)),
                          e.sub(code, ref), e.c32(0));
        };
        Value foldBy = folds ? offsetFrom(refs) : nullptr;
        Value exactBy = integers ? offsetFrom(exactRefs) : nullptr;
        for (int64_t v = 0; v < block / 16; ++v) {
          Value word =
              e.addIndex(e.mulIndex(blockIndex, e.cIndex(block / 4)),
                         e.cIndex(4 * v));
          Value vector = vector::LoadOp::create(
              b, VectorType::get({4}, i32), argument(codes), ValueRange{word},
              /*nontemporal=*/false, b.getI64IntegerAttr(16));
          auto store = [&](Value value, const Buffer &into) {
            vector::StoreOp::create(b, value, argument(into), ValueRange{word},
                                    /*nontemporal=*/false,
                                    b.getI64IntegerAttr(16));
          };
          if (folds)
            store(foldCodes(e, vector, foldBy), folded);
          if (integers)
            store(exactCodes(e, vector, exactBy), exact);
        }
      });
}

//===----------------------------------------------------------------------===//
// The GEMM launch: staged buffers, a barrier a step
//===----------------------------------------------------------------------===//

Value GemmKernelLowering::stepBarrier(QuantizationEmitter &e, Value) {
  gpu::BarrierOp::create(e.b);
  return nullptr;
}

Value GemmKernelLowering::stagedByte(QuantizationEmitter &e, Value stageAt,
                                     int side, Value row, Value kk) {
  const OperandPlan &operand = side == 0 ? lhs : rhs;
  Value tileAt =
      e.addIndex(stageAt, e.cIndex(side == 0 ? lhsTileAt() : rhsTileAt()));
  if (operand.mnMajor) {
    // Chunks of 64 rows (columns) of the tile, each stepK K-rows of 128
    // bytes (64 BF16 values along M or N), the 16-byte piece p of K-row kk
    // at p ^ (kk & 7): wgmma's MN-major 128-byte swizzle.
    Value at = e.addIndex(
        e.mulIndex(e.divIndex(row, 64), e.cIndex(tiling.stepK * 128)),
        e.mulIndex(kk, e.cIndex(128)));
    Value byteInRow = e.mulIndex(arith::RemUIOp::create(e.b, row, e.cIndex(64)),
                                 e.cIndex(2));
    Value piece = arith::XOrIOp::create(
        e.b, e.divIndex(byteInRow, 16),
        arith::AndIOp::create(e.b, kk, e.cIndex(7)));
    return e.addIndex(
        tileAt,
        e.addIndex(at, e.addIndex(e.mulIndex(piece, e.cIndex(16)),
                                  arith::RemUIOp::create(e.b, byteInRow,
                                                         e.cIndex(16)))));
  }
  const int64_t pitch = tiling.pitch[side];
  Value rowAt = e.mulIndex(row, e.cIndex(pitch));
  Value offset = tiling.packed[side]
                     ? e.divIndex(kk, 2)
                     : e.mulIndex(kk, e.cIndex(operand.elementBytes()));
  if (tiling.layout == StagedLayout::Swizzled) {
    // The 16-byte chunk's position: chunk ^ ((row·pitch >> 7) & (pitch/16 - 1)).
    Value swizzle = arith::AndIOp::create(
        e.b, arith::ShRUIOp::create(e.b, rowAt, e.cIndex(7)),
        e.cIndex(pitch / 16 - 1));
    Value chunk = arith::XOrIOp::create(e.b, e.divIndex(offset, 16), swizzle);
    offset = e.addIndex(e.mulIndex(chunk, e.cIndex(16)),
                        arith::RemUIOp::create(e.b, offset, e.cIndex(16)));
  }
  return e.addIndex(tileAt, e.addIndex(rowAt, offset));
}

Value GemmKernelLowering::stagedIndex(QuantizationEmitter &e,
                                      const StagedStep &step, int side,
                                      Value row, Value kk) {
  return e.divIndex(stagedByte(e, step.stageAt, side, row, kk), 4);
}

Value GemmKernelLowering::stagedWord(QuantizationEmitter &e,
                                     const StagedStep &step, int side,
                                     Value row, Value kk) {
  return memref::LoadOp::create(e.b, step.words,
                                ValueRange{stagedIndex(e, step, side, row, kk)});
}

Value GemmKernelLowering::stagedScale(QuantizationEmitter &e,
                                      const StagedStep &step, int64_t base,
                                      int64_t rows, Value row,
                                      Value blockInStep) {
  Value at = e.addIndex(
      e.addIndex(step.stageAt, e.cIndex(base)),
      e.addIndex(e.mulIndex(blockInStep, e.cIndex(rows)), row));
  return e.zext(memref::LoadOp::create(e.b, step.bytes, ValueRange{at}),
                e.i32());
}

Value GemmKernelLowering::lhsWord(QuantizationEmitter &e,
                                  const StagedStep &step, Value row, Value kk) {
  return stagedWord(e, step, 0, row, kk);
}
Value GemmKernelLowering::rhsWord(QuantizationEmitter &e,
                                  const StagedStep &step, Value col, Value kk) {
  return stagedWord(e, step, 1, col, kk);
}
Value GemmKernelLowering::lhsScaleCode(QuantizationEmitter &e,
                                       const StagedStep &step, Value row,
                                       Value blockInStep) {
  return stagedScale(e, step, lhsScalesAt(), tiling.blockM, row, blockInStep);
}
Value GemmKernelLowering::exactReference(QuantizationEmitter &e,
                                         const StagedStep &step, int side,
                                         Value at) {
  return memref::LoadOp::create(
      e.b, step.words,
      ValueRange{e.addIndex(
          e.cIndex(step.exactRefsAt + (side == 0 ? 0 : tiling.blockM)), at)});
}

Value GemmKernelLowering::exactOffset(QuantizationEmitter &e,
                                      const StagedStep &step, int side,
                                      Value at, Value code) {
  Value ref = exactReference(e, step, side, at);
  return e.select(e.cmp(CmpIPredicate::sge, ref, e.c32(0)), e.sub(code, ref),
                  e.c32(0));
}

Value GemmKernelLowering::rhsScaleCode(QuantizationEmitter &e,
                                       const StagedStep &step, Value col,
                                       Value blockInStep) {
  return stagedScale(e, step, rhsScalesAt(), tiling.blockN, col, blockInStep);
}

namespace {

/// How one operand's share of a step moves from global memory into the
/// staged tile: 16 bytes of a K-major row per load (the scratch codes are
/// K-major), a row's consecutive 16 bytes to consecutive threads — a
/// quarter warp's stores cover 128 contiguous bytes of the staged tile
/// (one padded row, or whole swizzled rows: distinct banks) — and a
/// thread's scale codes. An MN-major operand's (OperandPlan::mnMajor) 16
/// bytes are eight of the tile's rows at one K, consecutive along a K-row
/// of the scratch.
struct OperandStaging {
  const OperandPlan *operand;
  Value codes, scales; ///< global: memref<? x i32>, memref<? x i8> (or null)
  /// Folding plans: the folded codes (memref<? x i32>) and the fibers'
  /// reference codes (memref<? x i32>, -1 where a fiber does not fold).
  Value folded, foldRefs;
  /// Exact sums (sumsExactly): the integer codes and the exact references.
  Value exact, exactRefs;
  int64_t rows;        ///< Rows (columns) of the block's tile it covers.
  int64_t stepK, k, threads;
  /// The block's first step of K (index): a split GEMM's share.
  Value firstStep;
  int64_t scalesAt;
  bool packed; ///< E2M1 codes staged two per byte (16 codes as 8 bytes).
  Value origin; ///< The block's first row (column), index.
  /// The byte offset of K-element kk of row r in the staged buffer that
  /// starts at byte `stageAt`: (stageAt, r, kk).
  std::function<Value(Value, Value, Value)> stagedByte;

  int64_t elementsPerVector() const { return 16 / operand->elementBytes(); }
  /// Vectors per K-major row of the step, or (mnMajor) per K-row of the
  /// tile: consecutive threads take consecutive 16 bytes of global memory.
  int64_t vectorsPerRow() const {
    return (operand->mnMajor ? rows : stepK) / elementsPerVector();
  }
  int64_t vectorsPerStep() const { return rows * stepK / elementsPerVector(); }
  int64_t vectorsPerThread() const {
    return (vectorsPerStep() + threads - 1) / threads;
  }
  int64_t scalesPerStep() const {
    return operand->scaled() ? rows * (stepK / operand->block()) : 0;
  }
  int64_t scalesPerThread() const {
    return (scalesPerStep() + threads - 1) / threads;
  }
  /// The thread's vector q of a step: its row and its first K element
  /// within the step (threads past the step's last vector repeat it).
  std::pair<Value, Value> vectorAt(QuantizationEmitter &e, Value thread,
                                   int64_t q) {
    Value v = arith::MinUIOp::create(
        e.b, e.addIndex(thread, e.cIndex(q * threads)),
        e.cIndex(vectorsPerStep() - 1));
    Value along = e.divIndex(v, vectorsPerRow());
    Value across =
        e.mulIndex(arith::RemUIOp::create(e.b, v, e.cIndex(vectorsPerRow())),
                   e.cIndex(elementsPerVector()));
    if (operand->mnMajor)
      return {across, along};
    return {along, across};
  }
  /// Runs `body` where the thread's share `q` of `perStep` items exists.
  void inside(QuantizationEmitter &e, Value thread, int64_t q, int64_t perStep,
              function_ref<void()> body) {
    if ((q + 1) * threads <= perStep)
      return body();
    e.ifThen(arith::CmpIOp::create(e.b, CmpIPredicate::ult,
                                   e.addIndex(thread, e.cIndex(q * threads)),
                                   e.cIndex(perStep)),
             body);
  }

  /// The word (of the scratch codes as i32) where the thread's vector q of
  /// step `step` (index) starts.
  Value wordOf(QuantizationEmitter &e, Value thread, Value step, int64_t q) {
    auto [r, kk] = vectorAt(e, thread, q);
    Value row = e.addIndex(origin, r);
    Value along = e.addIndex(
        e.mulIndex(e.addIndex(firstStep, step), e.cIndex(stepK)), kk);
    Value element =
        operand->mnMajor
            ? e.addIndex(e.mulIndex(along, e.cIndex(operand->type.getDimSize(1))),
                         row)
            : e.addIndex(e.mulIndex(row, e.cIndex(k)), along);
    return e.divIndex(element, 4 / operand->elementBytes());
  }
  /// The thread's vectors (vector<4 x i32>) and scale codes of step `step`
  /// (index), in flight.
  SmallVector<Value> load(QuantizationEmitter &e, Value thread, Value step) {
    SmallVector<Value> values;
    for (int64_t q = 0; q < vectorsPerThread(); ++q)
      values.push_back(vector::LoadOp::create(
          e.b, VectorType::get({4}, e.i32()), codes,
          ValueRange{wordOf(e, thread, step, q)}, /*nontemporal=*/false,
          e.b.getI64IntegerAttr(16)));
    if (operand->scaled()) {
      const int64_t block = operand->block(), perStep = stepK / block;
      for (int64_t q = 0; q < scalesPerThread(); ++q) {
        Value w = arith::MinUIOp::create(
            e.b, e.addIndex(thread, e.cIndex(q * threads)),
            e.cIndex(scalesPerStep() - 1));
        // Staged as [block of the step][row]; global [row][block].
        Value c = e.divIndex(w, rows);
        Value r = arith::RemUIOp::create(e.b, w, e.cIndex(rows));
        Value chunk = e.addIndex(
            e.mulIndex(e.addIndex(firstStep, step), e.cIndex(perStep)), c);
        Value index = e.addIndex(
            e.mulIndex(e.addIndex(origin, r), e.cIndex(k / block)), chunk);
        values.push_back(memref::LoadOp::create(e.b, scales, ValueRange{index}));
      }
    }
    return values;
  }

  /// The values load() gave, into the staged buffer at byte `stageAt`;
  /// returns whether the thread's E8M0 scale codes are all moderate (in
  /// [127 - 45, 127 + 45]: StagedStep::moderateScales).
  Value store(QuantizationEmitter &e, Value thread, ValueRange values,
              Value stageAt, Value words, Value bytes) {
    for (int64_t q = 0; q < vectorsPerThread(); ++q)
      inside(e, thread, q, vectorsPerStep(), [&] {
        auto [r, kk] = vectorAt(e, thread, q);
        Value vector = values[q];
        if (packed) {
          // Each word's four E2M1 codes (a byte each) as four nibbles.
          SmallVector<Value> halves;
          for (int64_t w = 0; w < 4; ++w) {
            Value word =
                vector::ExtractOp::create(e.b, vector, ArrayRef<int64_t>{w});
            Value nibbles = e.c32(0);
            for (int64_t p = 0; p < 4; ++p)
              nibbles = e.bitOr(nibbles, e.bitAnd(e.shrui(word, e.c32(4 * p)),
                                                  e.c32(0xF << (4 * p))));
            halves.push_back(nibbles);
          }
          vector = vector::FromElementsOp::create(
              e.b, VectorType::get({2}, e.i32()),
              ValueRange{e.bitOr(halves[0], e.shl(halves[1], e.c32(16))),
                         e.bitOr(halves[2], e.shl(halves[3], e.c32(16)))});
        }
        vector::StoreOp::create(e.b, vector, words,
                                ValueRange{e.divIndex(stagedByte(stageAt, r, kk), 4)},
                                /*nontemporal=*/false,
                                e.b.getI64IntegerAttr(packed ? 8 : 16));
      });
    Value moderate = arith::ConstantIntOp::create(e.b, 1, 1);
    if (operand->kind == OperandKind::MX)
      for (int64_t q = 0; q < scalesPerThread(); ++q) {
        Value offset =
            e.sub(e.zext(values[vectorsPerThread() + q], e.i32()), e.c32(127));
        Value inRange = arith::AndIOp::create(
            e.b, e.cmp(CmpIPredicate::sge, offset, e.c32(-45)),
            e.cmp(CmpIPredicate::sle, offset, e.c32(45)));
        moderate = arith::AndIOp::create(e.b, moderate, inRange);
      }
    for (int64_t q = 0; q < scalesPerThread(); ++q)
      inside(e, thread, q, scalesPerStep(), [&] {
        Value w = e.addIndex(thread, e.cIndex(q * threads));
        memref::StoreOp::create(
            e.b, values[vectorsPerThread() + q], bytes,
            ValueRange{e.addIndex(e.addIndex(stageAt, e.cIndex(scalesAt)), w)});
      });
    return moderate;
  }
};

} // namespace

/// What buildSpecializedGemm takes over from buildGemm.
struct GemmKernelLowering::SpecializedGemm {
  QuantizationEmitter &e;
  OperandStaging (&staging)[2];
  StagedStep &step;
  Value out;    ///< The result (or partial tiles).
  Value addend; ///< The addend, or null.
  Value parts;  ///< The loss parts (kLossPartsSuffix), or null.
  std::function<std::array<Value, 2>(Value)> tileAt; ///< (row, col) of a tile
};

void GemmKernelLowering::buildGemm(OpBuilder &moduleBuilder,
                                   Epilogue epilogue) {
  const bool plusAddend = epilogue == Epilogue::PlusAddend,
             lossParts = epilogue == Epilogue::AndLossParts;
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i8 = IntegerType::get(context, 8),
       i32 = IntegerType::get(context, 32);
  const int64_t threads = tiling.threads;

  // Arguments: each operand's codes (as i32 words), its scales and NVFP4's
  // tensor scale, then the result.
  SmallVector<std::pair<std::string, Type>> arguments;
  for (const OperandPlan *operand : {&lhs, &rhs}) {
    std::string scratch = "scratch:" + operand->side;
    arguments.push_back(
        {scratch + ".codes",
         flat(operand->count() * operand->elementBytes() / 4, i32)});
    if (operand->scaled())
      arguments.push_back(
          {scratch + ".scales", flat(operand->count() / operand->block(), i8)});
    if (operand->kind == OperandKind::NVFP4)
      arguments.push_back({scratch + ".tensor_scale", flat(1, f32)});
    if (foldsScales()) {
      arguments.push_back(
          {scratch + ".folded", flat(operand->count() / 4, i32)});
      arguments.push_back(
          {scratch + ".fold_refs", flat(operand->count() / k, i32)});
    }
    if (sumsExactly() && copyStaged())
      arguments.push_back(
          {scratch + ".exact", flat(operand->count() / 4, i32)});
    if (sumsExactly())
      arguments.push_back(
          {scratch + ".exact_refs", flat(operand->count() / k, i32)});
  }
  // A split GEMM's blocks write partial tiles ([split][M][N]), which
  // buildSplitSum's launch adds into the result.
  const int64_t splitK = tiling.splitK;
  arguments.push_back(splitK > 1
                          ? std::pair<std::string, Type>{"scratch:partials",
                                                         flat(splitK * m * n, f32)}
                          : std::pair<std::string, Type>{"result:0",
                                                         flat(m * n, f32)});
  if (plusAddend)
    arguments.push_back({"addend", flat(m * n, f32)});
  const int64_t slabWidth = rowSlabs().width;
  if (lossParts)
    arguments.push_back({"loss_parts", flat(2 * m * (n / slabWidth),
                                            Float64Type::get(context))});
  const StringRef suffix = plusAddend  ? kPlusAddendSuffix
                           : lossParts ? kLossPartsSuffix
                                       : "";
  gpu::GPUFuncOp func = createLaunch(
      moduleBuilder, matmul.getLoc(),
      (kernel.getKernelName() + "__gemm" + suffix).str(), arguments,
      specializesWarps()
          ? SmallVector<int64_t>{specializedBlocks(), 1, 1}
          : SmallVector<int64_t>{n / tiling.blockN, m / tiling.blockM, splitK},
      {threads, 1, 1});
  if (plusAddend)
    markAddendVariant(func);
  if (lossParts) {
    markVariant(func);
    func->setAttr(kLossPartsAttr,
                  moduleBuilder.getI64ArrayAttr({slabWidth, n / slabWidth}));
  }
  Attribute workgroup = gpu::AddressSpaceAttr::get(
      context, gpu::GPUDialect::getWorkgroupAddressSpace());
  auto sharedType = [&](int64_t count, Type element) {
    return MemRefType::get({count}, element, MemRefLayoutAttrInterface{},
                           workgroup);
  };
  const int64_t staged = sharedBytes();
  Value sharedBytes =
      func.addWorkgroupAttribution(sharedType(staged, i8), matmul.getLoc());
  // On a 1024-byte boundary: the swizzled layout's pattern is the address's.
  func.setWorkgroupAttributionAttr(0, moduleBuilder.getStringAttr("llvm.align"),
                                   moduleBuilder.getI64IntegerAttr(1024));

  Block &entry = func.getBody().front();
  ImplicitLocOpBuilder b(matmul.getLoc(), context);
  b.setInsertionPointToStart(&entry);
  QuantizationEmitter e(b);
  // The block's tile: in row order (block x, y: tile column x of tile row
  // y), or, where the rhs is larger than kL2Budget bytes, in grouped order
  // — the blocks launched one after the other (x fastest) walk down
  // kTileGroup tile rows, then on to the next tile column, so that the
  // blocks resident at once share their rows of the lhs and their columns
  // of the rhs in L2 (a 14336 x 4096 rhs of 8B's MLP does not fit L2 in
  // row order; docs/benchmarks.md, variant 12).
  // (A persistent launch, specializesWarps(), takes the same order over the
  // linear index of its tiles, one after the other.)
  const int64_t tilesM = m / tiling.blockM, tilesN = n / tiling.blockN;
  auto tileAt = [&](Value linear) -> std::array<Value, 2> {
    if (n * k * rhs.elementBytes() <= kL2Budget)
      return {arith::DivUIOp::create(b, linear, e.cIndex(tilesN)),
              arith::RemUIOp::create(b, linear, e.cIndex(tilesN))};
    Value perGroup = e.cIndex(kTileGroup * tilesN);
    Value group = arith::DivUIOp::create(b, linear, perGroup);
    Value firstRow = e.mulIndex(group, e.cIndex(kTileGroup));
    Value rows = arith::MinUIOp::create(
        b, arith::SubIOp::create(b, e.cIndex(tilesM), firstRow),
        e.cIndex(kTileGroup));
    Value inGroup = arith::RemUIOp::create(b, linear, perGroup);
    return {e.addIndex(firstRow, arith::RemUIOp::create(b, inGroup, rows)),
            arith::DivUIOp::create(b, inGroup, rows)};
  };
  // The block's share of K: steps firstStep .. firstStep + steps - 1. (A
  // specialized launch's blocks take tile after tile: buildSpecializedGemm
  // sets each one's origin and share.)
  const int64_t steps = k / tiling.stepK / splitK;
  std::array<Value, 2> tileOf;
  Value split, firstStep;
  if (!specializesWarps()) {
    tileOf = {gpu::BlockIdOp::create(b, gpu::Dimension::y),
              gpu::BlockIdOp::create(b, gpu::Dimension::x)};
    if (n * k * rhs.elementBytes() > kL2Budget)
      tileOf = tileAt(
          e.addIndex(e.mulIndex(tileOf[0], e.cIndex(tilesN)), tileOf[1]));
    split = gpu::BlockIdOp::create(b, gpu::Dimension::z);
    firstStep = e.mulIndex(split, e.cIndex(steps));
  }
  unsigned argument = 0;
  OperandStaging staging[2];
  Value tensorScales[2];
  for (int side = 0; side < 2; ++side) {
    const OperandPlan *operand = side == 0 ? &lhs : &rhs;
    OperandStaging &s = staging[side];
    s.operand = operand;
    s.codes = func.getArgument(argument++);
    if (operand->scaled())
      s.scales = func.getArgument(argument++);
    if (operand->kind == OperandKind::NVFP4)
      tensorScales[side] = memref::LoadOp::create(
          b, func.getArgument(argument++), ValueRange{e.cIndex(0)});
    if (foldsScales()) {
      s.folded = func.getArgument(argument++);
      s.foldRefs = func.getArgument(argument++);
    }
    if (sumsExactly() && copyStaged())
      s.exact = func.getArgument(argument++);
    if (sumsExactly())
      s.exactRefs = func.getArgument(argument++);
    s.rows = side == 0 ? tiling.blockM : tiling.blockN;
    s.scalesAt = side == 0 ? lhsScalesAt() : rhsScalesAt();
    s.packed = tiling.packed[side];
    s.stagedByte = [this, &e, side](Value stageAt, Value r, Value kk) {
      return stagedByte(e, stageAt, side, r, kk);
    };
    s.stepK = tiling.stepK;
    s.firstStep = firstStep;
    s.k = k;
    s.threads = threads;
    if (tileOf[side])
      s.origin = e.mulIndex(tileOf[side], e.cIndex(s.rows));
  }
  Value out = func.getArgument(argument);
  Value addend = plusAddend ? func.getArgument(argument + 1) : Value();
  Value parts = lossParts ? func.getArgument(argument + 1) : Value();

  StagedStep step;
  step.bytes = sharedBytes;
  step.words = memref::ViewOp::create(b, sharedType(staged / 4, i32),
                                      sharedBytes, e.cIndex(0), ValueRange{});
  Value thread = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = e.divIndex(thread, lanes);
  step.lane = arith::RemUIOp::create(b, thread, e.cIndex(lanes));
  step.thread = thread;
  const int64_t warpsAcross = tiling.blockN / GemmTiling::warpN;
  step.warpRow = e.mulIndex(e.divIndex(warp, warpsAcross),
                            e.cIndex(GemmTiling::warpM));
  step.warpCol = e.mulIndex(
      arith::RemUIOp::create(b, warp, e.cIndex(warpsAcross)),
      e.cIndex(GemmTiling::warpN));
  step.lhsTensorScale = tensorScales[0];
  step.rhsTensorScale = tensorScales[1];
  if (specializesWarps()) {
    SpecializedGemm gemm{e, staging, step, out, addend, parts, tileAt};
    buildSpecializedGemm(gemm);
    gpu::ReturnOp::create(b);
    return;
  }

  // The tile's reference codes (from the fold launches): the fold
  // references (foldsScales) of row r of the lhs tile at word refsAt + r,
  // of column c of the rhs tile at refsAt + blockM + c, then the exact ones
  // (sumsExactly) the same way; and, the same in every thread, whether the
  // tile folds (every fold reference >= 0), whether it sums exactly
  // throughout, and whether some row and some column sum exactly.
  enum References { Fold, Exact };
  const int64_t refsAt = stagedBuffers() * stageBytes() / 4,
                exactRefsAt = refsAt + (foldsScales() ? tiling.blockM + tiling.blockN : 0);
  auto refIndex = [&](References which, int side, Value row) {
    return e.addIndex(e.cIndex((which == Fold ? refsAt : exactRefsAt) +
                               (side == 0 ? 0 : tiling.blockM)),
                      row);
  };
  step.exactRefsAt = exactRefsAt;
  Value foldable, allExact, someExact;
  if (foldsScales() || sumsExactly()) {
    assert((copyStaged() || !foldsScales()) &&
           "a chip that folds copies its steps asynchronously");
    Value yes = arith::ConstantIntOp::create(b, 1, 1);
    // all[Fold], all[Exact], and per side whether none sums exactly.
    Value all[2] = {yes, yes}, none[2] = {yes, yes};
    for (int side = 0; side < 2; ++side) {
      OperandStaging &s = staging[side];
      for (int64_t q = 0; q * threads < s.rows; ++q) {
        Value r = e.addIndex(thread, e.cIndex(q * threads));
        auto guard = scf::IfOp::create(
            b, TypeRange{b.getI1Type(), b.getI1Type(), b.getI1Type()},
            e.cmp(CmpIPredicate::ult, r, e.cIndex(s.rows)),
            /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard insertion(b);
          b.setInsertionPointToStart(&guard.getThenRegion().front());
          auto stage = [&](References which, Value refs) -> Value {
            if (!refs)
              return yes;
            Value ref = memref::LoadOp::create(
                b, refs, ValueRange{e.addIndex(s.origin, r)});
            memref::StoreOp::create(b, ref, step.words,
                                    ValueRange{refIndex(which, side, r)});
            return e.cmp(CmpIPredicate::sge, ref, e.c32(0));
          };
          Value folds = stage(Fold, s.foldRefs);
          Value exact = stage(Exact, s.exactRefs);
          scf::YieldOp::create(
              b, ValueRange{folds, exact,
                            arith::XOrIOp::create(b, exact, yes)});
          b.setInsertionPointToStart(&guard.getElseRegion().front());
          scf::YieldOp::create(b, ValueRange{yes, yes, yes});
        }
        all[Fold] = arith::AndIOp::create(b, all[Fold], guard.getResult(0));
        all[Exact] = arith::AndIOp::create(b, all[Exact], guard.getResult(1));
        none[side] = arith::AndIOp::create(b, none[side], guard.getResult(2));
      }
    }
    // Each flag over the block: the chip's reducing barrier, or (a chip
    // whose barrier does not reduce) one barrier, then every thread reads
    // all of the tile's references.
    auto overBlock = [&](Value predicate, References which, int firstSide,
                         int lastSide, bool none) -> Value {
      if (Value reduced = stepBarrier(e, predicate))
        return reduced;
      Value begin = refIndex(which, firstSide, e.cIndex(0));
      Value end = refIndex(which, lastSide, e.cIndex(staging[lastSide].rows));
      return e.loop(begin, end, {yes}, [&](Value at, ValueRange flag) {
        Value ok = e.cmp(CmpIPredicate::sge,
                         memref::LoadOp::create(b, step.words, ValueRange{at}),
                         e.c32(0));
        if (none)
          ok = arith::XOrIOp::create(b, ok, yes);
        return SmallVector<Value>{arith::AndIOp::create(b, flag[0], ok)};
      })[0];
    };
    if (foldsScales())
      foldable = overBlock(all[Fold], Fold, 0, 1, false);
    if (sumsExactly()) {
      allExact = overBlock(all[Exact], Exact, 0, 1, false);
      Value noRow = overBlock(none[0], Exact, 0, 0, true),
            noCol = overBlock(none[1], Exact, 1, 1, true);
      someExact = arith::AndIOp::create(
          b, arith::XOrIOp::create(b, noRow, yes),
          arith::XOrIOp::create(b, noCol, yes));
    }
  }

  // Through registers (copyStaged() off, or a folding plan's step-by-step
  // path): step s computes on buffer s % 2 while its threads store step
  // s + 1 (loaded during step s - 1) into the other buffer and load step
  // s + 2 (the last steps reload the last: no branch); one barrier a step
  // — the other buffer's readers (step s - 1) finished before the last
  // one. The thread's accumulators.
  auto accumulateThroughRegisters = [&](bool exact) {
    auto lastOr = [&](Value s, int64_t ahead) -> Value {
      return arith::MinUIOp::create(b, e.addIndex(s, e.cIndex(ahead)),
                                    e.cIndex(steps - 1));
    };
    // Where each operand's share starts among a step's loaded values.
    SmallVector<size_t> loadedAt;
    auto loadStep = [&](Value s) {
      SmallVector<Value> values;
      loadedAt.clear();
      for (OperandStaging &operand : staging) {
        loadedAt.push_back(values.size());
        llvm::append_range(values, operand.load(e, thread, s));
      }
      loadedAt.push_back(values.size());
      return values;
    };
    // A step's stores, the fence the chip needs, and the barrier after
    // them: the barrier's moderate-scales flag, or null.
    auto storeStep = [&](ValueRange values, Value stageAt) {
      Value moderate = arith::ConstantIntOp::create(b, 1, 1);
      for (int side = 0; side < 2; ++side)
        moderate = arith::AndIOp::create(
            b, moderate,
            staging[side].store(e, thread,
                                values.slice(loadedAt[side],
                                             loadedAt[side + 1] - loadedAt[side]),
                                stageAt, step.words, step.bytes));
      fenceStagedStores(e);
      return moderate;
    };
    Value flag = stepBarrier(e, storeStep(loadStep(e.cIndex(0)), e.cIndex(0)));
    SmallVector<Value> carried =
        exact ? exactAccumulators(e) : initialAccumulators(e);
    const size_t accumulatorCount = carried.size();
    const size_t flagCount = flag ? 1 : 0;
    if (flag)
      carried.push_back(flag);
    llvm::append_range(carried, loadStep(lastOr(e.cIndex(0), 1)));
    SmallVector<Value> results = e.loop(
        e.cIndex(0), e.cIndex(steps), carried,
        [&](Value s, ValueRange values) -> SmallVector<Value> {
          Value moderate =
              storeStep(values.drop_front(accumulatorCount + flagCount),
                        stagedBufferAt(e, e.addIndex(s, e.cIndex(1)), 2));
          SmallVector<Value> prefetched = loadStep(lastOr(s, 2));
          step.stageAt = stagedBufferAt(e, s, 2);
          step.moderateScales = flag ? values[accumulatorCount] : nullptr;
          step.folded = false;
          step.exact = exact;
          SmallVector<Value> next = accumulateStep(
              e, step, values.take_front(accumulatorCount));
          if (Value nextFlag = stepBarrier(e, moderate))
            next.push_back(nextFlag);
          llvm::append_range(next, prefetched);
          return next;
        });
    results.resize(accumulatorCount);
    return results;
  };
  // By asynchronous copies (copyStaged: bf16 codes, or the folded codes of
  // a folding tile) through B = stagedBuffers() buffers, A steps ahead:
  // A = B - 1, or B - 2 where the chip leaves a step's matrix instructions
  // in flight into the next (it waits for them by the end of the next).
  // Steps 0 .. A - 1 are in flight before the loop; step s waits for its
  // own copies (all but A - 1 groups), then the chip's fence and one
  // barrier — after which every thread's copies of step s have landed and
  // every matrix instruction on step s + A - B has finished — then copies
  // step s + A into that step's buffer (a group a step, empty past the
  // last) and computes on buffer s % B.
  const int64_t buffers = stagedBuffers();
  // The pass copying `source` (the codes, folded codes or exact integers).
  enum Source { Codes, Folded, Integers };
  auto accumulateCopied = [&](Source source) {
    const bool exact = source == Integers;
    const int64_t ahead = buffers - (leavesStepsInFlight(exact) ? 2 : 1);
    auto copyStep = [&](Value s) {
      Value stageAt = stagedBufferAt(e, s, buffers);
      for (int side = 0; side < 2; ++side) {
        OperandStaging &o = staging[side];
        Value from = source == Codes    ? o.codes
                     : source == Folded ? o.folded
                                        : o.exact;
        for (int64_t q = 0; q < o.vectorsPerThread(); ++q)
          o.inside(e, thread, q, o.vectorsPerStep(), [&] {
            auto [r, kk] = o.vectorAt(e, thread, q);
            copyAsync(e, step.bytes, stagedByte(e, stageAt, side, r, kk), from,
                      o.wordOf(e, thread, s, q));
          });
      }
    };
    for (int64_t s = 0; s < ahead; ++s) {
      if (s < steps)
        copyStep(e.cIndex(s));
      commitCopies(e);
    }
    return e.loop(
        e.cIndex(0), e.cIndex(steps),
        exact ? exactAccumulators(e) : initialAccumulators(e),
        [&](Value s, ValueRange accumulators) -> SmallVector<Value> {
          waitCopies(e, ahead - 1);
          fenceStagedStores(e);
          stepBarrier(e, arith::ConstantIntOp::create(b, 1, 1));
          Value next = e.addIndex(s, e.cIndex(ahead));
          e.ifThen(e.cmp(CmpIPredicate::ult, next, e.cIndex(steps)),
                   [&] { copyStep(next); });
          commitCopies(e);
          step.stageAt = stagedBufferAt(e, s, buffers);
          step.moderateScales = nullptr;
          step.folded = source == Folded;
          step.exact = exact;
          return accumulateStep(e, step, accumulators);
        });
  };
  // The chunked pass: folded where the tile folds, else step by step.
  auto accumulateChunked = [&]() -> SmallVector<Value> {
    if (foldable) {
      SmallVector<Type> types(TypeRange(ValueRange(initialAccumulators(e))));
      auto branch =
          scf::IfOp::create(b, types, foldable, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPointToStart(&branch.getThenRegion().front());
      scf::YieldOp::create(b, accumulateCopied(Folded));
      b.setInsertionPointToStart(&branch.getElseRegion().front());
      scf::YieldOp::create(b, accumulateThroughRegisters(false));
      return SmallVector<Value>(branch.getResults());
    }
    if (copyStaged() && !sumsExactly())
      return accumulateCopied(Codes);
    return accumulateThroughRegisters(false);
  };
  // A pass's results into the result, where `keep(row, col)` (i1, or
  // null: everywhere); exact sums times 2^(ref(row) + ref(col) - 256),
  // folded ones times 2^(ref(row) + ref(col) - 254): exact.
  Value row0 = staging[0].origin, col0 = staging[1].origin;
  auto storePass = [&](ValueRange results, bool exact,
                       function_ref<Value(Value, Value)> keep) {
    // The loop's: not for the stores below.
    step.stageAt = step.moderateScales = nullptr;
    step.folded = false;
    step.exact = exact;
    SmallVector<std::pair<Value, Value>> computed; // (value, element): parts
    storeAccumulators(e, step, results, [&](Value value, Value row, Value col) {
      auto refs = [&](References which) {
        Value refRow = memref::LoadOp::create(
            b, step.words, ValueRange{refIndex(which, 0, row)});
        Value refCol = memref::LoadOp::create(
            b, step.words, ValueRange{refIndex(which, 1, col)});
        return e.add(refRow, refCol);
      };
      if (exact) {
        value = e.mulf(value, e.bitcast(e.shl(e.sub(refs(Exact), e.c32(129)),
                                              e.c32(23)),
                                        e.f32()));
      } else if (foldable) {
        Value scale = e.bitcast(
            e.shl(e.sub(refs(Fold), e.c32(127)), e.c32(23)), e.f32());
        value = e.select(foldable, e.mulf(value, scale), value);
      }
      Value at = e.addIndex(
          e.mulIndex(split, e.cIndex(m * n)),
          e.addIndex(e.mulIndex(e.addIndex(row0, row), e.cIndex(n)),
                     e.addIndex(col0, col)));
      if (addend) // unsplit: `at` is the result's own index
        value = e.addf(value,
                       memref::LoadOp::create(b, addend, ValueRange{at}));
      if (parts)
        computed.push_back({value, at});
      auto write = [&] { memref::StoreOp::create(b, value, out, ValueRange{at}); };
      if (!keep)
        return write();
      e.ifThen(keep(row, col), write);
    });
    if (parts)
      storeLossParts(e, step.lane, computed, parts);
  };
  if (!sumsExactly()) {
    storePass(accumulateChunked(), /*exact=*/false, nullptr);
    gpu::ReturnOp::create(b);
    return;
  }
  // Exact sums: whether row `row` and column `col` of the tile both sum
  // exactly.
  auto pairExact = [&](Value row, Value col) -> Value {
    auto exactAt = [&](int side, Value at) {
      return e.cmp(CmpIPredicate::sge, exactReference(e, step, side, at),
                   e.c32(0));
    };
    return arith::AndIOp::create(b, exactAt(0, row), exactAt(1, col));
  };
  Value yes = arith::ConstantIntOp::create(b, 1, 1);
  // The chunked pass unless every pair sums exactly, storing the others.
  auto chunked = scf::IfOp::create(b, arith::XOrIOp::create(b, allExact, yes),
                                   /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard insertion(b);
    b.setInsertionPointToStart(&chunked.getThenRegion().front());
    storePass(accumulateChunked(), /*exact=*/false, [&](Value row, Value col) {
      return arith::XOrIOp::create(b, pairExact(row, col), yes);
    });
    // Every thread done with the staged buffers before the exact pass
    // copies into them.
    stepBarrier(e, yes);
  }
  // The exact pass where some pair sums exactly, storing those.
  auto exactly = scf::IfOp::create(b, someExact, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard insertion(b);
    b.setInsertionPointToStart(&exactly.getThenRegion().front());
    storePass(copyStaged() ? accumulateCopied(Integers)
                           : accumulateThroughRegisters(/*exact=*/true),
              /*exact=*/true, pairExact);
  }
  gpu::ReturnOp::create(b);
}

void GemmKernelLowering::buildSpecializedGemm(SpecializedGemm &gemm) {
  QuantizationEmitter &e = gemm.e;
  ImplicitLocOpBuilder &b = e.b;
  StagedStep &step = gemm.step;
  const int64_t buffers = stagedBuffers();
  const int64_t steps = k / tiling.stepK / tiling.splitK; // a tile's share
  const int64_t consumers = tiling.threads - kProducerThreads;
  const int64_t tiles = (m / tiling.blockM) * (n / tiling.blockN);
  const int64_t blocks = specializedBlocks();
  // Shared memory: the staged buffers, then buffer i's `full` barrier at
  // fullAt + 8i and its `empty` one at emptyAt + 8i.
  const int64_t fullAt = buffers * stageBytes() + referenceBytes(),
                emptyAt = fullAt + 8 * buffers;
  auto barrierOf = [&](int64_t base, Value g) {
    return e.addIndex(
        e.cIndex(base),
        e.mulIndex(arith::RemUIOp::create(b, g, e.cIndex(buffers)),
                   e.cIndex(8)));
  };
  // Phase parity of global step g's use of its buffer (its (g / B)-th).
  auto parityOf = [&](Value g, bool flipped) {
    Value parity = arith::IndexCastUIOp::create(
        b, e.i32(),
        arith::RemUIOp::create(b, e.divIndex(g, buffers), e.cIndex(2)));
    return flipped ? e.bitXor(parity, e.c32(1)) : parity;
  };
  auto stageOf = [&](Value g) { return stagedBufferAt(e, g, buffers); };
  Value thread = step.thread;
  e.ifThen(e.cmp(CmpIPredicate::eq, thread, e.cIndex(0)), [&] {
    for (int64_t i = 0; i < buffers; ++i) {
      initBarrier(e, step.bytes, fullAt + 8 * i, kProducerThreads);
      initBarrier(e, step.bytes, emptyAt + 8 * i,
                  pingPong() ? kGroupThreads : consumers);
    }
  });
  stepBarrier(e, arith::ConstantIntOp::create(b, 1, 1));

  // The block's work items: tiles (and K splits) blockIdx.x, + blocks, ...
  // Item w is split w / tiles of tile w % tiles; its first step of K and
  // its tile's origin, for each side.
  Value first = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value items = e.divIndex(
      e.addIndex(e.cIndex(tiles * tiling.splitK + blocks - 1),
                 arith::SubIOp::create(b, e.cIndex(0), first)),
      blocks);
  struct Item {
    Value split, origin[2];
  };
  auto itemAt = [&](Value i) {
    Value w = e.addIndex(first, e.mulIndex(i, e.cIndex(blocks)));
    Item item;
    item.split = e.divIndex(w, tiles);
    std::array<Value, 2> tile =
        gemm.tileAt(arith::RemUIOp::create(b, w, e.cIndex(tiles)));
    for (int side = 0; side < 2; ++side)
      item.origin[side] = e.mulIndex(tile[side], e.cIndex(gemm.staging[side].rows));
    return item;
  };
  Value isConsumer = e.cmp(CmpIPredicate::ult, thread, e.cIndex(consumers));
  auto roles = scf::IfOp::create(b, isConsumer, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard insertion(b);

  // Producers: every step of every item, each buffer refilled once its
  // consumers are done with it (the first use of each needs no wait: the
  // parity before a fresh barrier's first phase counts as completed).
  b.setInsertionPointToStart(&roles.getElseRegion().front());
  {
    if (pingPong())
      budgetRegisters(e, /*producer=*/true);
    Value producer = arith::SubIOp::create(b, thread, e.cIndex(consumers));
    for (OperandStaging &o : gemm.staging)
      o.threads = kProducerThreads;
    e.loop(e.cIndex(0), items, [&](Value i) {
      Item item = itemAt(i);
      for (int side = 0; side < 2; ++side) {
        gemm.staging[side].origin = item.origin[side];
        gemm.staging[side].firstStep = e.mulIndex(item.split, e.cIndex(steps));
      }
      e.loop(e.cIndex(0), e.cIndex(steps), [&](Value s) {
        Value g = e.addIndex(e.mulIndex(i, e.cIndex(steps)), s);
        waitOn(e, step.bytes, barrierOf(emptyAt, g), parityOf(g, true));
        Value stageAt = stageOf(g);
        for (int side = 0; side < 2; ++side) {
          OperandStaging &o = gemm.staging[side];
          for (int64_t q = 0; q < o.vectorsPerThread(); ++q)
            o.inside(e, producer, q, o.vectorsPerStep(), [&] {
              auto [r, kk] = o.vectorAt(e, producer, q);
              copyAsync(e, step.bytes, stagedByte(e, stageAt, side, r, kk),
                        o.codes, o.wordOf(e, producer, s, q));
            });
        }
        arriveOnCopies(e, step.bytes, barrierOf(fullAt, g));
      });
    });
    // Its last copies landed before the producer leaves.
    commitCopies(e);
    waitCopies(e, 0);
  }

  // Consumers: each item's steps as they land, the buffer of the step
  // before released once its matrix instructions finished (the chip's
  // accumulateStep leaves one step's in flight); then the tile's results
  // stored from the accumulators, two adjacent ones a store
  // (storeResultPair), while the producers fill the buffers for the next
  // tile. No barrier between the consumers: each goes on to the next tile.
  b.setInsertionPointToStart(&roles.getThenRegion().front());
  // Ping-pong: warpgroup w takes items w, w + 2, ...; before item i > 0's
  // K loop it waits at barrier 1 + i % 2 for the other's K loop of item
  // i - 1 to have passed its last wait (the other arrives there, if an
  // item i follows): a buffer's `full` phases are then waited on in order,
  // at most one phase apart, as parity waits need.
  const bool alternate = pingPong();
  // The warpgroup's index as lane 0 has it: uniform in ptxas's eyes (a
  // loop bound of thread / 128 as such made it serialize the wgmmas of a
  // path it took for divergent).
  Value group;
  if (alternate) {
    group = arith::IndexCastUIOp::create(
        b, b.getIndexType(),
        gpu::ShuffleOp::create(
            b,
            arith::IndexCastUIOp::create(b, e.i32(),
                                         e.divIndex(thread, kGroupThreads)),
            0, 32, gpu::ShuffleMode::IDX)
            .getShuffleResult());
    budgetRegisters(e, /*producer=*/false);
  }
  auto consumeItem = [&](Value i) {
    Item item = itemAt(i);
    if (alternate)
      e.ifThen(e.cmp(CmpIPredicate::ugt, i, e.cIndex(0)), [&] {
        e.ifThen(e.cmp(CmpIPredicate::eq, group, e.cIndex(0)),
                 [&] { groupBarrier(e, 2, 2 * kGroupThreads); });
        e.ifThen(e.cmp(CmpIPredicate::eq, group, e.cIndex(1)),
                 [&] { groupBarrier(e, 1, 2 * kGroupThreads); });
      });
    // A step's buffer released once its products finished: the step
    // before's after this one's are issued (accumulateStep leaves one in
    // flight) — within the item in ping-pong, whose last step's buffer is
    // released after the wait for its products (storeAccumulators).
    Value firstG = e.mulIndex(i, e.cIndex(steps));
    SmallVector<Value> acc = e.loop(
        e.cIndex(0), e.cIndex(steps), initialAccumulators(e),
        [&](Value s, ValueRange carried) -> SmallVector<Value> {
          Value g = e.addIndex(firstG, s);
          waitOn(e, step.bytes, barrierOf(fullAt, g), parityOf(g, false));
          fenceStagedStores(e);
          step.stageAt = stageOf(g);
          step.moderateScales = nullptr;
          step.folded = step.exact = false;
          SmallVector<Value> next = accumulateStep(e, step, carried);
          e.ifThen(
              e.cmp(CmpIPredicate::ugt, alternate ? s : g, e.cIndex(0)), [&] {
                arriveOn(e, step.bytes,
                         barrierOf(emptyAt,
                                   arith::SubIOp::create(b, g, e.cIndex(1))));
              });
          return next;
        });
    if (alternate)
      e.ifThen(
          e.cmp(CmpIPredicate::ult, e.addIndex(i, e.cIndex(1)), items), [&] {
            e.ifThen(e.cmp(CmpIPredicate::eq, group, e.cIndex(0)),
                     [&] { arriveAtGroupBarrier(e, 1, 2 * kGroupThreads); });
            e.ifThen(e.cmp(CmpIPredicate::eq, group, e.cIndex(1)),
                     [&] { arriveAtGroupBarrier(e, 2, 2 * kGroupThreads); });
          });
    step.stageAt = nullptr;
    // The result's element (or, split, the partial tile's) of each value,
    // plus the addend's, in storeAccumulators' pairs.
    Value partial = e.mulIndex(item.split, e.cIndex(m * n));
    SmallVector<std::pair<Value, Value>> results; // (value, element)
    storeAccumulators(e, step, acc, [&](Value value, Value row, Value col) {
      Value at =
          e.addIndex(e.mulIndex(e.addIndex(item.origin[0], row), e.cIndex(n)),
                     e.addIndex(item.origin[1], col));
      if (gemm.addend) // unsplit: `at` is the result's own index
        value = e.addf(value,
                       memref::LoadOp::create(b, gemm.addend, ValueRange{at}));
      results.push_back({value, e.addIndex(partial, at)});
    });
    if (alternate) // after storeAccumulators' wait for the products
      arriveOn(e, step.bytes,
               barrierOf(emptyAt, e.addIndex(firstG, e.cIndex(steps - 1))));
    for (size_t p = 0; p + 1 < results.size(); p += 2)
      storeResultPair(e, gemm.out, results[p].second, results[p].first,
                      results[p + 1].first);
    if (gemm.parts)
      storeLossParts(e, step.lane, results, gemm.parts);
  };
  if (!alternate) {
    e.loop(e.cIndex(0), items, consumeItem);
    return;
  }
  // Warpgroup w's items: w + 2j for j < (items - w + 1) / 2.
  e.loop(
      e.cIndex(0),
      e.divIndex(
          e.addIndex(arith::SubIOp::create(b, items, group), e.cIndex(1)), 2),
      [&](Value j) {
        consumeItem(e.addIndex(group, e.mulIndex(j, e.cIndex(2))));
      });
}

void GemmKernelLowering::storeResultPair(QuantizationEmitter &e, Value out,
                                         Value at, Value first, Value second) {
  Value pair = vector::FromElementsOp::create(
      e.b, VectorType::get({2}, e.f32()), ValueRange{first, second});
  vector::StoreOp::create(e.b, pair, out, ValueRange{at},
                          /*nontemporal=*/false, e.b.getI64IntegerAttr(8));
}

void GemmKernelLowering::buildSplitSum(OpBuilder &moduleBuilder,
                                       bool plusAddend) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context);
  const int64_t splitK = tiling.splitK, count = m * n;
  // A thread per four results (m and n are multiples of 32): 16-byte
  // loads of each partial tile in split order, one 16-byte store.
  const int64_t threads = count / 4;
  SmallVector<std::pair<std::string, Type>> arguments = {
      {"scratch:partials", flat(splitK * count, f32)},
      {"result:0", flat(count, f32)}};
  if (plusAddend)
    arguments.push_back({"addend", flat(count, f32)});
  gpu::GPUFuncOp func = createLaunch(
      moduleBuilder, matmul.getLoc(),
      (kernel.getKernelName() + "__sum" +
       (plusAddend ? kPlusAddendSuffix : ""))
          .str(),
      arguments, {(threads + kPrologueThreads - 1) / kPrologueThreads, 1, 1},
      {kPrologueThreads, 1, 1});
  if (plusAddend)
    markAddendVariant(func);
  Block &entry = func.getBody().front();
  ImplicitLocOpBuilder b(matmul.getLoc(), context);
  b.setInsertionPointToStart(&entry);
  QuantizationEmitter e(b);
  Value thread = guardedThread(e, threads);
  Value first = e.mulIndex(thread, e.cIndex(4));
  auto quadOf = [&](int64_t s) -> Value {
    return vector::LoadOp::create(
        b, VectorType::get({4}, f32), func.getArgument(0),
        ValueRange{e.addIndex(first, e.cIndex(s * count))},
        /*nontemporal=*/false, b.getI64IntegerAttr(16));
  };
  Value sum = quadOf(0);
  for (int64_t s = 1; s < splitK; ++s)
    sum = arith::AddFOp::create(b, sum, quadOf(s));
  if (plusAddend)
    sum = arith::AddFOp::create(
        b, sum,
        vector::LoadOp::create(b, VectorType::get({4}, f32),
                               func.getArgument(2), ValueRange{first},
                               /*nontemporal=*/false, b.getI64IntegerAttr(16)));
  vector::StoreOp::create(b, sum, func.getArgument(1), ValueRange{first},
                          /*nontemporal=*/false, b.getI64IntegerAttr(16));
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b);
}

LogicalResult tetra::conversion::lowerGemmKernels(
    ModuleOp module, function_ref<LogicalResult(KernelOp)> lowerKernel) {
  SmallVector<KernelOp> kernels;
  module.walk([&](KernelOp kernel) { kernels.push_back(kernel); });
  // A model's layers repeat their GEMMs at one source line: an error is
  // reported once per source place and text (the GEMM's name aside), the
  // rest counted — not once per layer (a batch of 304 tokens made 600
  // lines of the same few errors).
  std::set<std::pair<std::string, std::string>> reported;
  int64_t repeated = 0;
  bool failed = false;
  {
    ScopedDiagnosticHandler handler(
        module.getContext(), [&](Diagnostic &diagnostic) -> LogicalResult {
          if (diagnostic.getSeverity() != DiagnosticSeverity::Error)
            return failure(); // not this handler's: the next one's
          Location place = diagnostic.getLocation();
          while (auto named = dyn_cast<NameLoc>(place))
            place = named.getChildLoc();
          std::string where, text = diagnostic.str();
          llvm::raw_string_ostream(where) << place;
          // "GEMM 'layers.3.mlp.up.fprop' cannot ..." without the name.
          if (size_t name = text.find("' cannot be compiled for ");
              llvm::StringRef(text).starts_with("GEMM '") &&
              name != std::string::npos)
            text.erase(0, name);
          if (reported.insert({where, text}).second)
            return failure();
          ++repeated;
          return success();
        });
    for (KernelOp kernel : kernels)
      failed |= mlir::failed(lowerKernel(kernel));
  }
  if (repeated > 0)
    emitError(kernels.front().getLoc())
        << repeated << " more GEMM" << (repeated == 1 ? "" : "s")
        << " (other layers', or another role of one linear) refused for the "
           "same reason at the same place as one above";
  if (failed)
    return failure();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(module.getContext()));
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (!isa<gpu::GPUModuleOp>(op))
      op.erase();
  return success();
}
