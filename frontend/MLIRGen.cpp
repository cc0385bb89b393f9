//===- MLIRGen.cpp - An elaborated model into the tetra dialect -----------===//
//
// A direct walk over the ModelGraph: every value already has its shape and
// every op its checked arguments, so each op becomes one tetra op.
//
//===----------------------------------------------------------------------===//

#include "frontend/MLIRGen.h"

#include "dialect/TetraOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
namespace fe = tetra::frontend;
using fe::Dim;
using fe::ElementType;
using fe::EmitOptions;
using fe::Function;
using fe::LinearPolicy;
using fe::ModelGraph;
using fe::OperandPolicy;
using fe::OpKind;
using fe::Parameter;
using fe::ResolvedPolicy;
using fe::RolePolicy;
namespace numerics = tetra::numerics;

namespace {

class ModuleEmitter {
public:
  ModuleEmitter(MLIRContext &context, const llvm::SourceMgr &sourceMgr,
                const ModelGraph &model, const ResolvedPolicy *policy,
                const EmitOptions &options)
      : context(context), builder(&context), sourceMgr(sourceMgr), model(model),
        policy(policy), options(options) {}

  OwningOpRef<ModuleOp> emit();

private:
  void emitFunction(const Function &function);
  Value emitOp(const Function &function, const fe::Op &op,
               ArrayRef<Value> operands, Type resultType);

  Location locationOf(llvm::SMLoc loc);
  Type elementTypeOf(ElementType element);
  RankedTensorType typeOf(const fe::TensorType &type);
  tetra::PolicyAttr policyFor(const std::string &linear);
  tetra::OperandQuantAttr quantFor(const OperandPolicy &operand,
                                   const numerics::Rotation &rotation);

  MLIRContext &context;
  OpBuilder builder;
  const llvm::SourceMgr &sourceMgr;
  const ModelGraph &model;
  const ResolvedPolicy *policy;
  const EmitOptions &options;
};

} // namespace

Location ModuleEmitter::locationOf(llvm::SMLoc loc) {
  unsigned buffer = loc.isValid() ? sourceMgr.FindBufferContainingLoc(loc) : 0;
  if (!buffer)
    return UnknownLoc::get(&context);
  auto [line, column] = sourceMgr.getLineAndColumn(loc, buffer);
  return FileLineColLoc::get(
      &context, sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier(), line,
      column);
}

Type ModuleEmitter::elementTypeOf(ElementType element) {
  switch (element) {
  case ElementType::F32:
    return builder.getF32Type();
  case ElementType::BF16:
    return builder.getBF16Type();
  case ElementType::I32:
    return builder.getI32Type();
  }
  llvm_unreachable("unknown element type");
}

RankedTensorType ModuleEmitter::typeOf(const fe::TensorType &type) {
  SmallVector<int64_t> shape;
  for (const Dim &dim : type.shape) {
    if (!dim.isSymbolic()) {
      shape.push_back(dim.size);
      continue;
    }
    auto bound = options.dimensions.find(dim.symbol);
    shape.push_back(bound == options.dimensions.end() ? ShapedType::kDynamic
                                                      : bound->second);
  }
  return RankedTensorType::get(shape, elementTypeOf(type.element));
}

static tetra::ElementFormat toDialect(numerics::ElementFormat format) {
  switch (format) {
  case numerics::ElementFormat::E2M1:
    return tetra::ElementFormat::E2M1;
  case numerics::ElementFormat::E4M3:
    return tetra::ElementFormat::E4M3;
  case numerics::ElementFormat::E5M2:
    return tetra::ElementFormat::E5M2;
  case numerics::ElementFormat::BF16:
    return tetra::ElementFormat::BF16;
  case numerics::ElementFormat::F32:
    return tetra::ElementFormat::F32;
  }
  llvm_unreachable("unknown element format");
}

