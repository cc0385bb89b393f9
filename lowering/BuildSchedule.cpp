//===- BuildSchedule.cpp - A func of tetra ops into a schedule ------------===//
//
// One launch per op, in program order. Views (tensor.collapse_shape /
// expand_shape) share their source's buffer and launch nothing. Values a
// later op needs from the forward computation (rmsnorm's rstd, attention's
// log-sum-exp, cross-entropy's log-sum-exp) are extra temporaries the
// forward launch writes; the memory plan keeps them alive as long as a
// launch reads them.
//
//===----------------------------------------------------------------------===//

#include "lowering/BuildSchedule.h"

#include "dialect/LLVMFormatters.h"
#include "dialect/TetraOps.h"
#include "lowering/NumericsOf.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numeric>
#include <tuple>

using namespace mlir;
using namespace tetra;
using backend::Scalar;
using schedule::BufferDesc;
using schedule::BufferRole;
using schedule::Launch;

namespace {

class ScheduleBuilder {
public:
  ScheduleBuilder(func::FuncOp function, const ScheduleOptions &options)
      : function(function), options(options) {}

  FailureOr<schedule::Schedule> build();

private:
  LogicalResult addArguments();
  LogicalResult schedule(Operation *op);
  /// The buffer of `value`, creating a temporary for an op result.
  FailureOr<int> bufferOf(Value value);
  FailureOr<int> newBuffer(std::string name, BufferRole role, Type type);
  int newTemporary(std::string name, backend::ElementType type,
                   std::vector<int64_t> shape);
  void launch(Operation *op, StringRef kernel, std::vector<int> buffers,
              std::vector<Scalar> scalars);
  std::string originOf(Operation *op);

  /// Schedules `op` if it is one of the training ops (gradients, optimizer):
  /// true when it was, false when `op` is not one of them (the caller
  /// schedules it), failure when it is one and could not be scheduled.
  FailureOr<bool> scheduleTrainingOp(Operation *op);
  /// At the first optimizer op: ends the gradient phase (after the
  /// accumulate launches when gradients are accumulated).
  LogicalResult beginOptimizer();
  /// Ends the phases once the function is scheduled.
  void finishPhases();
  LogicalResult markOutputs();
  /// The saved tensor a backward launch needs from its forward op (found by
  /// the forward's operands), recomputing the forward into scratch buffers
  /// when the function does not compute it.
  FailureOr<int> rstdFor(Operation *op, Value input, Value weight, double eps);
  FailureOr<std::pair<int, int>> attentionSavedFor(Operation *op, Value q,
                                                   Value k, Value v,
                                                   int64_t heads,
                                                   int64_t kvHeads,
                                                   bool bf16Operands);
  FailureOr<int> crossEntropyLseFor(Operation *op, Value logits, Value targets);
  /// Makes `result` share `input`'s buffer when `op` is `input`'s last use
  /// (in-place updates: AdamW, clipping).
  LogicalResult aliasInPlace(Operation *op, Value input, Value result);

