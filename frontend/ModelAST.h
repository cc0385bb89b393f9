//===- ModelAST.h - The syntax tree of a model file -------------*- C++ -*-===//
//
// What the model parser produces (docs/language.md, "Model files"): the
// config constants, the parameter declarations with their groups, and the
// functions, each node with the location its diagnostics point at. Nothing
// is evaluated here; the elaborator (ModelElaborator.cpp) gives it meaning.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_MODELAST_H
#define TETRA_FRONTEND_MODELAST_H

#include "frontend/Diagnostics.h"
#include "frontend/ModelGraph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tetra::frontend::modelast {

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind {
    Integer,
    Float,
    String,
    Name,
    Negate,
    Binary,
    Call,
    Index,
    Member
  };

  virtual ~Expr() = default;

  Kind getKind() const { return kind; }
  /// Where a diagnostic about this expression points: the first token of a
  /// literal or name, the operator of a binary expression, the callee of a
  /// call, the member name of `a.b`.
  llvm::SMLoc getLoc() const { return loc; }
  /// The whole expression's text, for the `~~~` under the caret.
  llvm::SMRange getRange() const { return range; }
  /// The height of the tree below (1 for a leaf); the parser bounds it so
  /// that no recursion over an expression can exhaust the stack.
  unsigned getDepth() const { return depth; }

protected:
  Expr(Kind kind, llvm::SMLoc loc, llvm::SMRange range, unsigned depth = 1)
      : kind(kind), loc(loc), range(range), depth(depth) {}

private:
  Kind kind;
  llvm::SMLoc loc;
  llvm::SMRange range;
  unsigned depth;
};

using ExprPtr = std::unique_ptr<Expr>;

class IntegerExpr : public Expr {
public:
  IntegerExpr(int64_t value, llvm::SMRange range)
      : Expr(Kind::Integer, range.Start, range), value(value) {}
  int64_t getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Integer; }

private:
  int64_t value;
};

class FloatExpr : public Expr {
public:
  FloatExpr(double value, llvm::StringRef spelling, llvm::SMRange range)
      : Expr(Kind::Float, range.Start, range), value(value),
        spelling(spelling.str()) {}
  double getValue() const { return value; }
  /// As written (`1e-5`), for the AST dump.
  llvm::StringRef getSpelling() const { return spelling; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Float; }

private:
  double value;
  std::string spelling;
};

class StringExpr : public Expr {
public:
  StringExpr(std::string value, llvm::StringRef spelling, llvm::SMRange range)
      : Expr(Kind::String, range.Start, range), value(std::move(value)),
        spelling(spelling.str()) {}
  llvm::StringRef getValue() const { return value; }
  llvm::StringRef getSpelling() const { return spelling; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::String; }

private:
  std::string value;
  std::string spelling;
};

class NameExpr : public Expr {
public:
  NameExpr(llvm::StringRef name, llvm::SMRange range)
      : Expr(Kind::Name, range.Start, range), name(name.str()) {}
  llvm::StringRef getName() const { return name; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }

private:
  std::string name;
};

/// `-x`.
class NegateExpr : public Expr {
public:
  NegateExpr(llvm::SMLoc minus, ExprPtr operand)
      : Expr(Kind::Negate, minus, {minus, operand->getRange().End},
             operand->getDepth() + 1),
        operand(std::move(operand)) {}
  const Expr &getOperand() const { return *operand; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Negate; }

private:
  ExprPtr operand;
};

enum class BinaryOp { Add, Sub, Mul, Div, Rem };
/// "+", "-", "*", "/", "%".
llvm::StringRef spell(BinaryOp op);

class BinaryExpr : public Expr {
public:
  BinaryExpr(BinaryOp op, llvm::SMLoc opLoc, ExprPtr lhs, ExprPtr rhs)
      : Expr(Kind::Binary, opLoc, {lhs->getRange().Start, rhs->getRange().End},
             std::max(lhs->getDepth(), rhs->getDepth()) + 1),
        op(op), lhs(std::move(lhs)), rhs(std::move(rhs)) {}
  BinaryOp getOp() const { return op; }
  const Expr &getLHS() const { return *lhs; }
  const Expr &getRHS() const { return *rhs; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }

private:
  BinaryOp op;
  ExprPtr lhs, rhs;
};

