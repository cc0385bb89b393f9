//===- TrainingStep.cpp - @loss into @train_step (autodiff) ---------------===//
//
// --tetra-training-step: reverse-mode differentiation of the straight-line
// @loss the frontend emits, then the global gradient norm, clipping and
// AdamW, as one function @train_step (Passes.td has the contract).
// Each tetra.linear becomes its three role GEMMs (tetra.matmul fprop, dgrad,
// wgrad) so that quantization sees every product of every layer; every other
// op differentiates through tetra::DifferentiableOpInterface.
//
//===----------------------------------------------------------------------===//

#include "lowering/Transforms/Passes.h"

#include "dialect/TetraOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace tetra {
#define GEN_PASS_DEF_TRAININGSTEP
#include "lowering/Transforms/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;

namespace {

/// What the recomputed forward pass of a linear keeps for its backward:
/// all in @train_step.
struct LinearForward {
  LinearOp linear; ///< The linear in @loss (name, policy, location).
  Value input;     ///< X, [..., in].
  Value matrix;    ///< X as a matrix [N, in], N the tokens.
  Value weight;    ///< W, [out, in].
};

/// One op of @loss and its recomputation in @train_step.
struct ForwardStep {
  Operation *original;                 ///< In @loss.
  Operation *clone = nullptr;          ///< In @train_step; null for a linear.
  std::optional<LinearForward> linear; ///< Set for a linear.
  SmallVector<Value> operands;         ///< The operands in @train_step.
  SmallVector<Value> results;          ///< The results in @train_step.
};

/// Builds @train_step for one @loss.
class TrainingStepBuilder {
public:
  TrainingStepBuilder(func::FuncOp loss, const TrainingStepOptions &options)
      : loss(loss), options(options), builder(loss.getContext()) {}

  LogicalResult run();

private:
  LogicalResult checkLoss();
  void createFunction();
  void recomputeForward();
  LogicalResult buildBackward();
  LogicalResult buildOperandGradients(ForwardStep &record,
                                      ValueRange resultGradients,
                                      SmallVectorImpl<Value> &gradients);
  void buildOptimizer();
  void eraseDeadOps();

  Value buildFprop(LinearForward &forward);
  Value matrixOf(Value value, Location loc);
  Value unflatten(Value matrix, Value like, Type resultType, Location loc);
  void buildLinearGradients(const LinearForward &forward, Value resultGradient,
                            SmallVectorImpl<Value> &gradients);
  Value buildMatmul(LinearOp linear, Role role, Value lhs, Value rhs,
                    bool transposeLhs, bool transposeRhs);
  void accumulate(Value value, Value gradient, Location loc);
  Value zerosOf(Type type, Location loc);
  StringAttr parameterName(unsigned lossArgument);

  func::FuncOp loss;
  const TrainingStepOptions &options;
  OpBuilder builder;

  SmallVector<unsigned> parameters; ///< @loss argument indices.
  SmallVector<unsigned> inputs;     ///< @loss argument indices.
  func::FuncOp trainStep;
  Value stepArgument, lrArgument, seedArgument;

  IRMapping mapping; ///< @loss values to @train_step values.
  SmallVector<ForwardStep> forward;
  Value lossValue;
  /// Values that depend on a parameter: only they need a gradient.
  llvm::DenseSet<Value> active;
  /// The gradient of the loss with respect to each @train_step value, summed
  /// over the value's uses.
  DenseMap<Value, Value> gradients;
  /// Each tensor a matmul reads, as a matrix (one collapse for X's three
  /// readers: wq, wk and wv's Fprop and Wgrad).
  DenseMap<Value, Value> matrices;
  /// The sizes of each tensor a matmul's result is reshaped like (one
  /// tensor.dim per dynamic size, however many linears read the tensor).
  DenseMap<Value, SmallVector<OpFoldResult>> sizes;
};

} // namespace

//===----------------------------------------------------------------------===//
// Shapes and locations
//===----------------------------------------------------------------------===//

static RankedTensorType scalarTensorType(MLIRContext *context) {
  return RankedTensorType::get({}, Float32Type::get(context));
}

/// The reassociation that groups all dimensions but the last of a rank-`rank`
/// tensor: [[0, ..., rank-2], [rank-1]].
static SmallVector<ReassociationIndices> leadingDimsTogether(int64_t rank) {
  ReassociationIndices leading;
  for (int64_t dim = 0; dim + 1 < rank; ++dim)
    leading.push_back(dim);
  return {leading, {rank - 1}};
}