  func::FuncOp function;
  ScheduleOptions options;
  schedule::Schedule result;
  DenseMap<Value, int> buffers;
  /// Scalar arguments (the step, the learning rate) by their bound name.
  DenseMap<Value, std::string> scalarArguments;
  /// What forward launches saved, by the forward op's operands.
  DenseMap<std::pair<Value, Value>, int> savedRstd;
  DenseMap<std::pair<Value, Value>, int> savedLse;
  DenseMap<std::tuple<Value, Value, Value>, std::pair<int, int>> savedAttention;
  bool optimizerBegun = false;
};

/// What a GEMM kernel does to the operand `value` of its scaled matmul
/// (rotations and quantizers back to one of the kernel's arguments), for the
/// runtime's quantization-error measurement; nullopt when the operand is
/// f32 without rotation (lossless) or not traceable to an argument.
std::optional<schedule::QuantizedOperand>
describeOperand(KernelOp kernel, Value value, OperandQuantAttr quant,
                unsigned axis, StringRef name, ArrayRef<int> argumentOfInput) {
  numerics::Rotation rotation;
  uint32_t tensorId = 0;
  while (!isa<BlockArgument>(value)) {
    Operation *def = value.getDefiningOp();
    if (auto quantize = dyn_cast<QuantizeOp>(def)) {
      tensorId = static_cast<uint32_t>(quantize.getTensorId());
      value = quantize.getInput();
    } else if (auto rotate = dyn_cast<RotateOp>(def)) {
      rotation = numericsOf(rotate.getRotation());
      value = rotate.getInput();
    } else if (isa<arith::ExtFOp, arith::TruncFOp>(def)) {
      value = def->getOperand(0);
    } else {
      return std::nullopt;
    }
  }
  auto argument = cast<BlockArgument>(value);
  if (argument.getOwner()->getParentOp() != kernel.getOperation())
    return std::nullopt;
  numerics::OperandQuantization q{blockFormatOf(quant), rotation};
  if (q.format.element == numerics::ElementFormat::F32 &&
      rotation.kind == numerics::RotationKind::None)
    return std::nullopt;
  schedule::QuantizedOperand operand;
  operand.name = name.str();
  operand.argument = argumentOfInput[argument.getArgNumber()];
  ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
  operand.shape.assign(shape.begin(), shape.end());
  operand.axis = static_cast<int>(axis);
  operand.quantization = q;
  operand.tensorId = tensorId;
  return operand;
}

/// The GEMM a kernel computes, if it holds one scaled matmul with a role.
std::optional<schedule::GemmLaunch>
describeGemm(KernelOp kernel, ArrayRef<int> argumentOfInput) {
  ScaledMatmulOp matmul;
  kernel.getBody().walk([&](ScaledMatmulOp found) { matmul = found; });
  if (!matmul || !matmul.getRole())
    return std::nullopt;
  schedule::GemmLaunch gemm;
  Role role = *matmul.getRole();
  gemm.role = stringifyRole(role).str();
  // "layers.0.attn.wq.fprop" names the kernel's GEMM.
  std::string name;
  if (auto named = dyn_cast<NameLoc>(kernel.getLoc()))
    name = named.getName().str();
  gemm.linear = StringRef(name).rsplit('.').first.str();
  StringRef lhsName = gemmOperandName(role, /*lhs=*/true);
  StringRef rhsName = gemmOperandName(role, /*lhs=*/false);
  for (auto operand :
       {describeOperand(kernel, matmul.getLhs(), matmul.getLhsQuant(),
                        matmul.getLhsReductionDim(), lhsName, argumentOfInput),
        describeOperand(kernel, matmul.getRhs(), matmul.getRhsQuant(),
                        matmul.getRhsReductionDim(), rhsName, argumentOfInput)})
    if (operand)
      gemm.operands.push_back(std::move(*operand));
  return gemm;
}

int64_t productOf(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

std::string describeLocation(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().str() + " at " +
           describeLocation(named.getChildLoc());
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().strref() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      return describeLocation(fused.getLocations().front());
  return "?";
}

} // namespace

std::string ScheduleBuilder::originOf(Operation *op) {
  return op->getName().stripDialect().str() + " " +
         describeLocation(op->getLoc());
}

FailureOr<int> ScheduleBuilder::newBuffer(std::string name, BufferRole role,
                                          Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return function.emitError() << "cannot schedule a value of type " << type
                                << ": shapes must be static (bind batch and "
                                   "seq)";
  Type element = tensor.getElementType();
  BufferDesc buffer;
  if (element.isF32())
    buffer.type = backend::ElementType::F32;
  else if (element.isInteger(32))
    buffer.type = backend::ElementType::I32;
  else
    return function.emitError()
           << "cannot schedule a tensor of " << element << " yet";
  buffer.name = std::move(name);
  buffer.role = role;
  buffer.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  result.buffers.push_back(std::move(buffer));
  return static_cast<int>(result.buffers.size() - 1);
}

int ScheduleBuilder::newTemporary(std::string name, backend::ElementType type,
                                  std::vector<int64_t> shape) {
  BufferDesc buffer;
  buffer.name = std::move(name);
  buffer.type = type;
  buffer.shape = std::move(shape);
  result.buffers.push_back(std::move(buffer));
  return static_cast<int>(result.buffers.size() - 1);
}

LogicalResult ScheduleBuilder::addArguments() {
  for (BlockArgument argument : function.getArguments()) {
    unsigned index = argument.getArgNumber();
    auto named = [&](StringRef attr) {
      return function.getArgAttrOfType<StringAttr>(index, attr);
    };
    if (!isa<RankedTensorType>(argument.getType())) {
      // Scalars change every step: launches read them by name.
      for (StringRef attr : {"tetra.step", "tetra.lr", "tetra.seed"})
        if (function.getArgAttr(index, attr))
          scalarArguments[argument] = attr.drop_front(6).str();
      if (!scalarArguments.count(argument))
        return function.emitError()
               << "scalar argument " << index
               << " is none of tetra.step, tetra.lr, tetra.seed";
      continue;
    }
    BufferRole role;
    std::string name;
    if (StringAttr param = named("tetra.param")) {
      role = BufferRole::Parameter;
      name = param.str();
    } else if (StringAttr m = named("tetra.adam_m")) {
      role = BufferRole::AdamM;
      name = "m." + m.str();
    } else if (StringAttr v = named("tetra.adam_v")) {
      role = BufferRole::AdamV;
      name = "v." + v.str();
    } else if (StringAttr input = named("tetra.input")) {
      role = BufferRole::Input;
      name = input.str();
    } else {
      return function.emitError()
             << "argument " << index
             << " has no tetra.param, tetra.adam_m, tetra.adam_v or "
                "tetra.input name to bind it by";
    }
    FailureOr<int> buffer = newBuffer(name, role, argument.getType());
    if (failed(buffer))
      return failure();
    buffers[argument] = *buffer;
  }
  return success();
}

/// Results computed into temporaries become outputs; results that alias an
/// argument (AdamW's in-place parameters and moments) are that argument.
LogicalResult ScheduleBuilder::markOutputs() {
  auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    auto it = buffers.find(value);
    if (it == buffers.end())
      return function.emitError() << "result " << index << " has no buffer";
    BufferDesc &buffer = result.buffers[it->second];
    if (buffer.role == BufferRole::Temporary) {
      StringAttr name =
          function.getResultAttrOfType<StringAttr>(index, "tetra.output");
      buffer.role = BufferRole::Output;
      buffer.name = name ? name.str() : fmt::format("result{}", index);
      continue;
    }
    if (buffer.role == BufferRole::Input || buffer.role == BufferRole::Constant)
      return function.emitError()
             << "result " << index << " returns '" << buffer.name
             << "' unchanged: nothing computes it";
  }
  return success();
}

