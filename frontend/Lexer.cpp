//===- Lexer.cpp - Tokens of the Tetra language ---------------------------===//
//
// The one lexer of model, policy and run files (docs/language.md, "Lexical
// syntax"). It never stops on bad input: a malformed token is reported once
// and returned as TokenKind::Error, which the parsers skip without reporting
// anything more about it.
//
//===----------------------------------------------------------------------===//

#include "frontend/Lexer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

using namespace tetra::frontend;

std::string tetra::frontend::describeToken(const Token &token) {
  switch (token.kind) {
  case TokenKind::EndOfFile:
    return "end of file";
  case TokenKind::Identifier:
  case TokenKind::Integer:
  case TokenKind::Float:
    return "'" + token.spelling.str() + "'";
  case TokenKind::String:
    return token.spelling.str();
  default:
    return describeTokenKind(token.kind).str();
  }
}

llvm::StringRef tetra::frontend::describeTokenKind(TokenKind kind) {
  switch (kind) {
  case TokenKind::EndOfFile:
    return "end of file";
  case TokenKind::Error:
    return "invalid token";
  case TokenKind::Identifier:
    return "identifier";
  case TokenKind::Integer:
    return "integer";
  case TokenKind::Float:
    return "number";
  case TokenKind::String:
    return "string";
  case TokenKind::LBrace:
    return "'{'";
  case TokenKind::RBrace:
    return "'}'";
  case TokenKind::LParen:
    return "'('";
  case TokenKind::RParen:
    return "')'";
  case TokenKind::LBracket:
    return "'['";
  case TokenKind::RBracket:
    return "']'";
  case TokenKind::Less:
    return "'<'";
  case TokenKind::Greater:
    return "'>'";
  case TokenKind::Comma:
    return "','";
  case TokenKind::Colon:
    return "':'";
  case TokenKind::Equal:
    return "'='";
  case TokenKind::Dot:
    return "'.'";
  case TokenKind::DotDot:
    return "'..'";
  case TokenKind::Arrow:
    return "'->'";
  case TokenKind::Plus:
    return "'+'";
  case TokenKind::Minus:
    return "'-'";
  case TokenKind::Star:
    return "'*'";
  case TokenKind::Slash:
    return "'/'";
  case TokenKind::Percent:
    return "'%'";
  }
  return "token";
}

Lexer::Lexer(DiagnosticEngine &diags, unsigned bufferId) : diags(diags) {
  const llvm::MemoryBuffer *buffer =
      diags.getSourceMgr().getMemoryBuffer(bufferId);
  current = buffer->getBufferStart();
  end = buffer->getBufferEnd();
}

Token Lexer::next() {
  if (lookahead) {
    Token token = *lookahead;
    lookahead.reset();
    return token;
  }
  return lex();
}

const Token &Lexer::peek() {
  if (!lookahead)
    lookahead = lex();
  return *lookahead;
}

//===----------------------------------------------------------------------===//
// Scanning
//===----------------------------------------------------------------------===//

namespace {

bool isIdentifierStart(char c) { return llvm::isAlpha(c) || c == '_'; }
bool isIdentifierChar(char c) { return llvm::isAlnum(c) || c == '_'; }
bool isLineBreak(char c) { return c == '\n' || c == '\r'; }

/// Characters that begin a token (or a comment) of their own: where a run of
/// stray characters ends.
bool beginsToken(char c) {
  return llvm::isSpace(c) || isIdentifierChar(c) ||
         llvm::StringRef("{}()[]<>,:=.+-*/%\"#").contains(c);
}

/// `text` as a message shows it: printable ASCII and valid UTF-8 sequences
/// as they are, any other byte as `\xNN`.
std::string escapeForMessage(llvm::StringRef text) {
  std::string shown;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (llvm::isPrint(c)) {
      shown += static_cast<char>(c);
      ++i;
      continue;
    }
    unsigned length = c >= 0x80 ? llvm::getNumBytesForUTF8(c) : 1;
    const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data() + i);
    if (length > 1 && i + length <= text.size() &&
        llvm::isLegalUTF8Sequence(begin, begin + length)) {
      shown += text.substr(i, length).str();
      i += length;
      continue;
    }
    shown += "\\x" + llvm::utohexstr(c, /*LowerCase=*/false, /*Width=*/2);
    ++i;
  }
  return shown;
}