/// x [..., k] as a matrix [N, k], N the product of the leading dimensions
/// (1 for a vector).
static Value flattenToMatrix(OpBuilder &builder, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  if (rank == 2)
    return x;
  if (rank == 1) {
    auto matrix =
        RankedTensorType::get({1, type.getDimSize(0)}, type.getElementType());
    SmallVector<ReassociationIndices> all = {{0, 1}};
    return tensor::ExpandShapeOp::create(builder, loc, matrix, x, all);
  }
  return tensor::CollapseShapeOp::create(builder, loc, x,
                                         leadingDimsTogether(rank));
}

/// A matrix [N, k] back to `like`'s leading dimensions (whose sizes are
/// `likeSizes`) followed by k, cast to `resultType` (which may know more sizes
/// than the matrix).
static Value unflattenMatrix(OpBuilder &builder, Location loc, Value matrix,
                             Value like, ArrayRef<OpFoldResult> likeSizes,
                             Type resultType) {
  auto likeType = cast<RankedTensorType>(like.getType());
  auto matrixType = cast<RankedTensorType>(matrix.getType());
  int64_t rank = likeType.getRank();
  Value result = matrix;
  if (rank == 1) {
    SmallVector<ReassociationIndices> all = {{0, 1}};
    result = tensor::CollapseShapeOp::create(builder, loc, matrix, all);
  } else if (rank > 2) {
    SmallVector<OpFoldResult> sizes(likeSizes);
    sizes.back() = tensor::getMixedSize(builder, loc, matrix, 1);
    SmallVector<int64_t> shape(likeType.getShape());
    shape.back() = matrixType.getDimSize(1);
    auto type = RankedTensorType::get(shape, matrixType.getElementType());
    result = tensor::ExpandShapeOp::create(builder, loc, type, matrix,
                                           leadingDimsTogether(rank), sizes);
  }
  if (result.getType() != resultType)
    result = tensor::CastOp::create(builder, loc, resultType, result);
  return result;
}

/// "LINEAR.ROLE" around the linear's source location (without the linear's
/// own NameLoc, which the new name includes).
static Location gemmLocation(LinearOp linear, Role role) {
  Location base = linear.getLoc();
  if (auto named = dyn_cast<NameLoc>(base);
      named && named.getName().getValue() == linear.getName())
    base = named.getChildLoc();
  std::string name = (linear.getName() + "." + stringifyRole(role)).str();
  return NameLoc::get(StringAttr::get(linear.getContext(), name), base);
}

//===----------------------------------------------------------------------===//
// The signature
//===----------------------------------------------------------------------===//

StringAttr TrainingStepBuilder::parameterName(unsigned lossArgument) {
  return loss.getArgAttrOfType<StringAttr>(lossArgument, "tetra.param");
}

LogicalResult TrainingStepBuilder::checkLoss() {
  if (loss.isExternal())
    return loss.emitOpError("@loss has no body to differentiate");
  if (!llvm::hasSingleElement(loss.getBody()))
    return loss.emitOpError("@loss must be straight-line code (one block) to "
                            "be differentiated; loops are unrolled by the "
                            "frontend");
  FunctionType type = loss.getFunctionType();
  if (type.getNumResults() != 1 ||
      type.getResult(0) != scalarTensorType(loss.getContext())) {
    InFlightDiagnostic diag =
        loss.emitOpError("@loss must return the loss as one tensor<f32>, got ");
    if (type.getNumResults() == 0)
      return diag << "no result";
    llvm::interleaveComma(type.getResults(), diag);
    return diag;
  }
  for (unsigned index = 0; index < loss.getNumArguments(); ++index) {
    Attribute name = loss.getArgAttr(index, "tetra.param");
    if (!name) {
      inputs.push_back(index);
      continue;
    }
    Location loc = loss.getArgument(index).getLoc();
    if (!isa<StringAttr>(name))
      return emitError(loc) << "the tetra.param attribute of argument #"
                            << index << " must be the parameter's name";
    auto type = dyn_cast<RankedTensorType>(loss.getArgumentTypes()[index]);
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return emitError(loc)
             << "parameter '" << cast<StringAttr>(name).getValue()
             << "' must be an f32 tensor of static shape (its optimizer "
                "state has its shape), got "
             << loss.getArgumentTypes()[index];
    parameters.push_back(index);
  }
  return success();
}