FailureOr<int> ScheduleBuilder::bufferOf(Value value) {
  auto it = buffers.find(value);
  if (it != buffers.end())
    return it->second;
  std::string name = fmt::format("%{}", result.buffers.size());
  if (Operation *def = value.getDefiningOp())
    name += " " + def->getName().stripDialect().str();
  FailureOr<int> buffer =
      newBuffer(name, BufferRole::Temporary, value.getType());
  if (failed(buffer))
    return failure();
  return buffers[value] = *buffer;
}

void ScheduleBuilder::launch(Operation *op, StringRef kernel,
                             std::vector<int> operands,
                             std::vector<Scalar> scalars) {
  Launch launch;
  launch.kernel = kernel.str();
  launch.buffers = std::move(operands);
  launch.scalars = std::move(scalars);
  launch.origin = originOf(op);
  result.launches.push_back(std::move(launch));
}

LogicalResult ScheduleBuilder::schedule(Operation *op) {
  // Views alias their source.
  if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op)) {
    FailureOr<int> source = bufferOf(op->getOperand(0));
    if (failed(source))
      return failure();
    buffers[op->getResult(0)] = *source;
    return success();
  }
  if (isa<func::ReturnOp>(op))
    return success();
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (!splat || !splat.getElementType().isF32())
      return op->emitError("only f32 splat constants have a buffer form");
    FailureOr<int> buffer =
        newBuffer(fmt::format("constant.{}", result.buffers.size()),
                  BufferRole::Constant, constant.getType());
    if (failed(buffer))
      return failure();
    result.buffers[*buffer].splat =
        splat.getSplatValue<APFloat>().convertToDouble();
    buffers[constant.getResult()] = *buffer;
    return success();
  }
  bool isOptimizer = isa<GlobalNormOp, ClipByNormOp, AdamWOp>(op);
  if (optimizerBegun && !isOptimizer)
    return op->emitError("comes after the optimizer began; a training "
                         "step's norm, clipping and AdamW must come last");
  if (isOptimizer && !optimizerBegun && failed(beginOptimizer()))
    return failure();
  if (isa<ClipByNormOp, AdamWOp>(op) && result.phases.updateBegin < 0)
    result.phases.updateBegin = static_cast<int>(result.launches.size());
  FailureOr<bool> trainingOp = scheduleTrainingOp(op);
  if (failed(trainingOp))
    return failure();
  if (*trainingOp)
    return success();

  SmallVector<int> in;
  for (Value operand : op->getOperands()) {
    FailureOr<int> buffer = bufferOf(operand);
    if (failed(buffer))
      return failure();
    in.push_back(*buffer);
  }
  SmallVector<int> out;
  for (Value value : op->getResults()) {
    FailureOr<int> buffer = bufferOf(value);
    if (failed(buffer))
      return failure();
    out.push_back(*buffer);
  }
  auto shapeOf = [](Value value) {
    return cast<RankedTensorType>(value.getType()).getShape();
  };
  auto i64 = [](int64_t value) { return Scalar::integer(value); };
  auto f64 = [](double value) { return Scalar::real(value); };
  auto f32 = backend::ElementType::F32;

  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](EmbeddingOp embedding) {
        ArrayRef<int64_t> table = shapeOf(embedding.getTable());
        int64_t count = productOf(shapeOf(embedding.getTokens()));
        launch(op, "embedding.forward", {in[0], in[1], out[0]},
               {i64(count), i64(table[0]), i64(table[1])});
        return success();
      })
      .Case([&](RMSNormOp norm) {
        ArrayRef<int64_t> shape = shapeOf(norm.getInput());
        int64_t dim = shape.back(), rows = productOf(shape) / dim;
        int rstd =
            newTemporary(result.buffers[out[0]].name + ".rstd", f32, {rows});
        savedRstd[{norm.getInput(), norm.getWeight()}] = rstd;
        launch(op, "rmsnorm.forward", {in[0], in[1], out[0], rstd},
               {i64(rows), i64(dim), f64(norm.getEps().convertToDouble())});
        return success();
      })
      .Case([&](LinearOp linear) -> LogicalResult {
        if (!isa<Float32Type>(
                linear.getPolicy().getFprop().getLhs().getCodeType()) ||
            !isa<Float32Type>(
                linear.getPolicy().getFprop().getRhs().getCodeType()))
          return op->emitError("a quantized linear reaches the schedule: "
                               "materialize its quantization first");
        ArrayRef<int64_t> x = shapeOf(linear.getInput());
        ArrayRef<int64_t> w = shapeOf(linear.getWeight());
        int64_t rows = productOf(x) / x.back();
        launch(op, "matmul", {in[0], in[1], out[0]},
               {i64(rows), i64(w[0]), i64(w[1]), i64(0), i64(1), i64(0)});
        return success();
      })
      .Case([&](RopeOp rope) {
        ArrayRef<int64_t> shape = shapeOf(rope.getInput());
        int64_t headDim = rope.getHeadDim();
        launch(op, "rope.forward", {in[0], out[0]},
               {i64(shape[0]), i64(shape[1]), i64(shape[2] / headDim),
                i64(headDim), f64(rope.getTheta().convertToDouble())});
        return success();
      })
      .Case([&](AttentionOp attention) {
        ArrayRef<int64_t> q = shapeOf(attention.getQuery());
        int64_t heads = attention.getHeads();
        int lse = newTemporary(result.buffers[out[0]].name + ".lse", f32,
                               {q[0], heads, q[1]});
        savedAttention[std::make_tuple(attention.getQuery(), attention.getKey(),
                                       attention.getValue())] = {out[0], lse};
        launch(op, "attention.forward", {in[0], in[1], in[2], out[0], lse},
               {i64(q[0]), i64(q[1]), i64(heads), i64(attention.getKvHeads()),
                i64(q[2] / heads), i64(attention.getBf16Operands())});
        return success();
      })
      .Case([&](SiluOp) {
        launch(op, "silu.forward", {in[0], out[0]},
               {i64(productOf(shapeOf(op->getResult(0))))});
        return success();
      })
      .Case<AddOp, SubOp, MulOp>([&](Operation *) {
        std::string kernel = op->getName().stripDialect().str() + ".forward";
        launch(op, kernel, {in[0], in[1], out[0]},
               {i64(productOf(shapeOf(op->getResult(0))))});
        return success();
      })
      .Case([&](ScaleOp scale) {
        launch(op, "scale.forward", {in[0], out[0]},
               {i64(productOf(shapeOf(op->getResult(0)))),
                f64(scale.getFactor().convertToDouble())});
        return success();
      })
      .Case([&](CrossEntropyOp crossEntropy) {
        ArrayRef<int64_t> logits = shapeOf(crossEntropy.getLogits());
        int64_t vocab = logits.back(), rows = productOf(logits) / vocab;
        int lse =
            newTemporary(result.buffers[out[0]].name + ".lse", f32, {rows});
        savedLse[{crossEntropy.getLogits(), crossEntropy.getTargets()}] = lse;
        launch(op, "cross_entropy.forward", {in[0], in[1], out[0], lse},
               {i64(rows), i64(vocab)});
        return success();
      })
      .Default([&](Operation *) {
        return op->emitError()
               << "'" << op->getName() << "' has no kernel on this target yet";
      });
}