/// One argument of a call: `expr` or `name = expr`.
struct CallArg {
  std::string name; ///< Empty for a positional argument.
  llvm::SMLoc nameLoc;
  ExprPtr value;

  bool isNamed() const { return !name.empty(); }
  /// The argument's location: its name when named, else its value.
  llvm::SMLoc getLoc() const { return isNamed() ? nameLoc : value->getLoc(); }
};

/// Depth of a list of call arguments (0 when empty).
unsigned depthOf(const std::vector<CallArg> &args);

class CallExpr : public Expr {
public:
  CallExpr(ExprPtr callee, std::vector<CallArg> args, llvm::SMLoc rparenEnd)
      : Expr(Kind::Call, callee->getLoc(),
             {callee->getRange().Start, rparenEnd},
             std::max(callee->getDepth(), depthOf(args)) + 1),
        callee(std::move(callee)), args(std::move(args)) {}
  const Expr &getCallee() const { return *callee; }
  /// The callee's name when it is a plain name (the only callable form).
  llvm::StringRef getCalleeName() const {
    if (const auto *name = llvm::dyn_cast<NameExpr>(callee.get()))
      return name->getName();
    return {};
  }
  const std::vector<CallArg> &getArgs() const { return args; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }

private:
  ExprPtr callee;
  std::vector<CallArg> args;
};

/// `base[index]`.
class IndexExpr : public Expr {
public:
  IndexExpr(ExprPtr base, ExprPtr index, llvm::SMLoc rbracketEnd)
      : Expr(Kind::Index, index->getLoc(),
             {base->getRange().Start, rbracketEnd},
             std::max(base->getDepth(), index->getDepth()) + 1),
        base(std::move(base)), index(std::move(index)) {}
  const Expr &getBase() const { return *base; }
  const Expr &getIndex() const { return *index; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Index; }

private:
  ExprPtr base, index;
};

/// `base.member`.
class MemberExpr : public Expr {
public:
  MemberExpr(ExprPtr base, llvm::StringRef member, llvm::SMRange memberRange)
      : Expr(Kind::Member, memberRange.Start,
             {base->getRange().Start, memberRange.End}, base->getDepth() + 1),
        base(std::move(base)), member(member.str()) {}
  const Expr &getBase() const { return *base; }
  llvm::StringRef getMember() const { return member; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Member; }

private:
  ExprPtr base;
  std::string member;
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

class Stmt {
public:
  enum class Kind { Assign, For, Return };

