//===- RunFile.cpp - Parsing and checking run files -----------------------===//
//
// A run file (docs/language.md, "Run files") is a tree of settings whose
// values are small expressions: numbers, strings, identifiers, calls with
// named arguments (`adamw(lr = 3e-4, betas = (0.9, 0.95))`), tuples and
// lists. The parser builds that tree with no knowledge of the settings; the
// checker then walks it against the table of known settings — names, types,
// ranges, required settings, duplicates — and fills a RunConfig, resolving
// paths relative to the run file. The model and policy files (and the
// tokenizer) must exist; data globs are only resolved, never expanded.
//
//===----------------------------------------------------------------------===//

#include "frontend/Frontend.h"
#include "frontend/Lexer.h"
#include "frontend/PolicyGlob.h"
#include "frontend/Run.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>
#include <functional>

using namespace tetra;
using namespace tetra::frontend;

namespace {

//===----------------------------------------------------------------------===//
// Syntax tree
//===----------------------------------------------------------------------===//

struct RunExpr {
  enum class Kind { Integer, Float, String, Identifier, Call, Tuple, List };
  Kind kind = Kind::Integer;
  llvm::SMRange range;
  int64_t integer = 0;
  double number = 0; ///< Float (and Integer, converted).
  std::string text;  ///< String value, identifier, callee; a number as written.
  std::vector<RunExpr> elements; ///< Call arguments, tuple/list elements.
  std::vector<std::string> argumentNames; ///< Call: "" when positional.
  std::vector<llvm::SMLoc> argumentLocs;  ///< Call: each argument's start.

  llvm::SMLoc getLoc() const { return range.Start; }
  bool isNumber() const { return kind == Kind::Integer || kind == Kind::Float; }

  /// The expression in source syntax.
  std::string print() const;
  /// "a string", "an identifier", ... for "got X" messages.
  std::string describe() const;
};

std::string formatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

std::string RunExpr::print() const {
  auto join = [&](llvm::StringRef open, llvm::StringRef close) {
    std::string text = open.str();
    for (size_t i = 0; i < elements.size(); ++i) {
      if (i)
        text += ", ";
      if (kind == Kind::Call && !argumentNames[i].empty())
        text += argumentNames[i] + " = ";
      text += elements[i].print();
    }
    return text + close.str();
  };
  switch (kind) {
  case Kind::Integer:
  case Kind::Float:
    return text; // As written: 3e-4, 128_256.
  case Kind::String: {
    std::string escaped;
    for (char c : text) {
      if (c == '"' || c == '\\')
        escaped += '\\';
      escaped += c;
    }
    return "\"" + escaped + "\"";
  }
  case Kind::Identifier:
    return text;
  case Kind::Call:
    return text + join("(", ")");
  case Kind::Tuple:
    return join("(", ")");
  case Kind::List:
    return join("[", "]");
  }
  return "";
}

std::string RunExpr::describe() const {
  switch (kind) {
  case Kind::Integer:
    return "the integer " + text;
  case Kind::Float:
    return "the number " + text;
  case Kind::String:
    return "a string";
  case Kind::Identifier:
    return "'" + text + "'";
  case Kind::Call:
    return "a call of '" + text + "'";
  case Kind::Tuple:
    return "a tuple";
  case Kind::List:
    return "a list";
  }
  return "";
}

struct RunSetting {
  std::string name;
  llvm::SMRange nameRange;
  bool isBlock = false;
  RunExpr value;                    ///< When !isBlock.
  std::vector<RunSetting> children; ///< When isBlock.

  llvm::SMLoc getLoc() const { return nameRange.Start; }
};

struct RunFileAST {
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<RunSetting> settings;
};

/// A command line's `--set KEY=VALUE`: the setting (or a block's setting,
/// or a call's named argument) it replaces, and the new value.
struct RunOverride {
  std::vector<std::pair<std::string, llvm::SMRange>> key;
  RunExpr value;
};

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

class RunParser {
public:
  RunParser(DiagnosticEngine &diags, unsigned bufferId)
      : diags(diags), lexer(diags, bufferId) {
    token = lexer.next();
  }

  bool parseFile(RunFileAST &file);
  /// `KEY=VALUE` (KEY: NAME or NAME.NAME) up to the end of the buffer.
  bool parseOverride(RunOverride &override);

private:
  void consume() {
    previousEnd = token.getRange().End;
    token = lexer.next();
  }
  void error(const Token &at, const llvm::Twine &message,
             const llvm::Twine &hint = {}) {
    ok = false;
    if (!at.is(TokenKind::Error))
      diags.error(at.getLoc(), message, at.getRange(), hint);
  }

  bool parseSetting(RunSetting &setting);
  bool parseExpr(RunExpr &expr);
  bool parseSequence(TokenKind close, RunExpr &expr, bool isCall);
  void skipToSetting(const Token &start);