//===----------------------------------------------------------------------===//
// The training step: matmuls with roles, gradients, clipping, AdamW
//===----------------------------------------------------------------------===//

/// Whether `policy` leaves both operands in f32: the only GEMMs the library
/// runs; quantized ones need the materialize-quantization pass and compiled
/// kernels.
static bool isPlainF32(GemmPolicyAttr policy) {
  return isa<Float32Type>(policy.getLhs().getCodeType()) &&
         isa<Float32Type>(policy.getRhs().getCodeType()) &&
         policy.getLhs().getRotation().isNone();
}

LogicalResult ScheduleBuilder::aliasInPlace(Operation *op, Value input,
                                            Value output) {
  for (Operation *user : input.getUsers())
    if (user != op && !user->isBeforeInBlock(op))
      return op->emitError("updates a value in place that a later op still "
                           "reads; the schedule cannot keep both");
  FailureOr<int> buffer = bufferOf(input);
  if (failed(buffer))
    return failure();
  buffers[output] = *buffer;
  return success();
}

FailureOr<int> ScheduleBuilder::rstdFor(Operation *op, Value input,
                                        Value weight, double eps) {
  auto saved = savedRstd.find({input, weight});
  if (saved != savedRstd.end())
    return saved->second;
  FailureOr<int> x = bufferOf(input), w = bufferOf(weight);
  if (failed(x) || failed(w))
    return failure();
  const BufferDesc &xDesc = result.buffers[*x];
  int64_t dim = xDesc.shape.back(), rows = xDesc.numElements() / dim;
  int y = newTemporary(xDesc.name + ".renorm", backend::ElementType::F32,
                       xDesc.shape);
  int rstd =
      newTemporary(xDesc.name + ".rstd", backend::ElementType::F32, {rows});
  launch(op, "rmsnorm.forward", {*x, *w, y, rstd},
         {Scalar::integer(rows), Scalar::integer(dim), Scalar::real(eps)});
  return savedRstd[{input, weight}] = rstd;
}