void TrainingStepBuilder::createFunction() {
  MLIRContext *context = loss.getContext();
  SmallVector<Type> argumentTypes, resultTypes;
  SmallVector<DictionaryAttr> argumentAttrs, resultAttrs;
  SmallVector<Location> argumentLocs;
  auto named = [&](StringRef kind, Attribute value) {
    return builder.getDictionaryAttr(builder.getNamedAttr(kind, value));
  };
  auto addArgument = [&](Type type, DictionaryAttr attrs, Location loc) {
    argumentTypes.push_back(type);
    argumentAttrs.push_back(attrs ? attrs : builder.getDictionaryAttr({}));
    argumentLocs.push_back(loc);
  };

  // Parameters, then AdamW's first and second moments of each, each named
  // after its parameter.
  for (unsigned index : parameters)
    addArgument(loss.getArgumentTypes()[index], loss.getArgAttrDict(index),
                loss.getArgument(index).getLoc());
  for (StringRef kind : {"tetra.adam_m", "tetra.adam_v"})
    for (unsigned index : parameters)
      addArgument(loss.getArgumentTypes()[index],
                  named(kind, parameterName(index)),
                  loss.getArgument(index).getLoc());
  // The inputs (tokens, targets), then the step's scalars.
  for (unsigned index : inputs)
    addArgument(loss.getArgumentTypes()[index], loss.getArgAttrDict(index),
                loss.getArgument(index).getLoc());
  Location loc = loss.getLoc();
  addArgument(builder.getI64Type(), named("tetra.step", builder.getUnitAttr()),
              loc);
  addArgument(builder.getF32Type(), named("tetra.lr", builder.getUnitAttr()),
              loc);
  addArgument(builder.getI64Type(), named("tetra.seed", builder.getUnitAttr()),
              loc);

  // The loss and the gradient norm, then the new parameters and moments.
  Type scalar = scalarTensorType(context);
  for (StringRef output : {"loss", "grad_norm"}) {
    resultTypes.push_back(scalar);
    resultAttrs.push_back(named("tetra.output", builder.getStringAttr(output)));
  }
  for (StringRef kind : {"tetra.param", "tetra.adam_m", "tetra.adam_v"})
    for (unsigned index : parameters) {
      resultTypes.push_back(loss.getArgumentTypes()[index]);
      resultAttrs.push_back(named(kind, parameterName(index)));
    }

  builder.setInsertionPointAfter(loss);
  trainStep =
      func::FuncOp::create(builder, loc, "train_step",
                           builder.getFunctionType(argumentTypes, resultTypes));
  trainStep.setAllArgAttrs(argumentAttrs);
  trainStep.setAllResultAttrs(resultAttrs);
  trainStep->setAttr(
      "tetra.optimizer",
      builder.getDictionaryAttr({
          builder.getNamedAttr("beta1", builder.getF64FloatAttr(options.beta1)),
          builder.getNamedAttr("beta2", builder.getF64FloatAttr(options.beta2)),
          builder.getNamedAttr("eps", builder.getF64FloatAttr(options.eps)),
          builder.getNamedAttr("weight_decay",
                               builder.getF64FloatAttr(options.weightDecay)),
          builder.getNamedAttr("clip", builder.getF64FloatAttr(options.clip)),
      }));
  Block *entry = trainStep.addEntryBlock();
  for (auto [argument, argumentLoc] :
       llvm::zip(entry->getArguments(), argumentLocs))
    argument.setLoc(argumentLoc);
  builder.setInsertionPointToEnd(entry);

  unsigned numParameters = parameters.size();
  for (auto [position, index] : llvm::enumerate(parameters)) {
    mapping.map(loss.getArgument(index), entry->getArgument(position));
    active.insert(entry->getArgument(position));
  }
  for (auto [position, index] : llvm::enumerate(inputs))
    mapping.map(loss.getArgument(index),
                entry->getArgument(3 * numParameters + position));
  unsigned scalars = 3 * numParameters + inputs.size();
  stepArgument = entry->getArgument(scalars);
  lrArgument = entry->getArgument(scalars + 1);
  seedArgument = entry->getArgument(scalars + 2);
}