  virtual ~Stmt() = default;
  Kind getKind() const { return kind; }
  /// The assigned name, `for`, or `return`.
  llvm::SMLoc getLoc() const { return loc; }

protected:
  Stmt(Kind kind, llvm::SMLoc loc) : kind(kind), loc(loc) {}

private:
  Kind kind;
  llvm::SMLoc loc;
};

using StmtPtr = std::unique_ptr<Stmt>;

/// `name = value`.
class AssignStmt : public Stmt {
public:
  AssignStmt(llvm::StringRef name, llvm::SMRange nameRange, ExprPtr value)
      : Stmt(Kind::Assign, nameRange.Start), name(name.str()),
        nameRange(nameRange), value(std::move(value)) {}
  llvm::StringRef getName() const { return name; }
  llvm::SMRange getNameRange() const { return nameRange; }
  const Expr &getValue() const { return *value; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Assign; }

private:
  std::string name;
  llvm::SMRange nameRange;
  ExprPtr value;
};

/// `for var in begin..end { body }`.
class ForStmt : public Stmt {
public:
  ForStmt(llvm::SMLoc forLoc, llvm::StringRef var, llvm::SMRange varRange,
          ExprPtr begin, ExprPtr end, std::vector<StmtPtr> body)
      : Stmt(Kind::For, forLoc), var(var.str()), varRange(varRange),
        begin(std::move(begin)), end(std::move(end)), body(std::move(body)) {}
  llvm::StringRef getVar() const { return var; }
  llvm::SMRange getVarRange() const { return varRange; }
  const Expr &getBegin() const { return *begin; }
  const Expr &getEnd() const { return *end; }
  const std::vector<StmtPtr> &getBody() const { return body; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::For; }

private:
  std::string var;
  llvm::SMRange varRange;
  ExprPtr begin, end;
  std::vector<StmtPtr> body;
};

/// `return value`.
class ReturnStmt : public Stmt {
public:
  ReturnStmt(llvm::SMLoc returnLoc, ExprPtr value)
      : Stmt(Kind::Return, returnLoc), value(std::move(value)) {}
  const Expr &getValue() const { return *value; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Return; }

private:
  ExprPtr value;
};

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

/// `[d0, d1, ...]`.
struct ShapeAST {
  std::vector<ExprPtr> dims;
  llvm::SMRange range; ///< From '[' to ']'.
};

/// `f32[batch, seq, dim]`.
struct TypeAST {
  ElementType element = ElementType::F32;
  llvm::SMLoc loc; ///< The element type's name.
  ShapeAST shape;
};

/// `name = expr` in a config block.
struct ConstantDecl {
  std::string name;
  llvm::SMRange nameRange;
  ExprPtr value;
};

struct ConfigBlock {
  llvm::SMLoc loc; ///< The `config` keyword.
  std::vector<ConstantDecl> constants;
};

/// `= normal(std = 0.02)`, `= zeros`.
struct InitializerAST {
  std::string name;
  llvm::SMRange nameRange;
  bool hasParens = false;
  std::vector<CallArg> args;
};

/// A parameter (`wq: [dim, dim] = ...`) or a group (`layers[n] { ... }`,
/// `attn { ... }`).
struct ParamItem {
  enum class Kind { Tensor, Group };
  Kind kind = Kind::Tensor;
  std::string name;
  llvm::SMRange nameRange;
  // Tensor.
  ShapeAST shape;
  std::optional<InitializerAST> init;
  // Group.
  ExprPtr count; ///< Null for a group without copies.
  std::vector<ParamItem> members;
};

struct ParamsBlock {
  llvm::SMLoc loc; ///< The `params` keyword.
  std::vector<ParamItem> items;
};

/// `name: type` in a function's signature.
struct ArgumentDecl {
  std::string name;
  llvm::SMRange nameRange;
  TypeAST type;
};

struct FunctionDef {
  std::string name;
  llvm::SMRange nameRange;
  llvm::SMLoc defLoc; ///< The `def` keyword.
  std::vector<ArgumentDecl> args;
  std::optional<TypeAST> returnType;
  std::vector<StmtPtr> body;
  llvm::SMLoc closeLoc; ///< The body's '}'.
};

using ModelItem = std::variant<ConfigBlock, ParamsBlock, FunctionDef>;

struct ModelFile {
  std::string name;
  llvm::SMLoc loc; ///< The `model` keyword.
  llvm::SMRange nameRange;
  std::vector<ModelItem> items; ///< In source order.
};

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// Parses buffer `bufferId` of the engine's SourceMgr as a model file,
/// reporting every syntax error it can recover from. Returns null if there
/// was any error.
std::unique_ptr<ModelFile> parseModelFile(DiagnosticEngine &diags,
                                          unsigned bufferId);

/// An expression as source text, with the parentheses its structure needs:
/// `heads * head_dim`, `layers[i].attn.wq`, `normal(std = init_std)`.
std::string formatExpr(const Expr &expr);

/// `emit --stage=ast`: one node per line, indented two spaces per level,
/// each with `@line:col`.
void printModelAST(const ModelFile &file, const llvm::SourceMgr &sourceMgr,
                   llvm::raw_ostream &os);

} // namespace tetra::frontend::modelast

#endif // TETRA_FRONTEND_MODELAST_H
