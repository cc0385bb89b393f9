//===- ModelBuiltins.cpp - The built-in functions of model files ----------===//
//
// The shape rules of docs/language.md's table of built-ins, one function
// each: every argument is checked (a tensor where a tensor is due, a
// positive integer or number where an attribute is), then the shapes, with
// messages that print both shapes and say which dimensions must agree:
//
//   linear: x is [batch, seq, 4096] but w is [1024, 2048]: the last
//   dimension of x must equal w's second
//
//===----------------------------------------------------------------------===//

#include "dialect/LLVMFormatters.h"
#include "frontend/ModelElaborator.h"

#include <cmath>

using namespace tetra::frontend;
using namespace tetra::frontend::elaboration;
using namespace tetra::frontend::modelast;

namespace {

struct BuiltinInfo {
  const char *name;
  Builtin builtin;
  std::vector<std::string> positional;
  std::vector<std::string> named;
};

const std::vector<BuiltinInfo> &builtinTable() {
  static const std::vector<BuiltinInfo> table = {
      {"embedding", Builtin::Embedding, {"table", "tokens"}, {}},
      {"linear", Builtin::Linear, {"x", "w"}, {}},
      {"rmsnorm", Builtin::RMSNorm, {"x", "w"}, {"eps"}},
      {"rope", Builtin::Rope, {"x"}, {"head_dim", "theta"}},
      {"attention", Builtin::Attention, {"q", "k", "v"}, {"heads", "kv_heads"}},
      {"silu", Builtin::Silu, {"x"}, {}},
      {"cross_entropy", Builtin::CrossEntropy, {"logits", "targets"}, {}},
      {"sqrt", Builtin::Sqrt, {"x"}, {}},
  };
  return table;
}

/// One call of a built-in, its arguments bound and evaluated. The argument
/// accessors return nothing, silently, for a poisoned argument.
class BuiltinCall {
public:
  BuiltinCall(Elaborator &elaborator, const CallExpr &call,
              const Signature &signature, std::vector<const CallArg *> slots,
              std::vector<AbstractValue> values)
      : elaborator(elaborator), call(call), signature(signature),
        slots(std::move(slots)), values(std::move(values)) {}

  AbstractValue embedding();
  AbstractValue linear();
  AbstractValue rmsnorm();
  AbstractValue rope();
  AbstractValue attention();
  AbstractValue silu();
  AbstractValue crossEntropy();
  AbstractValue sqrt();

private:
  llvm::StringRef argName(size_t i) const {
    return i < signature.positional.size()
               ? signature.positional[i]
               : signature.named[i - signature.positional.size()];
  }
  const Expr &argExpr(size_t i) const { return *slots[i]->value; }

  /// Reports at argument `i`.
  void argError(size_t i, const llvm::Twine &message) {
    elaborator.error(argExpr(i).getLoc(), signature.function + ": " + message,
                     argExpr(i).getRange());
  }
  /// Reports at the call (shape mismatches between arguments).
  void callError(const llvm::Twine &message) {
    elaborator.error(call.getLoc(), signature.function + ": " + message,
                     call.getRange());
  }

  /// Argument `i` as a floating-point tensor, or null after an error.
  const TensorType *floatTensor(size_t i);
  /// Argument `i` as an i32 tensor (token ids), or null after an error.
  const TensorType *tokenTensor(size_t i);
  std::optional<int64_t> positiveInteger(size_t i);
  std::optional<double> positiveNumber(size_t i);
  /// The value id of tensor argument `i`.
  int id(size_t i) const { return values[i].id; }

  Op makeOp(OpKind kind) const {
    Op op;
    op.kind = kind;
    op.loc = call.getLoc();
    return op;
  }
  std::string shapeOf(size_t i) const {
    return formatShape(values[i].type.shape);
  }

