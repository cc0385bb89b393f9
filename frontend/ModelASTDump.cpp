//===- ModelASTDump.cpp - A model's syntax tree as text -------------------===//
//
// `tetra emit --stage=ast` for model files: one node per line, indented by
// depth, each with its `@line:col`. Expressions print as source text with
// the parentheses their structure needs, so that the dump shows how the
// parser grouped them:
//
//   Param layers.attn.wq [heads * head_dim, dim] normal(std = init_std) @20:7
//
//===----------------------------------------------------------------------===//

#include "frontend/ModelAST.h"

#include "llvm/Support/SourceMgr.h"

using namespace tetra::frontend;
using namespace tetra::frontend::modelast;

namespace {

/// Binding strength: what an operand needs to print without parentheses.
enum Precedence : int {
  Additive = 1,
  Multiplicative = 2,
  Unary = 3,
  Postfix = 4
};

int precedenceOf(BinaryOp op) {
  return op == BinaryOp::Add || op == BinaryOp::Sub ? Additive : Multiplicative;
}

void formatInto(const Expr &expr, int minimum, std::string &out);

void formatArgs(const std::vector<CallArg> &args, std::string &out) {
  out += '(';
  for (size_t i = 0; i < args.size(); ++i) {
    if (i)
      out += ", ";
    if (args[i].isNamed())
      out += args[i].name + " = ";
    formatInto(*args[i].value, 0, out);
  }
  out += ')';
}

void formatInto(const Expr &expr, int minimum, std::string &out) {
  switch (expr.getKind()) {
  case Expr::Kind::Integer:
    out += std::to_string(llvm::cast<IntegerExpr>(expr).getValue());
    return;
  case Expr::Kind::Float:
    out += llvm::cast<FloatExpr>(expr).getSpelling();
    return;
  case Expr::Kind::String:
    out += llvm::cast<StringExpr>(expr).getSpelling();
    return;
  case Expr::Kind::Name:
    out += llvm::cast<NameExpr>(expr).getName();
    return;
  case Expr::Kind::Negate: {
    bool parens = minimum > Unary;
    out += parens ? "(-" : "-";
    formatInto(llvm::cast<NegateExpr>(expr).getOperand(), Unary, out);
    if (parens)
      out += ')';
    return;
  }
  case Expr::Kind::Binary: {
    const auto &binary = llvm::cast<BinaryExpr>(expr);
    int precedence = precedenceOf(binary.getOp());
    bool parens = minimum > precedence;
    if (parens)
      out += '(';
    formatInto(binary.getLHS(), precedence, out);
    out += ' ';
    out += spell(binary.getOp());
    out += ' ';
    // Left-associative: a right operand of the same strength needs
    // parentheses (`a - (b - c)`).
    formatInto(binary.getRHS(), precedence + 1, out);
    if (parens)
      out += ')';
    return;
  }
  case Expr::Kind::Call: {
    const auto &call = llvm::cast<CallExpr>(expr);
    formatInto(call.getCallee(), Postfix, out);
    formatArgs(call.getArgs(), out);
    return;
  }
  case Expr::Kind::Index: {
    const auto &index = llvm::cast<IndexExpr>(expr);
    formatInto(index.getBase(), Postfix, out);
    out += '[';
    formatInto(index.getIndex(), 0, out);
    out += ']';
    return;
  }
  case Expr::Kind::Member: {
    const auto &member = llvm::cast<MemberExpr>(expr);
    formatInto(member.getBase(), Postfix, out);
    out += '.';
    out += member.getMember();
    return;
  }
  }
}

std::string formatShape(const ShapeAST &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.dims.size(); ++i) {
    if (i)
      out += ", ";
    formatInto(*shape.dims[i], 0, out);
  }
  return out + "]";
}

llvm::StringRef elementName(ElementType element) {
  switch (element) {
  case ElementType::F32:
    return "f32";
  case ElementType::BF16:
    return "bf16";
  case ElementType::I32:
    return "i32";
  }
  return "?";
}

std::string formatType(const TypeAST &type) {
  return (elementName(type.element) + formatShape(type.shape)).str();
}

class Printer {
public:
  Printer(const llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os)
      : sourceMgr(sourceMgr), os(os) {}

