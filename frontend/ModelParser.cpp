//===- ModelParser.cpp - Model files into their syntax tree ---------------===//
//
// A recursive-descent parser for the grammar of docs/language.md, "Model
// files". It recovers from an error by skipping to the next line, statement,
// item or closing brace, so that one run reports every syntax error of a
// file; a token the lexer already reported (TokenKind::Error) is skipped
// without a second message. Nesting is bounded so that no input can exhaust
// the stack.
//
//===----------------------------------------------------------------------===//

#include "frontend/ModelAST.h"

#include "frontend/Lexer.h"
#include "frontend/ParserBase.h"

using namespace tetra::frontend;
using namespace tetra::frontend::modelast;

llvm::StringRef modelast::spell(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return "+";
  case BinaryOp::Sub:
    return "-";
  case BinaryOp::Mul:
    return "*";
  case BinaryOp::Div:
    return "/";
  case BinaryOp::Rem:
    return "%";
  }
  return "?";
}

unsigned modelast::depthOf(const std::vector<CallArg> &args) {
  unsigned depth = 0;
  for (const CallArg &arg : args)
    depth = std::max(depth, arg.value->getDepth());
  return depth;
}

namespace {

/// The deepest an expression, or a nest of groups and loops, may be: far
/// beyond what a model needs, and small enough that no recursion over the
/// tree (the elaborator's, the destructors') can exhaust the stack.
constexpr unsigned kMaxNesting = 100;

class Parser : ParserBase {
public:
  Parser(DiagnosticEngine &diags, unsigned bufferId)
      : ParserBase(diags, bufferId) {}

  std::unique_ptr<ModelFile> parseFile();

private:
  //===--------------------------------------------------------------------===//
  // Tokens and errors
  //===--------------------------------------------------------------------===//

  using ParserBase::error;
  /// Reports `message` at the current token (ParserBase::error).
  void error(const llvm::Twine &message, const llvm::Twine &hint = {}) {
    error(token, message, hint);
  }
  /// Consumes a token of `kind`, or reports "expected <kind> <context>".
  bool expect(TokenKind kind, const llvm::Twine &context) {
    if (consumeIf(kind))
      return true;
    error("expected " + describeTokenKind(kind) + " " + context);
    return false;
  }
  /// Reports the end of the file inside a block opened at `open`.
  void errorUnclosed(llvm::SMLoc open, const llvm::Twine &what) {
    error("expected '}' to close " + what);
    diags.note(open, what + " opened here");
  }

  /// True when the current token starts a top-level item (`def NAME`,
  /// `config {`, `params {` at the start of a line): inside a block, the
  /// sign of a missing '}'.
  bool atItemStart() {
    if (!token.startsLine || !token.is(TokenKind::Identifier))
      return false;
    const Token &next = lexer.peek();
    if (token.spelling == "def")
      return next.is(TokenKind::Identifier);
    return (token.spelling == "config" || token.spelling == "params") &&
           next.is(TokenKind::LBrace);
  }

  /// Skips to the next line or the '}' that closes the current block
  /// (skipping nested brackets whole), consuming at least the token at
  /// `start` so that the caller progresses.
  void recover(llvm::SMLoc start);
  /// Skips to the next top-level item, past the one at `start`.
  void recoverToItem(llvm::SMLoc start);

  //===--------------------------------------------------------------------===//
  // Grammar
  //===--------------------------------------------------------------------===//

  bool parseItem(ModelFile &file);
  std::optional<ConfigBlock> parseConfig();
  std::optional<ParamsBlock> parseParams();
  bool parseParamItem(std::vector<ParamItem> &items, unsigned nesting);
  bool parseGroupBody(ParamItem &group, llvm::SMLoc open, unsigned nesting);
  std::optional<ShapeAST> parseShape(const llvm::Twine &context);
  std::optional<InitializerAST> parseInitializer();
  std::optional<FunctionDef> parseDef();
  std::optional<TypeAST> parseType(const llvm::Twine &context);
  bool parseBlock(std::vector<StmtPtr> &body, const std::string &what,
                  unsigned nesting);
  StmtPtr parseStatement(unsigned nesting);
  StmtPtr parseFor(unsigned nesting);