  Elaborator &elaborator;
  const CallExpr &call;
  const Signature &signature;
  std::vector<const CallArg *> slots;
  std::vector<AbstractValue> values;
};

const TensorType *BuiltinCall::floatTensor(size_t i) {
  const AbstractValue &value = values[i];
  if (value.isPoison())
    return nullptr;
  if (value.isTensor() && isFloating(value.type.element))
    return &value.type;
  argError(i, argName(i) + " must be a floating-point tensor, but it is " +
                  describe(value));
  return nullptr;
}

const TensorType *BuiltinCall::tokenTensor(size_t i) {
  const AbstractValue &value = values[i];
  if (value.isPoison())
    return nullptr;
  if (value.isTensor() && value.type.element == ElementType::I32)
    return &value.type;
  argError(i,
           argName(i) + " must be i32 token ids, but it is " + describe(value));
  return nullptr;
}

std::optional<int64_t> BuiltinCall::positiveInteger(size_t i) {
  const AbstractValue &value = values[i];
  if (value.isPoison())
    return std::nullopt;
  if (value.kind == AbstractValue::Kind::Integer && value.integer > 0)
    return value.integer;
  argError(i, argName(i) + " must be a positive integer, but it is " +
                  describe(value));
  return std::nullopt;
}

std::optional<double> BuiltinCall::positiveNumber(size_t i) {
  const AbstractValue &value = values[i];
  if (value.isPoison())
    return std::nullopt;
  if (value.isConstant() && value.asDouble() > 0 &&
      std::isfinite(value.asDouble()))
    return value.asDouble();
  argError(i, argName(i) + " must be a positive number, but it is " +
                  describe(value));
  return std::nullopt;
}

AbstractValue BuiltinCall::embedding() {
  const TensorType *table = floatTensor(0);
  const TensorType *tokens = tokenTensor(1);
  if (!table || !tokens)
    return AbstractValue::poison();
  if (table->shape.size() != 2) {
    argError(0, "table must be [vocab, dim], but it is " + shapeOf(0));
    return AbstractValue::poison();
  }
  TensorType result{ElementType::F32, tokens->shape};
  result.shape.push_back(table->shape[1]);
  return elaborator.emitOp(makeOp(OpKind::Embedding), {id(0), id(1)}, result);
}

AbstractValue BuiltinCall::linear() {
  const TensorType *x = floatTensor(0);
  const TensorType *w = floatTensor(1);
  if (!x || !w)
    return AbstractValue::poison();
  int parameter = elaborator.parameterOf(id(1));
  if (parameter < 0) {
    argError(1, "w must be a parameter (policies match a linear by its "
                "weight's name), but it is a computed tensor");
    return AbstractValue::poison();
  }
  if (w->shape.size() != 2) {
    argError(1, "w must be a matrix [out, in], but it is " + shapeOf(1));
    return AbstractValue::poison();
  }
  if (x->shape.empty()) {
    argError(0, "x must have at least one dimension, but it is []");
    return AbstractValue::poison();
  }
  if (x->shape.back() != w->shape[1]) {
    callError("x is " + shapeOf(0) + " but w is " + shapeOf(1) +
              ": the last dimension of x must equal w's second");
    return AbstractValue::poison();
  }
  TensorType result{ElementType::F32, x->shape};
  result.shape.back() = w->shape[0];
  Op op = makeOp(OpKind::Linear);
  op.linearName = elaborator.parameters()[parameter].name;
  return elaborator.emitOp(op, {id(0), id(1)}, result);
}

AbstractValue BuiltinCall::rmsnorm() {
  const TensorType *x = floatTensor(0);
  const TensorType *w = floatTensor(1);
  std::optional<double> eps = positiveNumber(2);
  if (!x || !w || !eps)
    return AbstractValue::poison();
  if (x->shape.empty() || w->shape.size() != 1 ||
      w->shape[0] != x->shape.back()) {
    callError("x is " + shapeOf(0) + " but w is " + shapeOf(1) +
              ": w must be [d], d the last dimension of x");
    return AbstractValue::poison();
  }
  Op op = makeOp(OpKind::RMSNorm);
  op.eps = *eps;
  return elaborator.emitOp(op, {id(0), id(1)},
                           TensorType{ElementType::F32, x->shape});
}

AbstractValue BuiltinCall::rope() {
  const TensorType *x = floatTensor(0);
  std::optional<int64_t> headDim = positiveInteger(1);
  std::optional<double> theta = positiveNumber(2);
  if (!x || !headDim || !theta)
    return AbstractValue::poison();
  if (*headDim % 2 != 0) {
    argError(1, fmt::format(
                    "head_dim must be even (rope rotates pairs), but it is {}",
                    *headDim));
    return AbstractValue::poison();
  }
  if (x->shape.size() != 3) {
    argError(0, "x must be [batch, seq, heads * head_dim], but it is " +
                    shapeOf(0));
    return AbstractValue::poison();
  }
  const Dim &features = x->shape[2];
  if (features.isSymbolic() || features.size % *headDim != 0) {
    callError(fmt::format("x is {} but head_dim is {}: the last dimension of x "
                          "must be a multiple of head_dim",
                          shapeOf(0), *headDim));
    return AbstractValue::poison();
  }
  Op op = makeOp(OpKind::Rope);
  op.headDim = *headDim;
  op.theta = *theta;
  return elaborator.emitOp(op, {id(0)}, TensorType{ElementType::F32, x->shape});
}

AbstractValue BuiltinCall::attention() {
  const TensorType *q = floatTensor(0);
  const TensorType *k = floatTensor(1);
  const TensorType *v = floatTensor(2);
  std::optional<int64_t> heads = positiveInteger(3);
  std::optional<int64_t> kvHeads = positiveInteger(4);
  if (!q || !k || !v || !heads || !kvHeads)
    return AbstractValue::poison();
  for (size_t i = 0; i < 3; ++i) {
    if (values[i].type.shape.size() == 3)
      continue;
    argError(i, argName(i) + " must be [batch, seq, " +
                    (i == 0 ? "heads" : "kv_heads") +
                    " * head_dim], but it is " + shapeOf(i));
    return AbstractValue::poison();
  }
  if (*heads % *kvHeads != 0) {
    argError(4, fmt::format("heads ({}) must be a multiple of kv_heads ({})",
                            *heads, *kvHeads));
    return AbstractValue::poison();
  }
  const Dim &features = q->shape[2];
  if (features.isSymbolic() || features.size % *heads != 0) {
    callError(fmt::format("q is {} but heads is {}: the last dimension of q "
                          "must be a multiple of heads",
                          shapeOf(0), *heads));
    return AbstractValue::poison();
  }
  int64_t headDim = features.size / *heads;
  Shape expected = {q->shape[0], q->shape[1], Dim{*kvHeads * headDim, ""}};
  for (size_t i = 1; i < 3; ++i) {
    if (values[i].type.shape == expected)
      continue;
    callError(fmt::format("{} is {} but must be {}: q's batch and sequence, "
                          "and kv_heads ({}) * head_dim ({})",
                          argName(i), shapeOf(i), formatShape(expected),
                          *kvHeads, headDim));
    return AbstractValue::poison();
  }
  Op op = makeOp(OpKind::Attention);
  op.heads = *heads;
  op.kvHeads = *kvHeads;
  return elaborator.emitOp(op, {id(0), id(1), id(2)},
                           TensorType{ElementType::F32, q->shape});
}

AbstractValue BuiltinCall::silu() {
  const TensorType *x = floatTensor(0);
  if (!x)
    return AbstractValue::poison();
  return elaborator.emitOp(makeOp(OpKind::Silu), {id(0)},
                           TensorType{ElementType::F32, x->shape});
}

AbstractValue BuiltinCall::crossEntropy() {
  const TensorType *logits = floatTensor(0);
  const TensorType *targets = tokenTensor(1);
  if (!logits || !targets)
    return AbstractValue::poison();
  Shape expected = logits->shape;
  if (!expected.empty())
    expected.pop_back();
  if (logits->shape.empty() || targets->shape != expected) {
    callError("logits are " + shapeOf(0) + " but targets are " + shapeOf(1) +
              ": targets must be the shape of logits without its last "
              "dimension");
    return AbstractValue::poison();
  }
  return elaborator.emitOp(makeOp(OpKind::CrossEntropy), {id(0), id(1)},
                           TensorType{ElementType::F32, {}});
}

AbstractValue BuiltinCall::sqrt() {
  const AbstractValue &x = values[0];
  if (x.isPoison())
    return x;
  if (!x.isConstant()) {
    argError(0, "x must be a constant number, but it is " + describe(x));
    return AbstractValue::poison();
  }
  if (x.asDouble() < 0) {
    argError(0, "x must not be negative, but it is " + describe(x));
    return AbstractValue::poison();
  }
  return AbstractValue::ofFloat(std::sqrt(x.asDouble()));
}

} // namespace

