//===- Json.cpp - A small strict JSON reader and writer -------------------===//
//
// A recursive-descent parser over a string_view. Strings take a fast path for
// runs of plain ASCII; numbers are checked against the RFC 8259 grammar and
// converted with std::from_chars (locale-independent, correctly rounded).
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fstream>

namespace tetra::io {

//===----------------------------------------------------------------------===//
// JsonValue
//===----------------------------------------------------------------------===//

JsonValue JsonValue::boolean(bool value) {
  JsonValue result;
  result.kind_ = Kind::Bool;
  result.bool_ = value;
  return result;
}

JsonValue JsonValue::number(double value) {
  JsonValue result;
  result.kind_ = Kind::Number;
  result.number_ = value;
  // 2^53: every integer up to here is exact in a double, so the double names
  // one integer unambiguously.
  if (std::isfinite(value) && std::trunc(value) == value &&
      std::fabs(value) <= 9007199254740992.0) {
    result.isInteger_ = true;
    result.integer_ = static_cast<int64_t>(value);
  }
  return result;
}

JsonValue JsonValue::integer(int64_t value) {
  JsonValue result;
  result.kind_ = Kind::Number;
  result.number_ = static_cast<double>(value);
  result.isInteger_ = true;
  result.integer_ = value;
  return result;
}

JsonValue JsonValue::string(std::string value) {
  JsonValue result;
  result.kind_ = Kind::String;
  result.string_ = std::move(value);
  return result;
}

JsonValue JsonValue::array() {
  JsonValue result;
  result.kind_ = Kind::Array;
  return result;
}

JsonValue JsonValue::strings(const std::vector<std::string> &values) {
  JsonValue result = array();
  for (const std::string &value : values)
    result.push(string(value));
  return result;
}

JsonValue JsonValue::object() {
  JsonValue result;
  result.kind_ = Kind::Object;
  return result;
}

const JsonValue *JsonValue::find(std::string_view key) const {
  if (kind_ != Kind::Object)
    return nullptr;
  for (const JsonMember &member : members_)
    if (member.key == key)
      return &member.value;
  return nullptr;
}

const JsonValue &JsonValue::get(std::string_view key) const {
  static const JsonValue null;
  const JsonValue *found = find(key);
  return found ? *found : null;
}

void JsonValue::push(JsonValue value) {
  assert(kind_ == Kind::Array && "push() on a non-array");
  items_.push_back(std::move(value));
}

void JsonValue::set(std::string_view key, JsonValue value) {
  assert(kind_ == Kind::Object && "set() on a non-object");
  for (JsonMember &member : members_) {
    if (member.key == key) {
      member.value = std::move(value);
      return;
    }
  }
  members_.push_back(JsonMember{std::string(key), std::move(value)});
}

std::string_view JsonValue::kindName(Kind kind) {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return "boolean";
  case Kind::Number:
    return "number";
  case Kind::String:
    return "string";
  case Kind::Array:
    return "array";
  case Kind::Object:
    return "object";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

namespace {

bool isJsonWhitespace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

int hexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

void appendUtf8(std::string &out, uint32_t codePoint) {
  if (codePoint < 0x80) {
    out.push_back(static_cast<char>(codePoint));
  } else if (codePoint < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (codePoint >> 6)));
    out.push_back(static_cast<char>(0x80 | (codePoint & 0x3F)));
  } else if (codePoint < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (codePoint >> 12)));
    out.push_back(static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (codePoint & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (codePoint >> 18)));
    out.push_back(static_cast<char>(0x80 | ((codePoint >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (codePoint & 0x3F)));
  }
}

/// The length of the well-formed UTF-8 sequence at `p` (Unicode 15, table
/// 3-7: no overlong forms, no surrogates, nothing above U+10FFFF), or 0.
size_t utf8SequenceLength(const unsigned char *p, const unsigned char *end) {
  unsigned char lead = p[0];
  size_t length;
  unsigned char low = 0x80, high = 0xBF; // Bounds of the second byte.
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0)
      low = 0xA0;
    else if (lead == 0xED)
      high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0)
      low = 0x90;
    else if (lead == 0xF4)
      high = 0x8F;
  } else {
    return 0;
  }
  if (static_cast<size_t>(end - p) < length)
    return 0;
  if (p[1] < low || p[1] > high)
    return 0;
  for (size_t i = 2; i < length; ++i)
    if (p[i] < 0x80 || p[i] > 0xBF)
      return 0;
  return length;
}

} // namespace

class JsonParser {
public:
  JsonParser(std::string_view text, const JsonParseOptions &options)
      : begin_(text.data()), pos_(text.data()), end_(text.data() + text.size()),
        options_(options) {}

