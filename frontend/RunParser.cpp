//===- RunParser.cpp - Parsing run files ----------------------------------===//

#include "frontend/RunParser.h"
#include "frontend/Frontend.h"

using namespace tetra;
using namespace tetra::frontend;

bool RunParser::parseFile(RunFileAST &file) {
  Token name;
  if (!parseHeader("run", name))
    return false;
  file.name = name.spelling.str();
  file.nameLoc = name.getLoc();
  while (!token.is(TokenKind::EndOfFile)) {
    if (token.is(TokenKind::Error)) {
      ok = false;
      consume();
      continue;
    }
    if (token.is(TokenKind::RBrace)) {
      error(token, "unmatched '}'");
      consume();
      continue;
    }
    RunSetting setting;
    Token start = token;
    if (parseSetting(setting))
      file.settings.push_back(std::move(setting));
    else
      skipToSetting(start);
  }
  return ok;
}

bool RunParser::parseOverride(RunOverride &override) {
  while (true) {
    if (!token.is(TokenKind::Identifier)) {
      error(token, "expected a setting name, got " + describeToken(token),
            "--set takes KEY=VALUE, e.g. --set seed=3 or --set "
            "optimizer.lr=3e-4");
      return false;
    }
    override.key.push_back({token.spelling.str(), token.getRange()});
    consume();
    if (!token.is(TokenKind::Dot))
      break;
    consume();
  }
  if (!token.is(TokenKind::Equal)) {
    error(token, "expected '=' after the setting's name, got " +
                     describeToken(token));
    return false;
  }
  consume();
  if (!parseExpr(override.value))
    return false;
  if (!token.is(TokenKind::EndOfFile)) {
    error(token, "expected the end of the value, got " + describeToken(token));
    return false;
  }
  return ok;
}

bool RunParser::parseSetting(RunSetting &setting) {
  if (!token.is(TokenKind::Identifier)) {
    error(token, "expected a setting name, got " + describeToken(token));
    return false;
  }
  setting.name = token.spelling.str();
  setting.nameRange = token.getRange();
  consume();
  if (token.is(TokenKind::Equal)) {
    consume();
    return parseExpr(setting.value);
  }
  if (!token.is(TokenKind::LBrace)) {
    error(token, "expected '=' or '{' after '" + setting.name + "', got " +
                     describeToken(token));
    return false;
  }
  setting.isBlock = true;
  llvm::SMLoc open = token.getLoc();
  consume();
  while (true) {
    BlockStep step = stepInBlock(open);
    if (step == BlockStep::Closed || step == BlockStep::Unclosed)
      return true;
    if (step == BlockStep::Skipped)
      continue;
    RunSetting child;
    Token start = token;
    if (parseSetting(child))
      setting.children.push_back(std::move(child));
    else
      skipToSetting(start);
  }
}

bool RunParser::parseExpr(RunExpr &expr) {
  Token start = token;
  // Nesting deeper than any run file needs: stop before the stack does.
  if (depth >= kMaxDepth) {
    error(token, "expression nested too deeply");
    return false;
  }
  struct DepthGuard {
    unsigned &depth;
    explicit DepthGuard(unsigned &depth) : depth(depth) { ++depth; }
    ~DepthGuard() { --depth; }
  } guard(depth);
  switch (token.kind) {
  case TokenKind::Minus: {
    consume();
    if (!token.is(TokenKind::Integer) && !token.is(TokenKind::Float)) {
      error(token, "expected a number after '-', got " + describeToken(token));
      return false;
    }
    if (!parseExpr(expr))
      return false;
    expr.integer = -expr.integer;
    expr.number = -expr.number;
    expr.text = "-" + expr.text;
    expr.range.Start = start.getLoc();
    return true;
  }
  case TokenKind::Integer:
    expr.kind = RunExpr::Kind::Integer;
    expr.integer = Lexer::integerValue(token);
    expr.number = static_cast<double>(expr.integer);
    expr.text = token.spelling.str();
    break;
  case TokenKind::Float:
    expr.kind = RunExpr::Kind::Float;
    expr.number = Lexer::floatValue(token);
    expr.text = token.spelling.str();
    break;
  case TokenKind::String:
    expr.kind = RunExpr::Kind::String;
    expr.text = Lexer::stringValue(token);
    break;
  case TokenKind::Identifier:
    expr.kind = RunExpr::Kind::Identifier;
    expr.text = token.spelling.str();
    consume();
    if (token.is(TokenKind::LParen) && !token.startsLine) {
      expr.kind = RunExpr::Kind::Call;
      consume();
      if (!parseSequence(TokenKind::RParen, expr, /*isCall=*/true))
        return false;
    }
    expr.range = {start.getLoc(), previousEnd};
    return true;
  case TokenKind::LParen:
    consume();
    expr.kind = RunExpr::Kind::Tuple;
    if (!parseSequence(TokenKind::RParen, expr, /*isCall=*/false))
      return false;
    // A parenthesized expression is the expression itself.
    if (expr.elements.size() == 1) {
      RunExpr inner = std::move(expr.elements.front());
      expr = std::move(inner);
    }
    expr.range = {start.getLoc(), previousEnd};
    return true;
  case TokenKind::LBracket:
    consume();
    expr.kind = RunExpr::Kind::List;
    if (!parseSequence(TokenKind::RBracket, expr, /*isCall=*/false))
      return false;
    expr.range = {start.getLoc(), previousEnd};
    return true;
  default:
    error(token, "expected a value (a number, a string, a name, a call, a "
                 "tuple or a list), got " +
                     describeToken(token));
    return false;
  }
  consume();
  expr.range = {start.getLoc(), previousEnd};
  return true;
}

/// The elements of a call, tuple or list up to `close` (consumed); a
/// trailing comma is allowed. Call arguments may be named.
bool RunParser::parseSequence(TokenKind close, RunExpr &expr, bool isCall) {
  while (!token.is(close)) {
    std::string name;
    llvm::SMLoc argumentLoc = token.getLoc();
    if (isCall && token.is(TokenKind::Identifier) &&
        lexer.peek().is(TokenKind::Equal)) {
      name = token.spelling.str();
      consume();
      consume();
    }
    RunExpr element;
    if (!parseExpr(element))
      return false;
    expr.elements.push_back(std::move(element));
    expr.argumentNames.push_back(name);
    expr.argumentLocs.push_back(argumentLoc);
    if (token.is(TokenKind::Comma)) {
      consume();
      continue;
    }
    if (!token.is(close)) {
      error(token, "expected ',' or " + describeTokenKind(close) + ", got " +
                       describeToken(token));
      return false;
    }
  }
  consume();
  return true;
}

bool tetra::frontend::parseRunBuffer(DiagnosticEngine &diags, llvm::StringRef path,
                    RunFileAST &file) {
  unsigned bufferId = loadSourceFile(diags.getSourceMgr(), diags, path);
  if (!bufferId)
    return false;
  RunParser parser(diags, bufferId);
  return parser.parseFile(file);
}