  DiagnosticEngine &diags;
  Lexer lexer;
  Token token;
  llvm::SMLoc previousEnd;
  bool ok = true;
  static constexpr unsigned kMaxDepth = 64;
  unsigned depth = 0;
};

bool RunParser::parseFile(RunFileAST &file) {
  while (token.is(TokenKind::Error))
    consume(), ok = false;
  if (!token.isIdentifier("run")) {
    if (token.isIdentifier("model") || token.isIdentifier("policy"))
      error(token, "this is a " + token.spelling + " file, not a run",
            "a run file starts with 'run NAME'");
    else
      error(token, "expected 'run' at the start of a run file, got " +
                       describeToken(token));
    return false;
  }
  consume();
  if (!token.is(TokenKind::Identifier)) {
    error(token,
          "expected the run's name after 'run', got " + describeToken(token));
    return false;
  }
  file.name = token.spelling.str();
  file.nameLoc = token.getLoc();
  consume();
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

void RunParser::skipToSetting(const Token &start) {
  if (token.spelling.data() == start.spelling.data() &&
      !token.is(TokenKind::EndOfFile) && !token.is(TokenKind::RBrace))
    consume();
  while (!token.is(TokenKind::EndOfFile) && !token.is(TokenKind::RBrace) &&
         !(token.is(TokenKind::Identifier) && token.startsLine))
    consume();
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
    if (token.is(TokenKind::RBrace)) {
      consume();
      return true;
    }
    if (token.is(TokenKind::EndOfFile)) {
      error(token, "expected '}' at end of file");
      diags.note(open, "to close this '{'");
      return true;
    }
    if (token.is(TokenKind::Error)) {
      ok = false;
      consume();
      continue;
    }
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

//===----------------------------------------------------------------------===//
// Checker
//===----------------------------------------------------------------------===//

/// Where the settings that are not top-level keys live, for hints.
const std::pair<const char *, const char *> kArgumentHomes[] = {
    {"lr", "optimizer = adamw(lr = 3e-4)"},
    {"betas", "optimizer = adamw(betas = (0.9, 0.95))"},
    {"eps", "optimizer = adamw(eps = 1e-8)"},
    {"weight_decay", "optimizer = adamw(weight_decay = 0.1)"},
    {"warmup", "schedule = cosine(warmup = 100, min_lr = 3e-5)"},
    {"min_lr", "schedule = cosine(warmup = 100, min_lr = 3e-5)"},
    {"train", "data { train = \"...\" }"},
    {"tokenizer", "data { tokenizer = bytes }"},
    {"interval", "eval { interval = ... } or checkpoint { interval = ... }"},
    {"batches", "eval { batches = ... }"},
    {"dir", "checkpoint { dir = \"...\" }"},
    {"batch_size", "micro_batch = ... (sequences per step, before "
                   "accumulation)"},
};

class RunChecker {
public:
  RunChecker(DiagnosticEngine &diags, const RunFileAST &file,
             llvm::StringRef path)
      : diags(diags), file(file) {
    config.name = file.name;
    config.path = path.str();
    directory = llvm::sys::path::parent_path(path).str();
  }

  std::optional<RunConfig> check();

private:
  using Handler = std::function<void(const RunSetting &)>;
  struct Key {
    const char *name;
    bool isBlock;
    Handler handler;
  };

  void checkScope(llvm::StringRef scope, const std::vector<RunSetting> &items,
                  const std::vector<Key> &keys);

  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::SMRange range = {}, const llvm::Twine &hint = {}) {
    diags.error(loc, message, range, hint);
  }
  void error(const RunExpr &expr, const llvm::Twine &message,
             const llvm::Twine &hint = {}) {
    diags.error(expr.getLoc(), message, expr.range, hint);
  }

  std::optional<std::string> getString(const RunExpr &expr,
                                       llvm::StringRef what);
  std::optional<int64_t> getInteger(const RunExpr &expr, llvm::StringRef what,
                                    int64_t minimum);
  std::optional<double> getNumber(const RunExpr &expr, llvm::StringRef what);
  std::string resolvePath(llvm::StringRef path) const;
  void checkFile(const RunExpr &expr, llvm::StringRef what,
                 std::string &target);

  /// Named arguments of a call against `known`: each (name, expr) found is
  /// handed to `onArgument`; unknown or positional ones are reported.
  void checkArguments(
      const RunExpr &call, const std::vector<std::string> &known,
      const std::function<void(llvm::StringRef, const RunExpr &)> &onArgument);

  void checkData(const RunSetting &setting);
  void checkGlobs(const RunExpr &expr, std::vector<std::string> &globs,
                  std::vector<llvm::SMLoc> &locs, llvm::StringRef what);
  void checkTokenizer(const RunExpr &expr);
  void checkOptimizer(const RunExpr &expr);
  void checkSchedule(const RunExpr &expr);

  DiagnosticEngine &diags;
  const RunFileAST &file;
  RunConfig config;
  std::string directory;

  // What was given, for required settings and cross-checks.
  llvm::StringMap<llvm::SMLoc> given;
  const RunSetting *dataBlock = nullptr;
  const RunSetting *evalBlock = nullptr;
  const RunSetting *checkpointBlock = nullptr;
  const RunExpr *warmupExpr = nullptr, *minLrExpr = nullptr;
  const RunExpr *lrExpr = nullptr;
};

std::optional<std::string> RunChecker::getString(const RunExpr &expr,
                                                 llvm::StringRef what) {
  if (expr.kind != RunExpr::Kind::String) {
    error(expr, what + " must be a string, got " + expr.describe());
    return std::nullopt;
  }
  return expr.text;
}

std::optional<int64_t> RunChecker::getInteger(const RunExpr &expr,
                                              llvm::StringRef what,
                                              int64_t minimum) {
  int64_t value = 0;
  if (expr.kind == RunExpr::Kind::Integer) {
    value = expr.integer;
  } else if (expr.kind == RunExpr::Kind::Float && std::isfinite(expr.number) &&
             expr.number == std::floor(expr.number) &&
             std::fabs(expr.number) < 9.0e18) {
    value = static_cast<int64_t>(expr.number); // 2.5e9 tokens
  } else {
    error(expr, what + " must be an integer, got " + expr.describe());
    return std::nullopt;
  }
  if (value < minimum) {
    error(expr, what + " must be " +
                    (minimum == 1 ? std::string("positive")
                                  : ">= " + std::to_string(minimum)) +
                    ", got " + std::to_string(value));
    return std::nullopt;
  }
  return value;
}

std::optional<double> RunChecker::getNumber(const RunExpr &expr,
                                            llvm::StringRef what) {
  if (!expr.isNumber()) {
    error(expr, what + " must be a number, got " + expr.describe());
    return std::nullopt;
  }
  return expr.number;
}

std::string RunChecker::resolvePath(llvm::StringRef path) const {
  if (llvm::sys::path::is_absolute(path))
    return path.str();
  llvm::SmallString<256> resolved(directory);
  llvm::sys::path::append(resolved, path);
  llvm::sys::path::remove_dots(resolved, /*remove_dot_dot=*/true);
  return resolved.str().str();
}

void RunChecker::checkFile(const RunExpr &expr, llvm::StringRef what,
                           std::string &target) {
  std::optional<std::string> path = getString(expr, what);
  if (!path)
    return;
  target = resolvePath(*path);
  if (!llvm::sys::fs::exists(target))
    error(expr,
          "the " + what + " file '" + *path + "' does not exist (looked for '" +
              target + "')",
          "paths are relative to the run file");
  else if (llvm::sys::fs::is_directory(target))
    error(expr, "the " + what + " file '" + *path + "' is a folder");
}

void RunChecker::checkScope(llvm::StringRef scope,
                            const std::vector<RunSetting> &items,
                            const std::vector<Key> &keys) {
  std::vector<std::string> names;
  for (const Key &key : keys)
    names.push_back(key.name);
  llvm::StringMap<llvm::SMLoc> seen;
  for (const RunSetting &item : items) {
    std::string qualified =
        scope.empty() ? item.name : (scope + "." + item.name).str();
    auto key =
        llvm::find_if(keys, [&](const Key &k) { return item.name == k.name; });
    if (key == keys.end()) {
      std::string message = "unknown setting '" + qualified + "'";
      std::string best = closestMatch(item.name, names);
      std::string hint;
      if (!best.empty()) {
        message += "; did you mean '" + best + "'?";
        // Not also "missing required setting" for the one it stands for.
        given.try_emplace(scope.empty() ? best : (scope + "." + best).str(),
                          item.getLoc());
      } else {
        for (auto [name, home] : kArgumentHomes)
          if (item.name == name)
            hint = std::string("'") + name + "' belongs elsewhere: " + home;
        if (hint.empty())
          hint = "settings" +
                 (scope.empty() ? std::string() : " of " + scope.str()) + ": " +
                 llvm::join(names, ", ");
      }
      error(item.getLoc(), message, item.nameRange, hint);
      continue;
    }
    auto [previous, inserted] = seen.try_emplace(item.name, item.getLoc());
    if (!inserted) {
      error(item.getLoc(), "'" + qualified + "' is set twice", item.nameRange);
      diags.note(previous->second, "first set here");
      continue;
    }
    given[qualified] = item.getLoc();
    if (item.isBlock != key->isBlock) {
      if (key->isBlock)
        error(item.getLoc(),
              "'" + qualified + "' is a block: write " + qualified + " { ... }",
              item.nameRange);
      else
        error(item.getLoc(),
              "'" + qualified + "' takes a value: write " + qualified +
                  " = ...",
              item.nameRange);
      continue;
    }
    key->handler(item);
  }
}

void RunChecker::checkArguments(
    const RunExpr &call, const std::vector<std::string> &known,
    const std::function<void(llvm::StringRef, const RunExpr &)> &onArgument) {
  llvm::StringMap<llvm::SMLoc> seen;
  for (size_t i = 0; i < call.elements.size(); ++i) {
    const std::string &name = call.argumentNames[i];
    const RunExpr &value = call.elements[i];
    if (name.empty()) {
      error(value, "the arguments of " + call.text +
                       " are named: " + call.text + "(" +
                       (known.empty() ? "" : known.front() + " = ...") + ")");
      continue;
    }
    if (!llvm::is_contained(known, name)) {
      std::string best = closestMatch(name, known);
      error(
          call.argumentLocs[i],
          "unknown argument '" + name + "' of " + call.text +
              (best.empty() ? std::string() : "; did you mean '" + best + "'?"),
          {},
          known.empty() ? call.text + " takes no arguments"
                        : "arguments: " + llvm::join(known, ", "));
      continue;
    }
    auto [previous, inserted] = seen.try_emplace(name, call.argumentLocs[i]);
    if (!inserted) {
      error(call.argumentLocs[i], "argument '" + name + "' is given twice");
      diags.note(previous->second, "first given here");
      continue;
    }
    onArgument(name, value);
  }
}

void RunChecker::checkGlobs(const RunExpr &expr,
                            std::vector<std::string> &globs,
                            std::vector<llvm::SMLoc> &locs,
                            llvm::StringRef what) {
  if (expr.kind == RunExpr::Kind::String) {
    globs.push_back(resolvePath(expr.text));
    locs.push_back(expr.getLoc());
    return;
  }
  if (expr.kind == RunExpr::Kind::List) {
    if (expr.elements.empty())
      error(expr, what + " is an empty list");
    for (const RunExpr &element : expr.elements)
      if (std::optional<std::string> glob =
              getString(element, ("each path of " + what).str())) {
        globs.push_back(resolvePath(*glob));
        locs.push_back(element.getLoc());
      }
    return;
  }
  error(expr, what +
                  " must be a path (a string, globs allowed) or a list of "
                  "them, got " +
                  expr.describe());
}

void RunChecker::checkTokenizer(const RunExpr &expr) {
  static const std::vector<std::string> kinds = {"bytes", "gpt2", "llama3"};
  config.tokenizerLoc = expr.getLoc();
  if (expr.kind != RunExpr::Kind::Identifier &&
      expr.kind != RunExpr::Kind::Call) {
    error(expr, "data.tokenizer must be bytes, gpt2(\"dir\") or "
                "llama3(\"tokenizer.model\"), got " +
                    expr.describe());
    return;
  }
  if (!llvm::is_contained(kinds, expr.text)) {
    std::string best = closestMatch(expr.text, kinds);
    error(expr,
          "unknown tokenizer '" + expr.text + "'" +
              (best.empty() ? std::string() : "; did you mean '" + best + "'?"),
          "tokenizers: bytes, gpt2(\"dir\") (encoder.json + vocab.bpe), "
          "llama3(\"tokenizer.model\")");
    return;
  }
  if (expr.text == "bytes") {
    config.tokenizer.kind = TokenizerConfig::Kind::Bytes;
    if (expr.kind == RunExpr::Kind::Call && !expr.elements.empty())
      error(expr, "the bytes tokenizer takes no arguments");
    return;
  }
  bool gpt2 = expr.text == "gpt2";
  config.tokenizer.kind =
      gpt2 ? TokenizerConfig::Kind::GPT2 : TokenizerConfig::Kind::Llama3;
  std::string example = gpt2 ? "gpt2(\"../../data/tokenizers/gpt2\")"
                             : "llama3(\"../../data/tokenizers/llama3/"
                               "tokenizer.model\")";
  if (expr.kind != RunExpr::Kind::Call || expr.elements.size() != 1 ||
      !expr.argumentNames.front().empty()) {
    error(expr,
          "the " + expr.text + " tokenizer takes one argument, the path of " +
              (gpt2 ? "its folder" : "its tokenizer.model"),
          "e.g. " + example);
    return;
  }
  std::optional<std::string> path =
      getString(expr.elements.front(), "the tokenizer path");
  if (!path)
    return;
  config.tokenizer.path = resolvePath(*path);
  const RunExpr &pathExpr = expr.elements.front();
  if (gpt2) {
    if (!llvm::sys::fs::is_directory(config.tokenizer.path)) {
      error(pathExpr, "the gpt2 tokenizer folder '" + *path +
                          "' does not exist (looked for '" +
                          config.tokenizer.path + "')");
      return;
    }
    for (const char *name : {"encoder.json", "vocab.bpe"}) {
      llvm::SmallString<256> file(config.tokenizer.path);
      llvm::sys::path::append(file, name);
      if (!llvm::sys::fs::exists(file))
        error(pathExpr,
              "the gpt2 tokenizer folder '" + *path + "' has no " + name);
    }
  } else if (!llvm::sys::fs::exists(config.tokenizer.path) ||
             llvm::sys::fs::is_directory(config.tokenizer.path)) {
    error(pathExpr, "the llama3 tokenizer file '" + *path +
                        "' does not exist (looked for '" +
                        config.tokenizer.path + "')");
  }
}

void RunChecker::checkOptimizer(const RunExpr &expr) {
  if (expr.kind != RunExpr::Kind::Call &&
      expr.kind != RunExpr::Kind::Identifier) {
    error(expr, "optimizer must be adamw(...), got " + expr.describe());
    return;
  }
  if (expr.text != "adamw") {
    std::string best = closestMatch(expr.text, {"adamw"});
    error(expr,
          "unknown optimizer '" + expr.text + "'" +
              (best.empty() ? std::string() : "; did you mean 'adamw'?"),
          "the optimizer is adamw(lr = ..., betas = (b1, b2), eps = ..., "
          "weight_decay = ...)");
    return;
  }
  checkArguments(
      expr, {"lr", "betas", "eps", "weight_decay"},
      [&](llvm::StringRef name, const RunExpr &value) {
        if (name == "lr") {
          lrExpr = &value;
          if (std::optional<double> lr = getNumber(value, "lr")) {
            if (!(*lr > 0))
              error(value, "lr must be positive, got " + value.print());
            else
              config.lr = *lr;
          }
        } else if (name == "betas") {
          if (value.kind != RunExpr::Kind::Tuple ||
              value.elements.size() != 2) {
            error(value, "betas must be a pair (beta1, beta2), got " +
                             value.describe());
            return;
          }
          double *targets[2] = {&config.beta1, &config.beta2};
          for (int i = 0; i < 2; ++i) {
            std::string what = i == 0 ? "beta1" : "beta2";
            const RunExpr &element = value.elements[i];
            std::optional<double> beta = getNumber(element, what);
            if (!beta)
              continue;
            if (!(*beta >= 0 && *beta < 1))
              error(element,
                    what + " must be in [0, 1), got " + element.print());
            else
              *targets[i] = *beta;
          }
        } else if (name == "eps") {
          if (std::optional<double> eps = getNumber(value, "eps")) {
            if (!(*eps > 0))
              error(value, "eps must be positive, got " + value.print());
            else
              config.eps = *eps;
          }
        } else if (std::optional<double> decay =
                       getNumber(value, "weight_decay")) {
          if (!(*decay >= 0))
            error(value, "weight_decay must be >= 0, got " + value.print());
          else
            config.weightDecay = *decay;
        }
      });
}

void RunChecker::checkSchedule(const RunExpr &expr) {
  static const std::vector<std::string> kinds = {"cosine", "linear",
                                                 "constant"};
  if (expr.kind != RunExpr::Kind::Call &&
      expr.kind != RunExpr::Kind::Identifier) {
    error(expr, "schedule must be cosine(...), linear(...) or constant(...), "
                "got " +
                    expr.describe());
    return;
  }
  if (!llvm::is_contained(kinds, expr.text)) {
    std::string best = closestMatch(expr.text, kinds);
    error(expr,
          "unknown schedule '" + expr.text + "'" +
              (best.empty() ? std::string() : "; did you mean '" + best + "'?"),
          "schedules: cosine(warmup = N, min_lr = x), linear(warmup = N, "
          "min_lr = x), constant(warmup = N)");
    return;
  }
  config.schedule.kind = expr.text == "cosine" ? ScheduleConfig::Kind::Cosine
                         : expr.text == "linear"
                             ? ScheduleConfig::Kind::Linear
                             : ScheduleConfig::Kind::Constant;
  std::vector<std::string> known = {"warmup"};
  if (config.schedule.kind != ScheduleConfig::Kind::Constant)
    known.push_back("min_lr");
  checkArguments(expr, known, [&](llvm::StringRef name, const RunExpr &value) {
    if (name == "warmup") {
      if (std::optional<int64_t> warmup = getInteger(value, "warmup", 0)) {
        config.schedule.warmup = *warmup;
        warmupExpr = &value;
      }
      return;
    }
    if (std::optional<double> minLr = getNumber(value, "min_lr")) {
      if (!(*minLr >= 0)) {
        error(value, "min_lr must be >= 0, got " + value.print());
        return;
      }
      config.schedule.minLr = *minLr;
      minLrExpr = &value;
    }
  });
}

void RunChecker::checkData(const RunSetting &setting) {
  dataBlock = &setting;
  checkScope("data", setting.children,
             {{"train", false,
               [&](const RunSetting &s) {
                 checkGlobs(s.value, config.trainData, config.trainDataLocs,
                            "data.train");
               }},
              {"eval", false,
               [&](const RunSetting &s) {
                 checkGlobs(s.value, config.evalData, config.evalDataLocs,
                            "data.eval");
               }},
              {"tokenizer", false,
               [&](const RunSetting &s) { checkTokenizer(s.value); }}});
}

std::optional<RunConfig> RunChecker::check() {
  unsigned errorsBefore = diags.errorCount();
  auto integer = [&](llvm::StringRef what, int64_t minimum, int64_t &target) {
    return [this, what, minimum, &target](const RunSetting &s) {
      if (std::optional<int64_t> value = getInteger(s.value, what, minimum))
        target = *value;
    };
  };
  int64_t seed = 0;
  std::vector<Key> keys = {
      {"model", false,
       [&](const RunSetting &s) {
         checkFile(s.value, "model", config.modelPath);
       }},
      {"policy", false,
       [&](const RunSetting &s) {
         checkFile(s.value, "policy", config.policyPath);
       }},
      {"data", true, [&](const RunSetting &s) { checkData(s); }},
      {"seq_len", false, integer("seq_len", 1, config.seqLen)},
      {"micro_batch", false, integer("micro_batch", 1, config.microBatch)},
      {"accumulation", false, integer("accumulation", 1, config.accumulation)},
      {"steps", false, integer("steps", 1, config.steps)},
      {"tokens", false, integer("tokens", 1, config.tokens)},
      {"optimizer", false,
       [&](const RunSetting &s) { checkOptimizer(s.value); }},
      {"schedule", false, [&](const RunSetting &s) { checkSchedule(s.value); }},
      {"clip", false,
       [&](const RunSetting &s) {
         if (std::optional<double> clip = getNumber(s.value, "clip")) {
           if (!(*clip >= 0))
             error(s.value, "clip must be >= 0 (0: no clipping), got " +
                                s.value.print());
           else
             config.clip = *clip;
         }
       }},
      {"seed", false, integer("seed", 0, seed)},
      {"target", false,
       [&](const RunSetting &s) {
         const RunExpr &value = s.value;
         if (value.kind != RunExpr::Kind::Identifier &&
             value.kind != RunExpr::Kind::String) {
           error(value, "target must be " + targetNameList() + ", got " +
                            value.describe());
           return;
         }
         std::optional<Target> target = parseTarget(value.text);
         if (!target) {
           std::string best = closestMatch(value.text, targetNames());
           error(value,
                 "unknown target '" + value.text + "'" +
                     (best.empty() ? std::string()
                                   : "; did you mean '" + best + "'?"),
                 "targets: cpu, sm_90a (NVIDIA Hopper), gfx950 (AMD MI355X)");
           return;
         }
         config.target = *target;
       }},
      {"eval", true,
       [&](const RunSetting &s) {
         evalBlock = &s;
         checkScope("eval", s.children,
                    {{"interval", false,
                      integer("eval.interval", 1, config.evalInterval)},
                     {"batches", false,
                      integer("eval.batches", 1, config.evalBatches)}});
       }},
      {"checkpoint", true,
       [&](const RunSetting &s) {
         checkpointBlock = &s;
         checkScope(
             "checkpoint", s.children,
             {{"dir", false,
               [&](const RunSetting &d) {
                 if (std::optional<std::string> dir =
                         getString(d.value, "checkpoint.dir"))
                   config.checkpointDir = resolvePath(*dir);
               }},
              {"interval", false,
               integer("checkpoint.interval", 1, config.checkpointInterval)}});
       }},
      {"log_interval", false, integer("log_interval", 1, config.logInterval)},
      {"sqnr_interval", false,
       integer("sqnr_interval", 0, config.sqnrInterval)},
  };
  checkScope("", file.settings, keys);
  config.seed = static_cast<uint64_t>(seed);

  // Required settings, reported at the run's name.
  auto require = [&](llvm::StringRef name, llvm::StringRef example) {
    if (given.count(name))
      return;
    error(file.nameLoc, "missing required setting '" + name + "'", {},
          "e.g. " + example);
  };
  require("model", "model = \"../llama_tiny.tetra\"");
  require("policy", "policy = \"../policies/bf16.tetra\"");
  if (!dataBlock) {
    if (!given.count("data"))
      error(file.nameLoc, "missing required setting 'data'", {},
            "e.g. data { train = \"../../data/c4/*.json.gz\", tokenizer = "
            "bytes }");
  } else {
    for (const char *name : {"train", "tokenizer"})
      if (!given.count(std::string("data.") + name))
        error(dataBlock->getLoc(),
              "missing required setting 'data." + std::string(name) + "'",
              dataBlock->nameRange,
              name == std::string("train")
                  ? "e.g. train = \"../../data/c4/c4-train.*.json.gz\""
                  : "e.g. tokenizer = bytes");
  }
  require("seq_len", "seq_len = 256");
  bool hasSteps = given.count("steps"), hasTokens = given.count("tokens");
  if (hasSteps && hasTokens) {
    error(given["tokens"], "give the run's length as steps or as tokens, not "
                           "both");
    diags.note(given["steps"], "steps is set here");
  } else if (!hasSteps && !hasTokens) {
    error(file.nameLoc, "missing the run's length: set 'steps' or 'tokens'", {},
          "e.g. steps = 1000");
  }

  // Cross-checks between settings that were each valid.
  // In double: the factors are each checked, their product may not fit.
  double stepTokens = static_cast<double>(config.seqLen) *
                      static_cast<double>(config.microBatch) *
                      static_cast<double>(config.accumulation);
  int64_t tokensPerStep =
      stepTokens < 9.0e18 ? static_cast<int64_t>(stepTokens) : 0;
  if (hasTokens && !hasSteps && config.tokens > 0 && tokensPerStep > 0 &&
      config.tokens < tokensPerStep)
    error(given["tokens"],
          "tokens (" + std::to_string(config.tokens) +
              ") is less than one step (seq_len x micro_batch x "
              "accumulation = " +
              std::to_string(tokensPerStep) + " tokens)");
  int64_t steps = config.steps;
  if (!hasSteps && tokensPerStep > 0)
    steps = config.tokens / tokensPerStep;
  if (warmupExpr && steps > 0 && config.schedule.warmup > steps)
    error(*warmupExpr, "warmup (" + std::to_string(config.schedule.warmup) +
                           " steps) is longer than the run (" +
                           std::to_string(steps) + " steps)");
  if (minLrExpr && config.schedule.minLr > config.lr)
    error(*minLrExpr, "min_lr (" + minLrExpr->print() +
                          ") is larger than the optimizer's lr (" +
                          (lrExpr ? lrExpr->print()
                                  : formatNumber(config.lr) + ", the default") +
                          ")");
  if (evalBlock) {
    if (!given.count("eval.interval"))
      error(evalBlock->getLoc(), "missing required setting 'eval.interval'",
            evalBlock->nameRange, "e.g. interval = 100");
    if (!given.count("eval.batches"))
      error(evalBlock->getLoc(), "missing required setting 'eval.batches'",
            evalBlock->nameRange, "e.g. batches = 20");
    if (!given.count("data.eval"))
      error(evalBlock->getLoc(),
            "evaluation needs evaluation data: set data.eval",
            evalBlock->nameRange);
  }
  if (checkpointBlock && !given.count("checkpoint.dir"))
    error(checkpointBlock->getLoc(),
          "missing required setting "
          "'checkpoint.dir'",
          checkpointBlock->nameRange, "e.g. dir = \"checkpoints/tiny\"");

  if (diags.errorCount() != errorsBefore)
    return std::nullopt;
  return config;
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

void printSettings(const std::vector<RunSetting> &settings, unsigned depth,
                   llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os) {
  for (const RunSetting &setting : settings) {
    auto [line, column] = sourceMgr.getLineAndColumn(setting.getLoc());
    os.indent(2 * depth);
    if (setting.isBlock)
      os << "Block " << setting.name;
    else
      os << "Setting " << setting.name << " = " << setting.value.print();
    os << " @" << line << ":" << column << "\n";
    if (setting.isBlock)
      printSettings(setting.children, depth + 1, sourceMgr, os);
  }
}

bool parseRunBuffer(DiagnosticEngine &diags, llvm::StringRef path,
                    RunFileAST &file) {
  unsigned bufferId = loadSourceFile(diags.getSourceMgr(), diags, path);
  if (!bufferId)
    return false;
  RunParser parser(diags, bufferId);
  return parser.parseFile(file);
}

/// A --set value's strings (paths, in a run) made absolute from the current
/// directory, where the file's own are relative to the run file.
void absolutePaths(RunExpr &expr) {
  if (expr.kind == RunExpr::Kind::String && !expr.text.empty() &&
      !llvm::sys::path::is_absolute(expr.text)) {
    llvm::SmallString<256> absolute(expr.text);
    if (!llvm::sys::fs::make_absolute(absolute))
      expr.text = std::string(absolute.str());
  }
  for (RunExpr &element : expr.elements)
    absolutePaths(element);
}

/// Puts `override` into the file's tree: it replaces the setting it names
/// (a top-level one, one inside a block, or a named argument of a call such
/// as `optimizer = adamw(...)`), or adds it; the checker then checks it as
/// if the file said it, its messages pointing into the --set text.
bool applyOverride(DiagnosticEngine &diags, RunFileAST &file,
                   RunOverride override) {
  absolutePaths(override.value);
  const std::string &name = override.key.front().first;
  const llvm::SMRange range = override.key.front().second;
  if (override.key.size() > 2) {
    diags.error(override.key[2].second.Start,
                "--set reaches at most one level down (NAME or NAME.NAME)",
                override.key[2].second);
    return false;
  }
  auto found = llvm::find_if(file.settings, [&](const RunSetting &setting) {
    return setting.name == name;
  });
  auto newSetting = [&](const std::string &settingName, llvm::SMRange at) {
    RunSetting setting;
    setting.name = settingName;
    setting.nameRange = at;
    return setting;
  };
  if (override.key.size() == 1) {
    if (found == file.settings.end()) {
      file.settings.push_back(newSetting(name, range));
      found = std::prev(file.settings.end());
    } else if (found->isBlock) {
      diags.error(range.Start,
                  "'" + name + "' is a block: set one of its settings",
                  range, "--set " + name + ".NAME=VALUE");
      return false;
    }
    found->value = std::move(override.value);
    return true;
  }
  const std::string &inner = override.key[1].first;
  const llvm::SMRange innerRange = override.key[1].second;
  if (found == file.settings.end()) {
    file.settings.push_back(newSetting(name, range));
    found = std::prev(file.settings.end());
    found->isBlock = true;
  }
  if (found->isBlock) {
    auto child = llvm::find_if(found->children, [&](const RunSetting &s) {
      return s.name == inner;
    });
    if (child == found->children.end()) {
      found->children.push_back(newSetting(inner, innerRange));
      child = std::prev(found->children.end());
    }
    child->value = std::move(override.value);
    return true;
  }
  RunExpr &call = found->value;
  if (call.kind != RunExpr::Kind::Call) {
    diags.error(range.Start,
                "'" + name + "' is " + call.describe() +
                    ", neither a block nor a call with named arguments",
                range, "--set " + name + "=VALUE");
    return false;
  }
  for (size_t i = 0; i < call.elements.size(); ++i)
    if (call.argumentNames[i] == inner) {
      call.elements[i] = std::move(override.value);
      return true;
    }
  call.elements.push_back(std::move(override.value));
  call.argumentNames.push_back(inner);
  call.argumentLocs.push_back(innerRange.Start);
  return true;
}

} // namespace

std::optional<RunConfig>
tetra::frontend::loadRun(DiagnosticEngine &diags, llvm::StringRef path,
                         const std::vector<std::string> &overrides) {
  RunFileAST file;
  if (!parseRunBuffer(diags, path, file))
    return std::nullopt;
  bool ok = true;
  for (const std::string &argument : overrides) {
    // A bare path or glob (`data.train=../c4/*.json.gz`) is taken as the
    // string it spells; anything else (numbers, names, calls, tuples,
    // lists, quoted strings) is an expression of the run language.
    std::string text = argument;
    size_t equal = text.find('=');
    if (equal != std::string::npos) {
      llvm::StringRef value = llvm::StringRef(text).drop_front(equal + 1);
      double number;
      bool bare = !value.empty() && value.getAsDouble(number) &&
                  !llvm::StringRef("\"([").contains(value.front()) &&
                  !value.contains('(') &&
                  (value.contains('/') || value.contains('.') ||
                   value.contains('*'));
      if (bare) {
        std::string quoted = "\"";
        for (char c : value) {
          if (c == '"' || c == '\\')
            quoted += '\\';
          quoted += c;
        }
        text = text.substr(0, equal + 1) + quoted + "\"";
      }
    }
    unsigned bufferId = diags.getSourceMgr().AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "--set " + argument),
        llvm::SMLoc());
    RunParser parser(diags, bufferId);
    RunOverride override;
    ok = parser.parseOverride(override) &&
         applyOverride(diags, file, std::move(override)) && ok;
  }
  if (!ok)
    return std::nullopt;
  RunChecker checker(diags, file, path);
  return checker.check();
}

bool tetra::frontend::dumpRunAST(DiagnosticEngine &diags, llvm::StringRef path,
                                 llvm::raw_ostream &os) {
  RunFileAST file;
  bool ok = parseRunBuffer(diags, path, file);
  if (!file.name.empty()) {
    auto [line, column] = diags.getSourceMgr().getLineAndColumn(file.nameLoc);
    os << "Run " << file.name << " @" << line << ":" << column << "\n";
    printSettings(file.settings, 1, diags.getSourceMgr(), os);
  }
  return ok;
}