//===----------------------------------------------------------------------===//
// The forward pass
//===----------------------------------------------------------------------===//

Value TrainingStepBuilder::buildMatmul(LinearOp linear, Role role, Value lhs,
                                       Value rhs, bool transposeLhs,
                                       bool transposeRhs) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  int64_t rows = lhsType.getDimSize(transposeLhs ? 1 : 0);
  int64_t columns = rhsType.getDimSize(transposeRhs ? 0 : 1);
  auto type = RankedTensorType::get({rows, columns}, lhsType.getElementType());
  // Stochastic rounding and per-step random signs draw from (seed, step).
  PolicyAttr policy = linear.getPolicy();
  Value seed, stepValue;
  if (policy.getForRole(role).needsRandomSource()) {
    seed = seedArgument;
    stepValue = stepArgument;
  }
  return MatmulOp::create(builder, gemmLocation(linear, role), type, lhs, rhs,
                          role, policy, transposeLhs, transposeRhs, seed,
                          stepValue);
}

Value TrainingStepBuilder::matrixOf(Value value, Location loc) {
  Value &matrix = matrices[value];
  if (!matrix)
    matrix = flattenToMatrix(builder, loc, value);
  return matrix;
}

Value TrainingStepBuilder::unflatten(Value matrix, Value like, Type resultType,
                                     Location loc) {
  auto [entry, inserted] = sizes.try_emplace(like);
  if (inserted)
    entry->second = tensor::getMixedSizes(builder, loc, like);
  return unflattenMatrix(builder, loc, matrix, like, entry->second, resultType);
}

/// Y = X·Wᵀ over the tokens: [N, in] x [out, in]ᵀ -> [N, out]. Keeps X as
/// a matrix in `forward` for Wgrad.
Value TrainingStepBuilder::buildFprop(LinearForward &forward) {
  LinearOp linear = forward.linear;
  Location loc = linear.getLoc();
  forward.matrix = matrixOf(forward.input, loc);
  Value product = buildMatmul(linear, Role::Fprop, forward.matrix,
                              forward.weight, /*transposeLhs=*/false,
                              /*transposeRhs=*/true);
  return unflatten(product, forward.input, linear.getType(), loc);
}

void TrainingStepBuilder::recomputeForward() {
  Block &body = loss.getBody().front();
  for (Operation &op : body.without_terminator()) {
    ForwardStep record;
    record.original = &op;
    for (Value operand : op.getOperands())
      record.operands.push_back(mapping.lookupOrDefault(operand));
    if (auto linear = dyn_cast<LinearOp>(op)) {
      LinearForward linearForward{linear, record.operands[0], Value(),
                                  record.operands[1]};
      Value result = buildFprop(linearForward);
      mapping.map(linear.getResult(), result);
      record.results.push_back(result);
      record.linear = linearForward;
    } else {
      Operation *clone = builder.clone(op, mapping);
      record.clone = clone;
      llvm::append_range(record.results, clone->getResults());
    }
    if (llvm::any_of(record.operands,
                     [&](Value operand) { return active.contains(operand); }))
      active.insert(record.results.begin(), record.results.end());
    forward.push_back(std::move(record));
  }
  lossValue = mapping.lookupOrDefault(body.getTerminator()->getOperand(0));
}

//===----------------------------------------------------------------------===//
// The backward pass
//===----------------------------------------------------------------------===//

Value TrainingStepBuilder::zerosOf(Type type, Location loc) {
  return arith::ConstantOp::create(builder, loc, builder.getZeroAttr(type));
}

void TrainingStepBuilder::accumulate(Value value, Value gradient,
                                     Location loc) {
  auto [entry, inserted] = gradients.try_emplace(value, gradient);
  if (!inserted)
    entry->second = AddOp::create(builder, loc, entry->second, gradient);
}

