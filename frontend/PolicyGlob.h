//===- PolicyGlob.h - Globs over dotted linear names ------------*- C++ -*-===//
//
// The patterns of a policy's `rule` (docs/language.md, "Policy files"): globs
// over dotted names such as `layers.3.attn.wq`.
//
//   *        any characters within one segment (never a '.')
//   **       a whole segment: zero or more segments
//   {a,b}    alternatives within one segment (nested braces allowed)
//   {0..3}   an integer from 0 to 3 (decimal, no leading zeros)
//
// A pattern is compiled once; an invalid one is reported with the offset of
// the offending character so that the parser can point at it.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_POLICYGLOB_H
#define TETRA_FRONTEND_POLICYGLOB_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tetra::frontend {

/// Why a pattern did not compile, and where (a byte offset into it).
struct GlobError {
  size_t offset = 0;
  std::string message;
};

/// A compiled glob over dotted names.
class Glob {
public:
  /// Compiles `pattern`; on failure returns nullopt and fills `error`.
  static std::optional<Glob> compile(llvm::StringRef pattern, GlobError &error);

  /// True when the whole of `name` matches the pattern.
  bool matches(llvm::StringRef name) const;

  /// True when the pattern has no wildcard, alternative or range: it names
  /// one linear.
  bool isLiteral() const;

  const std::string &text() const { return pattern; }

  /// A "did you mean" for a pattern that matches none of `names`: the
  /// pattern with its literal segments replaced by those of a name (so
  /// `layers.*.mpl.*` gives `layers.*.mlp.*`), or the closest name itself.
  /// Empty when nothing is close.
  std::string suggest(llvm::ArrayRef<std::string> names) const;

  /// One element of a brace-free alternative of a segment.
  struct Piece {
    enum class Kind { Literal, Star, Range };
    Kind kind = Kind::Literal;
    std::string text;          ///< Literal only.
    int64_t low = 0, high = 0; ///< Range only, inclusive.
  };
  using Sequence = std::vector<Piece>;

  /// One dotted segment of the pattern: `**`, or the alternatives its braces
  /// expand to.
  struct Segment {
    bool doubleStar = false;
    bool literal = true; ///< No `*`, braces or range.
    std::string text;    ///< The segment as written.
    std::vector<Sequence> alternatives;
  };

private:
  bool matchSegments(size_t patternIndex,
                     llvm::ArrayRef<llvm::StringRef> names) const;

  std::string pattern;
  std::vector<Segment> segments;
};

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_POLICYGLOB_H
