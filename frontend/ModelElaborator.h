//===- ModelElaborator.h - Model syntax trees into ModelGraphs --*- C++ -*-===//
//
// Internal to the frontend: the elaborator (sema) of model files, shared by
// ModelElaborator.cpp (constants, parameters, names, statements, calls) and
// ModelBuiltins.cpp (the shape rules of the built-in functions).
//
// Elaboration is abstract interpretation: every function is run at compile
// time over abstract values — constants, tensors of known type, parameter
// groups — with `for` loops unrolled and helper functions inlined, and every
// op it meets is appended to the ModelGraph function being built. An error
// yields a poison value that every later use passes on silently, so that one
// mistake is reported once.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_MODELELABORATOR_H
#define TETRA_FRONTEND_MODELELABORATOR_H

#include "frontend/Diagnostics.h"
#include "frontend/ModelAST.h"
#include "frontend/ModelGraph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tetra::frontend::elaboration {

/// A node of the parameter tree: a tensor, a group of named members, or a
/// group with copies (`layers[32]`), whose elements are groups.
struct ParamNode {
  enum class Kind { Tensor, Group, Array };
  Kind kind = Kind::Group;
  std::string path;          ///< "layers.3.attn"; empty for the root.
  llvm::SMRange declaration; ///< The declaring name.
  int parameter = -1;        ///< Tensor: index into the parameters; -1
                             ///< when its declaration had an error.
  bool valid = true;         ///< False for a group whose count had an error.
  std::vector<std::pair<std::string, std::unique_ptr<ParamNode>>> members;
  std::vector<std::unique_ptr<ParamNode>> elements; ///< Array.

  const ParamNode *findMember(llvm::StringRef name) const;
  std::vector<std::string> memberNames() const;
};

/// A value during elaboration.
struct AbstractValue {
  enum class Kind { Poison, Integer, Float, Tensor, Group };
  Kind kind = Kind::Poison;
  int64_t integer = 0;
  double number = 0;
  int id = -1;     ///< Tensor: the value id in the function being built.
  TensorType type; ///< Tensor.
  const ParamNode *group = nullptr; ///< Group (a Group or Array node).

  static AbstractValue poison() { return {}; }
  static AbstractValue ofInteger(int64_t value);
  static AbstractValue ofFloat(double value);
  static AbstractValue ofTensor(int id, TensorType type);
  static AbstractValue ofGroup(const ParamNode *node);

  bool isPoison() const { return kind == Kind::Poison; }
  bool isConstant() const {
    return kind == Kind::Integer || kind == Kind::Float;
  }
  bool isTensor() const { return kind == Kind::Tensor; }
  double asDouble() const {
    return kind == Kind::Integer ? static_cast<double>(integer) : number;
  }
};

/// "the integer 3", "the number 0.5", "a tensor f32[batch, seq, 64]", "the
/// parameter group 'layers.3.attn'".
std::string describe(const AbstractValue &value);
/// "f32[batch, seq, 64]".
std::string formatType(const TensorType &type);
bool isFloating(ElementType element);

enum class Builtin {
  Embedding,
  Linear,
  RMSNorm,
  Rope,
  Attention,
  Silu,
  CrossEntropy,
  Sqrt,
};
std::optional<Builtin> lookupBuiltin(llvm::StringRef name);
std::vector<std::string> builtinNames();

/// How a call's arguments bind: positional parameters, then keyword-only
/// ones (the attributes of built-ins); all are required.
struct Signature {
  std::string function;
  std::vector<std::string> positional;
  std::vector<std::string> named;
  /// Whether positional parameters may also be given by name (functions
  /// the model defines; built-ins take their tensors by position).
  bool positionalByName = false;

  /// "rmsnorm(x, w, eps = ...)".
  std::string describe() const;
};
Signature signatureOf(Builtin builtin);

/// The per-declaration facts of a parameter (shared by all its copies).
struct ParamDeclInfo {
  bool valid = false;
  std::vector<int64_t> shape;
  Initializer init;
  std::vector<int> copies; ///< Indices of its parameters.
};

/// A function activation: the locals of one (inlined) call.
struct Frame {
  const modelast::FunctionDef *def = nullptr;
  llvm::StringMap<AbstractValue> locals;
  llvm::StringSet<> loopVars;
  std::optional<AbstractValue> result;
  llvm::SMLoc resultLoc;
};

/// A resolved signature of a function the model defines.
struct ResolvedSignature {
  bool valid = false;
  std::vector<TensorType> arguments;
  std::optional<TensorType> result;
};

class Elaborator {
public:
  Elaborator(DiagnosticEngine &diags, const modelast::ModelFile &file);
  std::optional<ModelGraph> run();

  //===--------------------------------------------------------------------===//
  // Shared with ModelBuiltins.cpp
  //===--------------------------------------------------------------------===//

