//===- ParserBase.h - What the three file kinds' parsers share --*- C++ -*-===//
//
// The cursor, the error reporting and the header (`KIND NAME`, the file-kind
// check) of the model, policy and run parsers:
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

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"

#include <string>

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
      // Said once: a message that already names the end ("got end of
      // file") gets no suffix.
      std::string text = message.str();
      if (!llvm::StringRef(text).ends_with(
              describeTokenKind(TokenKind::EndOfFile)))
        text += " at the end of the file";
      diags.error(previousEnd, text, {}, hint);
      return;
    }
    diags.error(at.getLoc(), message, at.getRange(), hint);
  }
  void error(llvm::SMLoc at, const llvm::Twine &message,
             const llvm::Twine &hint = {}) {
    ok = false;
    diags.error(at, message, {}, hint);
  }

  /// The file's header `KIND NAME`, after any tokens the lexer rejected:
  /// `name` gets the name's token, `keyword` (where given) where KIND
  /// stands. An empty file, a file of another kind, a misspelled or missing
  /// KIND and a missing name are errors saying which.
  bool parseHeader(llvm::StringRef kind, Token &name,
                   llvm::SMLoc *keyword = nullptr) {
    while (token.is(TokenKind::Error))
      consume(), ok = false;
    if (!token.isIdentifier(kind)) {
      const std::string usage =
          "a " + kind.str() + " file starts with '" + kind.str() + " NAME'";
      if (token.is(TokenKind::EndOfFile))
        error(token.getLoc(), "empty " + kind + " file", usage);
      else if (token.isIdentifier("model") || token.isIdentifier("policy") ||
               token.isIdentifier("run"))
        error(token, "this is a " + token.spelling + " file, not a " + kind,
              usage);
      else if (token.is(TokenKind::Identifier) &&
               !closestMatch(token.spelling, {kind.str()}).empty())
        error(token,
              "expected '" + kind + "' at the start of a " + kind +
                  " file, got " + describeToken(token),
              "did you mean '" + kind + "'?");
      else
        error(token, "expected '" + kind + "' at the start of a " + kind +
                         " file, got " + describeToken(token));
      return false;
    }
    if (keyword)
      *keyword = token.getLoc();
    consume();
    if (!token.is(TokenKind::Identifier)) {
      error(token, "expected the " + kind + "'s name after '" + kind +
                       "', got " + describeToken(token));
      return false;
    }
    name = token;
    consume();
    return true;
  }

  /// One step inside a `{ ... }` block opened at `open`: its '}' (consumed),
  /// the end of the file (reported, with where the block opened), a token
  /// the lexer rejected (skipped), or the start of an item to parse.
  enum class BlockStep { Closed, Unclosed, Skipped, Item };
  BlockStep stepInBlock(llvm::SMLoc open) {
    if (consumeIf(TokenKind::RBrace))
      return BlockStep::Closed;
    if (token.is(TokenKind::EndOfFile)) {
      error(token, "expected '}'");
      diags.note(open, "to close this '{'");
      return BlockStep::Unclosed;
    }
    if (token.is(TokenKind::Error)) {
      ok = false;
      consume();
      return BlockStep::Skipped;
    }
    return BlockStep::Item;
  }

  /// After a setting that failed to parse, skips to the next one (a line
  /// that starts with an identifier), the block's '}' or the end of the
  /// file; `start` is where the failed setting began (it is skipped even
  /// if it starts a line).
  void skipToSetting(const Token &start) {
    if (token.spelling.data() == start.spelling.data() &&
        !token.is(TokenKind::EndOfFile) && !token.is(TokenKind::RBrace))
      consume();
    while (!token.is(TokenKind::EndOfFile) && !token.is(TokenKind::RBrace) &&
           !(token.is(TokenKind::Identifier) && token.startsLine))
      consume();
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
