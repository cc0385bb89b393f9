//===- ParserBase.h - What the three file kinds' parsers share --*- C++ -*-===//
//
// The cursor and the error reporting of the model, policy and run parsers:
// one token of lookahead from the shared Lexer, the end of the last token
// consumed (where an error at the end of the file points), and errors that
// skip a token the lexer already reported. Each parser adds its grammar and
// its own recovery (to the next line, setting, block or item).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_PARSERBASE_H
#define TETRA_FRONTEND_PARSERBASE_H

#include "frontend/Diagnostics.h"
#include "frontend/Lexer.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"

namespace tetra::frontend {

class ParserBase {
protected:
  ParserBase(DiagnosticEngine &diags, unsigned bufferId)
      : diags(diags), lexer(diags, bufferId) {
    token = lexer.next();
  }

  void consume() {
    previousEnd = token.getRange().End;
    token = lexer.next();
  }
  bool consumeIf(TokenKind kind) {
    if (!token.is(kind))
      return false;
    consume();
    return true;
  }
  /// Reports `message` at `at`, unless the lexer already reported that
  /// token; at the end of the file, just past the last token rather than
  /// on the (often empty) last line.
  void error(const Token &at, const llvm::Twine &message,
             const llvm::Twine &hint = {}) {
    ok = false;
    if (at.is(TokenKind::Error))
      return;
    if (at.is(TokenKind::EndOfFile) && previousEnd.isValid()) {
      diags.error(previousEnd, message + " at the end of the file", {}, hint);
      return;
    }
    diags.error(at.getLoc(), message, at.getRange(), hint);
  }
  void error(llvm::SMLoc at, const llvm::Twine &message,
             const llvm::Twine &hint = {}) {
    ok = false;
    diags.error(at, message, {}, hint);
  }

  DiagnosticEngine &diags;
  Lexer lexer;
  Token token;
  llvm::SMLoc previousEnd;
  /// False once an error was reported.
  bool ok = true;
};

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_PARSERBASE_H