std::optional<Builtin> elaboration::lookupBuiltin(llvm::StringRef name) {
  for (const BuiltinInfo &info : builtinTable())
    if (name == info.name)
      return info.builtin;
  return std::nullopt;
}

std::vector<std::string> elaboration::builtinNames() {
  std::vector<std::string> names;
  for (const BuiltinInfo &info : builtinTable())
    names.push_back(info.name);
  return names;
}

Signature elaboration::signatureOf(Builtin builtin) {
  for (const BuiltinInfo &info : builtinTable())
    if (info.builtin == builtin)
      return Signature{info.name, info.positional, info.named};
  return Signature();
}

AbstractValue Elaborator::callBuiltin(Builtin builtin, const CallExpr &call,
                                      Frame *frame) {
  Signature signature = elaboration::signatureOf(builtin);
  auto slots =
      bindArguments(signature, call.getArgs(), call.getLoc(), call.getRange());
  if (!slots)
    return AbstractValue::poison();
  // A poisoned argument (an error already reported) silences the checks
  // that need it, not those of the other arguments.
  std::vector<AbstractValue> values;
  for (const CallArg *arg : *slots)
    values.push_back(eval(*arg->value, frame));
  BuiltinCall checked(*this, call, signature, std::move(*slots),
                      std::move(values));
  switch (builtin) {
  case Builtin::Embedding:
    return checked.embedding();
  case Builtin::Linear:
    return checked.linear();
  case Builtin::RMSNorm:
    return checked.rmsnorm();
  case Builtin::Rope:
    return checked.rope();
  case Builtin::Attention:
    return checked.attention();
  case Builtin::Silu:
    return checked.silu();
  case Builtin::CrossEntropy:
    return checked.crossEntropy();
  case Builtin::Sqrt:
    return checked.sqrt();
  }
  return AbstractValue::poison();
}
