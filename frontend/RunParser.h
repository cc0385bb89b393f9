//===- RunParser.h - Parsing run files --------------------------*- C++ -*-===//
//
// The run language's parser: a file into its syntax tree (RunAST.h), or a
// command line's `--set KEY=VALUE` into an override, with error recovery
// at the next setting.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_RUNPARSER_H
#define TETRA_FRONTEND_RUNPARSER_H

#include "frontend/Diagnostics.h"
#include "frontend/Lexer.h"
#include "frontend/RunAST.h"

#include "llvm/ADT/StringRef.h"

namespace tetra::frontend {

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

/// Loads `path` into the diagnostics' source manager and parses it.
bool parseRunBuffer(DiagnosticEngine &diags, llvm::StringRef path,
                    RunFileAST &file);

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_RUNPARSER_H