  Expected<JsonValue> parseDocument() {
    JsonValue value;
    skipWhitespace();
    if (!parseValue(value, 0))
      return makeError();
    skipWhitespace();
    if (pos_ != end_) {
      fail("unexpected " + describeHere() + " after the JSON value");
      return makeError();
    }
    return value;
  }

private:
  const char *begin_;
  const char *pos_;
  const char *end_;
  const JsonParseOptions &options_;
  std::string errorMessage_;
  const char *errorPos_ = nullptr;

  bool fail(std::string message, const char *at = nullptr) {
    errorMessage_ = std::move(message);
    errorPos_ = at ? at : pos_;
    return false;
  }

  Error makeError() const {
    size_t offset = static_cast<size_t>(errorPos_ - begin_);
    size_t line = 1;
    const char *lineStart = begin_;
    for (const char *p = begin_; p < errorPos_; ++p) {
      if (*p == '\n') {
        ++line;
        lineStart = p + 1;
      }
    }
    size_t column = static_cast<size_t>(errorPos_ - lineStart) + 1;
    return Error(fmt::format("line {}, column {} (byte {}): {}", line, column,
                             offset, errorMessage_));
  }

  /// "end of input", "'x'" or "byte 0xC3".
  std::string describeHere() const {
    if (pos_ == end_)
      return "end of input";
    unsigned char c = static_cast<unsigned char>(*pos_);
    if (c >= 0x20 && c < 0x7F)
      return std::string("'") + static_cast<char>(c) + "'";
    static const char digits[] = "0123456789ABCDEF";
    return std::string("byte 0x") + digits[c >> 4] + digits[c & 15];
  }

  void skipWhitespace() {
    while (pos_ != end_ && isJsonWhitespace(*pos_))
      ++pos_;
  }

  bool consumeLiteral(std::string_view literal) {
    if (static_cast<size_t>(end_ - pos_) < literal.size() ||
        std::memcmp(pos_, literal.data(), literal.size()) != 0)
      return fail("invalid literal; expected '" + std::string(literal) + "'");
    pos_ += literal.size();
    return true;
  }

  bool parseValue(JsonValue &out, int depth) {
    if (pos_ == end_)
      return fail("expected a JSON value, found end of input");
    switch (*pos_) {
    case '{':
      return parseObject(out, depth + 1);
    case '[':
      return parseArray(out, depth + 1);
    case '"':
      out.kind_ = JsonValue::Kind::String;
      return parseString(out.string_);
    case 't':
      out = JsonValue::boolean(true);
      return consumeLiteral("true");
    case 'f':
      out = JsonValue::boolean(false);
      return consumeLiteral("false");
    case 'n':
      out = JsonValue();
      return consumeLiteral("null");
    default:
      if (*pos_ == '-' || isDigit(*pos_))
        return parseNumber(out);
      return fail("expected a JSON value, found " + describeHere());
    }
  }

  bool checkDepth(int depth) {
    if (depth > options_.maxDepth)
      return fail(fmt::format("arrays and objects nested deeper than {} levels",
                              options_.maxDepth));
    return true;
  }

  bool parseArray(JsonValue &out, int depth) {
    if (!checkDepth(depth))
      return false;
    out = JsonValue::array();
    ++pos_; // '['
    skipWhitespace();
    if (pos_ != end_ && *pos_ == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      out.items_.emplace_back();
      if (!parseValue(out.items_.back(), depth))
        return false;
      skipWhitespace();
      if (pos_ == end_ || (*pos_ != ',' && *pos_ != ']'))
        return fail("expected ',' or ']' after an array element, found " +
                    describeHere());
      if (*pos_++ == ']')
        return true;
      skipWhitespace();
    }
  }

  bool parseObject(JsonValue &out, int depth) {
    if (!checkDepth(depth))
      return false;
    out = JsonValue::object();
    ++pos_; // '{'
    skipWhitespace();
    if (pos_ != end_ && *pos_ == '}') {
      ++pos_;
      return true;
    }
    std::vector<const char *> keyPositions;
    while (true) {
      if (pos_ == end_ || *pos_ != '"')
        return fail("expected a string key in an object, found " +
                    describeHere());
      keyPositions.push_back(pos_);
      out.members_.emplace_back();
      JsonMember &member = out.members_.back();
      if (!parseString(member.key))
        return false;
      skipWhitespace();
      if (pos_ == end_ || *pos_ != ':')
        return fail("expected ':' after an object key, found " +
                    describeHere());
      ++pos_;
      skipWhitespace();
      if (!parseValue(member.value, depth))
        return false;
      skipWhitespace();
      if (pos_ == end_ || (*pos_ != ',' && *pos_ != '}'))
        return fail("expected ',' or '}' after an object member, found " +
                    describeHere());
      if (*pos_++ == '}')
        break;
      skipWhitespace();
    }
    if (!options_.allowDuplicateKeys)
      return checkDuplicateKeys(out, keyPositions);
    return true;
  }