FailureOr<std::pair<int, int>>
ScheduleBuilder::attentionSavedFor(Operation *op, Value q, Value k, Value v,
                                   int64_t heads, int64_t kvHeads,
                                   bool bf16Operands) {
  auto saved = savedAttention.find(std::make_tuple(q, k, v));
  if (saved != savedAttention.end())
    return saved->second;
  FailureOr<int> qb = bufferOf(q), kb = bufferOf(k), vb = bufferOf(v);
  if (failed(qb) || failed(kb) || failed(vb))
    return failure();
  std::vector<int64_t> shape = result.buffers[*qb].shape;
  int out = newTemporary(result.buffers[*qb].name + ".attention",
                         backend::ElementType::F32, shape);
  int lse =
      newTemporary(result.buffers[*qb].name + ".lse", backend::ElementType::F32,
                   {shape[0], heads, shape[1]});
  launch(op, "attention.forward", {*qb, *kb, *vb, out, lse},
         {Scalar::integer(shape[0]), Scalar::integer(shape[1]),
          Scalar::integer(heads), Scalar::integer(kvHeads),
          Scalar::integer(shape[2] / heads), Scalar::integer(bf16Operands)});
  return savedAttention[std::make_tuple(q, k, v)] = {out, lse};
}

FailureOr<int> ScheduleBuilder::crossEntropyLseFor(Operation *op, Value logits,
                                                   Value targets) {
  auto saved = savedLse.find({logits, targets});
  if (saved != savedLse.end())
    return saved->second;
  FailureOr<int> l = bufferOf(logits), t = bufferOf(targets);
  if (failed(l) || failed(t))
    return failure();
  const BufferDesc &desc = result.buffers[*l];
  int64_t vocab = desc.shape.back(), rows = desc.numElements() / vocab;
  int loss = newTemporary(desc.name + ".loss", backend::ElementType::F32, {1});
  int lse = newTemporary(desc.name + ".lse", backend::ElementType::F32, {rows});
  launch(op, "cross_entropy.forward", {*l, *t, loss, lse},
         {Scalar::integer(rows), Scalar::integer(vocab)});
  return savedLse[{logits, targets}] = lse;
}

