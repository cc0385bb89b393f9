//===- ModelElaborator.cpp - Model files into ModelGraphs -----------------===//
//
// `loadModel`: parses a model file and elaborates it (see ModelElaborator.h):
//   1. names: constants, top-level parameters and functions share one
//      namespace; a duplicate is an error with a note at the first;
//   2. config constants, in order (integer division must be exact);
//   3. parameter declarations: shapes and initializers once per
//      declaration, then groups expanded into dotted names;
//   4. functions: structure (a single final `return`), then `forward` and
//      `loss` run abstractly, which unrolls loops, inlines helpers and
//      type-checks every built-in (ModelBuiltins.cpp);
//   5. what only a complete model shows: unused parameters and functions.
//
//===----------------------------------------------------------------------===//

#include "frontend/ModelElaborator.h"

#include "dialect/LLVMFormatters.h"
#include "frontend/Frontend.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>

using namespace tetra::frontend;
using namespace tetra::frontend::elaboration;
using namespace tetra::frontend::modelast;
using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;

namespace {

/// Bounds that keep any input's elaboration small (the fuzzer's inputs
/// included): statements and calls executed, ops created, parameter-tree
/// nodes.
constexpr int64_t kMaxSteps = 200000;
constexpr int64_t kMaxOps = 1000000;
constexpr int64_t kMaxParamNodes = 100000;
/// How deep inlined calls may nest (recursion is an error anyway; this bounds
/// a chain of distinct functions).
constexpr size_t kMaxCallDepth = 64;

bool isSymbolicDimName(llvm::StringRef name) {
  return name == "batch" || name == "seq";
}

/// "layers.3.attn.wq" -> "layers.*.attn.wq": the copies of a declaration.
std::string wildcardIndices(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> segments;
  name.split(segments, '.');
  std::string result;
  for (llvm::StringRef segment : segments) {
    if (!result.empty())
      result += '.';
    bool isIndex =
        llvm::all_of(segment, [](char c) { return c >= '0' && c <= '9'; });
    result += isIndex ? "*" : segment.str();
  }
  return result;
}

std::string didYouMean(llvm::StringRef name,
                       llvm::ArrayRef<std::string> candidates) {
  std::string close = closestMatch(name, candidates);
  return close.empty() ? std::string() : "did you mean '" + close + "'?";
}

} // namespace

//===----------------------------------------------------------------------===//
// Values, parameter nodes, signatures
//===----------------------------------------------------------------------===//

AbstractValue AbstractValue::ofInteger(int64_t value) {
  AbstractValue result;
  result.kind = Kind::Integer;
  result.integer = value;
  return result;
}

AbstractValue AbstractValue::ofFloat(double value) {
  AbstractValue result;
  result.kind = Kind::Float;
  result.number = value;
  return result;
}

AbstractValue AbstractValue::ofTensor(int id, TensorType type) {
  AbstractValue result;
  result.kind = Kind::Tensor;
  result.id = id;
  result.type = std::move(type);
  return result;
}

AbstractValue AbstractValue::ofGroup(const ParamNode *node) {
  AbstractValue result;
  result.kind = Kind::Group;
  result.group = node;
  return result;
}

bool elaboration::isFloating(ElementType element) {
  return element == ElementType::F32 || element == ElementType::BF16;
}

std::string elaboration::formatType(const TensorType &type) {
  const char *element = type.element == ElementType::F32    ? "f32"
                        : type.element == ElementType::BF16 ? "bf16"
                                                            : "i32";
  return element + formatShape(type.shape);
}

std::string elaboration::describe(const AbstractValue &value) {
  switch (value.kind) {
  case AbstractValue::Kind::Poison:
    return "an invalid value";
  case AbstractValue::Kind::Integer:
    return fmt::format("the integer {}", value.integer);
  case AbstractValue::Kind::Float:
    return "the number " + formatNumber(value.number);
  case AbstractValue::Kind::Tensor:
    return "a tensor " + formatType(value.type);
  case AbstractValue::Kind::Group:
    if (value.group->kind == ParamNode::Kind::Array)
      return fmt::format("the parameter group '{}' ({} copies)",
                         value.group->path, value.group->elements.size());
    return "the parameter group '" + value.group->path + "'";
  }
  return "a value";
}

const ParamNode *ParamNode::findMember(llvm::StringRef name) const {
  for (const auto &[memberName, node] : members)
    if (memberName == name)
      return node.get();
  return nullptr;
}

std::vector<std::string> ParamNode::memberNames() const {
  std::vector<std::string> names;
  for (const auto &member : members)
    names.push_back(member.first);
  return names;
}

std::string Signature::describe() const {
  std::string text = function + "(";
  bool first = true;
  for (const std::string &name : positional) {
    text += (first ? "" : ", ") + name;
    first = false;
  }
  for (const std::string &name : named) {
    text += (first ? "" : ", ") + name + " = ...";
    first = false;
  }
  return text + ")";
}

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

Elaborator::Elaborator(DiagnosticEngine &diags, const ModelFile &file)
    : diags(diags), file(file) {}

bool Elaborator::error(llvm::SMLoc loc, const llvm::Twine &message,
                       llvm::SMRange range, const llvm::Twine &hint,
                       const Note &attached) {
  // While functions run, the same statement may run many times (loops,
  // inlined helpers): report each place once.
  if (current && loc.isValid() &&
      !reportedLocs.insert(loc.getPointer()).second) {
    lastErrorShown = false;
    return false;
  }
  diags.error(loc, message, range, hint);
  lastErrorShown = true;
  if (attached.loc.isValid())
    diags.note(attached.loc, attached.message);
  int shown = 0;
  for (auto it = stack.rbegin(); it != stack.rend() && shown < 3; ++it) {
    if (!it->second.isValid())
      continue;
    diags.note(it->second, "in '" + it->first->name + "', called from here");
    ++shown;
  }
  return true;
}