  ExprPtr parseExpr();
  ExprPtr parseAdditive();
  ExprPtr parseMultiplicative();
  ExprPtr parseUnary();
  ExprPtr parsePostfix();
  ExprPtr parsePrimary();
  bool parseCallArgs(std::vector<CallArg> &args);
  void errorTooDeep(llvm::SMLoc loc) {
    diags.error(loc, "expression too deep: more than " +
                         llvm::Twine(kMaxNesting) +
                         " levels of operators, calls and parentheses");
  }
  /// Returns `expr`, or null after an error when it nests too deeply.
  ExprPtr checkDepth(ExprPtr expr);

  /// Recursion depth of parseExpr / parseUnary.
  unsigned exprNesting = 0;
};

void Parser::recover(llvm::SMLoc start) {
  int depth = 0;
  while (!token.is(TokenKind::EndOfFile)) {
    if (depth == 0 && token.is(TokenKind::RBrace))
      return;
    if (depth == 0 && token.startsLine && token.getLoc() != start)
      return;
    if (token.is(TokenKind::LBrace) || token.is(TokenKind::LParen) ||
        token.is(TokenKind::LBracket))
      ++depth;
    else if (depth > 0 &&
             (token.is(TokenKind::RBrace) || token.is(TokenKind::RParen) ||
              token.is(TokenKind::RBracket)))
      --depth;
    consume();
  }
}

void Parser::recoverToItem(llvm::SMLoc start) {
  // Braces are not counted: an item keyword at the start of a line is a
  // safer place to resume than whatever an unbalanced '{' suggests.
  while (!token.is(TokenKind::EndOfFile) &&
         (token.getLoc() == start || !atItemStart()))
    consume();
}

//===----------------------------------------------------------------------===//
// Items
//===----------------------------------------------------------------------===//

std::unique_ptr<ModelFile> Parser::parseFile() {
  unsigned errorsBefore = diags.errorCount();
  auto file = std::make_unique<ModelFile>();
  Token name;
  if (!parseHeader("model", name, &file->loc))
    return nullptr;
  file->name = name.spelling.str();
  file->nameRange = name.getRange();
  while (!token.is(TokenKind::EndOfFile)) {
    llvm::SMLoc start = token.getLoc();
    if (!parseItem(*file))
      recoverToItem(start);
  }
  if (diags.errorCount() != errorsBefore)
    return nullptr;
  return file;
}

bool Parser::parseItem(ModelFile &file) {
  if (token.isIdentifier("config")) {
    std::optional<ConfigBlock> config = parseConfig();
    if (!config)
      return false;
    file.items.emplace_back(std::move(*config));
    return true;
  }
  if (token.isIdentifier("params")) {
    std::optional<ParamsBlock> params = parseParams();
    if (!params)
      return false;
    file.items.emplace_back(std::move(*params));
    return true;
  }
  if (token.isIdentifier("def")) {
    std::optional<FunctionDef> def = parseDef();
    if (!def)
      return false;
    file.items.emplace_back(std::move(*def));
    return true;
  }
  std::string hint;
  if (token.is(TokenKind::Identifier)) {
    std::string close = closestMatch(token.spelling, {"config", "params", "def"});
    if (!close.empty())
      hint = "did you mean '" + close + "'?";
  }
  error("expected 'config', 'params' or 'def' at the top level of a model",
        hint);
  return false;
}

std::optional<ConfigBlock> Parser::parseConfig() {
  ConfigBlock config;
  config.loc = token.getLoc();
  consume();
  llvm::SMLoc open = token.getLoc();
  if (!expect(TokenKind::LBrace, "after 'config'"))
    return std::nullopt;
  while (!token.is(TokenKind::RBrace)) {
    if (token.is(TokenKind::EndOfFile) || atItemStart()) {
      errorUnclosed(open, "the 'config' block");
      return config;
    }
    llvm::SMLoc start = token.getLoc();
    if (!token.is(TokenKind::Identifier)) {
      error("expected a constant (NAME = value) or '}' in the 'config' block");
      recover(start);
      continue;
    }
    ConstantDecl constant;
    constant.name = token.spelling.str();
    constant.nameRange = token.getRange();
    consume();
    if (!expect(TokenKind::Equal,
                "after constant name '" + constant.name + "'")) {
      recover(start);
      continue;
    }
    constant.value = parseExpr();
    if (!constant.value) {
      recover(start);
      continue;
    }
    config.constants.push_back(std::move(constant));
  }
  consume();
  return config;
}

std::optional<ParamsBlock> Parser::parseParams() {
  ParamsBlock params;
  params.loc = token.getLoc();
  consume();
  llvm::SMLoc open = token.getLoc();
  if (!expect(TokenKind::LBrace, "after 'params'"))
    return std::nullopt;
  while (!token.is(TokenKind::RBrace)) {
    if (token.is(TokenKind::EndOfFile) ||
        (token.isIdentifier("def") && atItemStart())) {
      errorUnclosed(open, "the 'params' block");
      return params;
    }
    llvm::SMLoc start = token.getLoc();
    if (!parseParamItem(params.items, 1))
      recover(start);
  }
  consume();
  return params;
}

bool Parser::parseParamItem(std::vector<ParamItem> &items, unsigned nesting) {
  if (!token.is(TokenKind::Identifier)) {
    error("expected a parameter (NAME: [shape]), a group (NAME { ... }) or "
          "'}'");
    return false;
  }
  ParamItem item;
  item.name = token.spelling.str();
  item.nameRange = token.getRange();
  consume();

  if (consumeIf(TokenKind::Colon)) {
    std::optional<ShapeAST> shape =
        parseShape("to start the shape of parameter '" + item.name + "'");
    if (!shape)
      return false;
    item.shape = std::move(*shape);
    if (consumeIf(TokenKind::Equal)) {
      item.init = parseInitializer();
      if (!item.init)
        return false;
    }
    items.push_back(std::move(item));
    return true;
  }

  item.kind = ParamItem::Kind::Group;
  if (token.is(TokenKind::LBracket)) {
    // `layers[n] { ... }` or a parameter missing its ':' (`wq [dim, dim]`).
    Token bracket = token;
    std::optional<ShapeAST> copies = parseShape("");
    if (!copies)
      return false;
    if (copies->dims.size() != 1 || !token.is(TokenKind::LBrace)) {
      error(bracket, "expected ':' after parameter name '" + item.name + "'");
      return false;
    }
    item.count = std::move(copies->dims.front());
  }
  if (!token.is(TokenKind::LBrace)) {
    error("expected ':' after parameter name '" + item.name + "'");
    return false;
  }
  if (nesting >= kMaxNesting) {
    error("parameter groups nested too deeply (more than " +
          llvm::Twine(kMaxNesting) +
          " levels of operators, calls and parentheses");
    return false;
  }
  llvm::SMLoc open = token.getLoc();
  consume();
  if (!parseGroupBody(item, open, nesting))
    return false;
  items.push_back(std::move(item));
  return true;
}

bool Parser::parseGroupBody(ParamItem &group, llvm::SMLoc open,
                            unsigned nesting) {
  while (!token.is(TokenKind::RBrace)) {
    if (token.is(TokenKind::EndOfFile) ||
        (token.isIdentifier("def") && atItemStart())) {
      errorUnclosed(open, "group '" + group.name + "'");
      return false;
    }
    llvm::SMLoc start = token.getLoc();
    if (!parseParamItem(group.members, nesting + 1))
      recover(start);
  }
  consume();
  return true;
}

std::optional<ShapeAST> Parser::parseShape(const llvm::Twine &context) {
  ShapeAST shape;
  llvm::SMLoc open = token.getLoc();
  if (!expect(TokenKind::LBracket, context))
    return std::nullopt;
  if (!token.is(TokenKind::RBracket)) {
    do {
      ExprPtr dim = parseExpr();
      if (!dim)
        return std::nullopt;
      shape.dims.push_back(std::move(dim));
    } while (consumeIf(TokenKind::Comma));
  }
  if (!token.is(TokenKind::RBracket)) {
    error("expected ',' or ']' in a shape");
    return std::nullopt;
  }
  consume();
  shape.range = {open, previousEnd};
  return shape;
}

std::optional<InitializerAST> Parser::parseInitializer() {
  if (!token.is(TokenKind::Identifier)) {
    error("expected an initializer after '=' (normal(std = ...), zeros or "
          "ones)");
    return std::nullopt;
  }
  InitializerAST init;
  init.name = token.spelling.str();
  init.nameRange = token.getRange();
  consume();
  if (token.is(TokenKind::LParen) && !token.startsLine) {
    init.hasParens = true;
    consume();
    if (!parseCallArgs(init.args))
      return std::nullopt;
  }
  return init;
}

//===----------------------------------------------------------------------===//
// Functions and statements
//===----------------------------------------------------------------------===//

std::optional<FunctionDef> Parser::parseDef() {
  FunctionDef def;
  def.defLoc = token.getLoc();
  consume();
  if (!token.is(TokenKind::Identifier)) {
    error("expected a function name after 'def'");
    return std::nullopt;
  }
  def.name = token.spelling.str();
  def.nameRange = token.getRange();
  consume();
  if (!expect(TokenKind::LParen, "after function name '" + def.name + "'"))
    return std::nullopt;
  if (!token.is(TokenKind::RParen)) {
    do {
      if (!token.is(TokenKind::Identifier)) {
        error("expected an argument name in the signature of '" + def.name +
              "'");
        return std::nullopt;
      }
      ArgumentDecl arg;
      arg.name = token.spelling.str();
      arg.nameRange = token.getRange();
      consume();
      if (!expect(TokenKind::Colon, "after argument name '" + arg.name + "'"))
        return std::nullopt;
      std::optional<TypeAST> type =
          parseType("for argument '" + arg.name + "'");
      if (!type)
        return std::nullopt;
      arg.type = std::move(*type);
      def.args.push_back(std::move(arg));
    } while (consumeIf(TokenKind::Comma));
  }
  if (!expect(TokenKind::RParen, "after the arguments of '" + def.name + "'"))
    return std::nullopt;
  if (consumeIf(TokenKind::Arrow)) {
    def.returnType = parseType("after '->'");
    if (!def.returnType)
      return std::nullopt;
  }
  if (!parseBlock(def.body, "the body of '" + def.name + "'", 1))
    return std::nullopt;
  def.closeLoc = llvm::SMLoc::getFromPointer(previousEnd.getPointer() - 1);
  return def;
}

std::optional<TypeAST> Parser::parseType(const llvm::Twine &context) {
  TypeAST type;
  type.loc = token.getLoc();
  if (token.isIdentifier("f32"))
    type.element = ElementType::F32;
  else if (token.isIdentifier("bf16"))
    type.element = ElementType::BF16;
  else if (token.isIdentifier("i32"))
    type.element = ElementType::I32;
  else {
    std::string hint;
    if (token.is(TokenKind::Identifier)) {
      std::string close = closestMatch(token.spelling, {"f32", "bf16", "i32"});
      if (!close.empty())
        hint = "did you mean '" + close + "'?";
    }
    error("expected a type (f32, bf16 or i32 followed by a shape) " + context,
          hint);
    return std::nullopt;
  }
  consume();
  std::optional<ShapeAST> shape = parseShape("after the element type");
  if (!shape)
    return std::nullopt;
  type.shape = std::move(*shape);
  return type;
}

bool Parser::parseBlock(std::vector<StmtPtr> &body, const std::string &what,
                        unsigned nesting) {
  llvm::SMLoc open = token.getLoc();
  if (!expect(TokenKind::LBrace, "to start " + what))
    return false;
  while (!token.is(TokenKind::RBrace)) {
    if (token.is(TokenKind::EndOfFile) || atItemStart()) {
      errorUnclosed(open, what);
      return false;
    }
    llvm::SMLoc start = token.getLoc();
    StmtPtr stmt = parseStatement(nesting);
    if (!stmt) {
      recover(start);
      continue;
    }
    body.push_back(std::move(stmt));
  }
  consume();
  return true;
}

StmtPtr Parser::parseStatement(unsigned nesting) {
  if (!token.is(TokenKind::Identifier)) {
    error("expected a statement (NAME = value, 'for' or 'return')");
    return nullptr;
  }
  const Token &next = lexer.peek();
  if (next.is(TokenKind::Equal)) {
    Token name = token;
    consume();
    consume();
    ExprPtr value = parseExpr();
    if (!value)
      return nullptr;
    return std::make_unique<AssignStmt>(name.spelling, name.getRange(),
                                        std::move(value));
  }
  if (token.isIdentifier("for") && next.is(TokenKind::Identifier))
    return parseFor(nesting);
  if (token.isIdentifier("return")) {
    llvm::SMLoc loc = token.getLoc();
    consume();
    ExprPtr value = parseExpr();
    if (!value)
      return nullptr;
    return std::make_unique<ReturnStmt>(loc, std::move(value));
  }
  Token name = token;
  consume();
  error("expected '=' after '" + name.spelling + "'");
  return nullptr;
}

StmtPtr Parser::parseFor(unsigned nesting) {
  llvm::SMLoc forLoc = token.getLoc();
  consume();
  Token var = token;
  consume();
  if (!token.isIdentifier("in")) {
    error("expected 'in' after loop variable '" + var.spelling + "'");
    return nullptr;
  }
  consume();
  ExprPtr begin = parseExpr();
  if (!begin)
    return nullptr;
  if (!expect(TokenKind::DotDot, "in the range of a 'for' loop (a..b)"))
    return nullptr;
  ExprPtr end = parseExpr();
  if (!end)
    return nullptr;
  if (nesting >= kMaxNesting) {
    error("'for' loops nested too deeply (more than " +
          llvm::Twine(kMaxNesting) +
          " levels of operators, calls and parentheses");
    return nullptr;
  }
  std::vector<StmtPtr> body;
  if (!parseBlock(body, "the body of the 'for' loop", nesting + 1))
    return nullptr;
  return std::make_unique<ForStmt>(forLoc, var.spelling, var.getRange(),
                                   std::move(begin), std::move(end),
                                   std::move(body));
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

ExprPtr Parser::checkDepth(ExprPtr expr) {
  if (expr && expr->getDepth() > kMaxNesting) {
    errorTooDeep(expr->getLoc());
    return nullptr;
  }
  return expr;
}

ExprPtr Parser::parseExpr() {
  if (exprNesting >= kMaxNesting) {
    errorTooDeep(token.getLoc());
    return nullptr;
  }
  ++exprNesting;
  ExprPtr expr = parseAdditive();
  --exprNesting;
  return expr;
}

ExprPtr Parser::parseAdditive() {
  ExprPtr lhs = parseMultiplicative();
  while (lhs && (token.is(TokenKind::Plus) || token.is(TokenKind::Minus))) {
    BinaryOp op = token.is(TokenKind::Plus) ? BinaryOp::Add : BinaryOp::Sub;
    llvm::SMLoc opLoc = token.getLoc();
    consume();
    ExprPtr rhs = parseMultiplicative();
    if (!rhs)
      return nullptr;
    lhs = checkDepth(std::make_unique<BinaryExpr>(op, opLoc, std::move(lhs),
                                                  std::move(rhs)));
  }
  return lhs;
}

ExprPtr Parser::parseMultiplicative() {
  ExprPtr lhs = parseUnary();
  while (lhs && (token.is(TokenKind::Star) || token.is(TokenKind::Slash) ||
                 token.is(TokenKind::Percent))) {
    BinaryOp op = token.is(TokenKind::Star)    ? BinaryOp::Mul
                  : token.is(TokenKind::Slash) ? BinaryOp::Div
                                             : BinaryOp::Rem;
    llvm::SMLoc opLoc = token.getLoc();
    consume();
    ExprPtr rhs = parseUnary();
    if (!rhs)
      return nullptr;
    lhs = checkDepth(std::make_unique<BinaryExpr>(op, opLoc, std::move(lhs),
                                                  std::move(rhs)));
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  if (!token.is(TokenKind::Minus))
    return parsePostfix();
  if (exprNesting >= kMaxNesting) {
    errorTooDeep(token.getLoc());
    return nullptr;
  }
  llvm::SMLoc minus = token.getLoc();
  consume();
  ++exprNesting;
  ExprPtr operand = parseUnary();
  --exprNesting;
  if (!operand)
    return nullptr;
  return checkDepth(std::make_unique<NegateExpr>(minus, std::move(operand)));
}

ExprPtr Parser::parsePostfix() {
  ExprPtr expr = parsePrimary();
  while (expr) {
    // A call's '(' and an index's '[' must be on the callee's line.
    if (token.is(TokenKind::LParen) && !token.startsLine) {
      consume();
      std::vector<CallArg> args;
      if (!parseCallArgs(args))
        return nullptr;
      expr = checkDepth(std::make_unique<CallExpr>(
          std::move(expr), std::move(args), previousEnd));
    } else if (token.is(TokenKind::LBracket) && !token.startsLine) {
      consume();
      ExprPtr index = parseExpr();
      if (!index)
        return nullptr;
      if (!expect(TokenKind::RBracket, "after the index"))
        return nullptr;
      expr = checkDepth(std::make_unique<IndexExpr>(
          std::move(expr), std::move(index), previousEnd));
    } else if (token.is(TokenKind::Dot)) {
      consume();
      if (!token.is(TokenKind::Identifier)) {
        error("expected a member name after '.'");
        return nullptr;
      }
      Token member = token;
      consume();
      expr = checkDepth(std::make_unique<MemberExpr>(
          std::move(expr), member.spelling, member.getRange()));
    } else {
      break;
    }
  }
  return expr;
}

ExprPtr Parser::parsePrimary() {
  Token literal = token;
  switch (token.kind) {
  case TokenKind::Integer:
    consume();
    return std::make_unique<IntegerExpr>(Lexer::integerValue(literal),
                                         literal.getRange());
  case TokenKind::Float:
    consume();
    return std::make_unique<FloatExpr>(Lexer::floatValue(literal), literal.spelling,
                                       literal.getRange());
  case TokenKind::String:
    consume();
    return std::make_unique<StringExpr>(Lexer::stringValue(literal),
                                        literal.spelling, literal.getRange());
  case TokenKind::Identifier:
    consume();
    return std::make_unique<NameExpr>(literal.spelling, literal.getRange());
  case TokenKind::LParen: {
    consume();
    ExprPtr inner = parseExpr();
    if (!inner)
      return nullptr;
    if (!token.is(TokenKind::RParen)) {
      error("expected ')' to close the '(' here");
      diags.note(literal.getLoc(), "'(' opened here");
      return nullptr;
    }
    consume();
    return inner;
  }
  default:
    error("expected an expression");
    return nullptr;
  }
}

bool Parser::parseCallArgs(std::vector<CallArg> &args) {
  if (consumeIf(TokenKind::RParen))
    return true;
  do {
    CallArg arg;
    if (token.is(TokenKind::Identifier) && lexer.peek().is(TokenKind::Equal)) {
      arg.name = token.spelling.str();
      arg.nameLoc = token.getLoc();
      consume();
      consume();
    }
    arg.value = parseExpr();
    if (!arg.value)
      return false;
    args.push_back(std::move(arg));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RParen, "after the arguments of a call");
}

} // namespace

std::unique_ptr<ModelFile> modelast::parseModelFile(DiagnosticEngine &diags,
                                                    unsigned bufferId) {
  return Parser(diags, bufferId).parseFile();
}