  void print(const ModelFile &file);

private:
  /// Starts a node's line at `depth`.
  llvm::raw_ostream &line(unsigned depth) { return os.indent(2 * depth); }
  /// Ends a node's line with its location.
  void end(llvm::SMLoc loc) {
    auto [row, column] = sourceMgr.getLineAndColumn(loc);
    os << " @" << row << ":" << column << "\n";
  }

  void printConfig(const ConfigBlock &config, unsigned depth);
  void printParams(const ParamsBlock &params, unsigned depth);
  void printParamItem(const ParamItem &item, const std::string &prefix,
                      unsigned depth);
  void printDef(const FunctionDef &def, unsigned depth);
  void printStmt(const Stmt &stmt, unsigned depth);

  const llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream &os;
};

void Printer::print(const ModelFile &file) {
  line(0) << "Model " << file.name;
  end(file.nameRange.Start);
  for (const ModelItem &item : file.items) {
    if (const auto *config = std::get_if<ConfigBlock>(&item))
      printConfig(*config, 1);
    else if (const auto *params = std::get_if<ParamsBlock>(&item))
      printParams(*params, 1);
    else
      printDef(std::get<FunctionDef>(item), 1);
  }
}

void Printer::printConfig(const ConfigBlock &config, unsigned depth) {
  line(depth) << "Config";
  end(config.loc);
  for (const ConstantDecl &constant : config.constants) {
    line(depth + 1) << "Constant " << constant.name << " = "
                    << formatExpr(*constant.value);
    end(constant.nameRange.Start);
  }
}

void Printer::printParams(const ParamsBlock &params, unsigned depth) {
  line(depth) << "Params";
  end(params.loc);
  for (const ParamItem &item : params.items)
    printParamItem(item, "", depth + 1);
}

void Printer::printParamItem(const ParamItem &item, const std::string &prefix,
                             unsigned depth) {
  std::string path = prefix + item.name;
  if (item.kind == ParamItem::Kind::Tensor) {
    line(depth) << "Param " << path << " " << formatShape(item.shape);
    if (item.init) {
      os << " " << item.init->name;
      if (item.init->hasParens) {
        std::string args;
        formatArgs(item.init->args, args);
        os << args;
      }
    }
    end(item.nameRange.Start);
    return;
  }
  line(depth) << "Group " << path;
  if (item.count)
    os << "[" << formatExpr(*item.count) << "]";
  end(item.nameRange.Start);
  for (const ParamItem &member : item.members)
    printParamItem(member, path + ".", depth + 1);
}

void Printer::printDef(const FunctionDef &def, unsigned depth) {
  line(depth) << "Def " << def.name << "(";
  for (size_t i = 0; i < def.args.size(); ++i) {
    if (i)
      os << ", ";
    os << def.args[i].name << ": " << formatType(def.args[i].type);
  }
  os << ")";
  if (def.returnType)
    os << " -> " << formatType(*def.returnType);
  end(def.nameRange.Start);
  for (const StmtPtr &stmt : def.body)
    printStmt(*stmt, depth + 1);
}

void Printer::printStmt(const Stmt &stmt, unsigned depth) {
  if (const auto *assign = llvm::dyn_cast<AssignStmt>(&stmt)) {
    line(depth) << "Assign " << assign->getName() << " = "
                << formatExpr(assign->getValue());
    end(assign->getLoc());
    return;
  }
  if (const auto *loop = llvm::dyn_cast<ForStmt>(&stmt)) {
    line(depth) << "For " << loop->getVar() << " in "
                << formatExpr(loop->getBegin()) << ".."
                << formatExpr(loop->getEnd());
    end(loop->getLoc());
    for (const StmtPtr &inner : loop->getBody())
      printStmt(*inner, depth + 1);
    return;
  }
  const auto &ret = llvm::cast<ReturnStmt>(stmt);
  line(depth) << "Return " << formatExpr(ret.getValue());
  end(ret.getLoc());
}

} // namespace

std::string modelast::formatExpr(const Expr &expr) {
  std::string out;
  formatInto(expr, 0, out);
  return out;
}

void modelast::printModelAST(const ModelFile &file,
                             const llvm::SourceMgr &sourceMgr,
                             llvm::raw_ostream &os) {
  Printer(sourceMgr, os).print(file);
}
