//===- Json.h - A small strict JSON reader and writer -----------*- C++ -*-===//
//
// The runtime reads JSON in two places: safetensors headers and C4's JSON
// lines. Both come from outside, so the parser is strict (RFC 8259: no
// comments, no trailing commas, no NaN, UTF-8 validated, unpaired surrogates
// rejected), bounded (a depth limit instead of unbounded recursion) and says
// where it stopped: "line 1, column 17 (byte 16): expected ':' after an
// object key, found '}'".
//
// Numbers keep their double value and, when the number is an integer that
// fits, its exact int64 value, so that a safetensors offset above 2^53 is not
// silently rounded.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_IO_JSON_H
#define TETRA_RUNTIME_IO_JSON_H

#include "runtime/io/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::io {

struct JsonMember;

/// One JSON value. Objects keep their members in document order (lookups are
/// linear, which is what small headers and C4 records want).
class JsonValue {
public:
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };

  /// A null value.
  JsonValue() = default;

  static JsonValue null() { return JsonValue(); }
  static JsonValue boolean(bool value);
  static JsonValue number(double value);
  static JsonValue integer(int64_t value);
  static JsonValue string(std::string value);
  static JsonValue array();
  /// An array of these strings.
  static JsonValue strings(const std::vector<std::string> &values);
  static JsonValue object();

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isBool() const { return kind_ == Kind::Bool; }
  bool isNumber() const { return kind_ == Kind::Number; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }

  /// The value of a Bool.
  bool asBool() const { return bool_; }
  /// The value of a Number, as the nearest double.
  double asDouble() const { return number_; }
  /// Whether this Number is an integer held exactly in an int64: written
  /// without fraction or exponent and within int64's range, or written with
  /// them ("1e3", "2.0") and of magnitude at most 2^53.
  bool isInteger() const { return kind_ == Kind::Number && isInteger_; }
  /// The exact value of an integer Number (isInteger()).
  int64_t asInt64() const { return integer_; }
  /// The (UTF-8) text of a String.
  const std::string &asString() const { return string_; }

  /// The elements of an Array.
  const std::vector<JsonValue> &items() const { return items_; }
  std::vector<JsonValue> &items() { return items_; }
  /// The members of an Object, in document order.
  const std::vector<JsonMember> &members() const { return members_; }
  std::vector<JsonMember> &members() { return members_; }

  /// The first member of an Object named `key`, or null if there is none
  /// (or this is not an Object).
  const JsonValue *find(std::string_view key) const;
  /// The same, or a null value where there is none: for readers that check
  /// the value's kind (or take its default) rather than its presence.
  const JsonValue &get(std::string_view key) const;

  /// Appends to an Array.
  void push(JsonValue value);
  /// Sets the member `key` of an Object: replaces an existing one, or appends.
  void set(std::string_view key, JsonValue value);

  /// "null", "boolean", "number", "string", "array" or "object".
  static std::string_view kindName(Kind kind);

private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool isInteger_ = false;
  double number_ = 0;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<JsonMember> members_;

  friend class JsonParser;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

struct JsonParseOptions {
  /// Arrays and objects nested deeper than this are an error (the parser
  /// recurses once per level).
  int maxDepth = 256;
  /// Whether an object may name the same key twice. RFC 8259 leaves it to
  /// the reader; Tetra rejects it unless the caller wants to report it
  /// itself (find() returns the first).
  bool allowDuplicateKeys = false;
};

/// Parses one JSON text (a value surrounded by optional whitespace). Errors
/// read "line L, column C (byte B): what" with 1-based line and column
/// (columns count bytes) and the 0-based byte offset.
Expected<JsonValue> parseJson(std::string_view text,
                              const JsonParseOptions &options = {});

/// Each non-blank line of a JSON-lines file (metrics.jsonl), in order, as
/// `visit(lineNumber, object)` (lines from 1). A line that is not a JSON
/// object is an error naming FILE:LINE; so is the file not being readable;
/// the first error `visit` returns stops the reading and is returned.
Status forEachJsonLine(
    const std::string &path,
    const std::function<Status(int line, const JsonValue &object)> &visit);

/// Serializes `value` compactly (no whitespace). Integers are written
/// exactly, other numbers in the shortest form that reads back to the same
/// double; NaN and infinities, which JSON cannot express, become null.
std::string writeJson(const JsonValue &value);
void appendJson(std::string &out, const JsonValue &value);

/// Appends `text` as a quoted JSON string, escaping '"', '\\' and control
/// characters. Bytes >= 0x80 are copied as they are (UTF-8 stays UTF-8).
void appendJsonString(std::string &out, std::string_view text);
/// Appends a number as writeJson does.
void appendJsonNumber(std::string &out, double value);
void appendJsonInteger(std::string &out, int64_t value);

} // namespace tetra::io

#endif // TETRA_RUNTIME_IO_JSON_H