FailureOr<bool> ScheduleBuilder::scheduleTrainingOp(Operation *op) {
  auto i64 = [](int64_t value) { return Scalar::integer(value); };
  auto f64 = [](double value) { return Scalar::real(value); };
  auto shapeOf = [](Value value) {
    return cast<RankedTensorType>(value.getType()).getShape();
  };
  auto buffersOf = [&](ValueRange values) -> FailureOr<std::vector<int>> {
    std::vector<int> indices;
    for (Value value : values) {
      FailureOr<int> buffer = bufferOf(value);
      if (failed(buffer))
        return failure();
      indices.push_back(*buffer);
    }
    return indices;
  };

  if (auto adamw = dyn_cast<AdamWOp>(op)) {
    auto step = scalarArguments.find(adamw.getStep());
    auto lr = scalarArguments.find(adamw.getLr());
    if (step == scalarArguments.end() || lr == scalarArguments.end())
      return op->emitError("adamw's step and lr must be the function's "
                           "tetra.step and tetra.lr arguments");
    if (failed(aliasInPlace(op, adamw.getParam(), adamw.getNewParam())) ||
        failed(aliasInPlace(op, adamw.getM(), adamw.getNewM())) ||
        failed(aliasInPlace(op, adamw.getV(), adamw.getNewV())))
      return failure();
    FailureOr<std::vector<int>> args = buffersOf(
        {adamw.getParam(), adamw.getGrad(), adamw.getM(), adamw.getV()});
    if (failed(args))
      return failure();
    launch(op, "adamw", *args,
           {i64(result.buffers[(*args)[0]].numElements()), f64(0),
            f64(adamw.getBeta1().convertToDouble()),
            f64(adamw.getBeta2().convertToDouble()),
            f64(adamw.getEps().convertToDouble()),
            f64(adamw.getWeightDecay().convertToDouble()), i64(0)});
    result.launches.back().boundScalars = {{1, lr->second}, {6, step->second}};
    BufferDesc &gradient = result.buffers[(*args)[1]];
    if (options.exposeGradients && gradient.role == BufferRole::Temporary) {
      gradient.role = BufferRole::Output;
      gradient.name = "grad." + result.buffers[(*args)[0]].name;
    }
    return true;
  }
  if (auto kernel = dyn_cast<KernelOp>(op)) {
    // A compiled kernel: tensor inputs then results as buffers, the seed
    // and the step (i64 inputs) as scalars bound per run.
    std::vector<int> args;
    std::vector<Scalar> scalars;
    std::vector<std::pair<int, std::string>> bound;
    SmallVector<int> argumentOfInput;
    for (Value input : kernel.getInputs()) {
      argumentOfInput.push_back(static_cast<int>(args.size()));
      if (isa<RankedTensorType>(input.getType())) {
        FailureOr<int> buffer = bufferOf(input);
        if (failed(buffer))
          return failure();
        args.push_back(*buffer);
        continue;
      }
      auto name = scalarArguments.find(input);
      if (name == scalarArguments.end())
        return op->emitError("a kernel's scalar input must be the "
                             "function's tetra.seed or tetra.step");
      bound.push_back({static_cast<int>(scalars.size()), name->second});
      scalars.push_back(i64(0));
    }
    FailureOr<std::vector<int>> results = buffersOf(kernel.getResults());
    if (failed(results))
      return failure();
    args.insert(args.end(), results->begin(), results->end());
    launch(op, kernel.getKernelName(), args, scalars);
    result.launches.back().boundScalars = bound;
    result.launches.back().gemm = describeGemm(kernel, argumentOfInput);
    return true;
  }
  if (auto clip = dyn_cast<ClipByNormOp>(op)) {
    if (failed(aliasInPlace(op, clip.getGrad(), clip.getResult())))
      return failure();
    FailureOr<std::vector<int>> args =
        buffersOf({clip.getNorm(), clip.getGrad()});
    if (failed(args))
      return failure();
    launch(op, "clip_by_global_norm", *args,
           {f64(clip.getMaxNorm().convertToDouble()),
            i64(result.buffers[(*args)[1]].numElements())});
    return true;
  }
  if (auto norm = dyn_cast<GlobalNormOp>(op)) {
    FailureOr<int> out = bufferOf(norm.getNorm());
    FailureOr<std::vector<int>> inputs = buffersOf(norm.getInputs());
    if (failed(out) || failed(inputs))
      return failure();
    std::vector<int> args = {*out};
    std::vector<Scalar> counts;
    for (int input : *inputs) {
      args.push_back(input);
      counts.push_back(i64(result.buffers[input].numElements()));
    }
    launch(op, "global_norm", args, counts);
    return true;
  }

  // The rest write fresh results.
  auto withResults = [&](ValueRange operands,
                         ValueRange results) -> FailureOr<std::vector<int>> {
    FailureOr<std::vector<int>> in = buffersOf(operands);
    FailureOr<std::vector<int>> out = buffersOf(results);
    if (failed(in) || failed(out))
      return failure();
    in->insert(in->end(), out->begin(), out->end());
    return in;
  };
  bool isTrainingOp = true;
  LogicalResult scheduled =
      TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](MatmulOp matmul) -> LogicalResult {
        if (!isPlainF32(matmul.getGemmPolicy()))
          return op->emitError("a quantized matmul reaches the schedule: "
                               "its kernel must be compiled first");
        ArrayRef<int64_t> lhs = shapeOf(matmul.getLhs());
        int64_t m = lhs[1 - matmul.getLhsReductionDim()];
        int64_t k = lhs[matmul.getLhsReductionDim()];
        int64_t n = shapeOf(matmul.getResult())[1];
        FailureOr<std::vector<int>> args = withResults(
            {matmul.getLhs(), matmul.getRhs()}, matmul->getResults());
        if (failed(args))
          return failure();
        launch(op, "matmul", *args,
               {i64(m), i64(n), i64(k), i64(matmul.getTransposeLhs()),
                i64(matmul.getTransposeRhs()), i64(0)});
        return success();
      })
      .Case([&](EmbeddingGradOp grad) -> LogicalResult {
        ArrayRef<int64_t> table = shapeOf(grad.getTableGrad());
        FailureOr<std::vector<int>> args =
            withResults({grad.getTokens(), grad.getGrad()}, grad->getResults());
        if (failed(args))
          return failure();
        launch(op, "embedding.backward", *args,
               {i64(result.buffers[(*args)[0]].numElements()), i64(table[0]),
                i64(table[1]), i64(0)});
        return success();
      })
      .Case([&](RMSNormGradOp grad) -> LogicalResult {
        double eps = grad.getEps().convertToDouble();
        FailureOr<int> rstd =
            rstdFor(op, grad.getInput(), grad.getWeight(), eps);
        FailureOr<std::vector<int>> args =
            buffersOf({grad.getInput(), grad.getWeight()});
        FailureOr<std::vector<int>> rest =
            withResults({grad.getGrad()}, grad->getResults());
        if (failed(rstd) || failed(args) || failed(rest))
          return failure();
        args->push_back(*rstd);
        args->insert(args->end(), rest->begin(), rest->end());
        ArrayRef<int64_t> shape = shapeOf(grad.getInput());
        int64_t dim = shape.back();
        launch(op, "rmsnorm.backward", *args,
               {i64(productOf(shape) / dim), i64(dim), i64(0)});
        return success();
      })
      .Case([&](RopeGradOp grad) -> LogicalResult {
        ArrayRef<int64_t> shape = shapeOf(grad.getGrad());
        int64_t headDim = grad.getHeadDim();
        FailureOr<std::vector<int>> args =
            withResults({grad.getGrad()}, grad->getResults());
        if (failed(args))
          return failure();
        launch(op, "rope.backward", *args,
               {i64(shape[0]), i64(shape[1]), i64(shape[2] / headDim),
                i64(headDim), f64(grad.getTheta().convertToDouble())});
        return success();
      })
      .Case([&](AttentionGradOp grad) -> LogicalResult {
        int64_t heads = grad.getHeads(), kvHeads = grad.getKvHeads();
        FailureOr<std::pair<int, int>> saved = attentionSavedFor(
            op, grad.getQuery(), grad.getKey(), grad.getValue(), heads, kvHeads,
            grad.getBf16Operands());
        FailureOr<std::vector<int>> args =
            buffersOf({grad.getQuery(), grad.getKey(), grad.getValue()});
        FailureOr<std::vector<int>> rest =
            withResults({grad.getGrad()}, grad->getResults());
        if (failed(saved) || failed(args) || failed(rest))
          return failure();
        ArrayRef<int64_t> q = shapeOf(grad.getQuery());
        int delta =
            newTemporary(result.buffers[(*rest)[0]].name + ".delta",
                         backend::ElementType::F32, {q[0], heads, q[1]});
        args->push_back(saved->first);
        args->push_back(saved->second);
        args->insert(args->end(), rest->begin(), rest->end());
        args->push_back(delta);
        launch(op, "attention.backward", *args,
               {i64(q[0]), i64(q[1]), i64(heads), i64(kvHeads),
                i64(q[2] / heads), i64(grad.getBf16Operands())});
        return success();
      })
      .Case([&](SiluGradOp grad) -> LogicalResult {
        FailureOr<std::vector<int>> args =
            withResults({grad.getInput(), grad.getGrad()}, grad->getResults());
        if (failed(args))
          return failure();
        launch(op, "silu.backward", *args,
               {i64(productOf(shapeOf(grad.getInput())))});
        return success();
      })
      .Case([&](CrossEntropyGradOp grad) -> LogicalResult {
        FailureOr<int> lse =
            crossEntropyLseFor(op, grad.getLogits(), grad.getTargets());
        FailureOr<std::vector<int>> args =
            buffersOf({grad.getLogits(), grad.getTargets()});
        FailureOr<std::vector<int>> rest =
            withResults({grad.getGrad()}, grad->getResults());
        if (failed(lse) || failed(args) || failed(rest))
          return failure();
        args->push_back(*lse);
        args->insert(args->end(), rest->begin(), rest->end());
        ArrayRef<int64_t> logits = shapeOf(grad.getLogits());
        int64_t vocab = logits.back();
        launch(op, "cross_entropy.backward", *args,
               {i64(productOf(logits) / vocab), i64(vocab)});
        return success();
      })
      .Default([&](Operation *) {
        isTrainingOp = false;
        return success();
      });
  if (failed(scheduled))
    return failure();
  return isTrainingOp;
}