  bool checkDuplicateKeys(const JsonValue &object,
                          const std::vector<const char *> &keyPositions) {
    const std::vector<JsonMember> &members = object.members_;
    size_t count = members.size();
    if (count < 2)
      return true;
    // Report the second occurrence that comes first in the document.
    size_t duplicate = count;
    if (count <= 16) {
      for (size_t i = 1; i < count && duplicate == count; ++i)
        for (size_t j = 0; j < i; ++j)
          if (members[i].key == members[j].key) {
            duplicate = i;
            break;
          }
    } else {
      std::vector<size_t> order(count);
      for (size_t i = 0; i < count; ++i)
        order[i] = i;
      // Equal keys sort in document order, so order[i] is the later one.
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        int compare = members[a].key.compare(members[b].key);
        return compare != 0 ? compare < 0 : a < b;
      });
      for (size_t i = 1; i < count; ++i)
        if (members[order[i]].key == members[order[i - 1]].key)
          duplicate = std::min(duplicate, order[i]);
    }
    if (duplicate == count)
      return true;
    std::string quoted;
    appendJsonString(quoted, members[duplicate].key);
    return fail("duplicate key " + quoted + " in an object",
                keyPositions[duplicate]);
  }

  bool parseHex4(uint32_t &value) {
    if (end_ - pos_ < 4)
      return fail("\\u escape needs four hex digits");
    value = 0;
    for (int i = 0; i < 4; ++i) {
      int digit = hexValue(pos_[i]);
      if (digit < 0)
        return fail("\\u escape needs four hex digits", pos_ + i);
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    pos_ += 4;
    return true;
  }

  bool parseEscape(std::string &out) {
    const char *escapeStart = pos_;
    ++pos_; // '\\'
    if (pos_ == end_)
      return fail("unterminated string");
    char c = *pos_++;
    switch (c) {
    case '"':
      out.push_back('"');
      return true;
    case '\\':
      out.push_back('\\');
      return true;
    case '/':
      out.push_back('/');
      return true;
    case 'b':
      out.push_back('\b');
      return true;
    case 'f':
      out.push_back('\f');
      return true;
    case 'n':
      out.push_back('\n');
      return true;
    case 'r':
      out.push_back('\r');
      return true;
    case 't':
      out.push_back('\t');
      return true;
    case 'u':
      break;
    default:
      --pos_;
      if (c >= 0x20 && c < 0x7F)
        return fail(std::string("invalid escape sequence '\\") + c + "'",
                    escapeStart);
      return fail("invalid escape sequence (a backslash followed by " +
                      describeHere() + ")",
                  escapeStart);
    }
    uint32_t codePoint;
    if (!parseHex4(codePoint))
      return false;
    if (codePoint >= 0xDC00 && codePoint <= 0xDFFF)
      return fail("unpaired low surrogate in \\u escape", escapeStart);
    if (codePoint >= 0xD800 && codePoint <= 0xDBFF) {
      if (end_ - pos_ < 2 || pos_[0] != '\\' || pos_[1] != 'u')
        return fail("high surrogate in \\u escape not followed by a low "
                    "surrogate",
                    escapeStart);
      pos_ += 2;
      uint32_t low;
      if (!parseHex4(low))
        return false;
      if (low < 0xDC00 || low > 0xDFFF)
        return fail("high surrogate in \\u escape not followed by a low "
                    "surrogate",
                    escapeStart);
      codePoint = 0x10000 + ((codePoint - 0xD800) << 10) + (low - 0xDC00);
    }
    appendUtf8(out, codePoint);
    return true;
  }

  bool parseString(std::string &out) {
    const char *open = pos_;
    ++pos_; // '"'
    while (true) {
      const char *runStart = pos_;
      while (pos_ != end_) {
        unsigned char c = static_cast<unsigned char>(*pos_);
        if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
          break;
        ++pos_;
      }
      out.append(runStart, pos_);
      if (pos_ == end_)
        return fail("unterminated string", open);
      unsigned char c = static_cast<unsigned char>(*pos_);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c == '\\') {
        if (!parseEscape(out))
          return false;
        continue;
      }
      if (c < 0x20)
        return fail("control character " + describeHere() +
                    " in a string must be escaped");
      size_t length =
          utf8SequenceLength(reinterpret_cast<const unsigned char *>(pos_),
                             reinterpret_cast<const unsigned char *>(end_));
      if (length == 0)
        return fail("invalid UTF-8 in a string (" + describeHere() + ")");
      out.append(pos_, length);
      pos_ += length;
    }
  }

  bool parseNumber(JsonValue &out) {
    const char *start = pos_;
    const char *p = pos_;
    if (*p == '-')
      ++p;
    if (p == end_ || !isDigit(*p))
      return fail("invalid number: expected a digit", p);
    // Decimal position of the most significant digit, to tell overflow from
    // underflow when from_chars reports a value out of range.
    long magnitude = 0;
    bool seenNonZero = false;
    if (*p == '0') {
      ++p;
      if (p != end_ && isDigit(*p))
        return fail("invalid number: leading zeros are not allowed", p);
    } else {
      while (p != end_ && isDigit(*p)) {
        ++magnitude;
        ++p;
      }
      seenNonZero = true;
    }
    bool integral = true;
    if (p != end_ && *p == '.') {
      integral = false;
      ++p;
      if (p == end_ || !isDigit(*p))
        return fail("invalid number: expected a digit after '.'", p);
      while (p != end_ && isDigit(*p)) {
        if (!seenNonZero) {
          if (*p == '0')
            --magnitude;
          else
            seenNonZero = true;
        }
        ++p;
      }
    }
    long exponent = 0;
    if (p != end_ && (*p == 'e' || *p == 'E')) {
      integral = false;
      ++p;
      bool negative = false;
      if (p != end_ && (*p == '+' || *p == '-'))
        negative = *p++ == '-';
      if (p == end_ || !isDigit(*p))
        return fail("invalid number: expected a digit in the exponent", p);
      while (p != end_ && isDigit(*p)) {
        if (exponent < 100000)
          exponent = exponent * 10 + (*p - '0');
        ++p;
      }
      if (negative)
        exponent = -exponent;
    }
    pos_ = p;

    if (integral) {
      int64_t value;
      auto [end, ec] = std::from_chars(start, p, value);
      if (ec == std::errc() && end == p) {
        out = JsonValue::integer(value);
        return true;
      }
      // Beyond int64: keep it as a double.
    }
    double value = 0;
    auto [end, ec] = std::from_chars(start, p, value);
    if (ec == std::errc::result_out_of_range) {
      if (seenNonZero && magnitude + exponent > 0)
        return fail("number " + std::string(start, p) +
                        " is out of the range of a double",
                    start);
      value = *start == '-' ? -0.0 : 0.0; // Underflow.
    } else if (ec != std::errc() || end != p) {
      return fail("invalid number", start);
    }
    out = JsonValue::number(value);
    return true;
  }
};