/// The digits of a number literal without its `_` separators.
std::string withoutSeparators(llvm::StringRef spelling) {
  std::string digits;
  for (char c : spelling)
    if (c != '_')
      digits += c;
  return digits;
}

/// A `_` separator must stand between two digits.
bool separatorsValid(llvm::StringRef spelling) {
  for (size_t i = 0; i < spelling.size(); ++i)
    if (spelling[i] == '_' &&
        (i == 0 || i + 1 == spelling.size() ||
         !llvm::isDigit(spelling[i - 1]) || !llvm::isDigit(spelling[i + 1])))
      return false;
  return true;
}

/// Parses a valid integer spelling; nullopt when it does not fit int64.
std::optional<int64_t> parseInteger(llvm::StringRef spelling) {
  uint64_t value = 0;
  for (char c : spelling) {
    if (c == '_')
      continue;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (static_cast<uint64_t>(INT64_MAX) - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  return static_cast<int64_t>(value);
}

} // namespace

Token Lexer::makeToken(TokenKind kind, const char *start) {
  Token token;
  token.kind = kind;
  token.spelling = llvm::StringRef(start, current - start);
  token.startsLine = startsLine;
  return token;
}

Token Lexer::makeError(const char *start, const llvm::Twine &message) {
  Token token = makeToken(TokenKind::Error, start);
  diags.error(token.getLoc(), message, token.getRange());
  return token;
}

bool Lexer::skipTrivia() {
  bool sawLineBreak = false;
  while (current < end) {
    char c = *current;
    if (isLineBreak(c)) {
      sawLineBreak = true;
      ++current;
    } else if (c == ' ' || c == '\t' || c == '\f' || c == '\v') {
      ++current;
    } else if (c == '#') {
      while (current < end && !isLineBreak(*current))
        ++current;
    } else {
      break;
    }
  }
  return sawLineBreak;
}

Token Lexer::lex() {
  if (skipTrivia())
    startsLine = true;
  Token token = [&] {
    const char *start = current;
    if (current >= end)
      return makeToken(TokenKind::EndOfFile, start);
    char c = *current;
    if (isIdentifierStart(c)) {
      while (current < end && isIdentifierChar(*current))
        ++current;
      return makeToken(TokenKind::Identifier, start);
    }
    if (llvm::isDigit(c))
      return lexNumber(start);
    if (c == '"')
      return lexString(start);
    ++current;
    auto followedBy = [&](char next) {
      if (current < end && *current == next) {
        ++current;
        return true;
      }
      return false;
    };
    switch (c) {
    case '{':
      return makeToken(TokenKind::LBrace, start);
    case '}':
      return makeToken(TokenKind::RBrace, start);
    case '(':
      return makeToken(TokenKind::LParen, start);
    case ')':
      return makeToken(TokenKind::RParen, start);
    case '[':
      return makeToken(TokenKind::LBracket, start);
    case ']':
      return makeToken(TokenKind::RBracket, start);
    case '<':
      return makeToken(TokenKind::Less, start);
    case '>':
      return makeToken(TokenKind::Greater, start);
    case ',':
      return makeToken(TokenKind::Comma, start);
    case ':':
      return makeToken(TokenKind::Colon, start);
    case '=':
      return makeToken(TokenKind::Equal, start);
    case '+':
      return makeToken(TokenKind::Plus, start);
    case '*':
      return makeToken(TokenKind::Star, start);
    case '/':
      return makeToken(TokenKind::Slash, start);
    case '%':
      return makeToken(TokenKind::Percent, start);
    case '.':
      return makeToken(followedBy('.') ? TokenKind::DotDot : TokenKind::Dot,
                       start);
    case '-':
      return makeToken(followedBy('>') ? TokenKind::Arrow : TokenKind::Minus,
                       start);
    default:
      current = start;
      return lexStray(start);
    }
  }();
  startsLine = false;
  return token;
}

Token Lexer::lexStray(const char *start) {
  // One error for a whole run of stray characters.
  ++current;
  while (current < end && !beginsToken(*current))
    ++current;
  llvm::StringRef run(start, current - start);
  std::string shown = escapeForMessage(run);
  size_t firstLength = 1;
  unsigned char first = static_cast<unsigned char>(*start);
  if (first >= 0x80)
    firstLength = std::max(1u, llvm::getNumBytesForUTF8(first));
  bool single = run.size() <= firstLength;
  return makeError(start, llvm::Twine(single ? "unexpected character '"
                                             : "unexpected characters '") +
                              shown + "'");
}

Token Lexer::lexNumber(const char *start) {
  bool isFloat = false;
  auto digits = [&] {
    while (current < end && (llvm::isDigit(*current) || *current == '_'))
      ++current;
  };
  digits();
  // A fraction needs a digit after the '.': `0..3` is a range.
  if (current + 1 < end && *current == '.' && llvm::isDigit(current[1])) {
    isFloat = true;
    ++current;
    digits();
  }
  if (current < end && (*current == 'e' || *current == 'E')) {
    const char *exponent = current + 1;
    if (exponent < end && (*exponent == '+' || *exponent == '-'))
      ++exponent;
    if (exponent < end && llvm::isDigit(*exponent)) {
      isFloat = true;
      current = exponent;
      while (current < end && llvm::isDigit(*current))
        ++current;
    }
  }
  const char *numberEnd = current;
  if (current < end && isIdentifierChar(*current)) {
    while (current < end && isIdentifierChar(*current))
      ++current;
    return makeError(
        start,
        "invalid suffix '" + llvm::StringRef(numberEnd, current - numberEnd) +
            "' on number '" + llvm::StringRef(start, numberEnd - start) + "'");
  }
  llvm::StringRef spelling(start, current - start);
  if (!separatorsValid(spelling))
    return makeError(start, "a '_' in number '" + spelling +
                                "' must stand between two digits");
  if (!isFloat) {
    if (!parseInteger(spelling))
      return makeError(start,
                       "integer '" + spelling + "' does not fit in 64 bits");
    return makeToken(TokenKind::Integer, start);
  }
  Token token = makeToken(TokenKind::Float, start);
  double value = floatValue(token);
  if (value == HUGE_VAL)
    return makeError(start, "number '" + spelling + "' is too large");
  return token;
}

Token Lexer::lexString(const char *start) {
  ++current; // The opening quote.
  bool valid = true;
  while (current < end && *current != '"') {
    if (isLineBreak(*current))
      break;
    if (*current != '\\') {
      ++current;
      continue;
    }
    const char *escape = current++;
    if (current >= end || isLineBreak(*current))
      break;
    if (!llvm::StringRef("\"\\nt").contains(*current)) {
      size_t length = 1;
      unsigned char c = static_cast<unsigned char>(*current);
      if (c >= 0x80)
        length = std::max(1u, llvm::getNumBytesForUTF8(c));
      length = std::min<size_t>(length, end - current);
      llvm::StringRef sequence(escape, 1 + length);
      diags.error(llvm::SMLoc::getFromPointer(escape),
                  "unknown escape sequence '" + escapeForMessage(sequence) +
                      "' in string (use \\\", \\\\, \\n or \\t)",
                  {llvm::SMLoc::getFromPointer(escape),
                   llvm::SMLoc::getFromPointer(escape + sequence.size())});
      valid = false;
      current += length;
      continue;
    }
    ++current;
  }
  if (current >= end || *current != '"')
    return makeError(start, "unterminated string (a string ends on its line)");
  ++current; // The closing quote.
  if (!valid) {
    // Already reported: an Error token, without a second message.
    return makeToken(TokenKind::Error, start);
  }
  return makeToken(TokenKind::String, start);
}

//===----------------------------------------------------------------------===//
// Literal values
//===----------------------------------------------------------------------===//

int64_t Lexer::integerValue(const Token &token) {
  return parseInteger(token.spelling).value_or(0);
}

double Lexer::floatValue(const Token &token) {
  if (token.kind == TokenKind::Integer)
    return static_cast<double>(integerValue(token));
  std::string digits = withoutSeparators(token.spelling);
  return std::strtod(digits.c_str(), nullptr);
}

std::string Lexer::stringValue(const Token &token) {
  llvm::StringRef body = token.spelling;
  if (body.size() >= 2 && body.front() == '"' && body.back() == '"')
    body = body.drop_front().drop_back();
  std::string value;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      value += c;
      continue;
    }
    char escaped = body[++i];
    value += escaped == 'n' ? '\n' : escaped == 't' ? '\t' : escaped;
  }
  return value;
}