LogicalResult ScheduleBuilder::beginOptimizer() {
  optimizerBegun = true;
  if (options.accumulateGradients) {
    for (AdamWOp adamw : function.getOps<AdamWOp>()) {
      Value gradient = adamw.getGrad();
      if (auto clip = gradient.getDefiningOp<ClipByNormOp>())
        gradient = clip.getGrad();
      FailureOr<int> source = bufferOf(gradient);
      FailureOr<int> param = bufferOf(adamw.getParam());
      if (failed(source) || failed(param))
        return failure();
      std::string name = "grad." + result.buffers[*param].name;
      FailureOr<int> sum =
          newBuffer(name, BufferRole::Gradient, gradient.getType());
      if (failed(sum))
        return failure();
      launch(adamw, "accumulate_gradient", {*sum, *source},
             {Scalar::integer(result.buffers[*sum].numElements()),
              Scalar::real(1.0), Scalar::integer(0)});
      result.launches.back().origin = "accumulate_gradient " + name;
      result.launches.back().boundScalars = {{1, "grad_scale"},
                                             {2, "micro_batch"}};
      buffers[gradient] = *sum;
    }
  }
  result.phases.gradientsEnd = static_cast<int>(result.launches.size());
  return success();
}

void ScheduleBuilder::finishPhases() {
  schedule::Phases &phases = result.phases;
  if (phases.gradientsEnd < 0)
    return; // No optimizer: one part.
  if (phases.updateBegin < 0)
    phases.updateBegin = static_cast<int>(result.launches.size());
  // The loss is ready after the last launch before the gradients' end that
  // touches it.
  phases.forwardEnd = phases.gradientsEnd;
  int loss = result.findBuffer("loss");
  if (loss < 0)
    return;
  for (int l = phases.gradientsEnd - 1; l >= 0; --l)
    if (llvm::is_contained(result.launches[l].buffers, loss)) {
      phases.forwardEnd = l + 1;
      return;
    }
}

FailureOr<schedule::Schedule> ScheduleBuilder::build() {
  if (!function.getBody().hasOneBlock())
    return function.emitError("a schedule needs a straight-line function");
  result.name = function.getName().str();
  if (failed(addArguments()))
    return failure();
  for (Operation &op : function.getBody().front())
    if (failed(schedule(&op)))
      return failure();
  if (failed(markOutputs()))
    return failure();
  finishPhases();
  schedule::rematerialize(result, options.recompute);
  schedule::planMemory(result);
  if (io::Status valid = schedule::validate(result); !valid)
    return function.emitError() << "internal error: the schedule is invalid: "
                                << valid.error().message();
  return std::move(result);
}

FailureOr<schedule::Schedule>
tetra::buildSchedule(func::FuncOp function, const ScheduleOptions &options) {
  return ScheduleBuilder(function, options).build();
}