static tetra::ScaleRule toDialect(numerics::ScaleRule rule) {
  switch (rule) {
  case numerics::ScaleRule::Floor:
    return tetra::ScaleRule::Floor;
  case numerics::ScaleRule::Ceil:
    return tetra::ScaleRule::Ceil;
  case numerics::ScaleRule::Even:
    return tetra::ScaleRule::Even;
  case numerics::ScaleRule::RCeil:
    return tetra::ScaleRule::RCeil;
  case numerics::ScaleRule::Nearest:
    return tetra::ScaleRule::Nearest;
  case numerics::ScaleRule::Torchao:
    return tetra::ScaleRule::Torchao;
  }
  llvm_unreachable("unknown scale rule");
}

static tetra::Rounding toDialect(numerics::Rounding rounding) {
  switch (rounding) {
  case numerics::Rounding::NearestEven:
    return tetra::Rounding::NearestEven;
  case numerics::Rounding::NearestAway:
    return tetra::Rounding::NearestAway;
  case numerics::Rounding::Stochastic:
    return tetra::Rounding::Stochastic;
  }
  llvm_unreachable("unknown rounding");
}

tetra::OperandQuantAttr
ModuleEmitter::quantFor(const OperandPolicy &operand,
                        const numerics::Rotation &rotation) {
  tetra::BlockScaleAttr blockScale;
  if (operand.format.blockSize > 0) {
    bool isE8M0 = operand.format.scaleFormat == numerics::ScaleFormat::E8M0;
    blockScale = tetra::BlockScaleAttr::get(
        &context, operand.format.blockSize,
        isE8M0 ? tetra::ScaleFormat::E8M0 : tetra::ScaleFormat::E4M3,
        toDialect(operand.rule));
  }
  tetra::RotationAttr rotationAttr;
  switch (rotation.kind) {
  case numerics::RotationKind::None:
    rotationAttr = tetra::RotationAttr::getNone(&context);
    break;
  case numerics::RotationKind::Hadamard:
    rotationAttr = tetra::RotationAttr::get(
        &context, tetra::RotationKind::Hadamard, rotation.blockSize,
        tetra::SignSchedule::Fixed, 0);
    break;
  case numerics::RotationKind::RandomHadamard:
    rotationAttr = tetra::RotationAttr::get(
        &context, tetra::RotationKind::RandomHadamard, rotation.blockSize,
        rotation.schedule == numerics::SignSchedule::PerStep
            ? tetra::SignSchedule::PerStep
            : tetra::SignSchedule::Fixed,
        rotation.seed);
    break;
  }
  return tetra::OperandQuantAttr::get(
      &context, toDialect(operand.format.element), blockScale,
      toDialect(operand.rounding), rotationAttr);
}

tetra::PolicyAttr ModuleEmitter::policyFor(const std::string &linear) {
  const LinearPolicy *resolved = policy ? policy->find(linear) : nullptr;
  tetra::GemmPolicyAttr roles[3];
  for (int role = 0; role < 3; ++role) {
    if (!resolved) {
      auto f32 = *tetra::OperandQuantAttr::getPreset(&context, "f32");
      roles[role] =
          tetra::GemmPolicyAttr::get(&context, f32, f32, builder.getF32Type());
      continue;
    }
    const RolePolicy &rolePolicy = resolved->roles[role];
    Type accumulate = builder.getF32Type();
    if (rolePolicy.accumulate == "bf16")
      accumulate = builder.getBF16Type();
    else if (rolePolicy.accumulate == "f16")
      accumulate = builder.getF16Type();
    roles[role] = tetra::GemmPolicyAttr::get(
        &context, quantFor(rolePolicy.lhs, rolePolicy.rotation),
        quantFor(rolePolicy.rhs, rolePolicy.rotation), accumulate);
  }
  return tetra::PolicyAttr::get(&context, roles[0], roles[1], roles[2]);
}