/// Dgrad dX = dY·W ([N, out] x [out, in] -> [N, in]) and Wgrad dW = dYᵀ·X
/// ([N, out]ᵀ x [N, in] -> [out, in], reducing over the N tokens).
void TrainingStepBuilder::buildLinearGradients(
    const LinearForward &forward, Value resultGradient,
    SmallVectorImpl<Value> &operandGradients) {
  LinearOp linear = forward.linear;
  Value gradientMatrix = matrixOf(resultGradient, linear.getLoc());
  Value inputGradient, weightGradient;
  if (active.contains(forward.input)) {
    Value product =
        buildMatmul(linear, Role::Dgrad, gradientMatrix, forward.weight,
                    /*transposeLhs=*/false, /*transposeRhs=*/false);
    inputGradient = unflatten(product, forward.input, forward.input.getType(),
                              linear.getLoc());
  }
  if (active.contains(forward.weight)) {
    weightGradient =
        buildMatmul(linear, Role::Wgrad, gradientMatrix, forward.matrix,
                    /*transposeLhs=*/true, /*transposeRhs=*/false);
    if (weightGradient.getType() != forward.weight.getType())
      weightGradient = tensor::CastOp::create(
          builder, linear.getLoc(), forward.weight.getType(), weightGradient);
  }
  operandGradients.assign({inputGradient, weightGradient});
}

LogicalResult TrainingStepBuilder::buildOperandGradients(
    ForwardStep &record, ValueRange resultGradients,
    SmallVectorImpl<Value> &operandGradients) {
  Operation *op = record.original;
  if (record.linear) {
    buildLinearGradients(*record.linear, resultGradients.front(),
                         operandGradients);
    return success();
  }
  auto differentiable = dyn_cast<DifferentiableOpInterface>(record.clone);
  if (!differentiable)
    return op->emitOpError()
           << "has no gradient rule: the training step differentiates "
              "tetra.linear and ops that implement "
              "tetra::DifferentiableOpInterface";
  if (failed(differentiable.buildGradients(builder, resultGradients,
                                           operandGradients)))
    return op->emitOpError("could not be differentiated");
  if (operandGradients.size() != op->getNumOperands())
    return op->emitOpError()
           << "gradient rule gave " << operandGradients.size()
           << " gradients for " << op->getNumOperands() << " operands";
  for (auto [index, operand, gradient] :
       llvm::enumerate(record.operands, operandGradients))
    if (gradient && gradient.getType() != operand.getType())
      return op->emitOpError() << "gradient rule gave operand #" << index
                               << " (" << operand.getType()
                               << ") a gradient of type " << gradient.getType();
  return success();
}

