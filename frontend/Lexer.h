//===- Lexer.h - Tokens of the Tetra language -------------------*- C++ -*-===//
//
// One lexer for model, policy and run files (docs/language.md, "Lexical
// syntax"). Keywords are contextual: the lexer returns identifiers and the
// parsers compare spellings.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_LEXER_H
#define TETRA_FRONTEND_LEXER_H

#include "frontend/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tetra::frontend {

enum class TokenKind {
  EndOfFile,
  Error, ///< Already reported; the parser skips it.
  Identifier,
  Integer,
  Float,
  String,
  LBrace,   // {
  RBrace,   // }
  LParen,   // (
  RParen,   // )
  LBracket, // [
  RBracket, // ]
  Less,     // <
  Greater,  // >
  Comma,    // ,
  Colon,    // :
  Equal,    // =
  Dot,      // .
  DotDot,   // ..
  Arrow,    // ->
  Plus,     // +
  Minus,    // -
  Star,     // *
  Slash,    // /
  Percent,  // %
};

/// "identifier", "'{'", ... for "expected X" messages.
llvm::StringRef describeTokenKind(TokenKind kind);

struct Token {
  TokenKind kind = TokenKind::EndOfFile;
  /// The exact source text (quotes included for strings).
  llvm::StringRef spelling;
  /// True when a newline separates this token from the previous one: a call
  /// or index bracket must not start a line.
  bool startsLine = false;

  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data());
  }
  llvm::SMRange getRange() const {
    return {getLoc(),
            llvm::SMLoc::getFromPointer(spelling.data() + spelling.size())};
  }
  bool is(TokenKind k) const { return kind == k; }
  bool isIdentifier(llvm::StringRef name) const {
    return kind == TokenKind::Identifier && spelling == name;
  }
};

/// How a token reads in "got X": its spelling quoted, a string as written,
/// "end of file", or its kind.
std::string describeToken(const Token &token);

class Lexer {
public:
  /// Lexes buffer `bufferId` of the engine's SourceMgr; lexical errors (an
  /// unterminated string, a stray character, an integer that does not fit
  /// int64) are reported to `diags` and returned as TokenKind::Error.
  Lexer(DiagnosticEngine &diags, unsigned bufferId);

  /// The next token; EndOfFile forever once the buffer ends.
  Token next();
  /// The token next() would return, without consuming it.
  const Token &peek();

  /// Values of literal tokens (valid tokens of the right kind only).
  static int64_t integerValue(const Token &token); ///< `_` separators allowed
  static double floatValue(const Token &token);    ///< also accepts Integer
  static std::string stringValue(const Token &token); ///< escapes decoded

private:
  Token lex();
  /// Skips blanks and comments; true when a line break was among them.
  bool skipTrivia();
  Token lexNumber(const char *start);
  Token lexString(const char *start);
  Token lexStray(const char *start);
  Token makeToken(TokenKind kind, const char *start);
  /// Reports `message` at [start, current) and returns an Error token.
  Token makeError(const char *start, const llvm::Twine &message);

  DiagnosticEngine &diags;
  const char *current;
  const char *end;
  /// Whether the token being lexed is the first of its line.
  bool startsLine = true;
  std::optional<Token> lookahead;
};

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_LEXER_H
