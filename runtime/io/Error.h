//===- Error.h - Errors as values for the runtime ---------------*- C++ -*-===//
//
// The runtime is built without exceptions (and without LLVM, so no
// llvm::Expected): a function that can fail returns Expected<T>, which holds
// either a T or an Error, a human-readable message. A message is one line a
// driver can print after "error: "; it names the file and says what is
// wrong ("model.safetensors: header length 4096 exceeds the file size 100").
// Callers add context with Error::withContext.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_IO_ERROR_H
#define TETRA_RUNTIME_IO_ERROR_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace tetra::io {

/// A failure, described by one line of text.
class Error {
public:
  explicit Error(std::string message) : message_(std::move(message)) {}

  const std::string &message() const { return message_; }

  /// The same error with `context + ": "` in front, e.g. the file name.
  Error withContext(const std::string &context) const {
    return Error(context + ": " + message_);
  }

private:
  std::string message_;
};

/// Either a value of type T or an Error. Test it before use:
///
///   Expected<SafetensorsFile> file = SafetensorsFile::open(path);
///   if (!file)
///     return file.error();
///   use(*file);
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)), error_("") {}
  Expected(Error error) : error_(std::move(error)) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }

  T &operator*() {
    assert(ok() && "dereferencing an Expected that holds an error");
    return *value_;
  }
  const T &operator*() const {
    assert(ok() && "dereferencing an Expected that holds an error");
    return *value_;
  }
  T *operator->() { return &**this; }
  const T *operator->() const { return &**this; }

  /// Moves the value out; the Expected must hold one.
  T take() { return std::move(**this); }

  const Error &error() const {
    assert(!ok() && "asking a successful Expected for its error");
    return error_;
  }

private:
  std::optional<T> value_;
  Error error_;
};

/// Success or an Error, for functions that return nothing.
template <> class [[nodiscard]] Expected<void> {
public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)) {}

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }

  const Error &error() const {
    assert(!ok() && "asking a successful Status for its error");
    return *error_;
  }

private:
  std::optional<Error> error_;
};

using Status = Expected<void>;

/// `return success();` from a function returning Status.
inline Status success() { return Status(); }

} // namespace tetra::io

#endif // TETRA_RUNTIME_IO_ERROR_H