LogicalResult TrainingStepBuilder::buildBackward() {
  // d loss / d loss = 1.
  gradients[lossValue] = arith::ConstantOp::create(
      builder, loss.getLoc(), builder.getOneAttr(lossValue.getType()));

  for (ForwardStep &record : llvm::reverse(forward)) {
    // Only ops on a path from a parameter to the loss need their backward.
    SmallVector<Value> resultGradients;
    bool anyGradient = false;
    for (Value result : record.results) {
      Value gradient = gradients.lookup(result);
      anyGradient |= static_cast<bool>(gradient);
      resultGradients.push_back(gradient);
    }
    if (!anyGradient || llvm::none_of(record.operands, [&](Value operand) {
          return active.contains(operand);
        }))
      continue;
    Location loc = record.original->getLoc();
    for (auto [result, gradient] : llvm::zip(record.results, resultGradients)) {
      if (gradient)
        continue;
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape())
        return record.original->emitOpError()
               << "result of type " << result.getType()
               << " takes no gradient, and a zero gradient needs a static "
                  "shape";
      gradient = zerosOf(type, loc);
    }

    SmallVector<Value> operandGradients;
    if (failed(
            buildOperandGradients(record, resultGradients, operandGradients)))
      return failure();
    for (auto [operand, gradient] :
         llvm::zip(record.operands, operandGradients))
      if (gradient && active.contains(operand))
        accumulate(operand, gradient, loc);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The optimizer
//===----------------------------------------------------------------------===//

void TrainingStepBuilder::buildOptimizer() {
  MLIRContext *context = loss.getContext();
  Block &entry = trainStep.getBody().front();
  unsigned numParameters = parameters.size();
  auto nameOf = [&](unsigned position) {
    return parameterName(parameters[position]);
  };
  auto locationOf = [&](unsigned position, StringRef what) {
    std::string name = (nameOf(position).getValue() + "." + what).str();
    return NameLoc::get(StringAttr::get(context, name),
                        entry.getArgument(position).getLoc());
  };

  // Every parameter's gradient; zero for one that does not reach the loss.
  SmallVector<Value> parameterGradients;
  for (unsigned position = 0; position < numParameters; ++position) {
    Value parameter = entry.getArgument(position);
    Value gradient = gradients.lookup(parameter);
    if (!gradient)
      gradient = zerosOf(parameter.getType(), parameter.getLoc());
    parameterGradients.push_back(gradient);
  }

  Type scalar = scalarTensorType(context);
  Location normLoc =
      NameLoc::get(StringAttr::get(context, "grad_norm"), loss.getLoc());
  Value norm =
      parameterGradients.empty()
          ? zerosOf(scalar, normLoc)
          : GlobalNormOp::create(builder, normLoc, scalar, parameterGradients)
                .getResult();
  if (options.clip > 0)
    for (auto [position, gradient] : llvm::enumerate(parameterGradients))
      gradient =
          ClipByNormOp::create(builder, locationOf(position, "clip"), gradient,
                               norm, builder.getF64FloatAttr(options.clip));

  // AdamW; weight decay for matrices (and the embedding table), not for the
  // norms' 1-D weights.
  SmallVector<Value> newParameters, newFirstMoments, newSecondMoments;
  for (unsigned position = 0; position < numParameters; ++position) {
    Value parameter = entry.getArgument(position);
    auto type = cast<RankedTensorType>(parameter.getType());
    double decay = type.getRank() >= 2 ? options.weightDecay : 0.0;
    auto update = AdamWOp::create(
        builder, locationOf(position, "adamw"), parameter,
        parameterGradients[position],
        entry.getArgument(numParameters + position),
        entry.getArgument(2 * numParameters + position), stepArgument,
        lrArgument, builder.getF64FloatAttr(options.beta1),
        builder.getF64FloatAttr(options.beta2),
        builder.getF64FloatAttr(options.eps), builder.getF64FloatAttr(decay));
    newParameters.push_back(update.getNewParam());
    newFirstMoments.push_back(update.getNewM());
    newSecondMoments.push_back(update.getNewV());
  }

  SmallVector<Value> results = {lossValue, norm};
  llvm::append_range(results, newParameters);
  llvm::append_range(results, newFirstMoments);
  llvm::append_range(results, newSecondMoments);
  func::ReturnOp::create(builder, loss.getLoc(), results);
}

/// Gradient rules may build gradients no parameter needs (of an operand that
/// depends on no parameter), and @loss may hold ops that do not reach the
/// loss: drop them.
void TrainingStepBuilder::eraseDeadOps() {
  Block &entry = trainStep.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(entry)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

LogicalResult TrainingStepBuilder::run() {
  if (failed(checkLoss()))
    return failure();
  createFunction();
  recomputeForward();
  if (failed(buildBackward())) {
    trainStep.erase();
    return failure();
  }
  buildOptimizer();
  eraseDeadOps();
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct TrainingStepPass
    : public tetra::impl::TrainingStepBase<TrainingStepPass> {
  using TrainingStepBase::TrainingStepBase;

  LogicalResult checkOptions(ModuleOp module) {
    auto isBeta = [](double beta) { return beta >= 0 && beta < 1; };
    if (!isBeta(beta1) || !isBeta(beta2))
      return module.emitError("tetra-training-step: beta1 and beta2 must be "
                              "in [0, 1)");
    if (!(eps > 0))
      return module.emitError("tetra-training-step: eps must be positive");
    if (!(weightDecay >= 0))
      return module.emitError("tetra-training-step: weight-decay must not be "
                              "negative");
    if (!(clip >= 0))
      return module.emitError("tetra-training-step: clip must not be "
                              "negative (0 disables clipping)");
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptions(module)))
      return signalPassFailure();
    auto loss = module.lookupSymbol<func::FuncOp>("loss");
    if (!loss) {
      module.emitError("no func.func @loss to differentiate: the training "
                       "step is derived from the model's loss");
      return signalPassFailure();
    }
    if (Operation *existing = module.lookupSymbol("train_step")) {
      existing->emitError("the module already has a @train_step");
      return signalPassFailure();
    }
    TrainingStepOptions settings;
    settings.beta1 = beta1;
    settings.beta2 = beta2;
    settings.eps = eps;
    settings.weightDecay = weightDecay;
    settings.clip = clip;
    if (failed(TrainingStepBuilder(loss, settings).run()))
      signalPassFailure();
  }
};
} // namespace