Expected<JsonValue> parseJson(std::string_view text,
                              const JsonParseOptions &options) {
  return JsonParser(text, options).parseDocument();
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

void appendJsonString(std::string &out, std::string_view text) {
  static const char digits[] = "0123456789abcdef";
  out.push_back('"');
  size_t runStart = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    out.append(text.data() + runStart, i - runStart);
    runStart = i + 1;
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      out += "\\u00";
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  out.append(text.data() + runStart, text.size() - runStart);
  out.push_back('"');
}

void appendJsonInteger(std::string &out, int64_t value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

void appendJsonNumber(std::string &out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

void appendJson(std::string &out, const JsonValue &value) {
  switch (value.kind()) {
  case JsonValue::Kind::Null:
    out += "null";
    return;
  case JsonValue::Kind::Bool:
    out += value.asBool() ? "true" : "false";
    return;
  case JsonValue::Kind::Number:
    if (value.isInteger())
      appendJsonInteger(out, value.asInt64());
    else
      appendJsonNumber(out, value.asDouble());
    return;
  case JsonValue::Kind::String:
    appendJsonString(out, value.asString());
    return;
  case JsonValue::Kind::Array: {
    out.push_back('[');
    bool first = true;
    for (const JsonValue &item : value.items()) {
      if (!first)
        out.push_back(',');
      first = false;
      appendJson(out, item);
    }
    out.push_back(']');
    return;
  }
  case JsonValue::Kind::Object: {
    out.push_back('{');
    bool first = true;
    for (const JsonMember &member : value.members()) {
      if (!first)
        out.push_back(',');
      first = false;
      appendJsonString(out, member.key);
      out.push_back(':');
      appendJson(out, member.value);
    }
    out.push_back('}');
    return;
  }
  }
}

std::string writeJson(const JsonValue &value) {
  std::string out;
  appendJson(out, value);
  return out;
}

Status forEachJsonLine(
    const std::string &path,
    const std::function<Status(int line, const JsonValue &object)> &visit) {
  std::ifstream in(path);
  if (!in)
    return Error("cannot read '" + path + "'");
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    Expected<JsonValue> value = parseJson(line);
    if (!value || !value->isObject())
      return Error(fmt::format("{}:{}: not a JSON object{}", path, number,
                               (value ? "" : ": " + value.error().message())));
    if (Status visited = visit(number, *value); !visited)
      return visited;
  }
  return success();
}

} // namespace tetra::io