Value ModuleEmitter::emitOp(const Function &function, const fe::Op &op,
                            ArrayRef<Value> operands, Type resultType) {
  Location loc = locationOf(op.loc);
  switch (op.kind) {
  case OpKind::Embedding:
    return tetra::EmbeddingOp::create(builder, loc, resultType, operands[0],
                                      operands[1]);
  case OpKind::Linear:
    return tetra::LinearOp::create(
        builder, NameLoc::get(builder.getStringAttr(op.linearName), loc),
        resultType, operands[0], operands[1], op.linearName,
        policyFor(op.linearName));
  case OpKind::RMSNorm:
    return tetra::RMSNormOp::create(builder, loc, operands[0], operands[1],
                                    builder.getF64FloatAttr(op.eps));
  case OpKind::Rope:
    return tetra::RopeOp::create(builder, loc, operands[0],
                                 builder.getI64IntegerAttr(op.headDim),
                                 builder.getF64FloatAttr(op.theta));
  case OpKind::Attention:
    return tetra::AttentionOp::create(
        builder, loc, operands[0], operands[1], operands[2],
        builder.getI64IntegerAttr(op.heads),
        builder.getI64IntegerAttr(op.kvHeads),
        policy && policy->attention == "bf16" ? builder.getUnitAttr()
                                              : UnitAttr());
  case OpKind::Silu:
    return tetra::SiluOp::create(builder, loc, operands[0]);
  case OpKind::Add:
    return tetra::AddOp::create(builder, loc, operands[0], operands[1]);
  case OpKind::Sub:
    return tetra::SubOp::create(builder, loc, operands[0], operands[1]);
  case OpKind::Mul:
    return tetra::MulOp::create(builder, loc, operands[0], operands[1]);
  case OpKind::Scale:
    return tetra::ScaleOp::create(builder, loc, operands[0],
                                  builder.getF64FloatAttr(op.factor));
  case OpKind::CrossEntropy:
    return tetra::CrossEntropyOp::create(builder, loc, resultType, operands[0],
                                         operands[1]);
  }
  llvm_unreachable("unknown op kind");
}

void ModuleEmitter::emitFunction(const Function &function) {
  // Arguments: every parameter of the model, then the function's inputs.
  SmallVector<Type> argumentTypes;
  SmallVector<DictionaryAttr> argumentAttrs;
  for (const Parameter &parameter : model.parameters) {
    argumentTypes.push_back(
        RankedTensorType::get(parameter.shape, builder.getF32Type()));
    argumentAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        "tetra.param", builder.getStringAttr(parameter.name))));
  }
  for (auto [name, value] :
       llvm::zip(function.argumentNames, function.arguments)) {
    argumentTypes.push_back(typeOf(function.values[value].type));
    argumentAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("tetra.input", builder.getStringAttr(name))));
  }
  Type resultType = typeOf(function.values[function.result].type);
  auto func =
      func::FuncOp::create(builder, locationOf(function.loc), function.name,
                           builder.getFunctionType(argumentTypes, resultType));
  func.setAllArgAttrs(argumentAttrs);
  Block *body = func.addEntryBlock();
  // A parameter's argument points at the parameter's declaration.
  for (auto [index, parameter] : llvm::enumerate(model.parameters))
    body->getArgument(index).setLoc(locationOf(parameter.loc));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(body);

  SmallVector<Value> values(function.values.size());
  for (auto [id, value] : llvm::enumerate(function.values)) {
    if (value.source == fe::Value::Source::Parameter)
      values[id] = body->getArgument(value.index);
    else if (value.source == fe::Value::Source::Argument)
      values[id] = body->getArgument(model.parameters.size() + value.index);
  }
  for (const fe::Op &op : function.ops) {
    SmallVector<Value> operands;
    for (int operand : op.operands)
      operands.push_back(values[operand]);
    values[op.result] =
        emitOp(function, op, operands, typeOf(function.values[op.result].type));
  }
  func::ReturnOp::create(builder, locationOf(function.loc),
                         values[function.result]);
}

OwningOpRef<ModuleOp> ModuleEmitter::emit() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(builder.getUnknownLoc());
  module->setName(model.name);
  builder.setInsertionPointToEnd(module->getBody());
  for (const Function &function : model.functions)
    emitFunction(function);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

void tetra::frontend::loadEmitDialects(MLIRContext &context) {
  context.loadDialect<tetra::TetraDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> tetra::frontend::emitModule(
    MLIRContext &context, const llvm::SourceMgr &sourceMgr,
    const ModelGraph &model, const ResolvedPolicy *policy,
    const EmitOptions &options) {
  loadEmitDialects(context);
  return ModuleEmitter(context, sourceMgr, model, policy, options).emit();
}