  /// Reports an error unless one was already reported at `loc` (a loop body
  /// or an inlined function runs many times); true when it was reported.
  /// A note printed with its error, before the inlined calls' notes.
  struct Note {
    llvm::SMLoc loc;
    std::string message;
  };
  bool error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::SMRange range = {}, const llvm::Twine &hint = {},
             const Note &attached = {});
  /// A note to the error just reported (dropped with it).
  void note(llvm::SMLoc loc, const llvm::Twine &message);

  AbstractValue eval(const modelast::Expr &expr, Frame *frame);
  /// Binds a call's arguments; nullopt after reporting an error.
  std::optional<std::vector<const modelast::CallArg *>>
  bindArguments(const Signature &signature,
                const std::vector<modelast::CallArg> &args, llvm::SMLoc loc,
                llvm::SMRange range);
  AbstractValue callBuiltin(Builtin builtin, const modelast::CallExpr &call,
                            Frame *frame);
  /// Appends an op to the function being built; poison past the op limit.
  AbstractValue emitOp(Op op, std::vector<int> operands, TensorType type);
  /// The parameter index behind tensor value `id`, or -1.
  int parameterOf(int id) const;
  const std::vector<Parameter> &parameters() const { return graph.parameters; }

private:
  //===--------------------------------------------------------------------===//
  // Declarations
  //===--------------------------------------------------------------------===//

  void declareGlobals();
  /// False (after an error) when `name` is already defined.
  bool declareGlobal(llvm::StringRef name, llvm::SMRange range);
  void evaluateConstants();
  void checkParamItems(const std::vector<const modelast::ParamItem *> &items);
  void checkParamTensor(const modelast::ParamItem &item);
  std::optional<Initializer> checkInitializer(const modelast::ParamItem &item);
  void expandParams(const modelast::ParamItem &item, ParamNode &parent,
                    const std::string &prefix);
  std::optional<int64_t> evalCount(const modelast::Expr &expr);
  /// A dimension of a shape: a positive constant, or `batch` / `seq` when
  /// `allowSymbols`.
  std::optional<Dim> evalDim(const modelast::Expr &expr, bool allowSymbols);
  std::optional<TensorType> resolveType(const modelast::TypeAST &type);
  const ResolvedSignature &resolvedSignature(const modelast::FunctionDef &def);
  void checkStructure(const modelast::FunctionDef &def);
  void checkEntrySignature(const modelast::FunctionDef &def,
                           llvm::ArrayRef<const char *> argumentNames);

  //===--------------------------------------------------------------------===//
  // Functions
  //===--------------------------------------------------------------------===//

  void elaborateEntry(const modelast::FunctionDef &def);
  void checkUnusedParameters();
  void checkUncalledFunctions();
  void exec(const std::vector<modelast::StmtPtr> &body, Frame &frame);
  void execFor(const modelast::ForStmt &loop, Frame &frame);
  bool step(llvm::SMLoc loc);

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  AbstractValue evalName(const modelast::NameExpr &name, Frame *frame);
  void reportUnknownName(const modelast::NameExpr &name, Frame *frame);
  AbstractValue evalNegate(const modelast::NegateExpr &negate, Frame *frame);
  AbstractValue evalBinary(const modelast::BinaryExpr &binary, Frame *frame);
  AbstractValue foldConstants(const modelast::BinaryExpr &binary,
                              const AbstractValue &lhs,
                              const AbstractValue &rhs);
  AbstractValue evalTensorBinary(const modelast::BinaryExpr &binary,
                                 const AbstractValue &lhs,
                                 const AbstractValue &rhs);
  AbstractValue evalIndex(const modelast::IndexExpr &index, Frame *frame);
  AbstractValue evalMember(const modelast::MemberExpr &member, Frame *frame);
  AbstractValue evalCall(const modelast::CallExpr &call, Frame *frame);
  AbstractValue callFunction(const modelast::FunctionDef &def,
                             const modelast::CallExpr &call, Frame *frame);
  bool argumentMatches(AbstractValue &value, const TensorType &type);
  AbstractValue parameterValue(const ParamNode &node);

  DiagnosticEngine &diags;
  const modelast::ModelFile &file;
  ModelGraph graph;

  /// Constants by name; `evaluated` turns true in declaration order.
  struct ConstantInfo {
    const modelast::ConstantDecl *decl = nullptr;
    AbstractValue value;
    bool evaluated = false;
  };
  llvm::StringMap<ConstantInfo> constants;
  llvm::StringMap<const modelast::FunctionDef *> functions;
  llvm::StringMap<llvm::SMRange> globals;
  const modelast::ConstantDecl *evaluatingConstant = nullptr;
  /// The top-level parameter items, duplicates left out.
  std::vector<const modelast::ParamItem *> rootItems;
  llvm::DenseSet<const modelast::ParamItem *> skippedItems;
  ParamNode root;
  std::map<const modelast::ParamItem *, ParamDeclInfo> paramDecls;
  std::map<const modelast::ParamItem *, int64_t> groupCounts;
  std::map<const modelast::FunctionDef *, ResolvedSignature> signatures;
  llvm::DenseSet<const modelast::FunctionDef *> brokenFunctions;
  llvm::DenseSet<const modelast::FunctionDef *> calledFunctions;
  int64_t paramNodes = 0;
  bool paramLimitReported = false;

  /// The function being built, its parameter values, the inlining stack.
  Function *current = nullptr;
  std::map<int, int> parameterValues;
  std::vector<std::pair<const modelast::FunctionDef *, llvm::SMLoc>> stack;

  llvm::DenseSet<const char *> reportedLocs;
  llvm::DenseSet<std::pair<const ParamNode *, int64_t>> reportedIndices;
  bool lastErrorShown = false;
  int64_t steps = 0;
  int64_t opCount = 0;
  bool aborted = false;
};

} // namespace tetra::frontend::elaboration

#endif // TETRA_FRONTEND_MODELELABORATOR_H