void Elaborator::note(llvm::SMLoc loc, const llvm::Twine &message) {
  if (lastErrorShown)
    diags.note(loc, message);
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

std::optional<ModelGraph> Elaborator::run() {
  unsigned errorsBefore = diags.errorCount();
  graph.name = file.name;
  root.kind = ParamNode::Kind::Group;

  declareGlobals();
  evaluateConstants();
  checkParamItems(rootItems);
  for (const ParamItem *item : rootItems)
    expandParams(*item, root, "");

  for (const ModelItem &item : file.items)
    if (const auto *def = std::get_if<FunctionDef>(&item))
      if (functions.lookup(def->name) == def)
        checkStructure(*def);

  const FunctionDef *forward = functions.lookup("forward");
  const FunctionDef *loss = functions.lookup("loss");
  if (!forward)
    error(file.nameRange.Start,
          "model '" + file.name + "' has no 'forward' function", file.nameRange,
          "define forward(tokens: i32[batch, seq])");
  if (!loss)
    error(file.nameRange.Start,
          "model '" + file.name + "' has no 'loss' function", file.nameRange,
          "define loss(tokens: i32[batch, seq], targets: i32[batch, seq])");
  if (forward) {
    checkEntrySignature(*forward, {"tokens"});
    elaborateEntry(*forward);
  }
  if (loss) {
    checkEntrySignature(*loss, {"tokens", "targets"});
    elaborateEntry(*loss);
  }

  // Only a model without errors shows reliably what it never uses.
  if (diags.errorCount() == errorsBefore) {
    checkUnusedParameters();
    checkUncalledFunctions();
  }
  if (diags.errorCount() != errorsBefore)
    return std::nullopt;
  return std::move(graph);
}

//===----------------------------------------------------------------------===//
// Names and constants
//===----------------------------------------------------------------------===//

bool Elaborator::declareGlobal(llvm::StringRef name, llvm::SMRange range) {
  auto [it, inserted] = globals.try_emplace(name, range);
  if (inserted)
    return true;
  error(range.Start, "redefinition of '" + name + "'", range);
  note(it->second.Start, "previous definition of '" + name + "' is here");
  return false;
}

void Elaborator::declareGlobals() {
  for (const ModelItem &item : file.items) {
    if (const auto *config = std::get_if<ConfigBlock>(&item)) {
      for (const ConstantDecl &constant : config->constants) {
        if (isSymbolicDimName(constant.name)) {
          error(constant.nameRange.Start,
                "'" + constant.name +
                    "' is reserved: it names a symbolic dimension that the "
                    "run fixes",
                constant.nameRange);
          continue;
        }
        if (declareGlobal(constant.name, constant.nameRange))
          constants[constant.name].decl = &constant;
      }
    } else if (const auto *params = std::get_if<ParamsBlock>(&item)) {
      for (const ParamItem &param : params->items)
        if (declareGlobal(param.name, param.nameRange))
          rootItems.push_back(&param);
    } else {
      const auto &def = std::get<FunctionDef>(item);
      if (lookupBuiltin(def.name)) {
        error(def.nameRange.Start,
              "'" + def.name +
                  "' is a built-in function and cannot be "
                  "redefined",
              def.nameRange);
        continue;
      }
      if (declareGlobal(def.name, def.nameRange))
        functions[def.name] = &def;
    }
  }
}

void Elaborator::evaluateConstants() {
  for (const ModelItem &item : file.items) {
    const auto *config = std::get_if<ConfigBlock>(&item);
    if (!config)
      continue;
    for (const ConstantDecl &constant : config->constants) {
      auto it = constants.find(constant.name);
      if (it == constants.end() || it->second.decl != &constant)
        continue; // A duplicate or a reserved name, already reported.
      evaluatingConstant = &constant;
      AbstractValue value = eval(*constant.value, nullptr);
      evaluatingConstant = nullptr;
      if (!value.isPoison() && !value.isConstant()) {
        error(constant.value->getLoc(),
              "constant '" + constant.name + "' must be a number, but it is " +
                  describe(value),
              constant.value->getRange());
        value = AbstractValue::poison();
      }
      it->second.value = value;
      it->second.evaluated = true;
      if (value.kind == AbstractValue::Kind::Integer)
        graph.constants.push_back(
            {constant.name, value.integer, constant.nameRange.Start});
      else if (value.kind == AbstractValue::Kind::Float)
        graph.constants.push_back(
            {constant.name, value.number, constant.nameRange.Start});
    }
  }
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

void Elaborator::checkParamItems(const std::vector<const ParamItem *> &items) {
  llvm::StringMap<const ParamItem *> seen;
  for (const ParamItem *item : items) {
    auto [it, inserted] = seen.try_emplace(item->name, item);
    if (!inserted) {
      error(item->nameRange.Start, "redefinition of '" + item->name + "'",
            item->nameRange);
      note(it->second->nameRange.Start,
           "previous definition of '" + item->name + "' is here");
      skippedItems.insert(item);
      continue;
    }
    if (item->kind == ParamItem::Kind::Tensor) {
      checkParamTensor(*item);
      continue;
    }
    if (item->count)
      groupCounts[item] = evalCount(*item->count).value_or(-1);
    std::vector<const ParamItem *> members;
    for (const ParamItem &member : item->members)
      members.push_back(&member);
    checkParamItems(members);
  }
}

void Elaborator::checkParamTensor(const ParamItem &item) {
  ParamDeclInfo &info = paramDecls[&item];
  bool valid = true;
  int64_t elements = 1;
  for (const ExprPtr &dimExpr : item.shape.dims) {
    std::optional<Dim> dim = evalDim(*dimExpr, /*allowSymbols=*/false);
    if (!dim) {
      valid = false;
      continue;
    }
    info.shape.push_back(dim->size);
    if (valid && __builtin_mul_overflow(elements, dim->size, &elements)) {
      error(item.nameRange.Start,
            "parameter '" + item.name +
                "' has more elements than a 64-bit count holds",
            item.shape.range);
      valid = false;
    }
  }
  std::optional<Initializer> init = checkInitializer(item);
  if (init)
    info.init = *init;
  info.valid = valid && init.has_value();
}

std::optional<Initializer> Elaborator::checkInitializer(const ParamItem &item) {
  Initializer init;
  if (!item.init)
    return init; // zeros
  const InitializerAST &ast = *item.init;
  if (ast.name == "zeros" || ast.name == "ones") {
    init.kind = ast.name == "zeros" ? Initializer::Kind::Zeros
                                    : Initializer::Kind::Ones;
    if (!ast.args.empty()) {
      error(ast.args.front().getLoc(), "'" + ast.name + "' takes no arguments",
            ast.nameRange);
      return std::nullopt;
    }
    return init;
  }
  if (ast.name != "normal") {
    error(ast.nameRange.Start, "unknown initializer '" + ast.name + "'",
          ast.nameRange,
          didYouMean(ast.name, {"normal", "zeros", "ones"}).empty()
              ? "the initializers are normal(std = ...), zeros and ones"
              : didYouMean(ast.name, {"normal", "zeros", "ones"}));
    return std::nullopt;
  }
  Signature signature{"normal", {}, {"std"}};
  auto bound =
      bindArguments(signature, ast.args, ast.nameRange.Start, ast.nameRange);
  if (!bound)
    return std::nullopt;
  const Expr &stdExpr = *(*bound)[0]->value;
  AbstractValue stdValue = eval(stdExpr, nullptr);
  if (stdValue.isPoison())
    return std::nullopt;
  if (!stdValue.isConstant() || !(stdValue.asDouble() > 0) ||
      !std::isfinite(stdValue.asDouble())) {
    error(stdExpr.getLoc(),
          "normal: std must be a positive number, but it is " +
              describe(stdValue),
          stdExpr.getRange());
    return std::nullopt;
  }
  init.kind = Initializer::Kind::Normal;
  init.std = stdValue.asDouble();
  return init;
}

std::optional<int64_t> Elaborator::evalCount(const Expr &expr) {
  AbstractValue value = eval(expr, nullptr);
  if (value.isPoison())
    return std::nullopt;
  if (value.kind != AbstractValue::Kind::Integer || value.integer <= 0) {
    error(expr.getLoc(),
          "the number of copies of a group must be a positive integer, but "
          "it is " +
              describe(value),
          expr.getRange());
    return std::nullopt;
  }
  return value.integer;
}

std::optional<Dim> Elaborator::evalDim(const Expr &expr, bool allowSymbols) {
  if (const auto *name = dyn_cast<NameExpr>(&expr)) {
    if (isSymbolicDimName(name->getName())) {
      if (allowSymbols)
        return Dim{0, name->getName().str()};
      error(expr.getLoc(),
            "a parameter's shape must be constant, but '" + name->getName() +
                "' is a symbolic dimension that the run fixes",
            expr.getRange());
      return std::nullopt;
    }
  }
  AbstractValue value = eval(expr, nullptr);
  if (value.isPoison())
    return std::nullopt;
  if (value.kind == AbstractValue::Kind::Integer && value.integer > 0)
    return Dim{value.integer, ""};
  std::string what = value.kind == AbstractValue::Kind::Integer
                         ? "a dimension must be positive"
                         : "a dimension must be an integer";
  error(expr.getLoc(),
        what + ", but '" + formatExpr(expr) + "' is " + describe(value),
        expr.getRange());
  return std::nullopt;
}

void Elaborator::expandParams(const ParamItem &item, ParamNode &parent,
                              const std::string &prefix) {
  if (skippedItems.count(&item))
    return;
  if (++paramNodes > kMaxParamNodes) {
    if (!paramLimitReported)
      error(item.nameRange.Start,
            "the parameters expand to more than " +
                llvm::Twine(kMaxParamNodes) + " tensors and groups",
            item.nameRange);
    paramLimitReported = true;
    return;
  }
  auto node = std::make_unique<ParamNode>();
  node->path = prefix + item.name;
  node->declaration = item.nameRange;
  if (item.kind == ParamItem::Kind::Tensor) {
    node->kind = ParamNode::Kind::Tensor;
    ParamDeclInfo &info = paramDecls[&item];
    if (info.valid) {
      node->parameter = static_cast<int>(graph.parameters.size());
      info.copies.push_back(node->parameter);
      graph.parameters.push_back(
          {node->path, info.shape, info.init, item.nameRange.Start});
    }
  } else if (item.count) {
    node->kind = ParamNode::Kind::Array;
    int64_t count = groupCounts[&item];
    node->valid = count > 0;
    for (int64_t i = 0; i < count && !paramLimitReported; ++i) {
      if (++paramNodes > kMaxParamNodes) {
        error(item.nameRange.Start,
              "the parameters expand to more than " +
                  llvm::Twine(kMaxParamNodes) + " tensors and groups",
              item.nameRange);
        paramLimitReported = true;
        break;
      }
      auto element = std::make_unique<ParamNode>();
      element->path = fmt::format("{}.{}", node->path, i);
      element->declaration = item.nameRange;
      for (const ParamItem &member : item.members)
        expandParams(member, *element, element->path + ".");
      node->elements.push_back(std::move(element));
    }
  } else {
    node->kind = ParamNode::Kind::Group;
    for (const ParamItem &member : item.members)
      expandParams(member, *node, node->path + ".");
  }
  parent.members.emplace_back(item.name, std::move(node));
}

//===----------------------------------------------------------------------===//
// Function declarations
//===----------------------------------------------------------------------===//

/// Reports a `return` that is not the last statement of its function.
static void checkReturns(Elaborator &elaborator, const FunctionDef &def,
                         const std::vector<StmtPtr> &body, bool inLoop,
                         bool &valid) {
  for (size_t i = 0; i < body.size(); ++i) {
    const Stmt &stmt = *body[i];
    if (const auto *loop = dyn_cast<ForStmt>(&stmt)) {
      checkReturns(elaborator, def, loop->getBody(), true, valid);
      continue;
    }
    if (!isa<ReturnStmt>(stmt))
      continue;
    if (inLoop) {
      elaborator.error(stmt.getLoc(),
                       "'return' inside a 'for' loop: a function returns "
                       "once, with its last statement");
      valid = false;
    } else if (i + 1 != body.size()) {
      elaborator.error(stmt.getLoc(), "'return' must be the last statement "
                                      "of '" +
                                          def.name + "'");
      valid = false;
    }
  }
}

void Elaborator::checkStructure(const FunctionDef &def) {
  bool valid = true;
  llvm::StringMap<llvm::SMRange> seen;
  for (const ArgumentDecl &arg : def.args) {
    auto [it, inserted] = seen.try_emplace(arg.name, arg.nameRange);
    if (inserted)
      continue;
    error(arg.nameRange.Start,
          "duplicate argument '" + arg.name + "' in '" + def.name + "'",
          arg.nameRange);
    note(it->second.Start, "previous argument '" + arg.name + "' is here");
    valid = false;
  }
  checkReturns(*this, def, def.body, false, valid);
  // A misplaced `return` was just reported; not also a missing one.
  if (valid && (def.body.empty() || !isa<ReturnStmt>(*def.body.back()))) {
    error(def.nameRange.Start,
          "function '" + def.name + "' does not return a value", def.nameRange,
          "end it with 'return EXPRESSION'");
    valid = false;
  }
  if (!valid)
    brokenFunctions.insert(&def);
}

std::optional<TensorType> Elaborator::resolveType(const TypeAST &ast) {
  TensorType type;
  type.element = ast.element;
  bool valid = true;
  for (const ExprPtr &dimExpr : ast.shape.dims) {
    std::optional<Dim> dim = evalDim(*dimExpr, /*allowSymbols=*/true);
    if (dim)
      type.shape.push_back(*dim);
    else
      valid = false;
  }
  if (!valid)
    return std::nullopt;
  return type;
}

const ResolvedSignature &Elaborator::resolvedSignature(const FunctionDef &def) {
  auto it = signatures.find(&def);
  if (it != signatures.end())
    return it->second;
  // Resolved outside any function: its errors are not call-site errors.
  Function *saved = current;
  auto savedStack = std::move(stack);
  stack.clear();
  current = nullptr;
  ResolvedSignature signature;
  signature.valid = true;
  for (const ArgumentDecl &arg : def.args) {
    std::optional<TensorType> type = resolveType(arg.type);
    signature.valid &= type.has_value();
    signature.arguments.push_back(type.value_or(TensorType()));
  }
  if (def.returnType) {
    signature.result = resolveType(*def.returnType);
    signature.valid &= signature.result.has_value();
  }
  current = saved;
  stack = std::move(savedStack);
  return signatures[&def] = std::move(signature);
}

void Elaborator::checkEntrySignature(const FunctionDef &def,
                                     llvm::ArrayRef<const char *> names) {
  std::string expected = def.name + "(";
  for (size_t i = 0; i < names.size(); ++i)
    expected += (i ? ", " : "") + std::string(names[i]) + ": i32[batch, seq]";
  expected += ")";
  std::string message = "'" + def.name + "' must be declared as " + expected;
  if (def.args.size() != names.size()) {
    error(def.nameRange.Start, message, def.nameRange);
    brokenFunctions.insert(&def);
    return;
  }
  const ResolvedSignature &signature = resolvedSignature(def);
  if (def.name == "loss" && signature.result &&
      (signature.result->element != ElementType::F32 ||
       !signature.result->shape.empty())) {
    error(def.returnType->loc,
          "'loss' must return a scalar f32[], but it is declared to return " +
              formatType(*signature.result),
          {def.returnType->loc, def.returnType->shape.range.End});
    brokenFunctions.insert(&def);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const ArgumentDecl &arg = def.args[i];
    if (arg.name != names[i]) {
      error(arg.nameRange.Start, message, arg.nameRange);
      brokenFunctions.insert(&def);
      continue;
    }
    if (!signature.valid)
      continue;
    const TensorType &type = signature.arguments[i];
    TensorType tokens{ElementType::I32, {Dim{0, "batch"}, Dim{0, "seq"}}};
    if (type.element != tokens.element || type.shape != tokens.shape) {
      error(arg.type.loc, message, {arg.type.loc, arg.type.shape.range.End});
      brokenFunctions.insert(&def);
    }
  }
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

void Elaborator::elaborateEntry(const FunctionDef &def) {
  if (brokenFunctions.count(&def))
    return;
  const ResolvedSignature &signature = resolvedSignature(def);
  if (!signature.valid)
    return;
  graph.functions.emplace_back();
  Function &function = graph.functions.back();
  function.name = def.name;
  function.loc = def.nameRange.Start;
  current = &function;
  parameterValues.clear();

  Frame frame;
  frame.def = &def;
  for (size_t i = 0; i < def.args.size(); ++i) {
    Value value;
    value.source = Value::Source::Argument;
    value.index = static_cast<int>(i);
    value.type = signature.arguments[i];
    int id = static_cast<int>(function.values.size());
    function.values.push_back(value);
    function.argumentNames.push_back(def.args[i].name);
    function.arguments.push_back(id);
    frame.locals[def.args[i].name] =
        AbstractValue::ofTensor(id, signature.arguments[i]);
  }
  stack.push_back({&def, llvm::SMLoc()});
  exec(def.body, frame);
  stack.pop_back();

  AbstractValue result = frame.result.value_or(AbstractValue::poison());
  if (!result.isPoison()) {
    if (!result.isTensor()) {
      error(frame.resultLoc, "'" + def.name +
                                 "' must return a tensor, but it returns " +
                                 describe(result));
    } else if (signature.result &&
               !argumentMatches(result, *signature.result)) {
      error(frame.resultLoc,
            "'" + def.name + "' returns " + formatType(result.type) +
                ", but its declared type is " + formatType(*signature.result));
    } else if (def.name == "loss" && (result.type.element != ElementType::F32 ||
                                      !result.type.shape.empty())) {
      error(frame.resultLoc,
            "'loss' must return a scalar f32[], but it returns " +
                formatType(result.type));
    } else {
      function.result = result.id;
    }
  }
  current = nullptr;
}

void Elaborator::exec(const std::vector<StmtPtr> &body, Frame &frame) {
  for (const StmtPtr &stmt : body) {
    if (aborted || !step(stmt->getLoc()))
      return;
    if (const auto *assign = dyn_cast<AssignStmt>(stmt.get())) {
      if (frame.loopVars.count(assign->getName())) {
        error(assign->getLoc(),
              "cannot assign to loop variable '" + assign->getName() + "'",
              assign->getNameRange());
        continue;
      }
      frame.locals[assign->getName()] = eval(assign->getValue(), &frame);
    } else if (const auto *loop = dyn_cast<ForStmt>(stmt.get())) {
      execFor(*loop, frame);
    } else {
      const auto &ret = cast<ReturnStmt>(*stmt);
      frame.result = eval(ret.getValue(), &frame);
      frame.resultLoc = ret.getValue().getLoc();
    }
  }
}

void Elaborator::execFor(const ForStmt &loop, Frame &frame) {
  AbstractValue begin = eval(loop.getBegin(), &frame);
  AbstractValue end = eval(loop.getEnd(), &frame);
  if (begin.isPoison() || end.isPoison())
    return;
  for (const auto &[value, expr] :
       {std::pair(&begin, &loop.getBegin()), std::pair(&end, &loop.getEnd())}) {
    if (value->kind != AbstractValue::Kind::Integer) {
      error(expr->getLoc(),
            "the bounds of a 'for' loop must be integers, but this is " +
                describe(*value),
            expr->getRange());
      return;
    }
  }
  if (end.integer < begin.integer) {
    error(loop.getBegin().getLoc(),
          fmt::format("the range {}..{} is reversed ('for i in a..b' runs i "
                      "from a to b - 1)",
                      begin.integer, end.integer),
          {loop.getBegin().getRange().Start, loop.getEnd().getRange().End});
    return;
  }
  llvm::StringRef var = loop.getVar();
  if (frame.locals.count(var)) {
    error(loop.getVarRange().Start,
          "loop variable '" + var + "' is already defined", loop.getVarRange());
    return;
  }
  frame.loopVars.insert(var);
  for (int64_t i = begin.integer; i < end.integer && !aborted; ++i) {
    frame.locals[var] = AbstractValue::ofInteger(i);
    exec(loop.getBody(), frame);
  }
  frame.locals.erase(var);
  frame.loopVars.erase(var);
}

bool Elaborator::step(llvm::SMLoc loc) {
  if (++steps <= kMaxSteps)
    return true;
  if (!aborted)
    diags.error(loc, "elaboration stopped after " + llvm::Twine(kMaxSteps) +
                         " steps: is a loop's range too large?");
  aborted = true;
  return false;
}

void Elaborator::checkUnusedParameters() {
  std::vector<bool> used(graph.parameters.size());
  for (const Function &function : graph.functions)
    for (const Value &value : function.values)
      if (value.source == Value::Source::Parameter)
        used[value.index] = true;

  std::function<void(const ParamItem &)> visit = [&](const ParamItem &item) {
    if (item.kind == ParamItem::Kind::Group) {
      for (const ParamItem &member : item.members)
        visit(member);
      return;
    }
    auto it = paramDecls.find(&item);
    if (it == paramDecls.end())
      return;
    std::vector<int> unused;
    for (int index : it->second.copies)
      if (!used[index])
        unused.push_back(index);
    if (unused.empty())
      return;
    size_t copies = it->second.copies.size();
    std::string name = graph.parameters[unused.front()].name;
    std::string hint;
    if (copies > 1 && unused.size() == copies) {
      name = wildcardIndices(name);
      hint = fmt::format("none of its {} copies is used", copies);
    } else if (unused.size() > 1) {
      hint = fmt::format("{} more of its {} copies are unused too",
                         unused.size() - 1, copies);
    }
    error(item.nameRange.Start,
          "parameter '" + name + "' is never used by forward or loss",
          item.nameRange, hint);
  };
  for (const ParamItem *item : rootItems)
    visit(*item);
}

void Elaborator::checkUncalledFunctions() {
  for (const ModelItem &item : file.items) {
    const auto *def = std::get_if<FunctionDef>(&item);
    if (!def || def->name == "forward" || def->name == "loss" ||
        functions.lookup(def->name) != def || calledFunctions.count(def))
      continue;
    error(def->nameRange.Start, "function '" + def->name + "' is never called",
          def->nameRange,
          "forward and loss are the model's entry points; an unused "
          "function would go unchecked");
  }
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

AbstractValue Elaborator::eval(const Expr &expr, Frame *frame) {
  if (aborted)
    return AbstractValue::poison();
  switch (expr.getKind()) {
  case Expr::Kind::Integer:
    return AbstractValue::ofInteger(cast<IntegerExpr>(expr).getValue());
  case Expr::Kind::Float:
    return AbstractValue::ofFloat(cast<FloatExpr>(expr).getValue());
  case Expr::Kind::String:
    error(expr.getLoc(), "a string is not a value in a model file",
          expr.getRange());
    return AbstractValue::poison();
  case Expr::Kind::Name:
    return evalName(cast<NameExpr>(expr), frame);
  case Expr::Kind::Negate:
    return evalNegate(cast<NegateExpr>(expr), frame);
  case Expr::Kind::Binary:
    return evalBinary(cast<BinaryExpr>(expr), frame);
  case Expr::Kind::Call:
    return evalCall(cast<CallExpr>(expr), frame);
  case Expr::Kind::Index:
    return evalIndex(cast<IndexExpr>(expr), frame);
  case Expr::Kind::Member:
    return evalMember(cast<MemberExpr>(expr), frame);
  }
  return AbstractValue::poison();
}

AbstractValue Elaborator::evalName(const NameExpr &name, Frame *frame) {
  llvm::StringRef text = name.getName();
  if (frame) {
    auto local = frame->locals.find(text);
    if (local != frame->locals.end())
      return local->second;
  }
  auto constant = constants.find(text);
  if (constant != constants.end() && constant->second.decl) {
    if (constant->second.evaluated)
      return constant->second.value;
    const ConstantDecl *decl = constant->second.decl;
    if (decl == evaluatingConstant)
      error(name.getLoc(),
            "constant '" + text + "' is defined in terms of itself",
            name.getRange());
    else {
      error(name.getLoc(),
            "constant '" + text + "' is used before its definition",
            name.getRange());
      note(decl->nameRange.Start, "'" + text + "' is defined here");
    }
    return AbstractValue::poison();
  }
  if (!frame && globals.count(text)) {
    error(name.getLoc(),
          "'" + text +
              "' is not a constant: a constant expression can "
              "only use config constants",
          name.getRange());
    return AbstractValue::poison();
  }
  if (const ParamNode *node = root.findMember(text)) {
    if (node->kind == ParamNode::Kind::Tensor)
      return parameterValue(*node);
    return node->valid ? AbstractValue::ofGroup(node) : AbstractValue::poison();
  }
  if (functions.count(text) || lookupBuiltin(text)) {
    error(name.getLoc(),
          "'" + text + "' is a function: call it, as in " + text + "(...)",
          name.getRange());
    return AbstractValue::poison();
  }
  if (isSymbolicDimName(text)) {
    error(name.getLoc(),
          "'" + text +
              "' is a symbolic dimension, not a value: it can only "
              "stand alone as a dimension of an argument's type",
          name.getRange());
    return AbstractValue::poison();
  }
  reportUnknownName(name, frame);
  return AbstractValue::poison();
}

void Elaborator::reportUnknownName(const NameExpr &name, Frame *frame) {
  std::vector<std::string> candidates;
  if (frame)
    for (const auto &local : frame->locals)
      candidates.push_back(local.getKey().str());
  for (const auto &constant : constants)
    if (!evaluatingConstant || constant.second.evaluated)
      candidates.push_back(constant.getKey().str());
  if (frame)
    for (const auto &global : globals)
      if (!constants.count(global.getKey()))
        candidates.push_back(global.getKey().str());
  // StringMap iterates in hash order: sort for a deterministic hint.
  llvm::sort(candidates);
  error(name.getLoc(), "unknown name '" + name.getName() + "'", name.getRange(),
        didYouMean(name.getName(), candidates));
}

AbstractValue Elaborator::parameterValue(const ParamNode &node) {
  if (node.parameter < 0 || !current)
    return AbstractValue::poison();
  const Parameter &parameter = graph.parameters[node.parameter];
  TensorType type;
  type.element = ElementType::F32;
  for (int64_t size : parameter.shape)
    type.shape.push_back(Dim{size, ""});
  auto [it, inserted] = parameterValues.try_emplace(node.parameter, -1);
  if (inserted) {
    Value value;
    value.source = Value::Source::Parameter;
    value.index = node.parameter;
    value.type = type;
    it->second = static_cast<int>(current->values.size());
    current->values.push_back(value);
  }
  return AbstractValue::ofTensor(it->second, type);
}

int Elaborator::parameterOf(int id) const {
  if (!current || id < 0 || id >= static_cast<int>(current->values.size()))
    return -1;
  const Value &value = current->values[id];
  return value.source == Value::Source::Parameter ? value.index : -1;
}

AbstractValue Elaborator::emitOp(Op op, std::vector<int> operands,
                                 TensorType type) {
  if (!current)
    return AbstractValue::poison();
  if (++opCount > kMaxOps) {
    if (!aborted)
      diags.error(op.loc,
                  "elaboration stopped after " + llvm::Twine(kMaxOps) + " ops");
    aborted = true;
    return AbstractValue::poison();
  }
  Value value;
  value.source = Value::Source::Op;
  value.index = static_cast<int>(current->ops.size());
  value.type = type;
  int id = static_cast<int>(current->values.size());
  current->values.push_back(value);
  op.operands = std::move(operands);
  op.result = id;
  current->ops.push_back(std::move(op));
  return AbstractValue::ofTensor(id, std::move(type));
}

AbstractValue Elaborator::evalNegate(const NegateExpr &negate, Frame *frame) {
  AbstractValue operand = eval(negate.getOperand(), frame);
  switch (operand.kind) {
  case AbstractValue::Kind::Poison:
    return operand;
  case AbstractValue::Kind::Integer:
    if (operand.integer == INT64_MIN) {
      error(negate.getLoc(), "integer overflow", negate.getRange());
      return AbstractValue::poison();
    }
    return AbstractValue::ofInteger(-operand.integer);
  case AbstractValue::Kind::Float:
    return AbstractValue::ofFloat(-operand.number);
  case AbstractValue::Kind::Tensor: {
    if (!isFloating(operand.type.element)) {
      error(negate.getLoc(),
            "'-' needs a floating-point tensor, but this is " +
                describe(operand),
            negate.getRange());
      return AbstractValue::poison();
    }
    Op op;
    op.kind = OpKind::Scale;
    op.loc = negate.getLoc();
    op.factor = -1;
    return emitOp(op, {operand.id}, operand.type);
  }
  default:
    error(negate.getLoc(), "cannot negate " + describe(operand),
          negate.getRange());
    return AbstractValue::poison();
  }
}

AbstractValue Elaborator::evalBinary(const BinaryExpr &binary, Frame *frame) {
  AbstractValue lhs = eval(binary.getLHS(), frame);
  AbstractValue rhs = eval(binary.getRHS(), frame);
  if (lhs.isPoison() || rhs.isPoison())
    return AbstractValue::poison();
  if (lhs.isConstant() && rhs.isConstant())
    return foldConstants(binary, lhs, rhs);
  for (const AbstractValue *operand : {&lhs, &rhs}) {
    if (operand->isConstant() || operand->isTensor())
      continue;
    error(binary.getLoc(),
          "'" + spell(binary.getOp()) + "' cannot apply to " +
              describe(*operand),
          binary.getRange());
    return AbstractValue::poison();
  }
  return evalTensorBinary(binary, lhs, rhs);
}

AbstractValue Elaborator::foldConstants(const BinaryExpr &binary,
                                        const AbstractValue &lhs,
                                        const AbstractValue &rhs) {
  BinaryOp op = binary.getOp();
  llvm::SMLoc loc = binary.getLoc();
  llvm::SMRange range = binary.getRange();
  if (lhs.kind == AbstractValue::Kind::Integer &&
      rhs.kind == AbstractValue::Kind::Integer) {
    int64_t a = lhs.integer, b = rhs.integer, result = 0;
    bool overflow = false;
    switch (op) {
    case BinaryOp::Add:
      overflow = __builtin_add_overflow(a, b, &result);
      break;
    case BinaryOp::Sub:
      overflow = __builtin_sub_overflow(a, b, &result);
      break;
    case BinaryOp::Mul:
      overflow = __builtin_mul_overflow(a, b, &result);
      break;
    case BinaryOp::Div:
    case BinaryOp::Rem:
      if (b == 0) {
        error(loc,
              op == BinaryOp::Div ? "division by zero" : "remainder by zero",
              range);
        return AbstractValue::poison();
      }
      if (a == INT64_MIN && b == -1) {
        overflow = op == BinaryOp::Div;
        result = 0;
        break;
      }
      if (op == BinaryOp::Rem) {
        result = a % b;
        break;
      }
      if (a % b != 0) {
        error(
            loc,
            fmt::format("integer division {} / {} is not exact (remainder {})",
                        a, b, a % b),
            range,
            fmt::format("write a float ({}.0) for a fractional result", a));
        return AbstractValue::poison();
      }
      result = a / b;
      break;
    }
    if (overflow) {
      error(loc, "integer overflow in '" + formatExpr(binary) + "'", range);
      return AbstractValue::poison();
    }
    return AbstractValue::ofInteger(result);
  }
  if (op == BinaryOp::Rem) {
    error(loc,
          "'%' needs integers, but got " + describe(lhs) + " and " +
              describe(rhs),
          range);
    return AbstractValue::poison();
  }
  double a = lhs.asDouble(), b = rhs.asDouble(), result = 0;
  switch (op) {
  case BinaryOp::Add:
    result = a + b;
    break;
  case BinaryOp::Sub:
    result = a - b;
    break;
  case BinaryOp::Mul:
    result = a * b;
    break;
  case BinaryOp::Div:
    if (b == 0) {
      error(loc, "division by zero", range);
      return AbstractValue::poison();
    }
    result = a / b;
    break;
  case BinaryOp::Rem:
    break;
  }
  if (!std::isfinite(result)) {
    error(loc, "'" + formatExpr(binary) + "' is not a finite number", range);
    return AbstractValue::poison();
  }
  return AbstractValue::ofFloat(result);
}

AbstractValue Elaborator::evalTensorBinary(const BinaryExpr &binary,
                                           const AbstractValue &lhs,
                                           const AbstractValue &rhs) {
  BinaryOp op = binary.getOp();
  llvm::StringRef symbol = spell(op);
  Op result;
  result.loc = binary.getLoc();
  for (const AbstractValue *operand : {&lhs, &rhs}) {
    if (operand->isTensor() && !isFloating(operand->type.element)) {
      error(binary.getLoc(),
            "'" + symbol + "' needs floating-point tensors, but " +
                (operand == &lhs ? "the left" : "the right") + " operand is " +
                formatType(operand->type),
            binary.getRange());
      return AbstractValue::poison();
    }
  }
  if (lhs.isTensor() && rhs.isTensor()) {
    if (op == BinaryOp::Div || op == BinaryOp::Rem) {
      error(binary.getLoc(),
            "'" + symbol +
                "' is not defined between tensors: only '+', '-' "
                "and '*' are elementwise",
            binary.getRange());
      return AbstractValue::poison();
    }
    if (lhs.type.shape != rhs.type.shape ||
        lhs.type.element != rhs.type.element) {
      error(binary.getLoc(),
            "the operands of '" + symbol +
                "' must have the same shape, but they are " +
                formatType(lhs.type) + " and " + formatType(rhs.type),
            binary.getRange());
      return AbstractValue::poison();
    }
    result.kind = op == BinaryOp::Add   ? OpKind::Add
                  : op == BinaryOp::Sub ? OpKind::Sub
                                        : OpKind::Mul;
    return emitOp(result, {lhs.id, rhs.id}, lhs.type);
  }
  // A tensor and a constant: only scaling.
  const AbstractValue &tensor = lhs.isTensor() ? lhs : rhs;
  const AbstractValue &constant = lhs.isTensor() ? rhs : lhs;
  bool scales = op == BinaryOp::Mul || (op == BinaryOp::Div && lhs.isTensor());
  if (!scales) {
    error(binary.getLoc(),
          "'" + symbol +
              "' cannot combine a tensor and a constant: a "
              "constant can only scale a tensor (x * c, c * x, "
              "x / c)",
          binary.getRange());
    return AbstractValue::poison();
  }
  double factor = constant.asDouble();
  if (op == BinaryOp::Div) {
    if (factor == 0) {
      error(binary.getLoc(), "division by zero", binary.getRange());
      return AbstractValue::poison();
    }
    factor = 1 / factor;
  }
  if (!std::isfinite(factor)) {
    error(binary.getLoc(), "the scale factor is not a finite number",
          binary.getRange());
    return AbstractValue::poison();
  }
  result.kind = OpKind::Scale;
  result.factor = factor;
  return emitOp(result, {tensor.id}, tensor.type);
}

AbstractValue Elaborator::evalIndex(const IndexExpr &index, Frame *frame) {
  AbstractValue base = eval(index.getBase(), frame);
  AbstractValue position = eval(index.getIndex(), frame);
  if (base.isPoison())
    return base;
  const Expr &indexExpr = index.getIndex();
  if (base.kind != AbstractValue::Kind::Group ||
      base.group->kind != ParamNode::Kind::Array) {
    std::string why = base.kind == AbstractValue::Kind::Group
                          ? "'" + base.group->path +
                                "' has no copies to index (only a group "
                                "declared as NAME[n] { ... } has)"
                          : describe(base) +
                                " cannot be indexed (only a group of "
                                "parameters with copies can, as in "
                                "layers[i])";
    error(indexExpr.getLoc(), why, index.getRange());
    return AbstractValue::poison();
  }
  if (position.isPoison())
    return position;
  int64_t count = static_cast<int64_t>(base.group->elements.size());
  if (position.kind != AbstractValue::Kind::Integer) {
    error(indexExpr.getLoc(),
          "an index must be an integer, but this is " + describe(position),
          indexExpr.getRange());
    return AbstractValue::poison();
  }
  if (position.integer < 0 || position.integer >= count) {
    // One error per group and index: a loop's bound off by one shows at
    // every `layers[i]` of its body.
    if (!reportedIndices.insert({base.group, position.integer}).second)
      return AbstractValue::poison();
    error(indexExpr.getLoc(),
          fmt::format("index {} is out of range: '{}' has {} copies (0 to {})",
                      position.integer, base.group->path, count, count - 1),
          indexExpr.getRange());
    return AbstractValue::poison();
  }
  return AbstractValue::ofGroup(base.group->elements[position.integer].get());
}

AbstractValue Elaborator::evalMember(const MemberExpr &member, Frame *frame) {
  AbstractValue base = eval(member.getBase(), frame);
  if (base.isPoison())
    return base;
  llvm::SMRange range(member.getLoc(), member.getRange().End);
  if (base.kind != AbstractValue::Kind::Group) {
    error(member.getLoc(), describe(base) + " has no members", range);
    return AbstractValue::poison();
  }
  const ParamNode &group = *base.group;
  if (group.kind == ParamNode::Kind::Array) {
    error(member.getLoc(),
          fmt::format("'{}' has {} copies: index it first, as in {}[i].{}",
                      group.path, group.elements.size(), group.path,
                      member.getMember()),
          range);
    return AbstractValue::poison();
  }
  const ParamNode *node = group.findMember(member.getMember());
  if (!node) {
    error(member.getLoc(),
          "'" + group.path + "' has no member '" + member.getMember() + "'",
          range, didYouMean(member.getMember(), group.memberNames()));
    return AbstractValue::poison();
  }
  if (node->kind == ParamNode::Kind::Tensor)
    return parameterValue(*node);
  return node->valid ? AbstractValue::ofGroup(node) : AbstractValue::poison();
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

AbstractValue Elaborator::evalCall(const CallExpr &call, Frame *frame) {
  llvm::StringRef name = call.getCalleeName();
  if (name.empty()) {
    error(call.getLoc(), "only functions can be called, by their name",
          call.getCallee().getRange());
    return AbstractValue::poison();
  }
  std::optional<Builtin> builtin = lookupBuiltin(name);
  const FunctionDef *def = functions.lookup(name);
  if (!frame && (def || (builtin && *builtin != Builtin::Sqrt))) {
    error(call.getLoc(),
          "'" + name +
              "' cannot be called in a constant expression (only "
              "sqrt can)",
          call.getCallee().getRange());
    return AbstractValue::poison();
  }
  if (def)
    return callFunction(*def, call, frame);
  if (builtin)
    return callBuiltin(*builtin, call, frame);
  if (frame && frame->locals.count(name)) {
    error(call.getLoc(), "'" + name + "' is not a function",
          call.getCallee().getRange());
    return AbstractValue::poison();
  }
  std::vector<std::string> candidates = builtinNames();
  if (frame)
    for (const auto &function : functions)
      candidates.push_back(function.getKey().str());
  llvm::sort(candidates);
  error(call.getLoc(), "unknown function '" + name + "'",
        call.getCallee().getRange(), didYouMean(name, candidates));
  return AbstractValue::poison();
}

bool Elaborator::argumentMatches(AbstractValue &value, const TensorType &type) {
  switch (value.kind) {
  case AbstractValue::Kind::Tensor:
    return value.type.element == type.element && value.type.shape == type.shape;
  case AbstractValue::Kind::Integer:
    if (!type.shape.empty())
      return false;
    if (type.element != ElementType::I32)
      value = AbstractValue::ofFloat(static_cast<double>(value.integer));
    return true;
  case AbstractValue::Kind::Float:
    return type.shape.empty() && type.element != ElementType::I32;
  default:
    return false;
  }
}

AbstractValue Elaborator::callFunction(const FunctionDef &def,
                                       const CallExpr &call, Frame *frame) {
  calledFunctions.insert(&def);
  for (const auto &entry : stack) {
    if (entry.first != &def)
      continue;
    std::string chain;
    for (const auto &link : stack)
      chain += link.first->name + " -> ";
    error(call.getLoc(),
          "recursive call to '" + def.name + "' (" + chain + def.name +
              "): functions are inlined, so they cannot recurse",
          call.getCallee().getRange());
    return AbstractValue::poison();
  }
  if (stack.size() >= kMaxCallDepth) {
    error(call.getLoc(),
          "calls nested more than " + llvm::Twine(kMaxCallDepth) +
              " deep: functions are inlined",
          call.getCallee().getRange());
    return AbstractValue::poison();
  }
  Signature signature{def.name, {}, {}, /*positionalByName=*/true};
  for (const ArgumentDecl &arg : def.args)
    signature.positional.push_back(arg.name);
  auto bound =
      bindArguments(signature, call.getArgs(), call.getLoc(), call.getRange());
  if (!bound)
    return AbstractValue::poison();
  std::vector<AbstractValue> values;
  for (const CallArg *arg : *bound)
    values.push_back(eval(*arg->value, frame));
  if (brokenFunctions.count(&def))
    return AbstractValue::poison();
  const ResolvedSignature &resolved = resolvedSignature(def);
  if (!resolved.valid)
    return AbstractValue::poison();

  Frame callee;
  callee.def = &def;
  for (size_t i = 0; i < values.size(); ++i) {
    AbstractValue &value = values[i];
    if (!value.isPoison() && !argumentMatches(value, resolved.arguments[i])) {
      const Expr &expr = *(*bound)[i]->value;
      error(expr.getLoc(),
            "argument '" + def.args[i].name + "' of '" + def.name +
                "' must be " + formatType(resolved.arguments[i]) +
                ", but it is " + describe(value),
            expr.getRange());
      value = AbstractValue::poison();
    }
    callee.locals[def.args[i].name] = value;
  }
  // Inlined even with poisoned arguments, so that its own errors show.
  if (!step(call.getLoc()))
    return AbstractValue::poison();
  stack.push_back({&def, call.getLoc()});
  exec(def.body, callee);
  stack.pop_back();

  AbstractValue result = callee.result.value_or(AbstractValue::poison());
  if (!result.isPoison() && resolved.result &&
      !argumentMatches(result, *resolved.result)) {
    stack.push_back({&def, call.getLoc()});
    error(callee.resultLoc, "'" + def.name + "' returns " + describe(result) +
                                ", but its declared type is " +
                                formatType(*resolved.result));
    stack.pop_back();
    return AbstractValue::poison();
  }
  return result;
}

std::optional<std::vector<const CallArg *>>
Elaborator::bindArguments(const Signature &signature,
                          const std::vector<CallArg> &args, llvm::SMLoc loc,
                          llvm::SMRange range) {
  size_t positionalCount = signature.positional.size();
  std::vector<const CallArg *> slots(positionalCount + signature.named.size(),
                                     nullptr);
  bool valid = true, sawNamed = false;
  size_t positionalGiven = 0;
  const CallArg *firstExtra = nullptr;
  std::string plural = signature.named.empty() ? "argument"
                                               : "positional "
                                                 "argument";
  for (const CallArg &arg : args) {
    if (!arg.isNamed()) {
      if (sawNamed) {
        error(arg.getLoc(), "a positional argument cannot follow a named one",
              arg.value->getRange());
        valid = false;
      } else if (positionalGiven < positionalCount) {
        slots[positionalGiven] = &arg;
      } else if (!firstExtra) {
        firstExtra = &arg;
      }
      ++positionalGiven;
      continue;
    }
    sawNamed = true;
    std::optional<size_t> slot;
    for (size_t i = 0; i < signature.named.size(); ++i)
      if (signature.named[i] == arg.name)
        slot = positionalCount + i;
    for (size_t i = 0; i < positionalCount && !slot; ++i) {
      if (signature.positional[i] != arg.name)
        continue;
      if (signature.positionalByName) {
        slot = i;
        break;
      }
      error(arg.nameLoc,
            "'" + signature.function + "' takes '" + arg.name +
                "' by position, not by name",
            {}, signature.describe());
      valid = false;
      slot = slots.size(); // Reported.
    }
    if (!slot) {
      std::vector<std::string> names = signature.positional;
      names.insert(names.end(), signature.named.begin(), signature.named.end());
      std::string hint = didYouMean(arg.name, names);
      error(arg.nameLoc,
            "'" + signature.function + "' has no argument named '" + arg.name +
                "'",
            {}, hint.empty() ? signature.describe() : hint);
      valid = false;
      continue;
    }
    if (*slot == slots.size())
      continue;
    if (slots[*slot]) {
      error(arg.nameLoc, "argument '" + arg.name + "' is given twice", {}, {},
            {slots[*slot]->getLoc(), "first given here"});
      valid = false;
      continue;
    }
    slots[*slot] = &arg;
  }
  auto countMessage = [&] {
    return fmt::format("'{}' takes {} {}{}, but {}{} given", signature.function,
                       positionalCount, plural,
                       (positionalCount == 1 ? "" : "s"), positionalGiven,
                       (positionalGiven == 1 ? " was" : " were"));
  };
  if (firstExtra) {
    error(firstExtra->getLoc(), countMessage(), firstExtra->value->getRange(),
          signature.describe());
    return std::nullopt;
  }
  if (!valid)
    return std::nullopt;
  for (size_t i = 0; i < positionalCount; ++i) {
    if (slots[i])
      continue;
    if (sawNamed && signature.positionalByName)
      error(loc,
            "call to '" + signature.function + "' is missing argument '" +
                signature.positional[i] + "'",
            range, signature.describe());
    else
      error(loc, countMessage(), range, signature.describe());
    return std::nullopt;
  }
  for (size_t i = 0; i < signature.named.size(); ++i) {
    if (slots[positionalCount + i])
      continue;
    error(loc,
          "'" + signature.function + "' is missing its named argument '" +
              signature.named[i] + "'",
          range, signature.describe());
    valid = false;
  }
  if (!valid)
    return std::nullopt;
  return slots;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::optional<ModelGraph>
tetra::frontend::loadModelBuffer(DiagnosticEngine &diags, unsigned bufferId) {
  std::unique_ptr<ModelFile> file = parseModelFile(diags, bufferId);
  if (!file)
    return std::nullopt;
  return Elaborator(diags, *file).run();
}

std::optional<ModelGraph> tetra::frontend::loadModel(DiagnosticEngine &diags,
                                                     llvm::StringRef path) {
  unsigned bufferId = loadSourceFile(diags.getSourceMgr(), diags, path);
  if (!bufferId)
    return std::nullopt;
  return loadModelBuffer(diags, bufferId);
}
