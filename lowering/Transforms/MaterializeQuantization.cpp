//===- MaterializeQuantization.cpp - Policies into quantizers -------------===//
//
// `--tetra-materialize-quantization`: each tetra.matmul whose role's policy
// quantizes becomes tetra.rotate -> tetra.quantize on each operand, along the
// operand's reduction dimension, and a tetra.scaled_matmul over the codes and
// scales. Assigns every quantizer its tensor id (Passes.td has
// the scheme, which the runtime and the GPU targets reproduce).
//
//===----------------------------------------------------------------------===//

#include "lowering/Transforms/Passes.h"

#include "dialect/TetraOps.h"
#include "runtime/numerics/Hadamard.h"
#include "runtime/numerics/Philox.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace tetra {
#define GEN_PASS_DEF_MATERIALIZEQUANTIZATION
#include "lowering/Transforms/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;

namespace {

/// A tensor's stream id (numerics::tensorIdOf).
uint32_t fnv1a32(StringRef text) {
  return numerics::tensorIdOf(std::string_view(text.data(), text.size()));
}

/// Hands out distinct tensor ids in program order.
class TensorIdAllocator {
public:
  uint32_t assign(StringRef key) {
    uint32_t id = fnv1a32(key);
    for (unsigned attempt = 1;
         id == numerics::kRotationSignsTensorId || used.contains(id); ++attempt)
      id = fnv1a32((key + "#" + Twine(attempt)).str());
    used.insert(id);
    return id;
  }

private:
  llvm::DenseSet<uint32_t> used;
};

/// The name of the first NameLoc in `loc`, if any.
std::optional<std::string> nameFromLocation(Location loc) {
  std::optional<std::string> name;
  loc->walk([&](Location nested) {
    if (auto nameLoc = dyn_cast<NameLoc>(nested)) {
      name = nameLoc.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

/// One operand as the scaled matmul takes it.
struct PreparedOperand {
  Value values; // codes, or f32 values
  Value scales;
  Value tensorScale;
  OperandQuantAttr quant; // without its rotation
};

OperandQuantAttr withoutRotation(OperandQuantAttr quant) {
  return OperandQuantAttr::get(quant.getContext(), quant.getFormat(),
                               quant.getBlockScale(), quant.getRounding(),
                               RotationAttr::getNone(quant.getContext()));
}

/// `value` as an f32 tensor (extended if it is bf16 or f16).
Value toF32(OpBuilder &builder, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType().isF32())
    return value;
  return arith::ExtFOp::create(builder, loc, type.clone(builder.getF32Type()),
                               value);
}

class MaterializeQuantization
    : public tetra::impl::MaterializeQuantizationBase<MaterializeQuantization> {
public:
  void runOnOperation() override;

private:
  LogicalResult rewrite(MatmulOp matmul, StringRef name);
  PreparedOperand prepare(OpBuilder &builder, MatmulOp matmul, Value operand,
                          OperandQuantAttr quant, unsigned axis,
                          StringRef idKey, StringRef operandName);

  TensorIdAllocator tensorIds;
};

} // namespace

PreparedOperand MaterializeQuantization::prepare(OpBuilder &builder,
                                                 MatmulOp matmul, Value operand,
                                                 OperandQuantAttr quant,
                                                 unsigned axis,
                                                 StringRef idKey,
                                                 StringRef operandName) {
  Location loc = matmul.getLoc();
  MLIRContext *context = builder.getContext();
  Value values = toF32(builder, loc, operand);
  auto type = cast<RankedTensorType>(values.getType());

  RotationAttr rotation = quant.getRotation();
  if (!rotation.isNone())
    values = RotateOp::create(
        builder, loc, values, static_cast<uint64_t>(axis), rotation,
        /*inverse=*/false, rotation.needsStep() ? matmul.getStep() : Value());

  OperandQuantAttr plain = withoutRotation(quant);
  if (quant.getFormat() == ElementFormat::F32)
    return {values, {}, {}, plain};
  if (quant.getFormat() == ElementFormat::BF16) {
    Value rounded = arith::TruncFOp::create(
        builder, loc, type.clone(BFloat16Type::get(context)), values);
    values = arith::ExtFOp::create(builder, loc, type, rounded);
    return {values, {}, {}, plain};
  }

  // Block-scaled: codes like the values, one scale per block along `axis`.
  SmallVector<int64_t> scaleShape(type.getShape());
  if (!ShapedType::isDynamic(scaleShape[axis]))
    scaleShape[axis] /= quant.getBlockSize();
  Type codesType = type.clone(quant.getCodeType());
  Type scalesType = RankedTensorType::get(scaleShape, quant.getScaleType());
  Type tensorScaleType;
  if (quant.getBlockScale().getScaleFormat() == ScaleFormat::E4M3)
    tensorScaleType = RankedTensorType::get({}, builder.getF32Type());

  bool stochastic = quant.isStochastic();
  uint32_t tensorId = tensorIds.assign(idKey);
  auto quantize =
      QuantizeOp::create(builder, loc, codesType, scalesType, tensorScaleType,
                         values, builder.getI64IntegerAttr(axis), plain,
                         stochastic ? matmul.getSeed() : Value(),
                         stochastic ? matmul.getStep() : Value(),
                         builder.getI64IntegerAttr(tensorId),
                         builder.getStringAttr(operandName));
  return {quantize.getCodes(), quantize.getScales(), quantize.getTensorScale(),
          plain};
}

LogicalResult MaterializeQuantization::rewrite(MatmulOp matmul,
                                               StringRef name) {
  GemmPolicyAttr policy = matmul.getGemmPolicy();
  auto isPlain = [](OperandQuantAttr quant) {
    return quant.getFormat() == ElementFormat::F32 &&
           quant.getRotation().isNone();
  };
  if (isPlain(policy.getLhs()) && isPlain(policy.getRhs()))
    return success();
  if (!policy.getAccumulateType().isF32())
    return matmul.emitOpError()
           << "accumulates in " << policy.getAccumulateType()
           << ", but quantized products accumulate in f32";

  for (OperandQuantAttr quant : {policy.getLhs(), policy.getRhs()})
    if (quant.getFormat() == ElementFormat::BF16 && quant.isStochastic())
      return matmul.emitOpError()
             << "rounds an operand to bf16 stochastically: no kernel "
                "implements that yet (bf16 rounds to nearest even; use "
                "stochastic rounding with a block format)";

  OpBuilder builder(matmul);
  std::string role = stringifyRole(matmul.getRole()).str();
  std::string keyPrefix = (name + "|" + role + "|").str();
  // "layers.0.attn.wq.fprop.x" (the GEMM's name and the operand's): which
  // operand each quantizer is, for a reader of the IR.
  std::string operandPrefix = (name + ".").str();
  Role gemmRole = matmul.getRole();
  PreparedOperand lhs = prepare(
      builder, matmul, matmul.getLhs(), policy.getLhs(),
      matmul.getLhsReductionDim(), keyPrefix + "lhs",
      operandPrefix + gemmOperandName(gemmRole, /*lhs=*/true).str());
  PreparedOperand rhs = prepare(
      builder, matmul, matmul.getRhs(), policy.getRhs(),
      matmul.getRhsReductionDim(), keyPrefix + "rhs",
      operandPrefix + gemmOperandName(gemmRole, /*lhs=*/false).str());

  auto resultType = matmul.getResult().getType();
  Type accumulatorType = resultType.clone(builder.getF32Type());
  Value product = ScaledMatmulOp::create(
      builder, matmul.getLoc(), accumulatorType, lhs.values, lhs.scales,
      lhs.tensorScale, rhs.values, rhs.scales, rhs.tensorScale, lhs.quant,
      rhs.quant, matmul.getTransposeLhs(), matmul.getTransposeRhs(),
      matmul.getRoleAttr());
  if (product.getType() != resultType)
    product =
        arith::TruncFOp::create(builder, matmul.getLoc(), resultType, product);
  matmul.replaceAllUsesWith(product);
  matmul.erase();
  return success();
}

void MaterializeQuantization::runOnOperation() {
  // Names first, in program order, so that the fallback "FUNC#I" counts
  // every matmul of the function as the input has it.
  SmallVector<std::pair<MatmulOp, std::string>> matmuls;
  getOperation().walk([&](func::FuncOp function) {
    unsigned index = 0;
    function.walk([&](MatmulOp matmul) {
      std::optional<std::string> name = nameFromLocation(matmul.getLoc());
      if (!name)
        name = (function.getSymName() + "#" + Twine(index)).str();
      matmuls.emplace_back(matmul, *name);
      ++index;
    });
  });
  // Matmuls outside any function still get a name.
  unsigned orphan = 0;
  getOperation().walk([&](MatmulOp matmul) {
    if (!matmul->getParentOfType<func::FuncOp>())
      matmuls.emplace_back(matmul, ("#" + Twine(orphan++)).str());
  });

  for (auto &[matmul, name] : matmuls)
    if (failed(rewrite(matmul, name)))
      return signalPassFailure();
}
