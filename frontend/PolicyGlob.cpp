//===- PolicyGlob.cpp - Globs over dotted linear names --------------------===//
//
// A pattern is split at the dots outside braces into segments; each segment
// is `**` or expands (braces multiplied out) into brace-free alternatives of
// literals, `*` and integer ranges, matched by backtracking. Names are short,
// so nothing cleverer is needed; the expansion is capped so that a pattern
// cannot blow up.
//
//===----------------------------------------------------------------------===//

#include "frontend/PolicyGlob.h"

#include "dialect/LLVMFormatters.h"
#include "frontend/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace tetra::frontend;

namespace {

/// More alternatives than this in one segment is surely a mistake.
constexpr size_t kMaxAlternatives = 4096;
/// Braces nested deeper than this too.
constexpr unsigned kMaxDepth = 16;

bool isNameChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// Appends `piece` to `sequence`, merging adjacent literals and stars.
void append(Glob::Sequence &sequence, const Glob::Piece &piece) {
  if (piece.kind == Glob::Piece::Kind::Literal && !sequence.empty() &&
      sequence.back().kind == Glob::Piece::Kind::Literal) {
    sequence.back().text += piece.text;
    return;
  }
  // `*{*,a}`: two stars in a row match what one does.
  if (piece.kind == Glob::Piece::Kind::Star && !sequence.empty() &&
      sequence.back().kind == Glob::Piece::Kind::Star)
    return;
  sequence.push_back(piece);
}

/// Parses one segment (no dots outside braces) into its alternatives.
class SegmentParser {
public:
  SegmentParser(llvm::StringRef pattern, GlobError &error)
      : pattern(pattern), error(error) {}

  /// Parses pattern[pos, end) up to `end`, or, inside braces, up to the ','
  /// or '}' that ends the current alternative. Returns false on error.
  bool parseSequence(size_t &pos, size_t end, bool inBraces,
                     std::vector<Glob::Sequence> &result) {
    result.assign(1, {});
    while (pos < end) {
      char c = pattern[pos];
      if (isNameChar(c)) {
        size_t start = pos;
        while (pos < end && isNameChar(pattern[pos]))
          ++pos;
        Glob::Piece piece;
        piece.text = pattern.slice(start, pos).str();
        for (Glob::Sequence &sequence : result)
          append(sequence, piece);
        continue;
      }
      if (c == '*') {
        // A whole-segment `**` never gets here; any other `**` is an error
        // reported by the caller before parsing.
        Glob::Piece piece;
        piece.kind = Glob::Piece::Kind::Star;
        for (Glob::Sequence &sequence : result)
          append(sequence, piece);
        ++pos;
        continue;
      }
      if (c == '{') {
        std::vector<Glob::Sequence> alternatives;
        if (!parseBraces(pos, end, alternatives))
          return false;
        if (result.size() * alternatives.size() > kMaxAlternatives)
          return fail(
              pos, fmt::format("pattern expands to more than {} alternatives",
                               kMaxAlternatives));
        std::vector<Glob::Sequence> product;
        for (const Glob::Sequence &prefix : result)
          for (const Glob::Sequence &suffix : alternatives) {
            Glob::Sequence combined = prefix;
            for (const Glob::Piece &piece : suffix)
              append(combined, piece);
            product.push_back(std::move(combined));
          }
        result = std::move(product);
        continue;
      }
      if (inBraces && (c == ',' || c == '}'))
        return true;
      if (c == '}')
        return fail(pos, "unmatched '}' in pattern");
      if (c == ',')
        return fail(pos, "',' outside braces in pattern (alternatives are "
                         "written {a,b}; a rule takes several patterns as "
                         "\"a\", \"b\")");
      if (c == '.')
        return fail(pos, "'.' inside braces: alternatives are within one "
                         "segment (write several patterns instead)");
      return fail(pos, std::string("invalid character '") + c +
                           "' in pattern (names are identifiers and "
                           "integers separated by '.')");
    }
    return true;
  }

private:
  bool fail(size_t offset, std::string message) {
    error.offset = offset;
    error.message = std::move(message);
    return false;
  }

  /// At a '{': parses up to the matching '}' into the union of its
  /// alternatives.
  bool parseBraces(size_t &pos, size_t end,
                   std::vector<Glob::Sequence> &alternatives) {
    size_t open = pos++;
    if (++depth > kMaxDepth)
      return fail(open, "braces nested too deeply in pattern");
    struct DepthGuard {
      unsigned &depth;
      ~DepthGuard() { --depth; }
    } guard{depth};
    while (true) {
      if (pos >= end)
        return fail(open, "unclosed '{' in pattern");
      size_t start = pos;
      if (pattern[pos] == ',' || pattern[pos] == '}')
        return fail(pos, "empty alternative in '{...}'");
      // A range: INTEGER ".." INTEGER up to the ',' or '}'.
      size_t stop = start;
      while (stop < end && pattern[stop] != ',' && pattern[stop] != '}' &&
             pattern[stop] != '{')
        ++stop;
      if (stop >= end)
        return fail(open, "unclosed '{' in pattern");
      llvm::StringRef text = pattern.slice(start, stop);
      if (text.contains("..")) {
        auto [lowText, highText] = text.split("..");
        int64_t low = 0, high = 0;
        if (lowText.empty() || highText.empty() ||
            !llvm::all_of(lowText, llvm::isDigit) ||
            !llvm::all_of(highText, llvm::isDigit))
          return fail(start, "a range is written {LOW..HIGH} with two "
                             "non-negative integers, got '{" +
                                 text.str() + "}'");
        if (lowText.size() > 18 || highText.size() > 18 ||
            lowText.getAsInteger(10, low) || highText.getAsInteger(10, high))
          return fail(start, "range bound too large in '{" + text.str() + "}'");
        if (low > high)
          return fail(start, fmt::format("empty range {{{}}}: {} > {}",
                                         text.str(), low, high));
        Glob::Piece piece;
        piece.kind = Glob::Piece::Kind::Range;
        piece.low = low;
        piece.high = high;
        alternatives.push_back({piece});
        pos = stop;
      } else {
        std::vector<Glob::Sequence> nested;
        if (!parseSequence(pos, end, /*inBraces=*/true, nested))
          return false;
        for (Glob::Sequence &sequence : nested)
          alternatives.push_back(std::move(sequence));
        if (alternatives.size() > kMaxAlternatives)
          return fail(
              open, fmt::format("pattern expands to more than {} alternatives",
                                kMaxAlternatives));
      }
      if (pos >= end)
        return fail(open, "unclosed '{' in pattern");
      if (pattern[pos] == '}') {
        ++pos;
        return true;
      }
      ++pos; // ','
    }
  }

  llvm::StringRef pattern;
  GlobError &error;
  unsigned depth = 0;
};

/// Whether a segment matches a brace-free alternative, by backtracking
/// memoized on (piece, position): `*a*a*a...` stays polynomial.
class SequenceMatcher {
public:
  SequenceMatcher(const Glob::Sequence &sequence, llvm::StringRef text)
      : sequence(sequence), text(text),
        memo((sequence.size() + 1) * (text.size() + 1), -1) {}

  bool match(size_t index, size_t position) {
    int8_t &known = memo[index * (text.size() + 1) + position];
    if (known < 0)
      known = compute(index, position) ? 1 : 0;
    return known == 1;
  }

private:
  bool compute(size_t index, size_t position) {
    llvm::StringRef rest = text.drop_front(position);
    if (index == sequence.size())
      return rest.empty();
    const Glob::Piece &piece = sequence[index];
    switch (piece.kind) {
    case Glob::Piece::Kind::Literal:
      return rest.starts_with(piece.text) &&
             match(index + 1, position + piece.text.size());
    case Glob::Piece::Kind::Star:
      for (size_t length = 0; length <= rest.size(); ++length)
        if (match(index + 1, position + length))
          return true;
      return false;
    case Glob::Piece::Kind::Range: {
      // A canonical decimal integer: no sign, no leading zero unless 0.
      size_t digits = 0;
      while (digits < rest.size() && llvm::isDigit(rest[digits]))
        ++digits;
      for (size_t length = 1; length <= digits && length <= 18; ++length) {
        llvm::StringRef number = rest.take_front(length);
        if (length > 1 && number[0] == '0')
          break; // Not canonical, nor any longer prefix.
        int64_t value = 0;
        if (number.getAsInteger(10, value))
          break;
        if (value >= piece.low && value <= piece.high &&
            match(index + 1, position + length))
          return true;
      }
      return false;
    }
    }
    return false;
  }

  const Glob::Sequence &sequence;
  llvm::StringRef text;
  std::vector<int8_t> memo; ///< -1 unknown, 0 no, 1 yes.
};

bool matchSegment(const Glob::Segment &segment, llvm::StringRef text) {
  return llvm::any_of(segment.alternatives, [&](const Glob::Sequence &s) {
    return SequenceMatcher(s, text).match(0, 0);
  });
}

} // namespace

std::optional<Glob> Glob::compile(llvm::StringRef pattern, GlobError &error) {
  Glob glob;
  glob.pattern = pattern.str();
  if (pattern.empty()) {
    error = {0, "empty pattern"};
    return std::nullopt;
  }
  // Split at the dots outside braces.
  llvm::SmallVector<std::pair<size_t, size_t>> bounds;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= pattern.size(); ++i) {
    if (i == pattern.size() || (pattern[i] == '.' && depth == 0)) {
      bounds.push_back({start, i});
      start = i + 1;
      continue;
    }
    if (pattern[i] == '{')
      ++depth;
    else if (pattern[i] == '}' && depth > 0)
      --depth;
  }
  SegmentParser parser(pattern, error);
  for (auto [begin, end] : bounds) {
    Segment segment;
    segment.text = pattern.slice(begin, end).str();
    if (begin == end) {
      error = {begin, "empty segment in pattern (names have no '..' and "
                      "neither start nor end with '.')"};
      return std::nullopt;
    }
    if (segment.text == "**") {
      // `**.**` matches what `**` does.
      if (!glob.segments.empty() && glob.segments.back().doubleStar)
        continue;
      segment.doubleStar = true;
      segment.literal = false;
      glob.segments.push_back(std::move(segment));
      continue;
    }
    size_t doubleStar = llvm::StringRef(segment.text).find("**");
    if (doubleStar != llvm::StringRef::npos) {
      error = {begin + doubleStar,
               "'**' must be a whole segment between dots (use '*' for "
               "any characters within a segment)"};
      return std::nullopt;
    }
    segment.literal = llvm::StringRef(segment.text).find_first_of("*{") ==
                      llvm::StringRef::npos;
    size_t pos = begin;
    if (!parser.parseSequence(pos, end, /*inBraces=*/false,
                              segment.alternatives))
      return std::nullopt;
    glob.segments.push_back(std::move(segment));
  }
  return glob;
}

bool Glob::matchSegments(size_t patternIndex,
                         llvm::ArrayRef<llvm::StringRef> names) const {
  if (patternIndex == segments.size())
    return names.empty();
  const Segment &segment = segments[patternIndex];
  if (segment.doubleStar) {
    for (size_t skip = 0; skip <= names.size(); ++skip)
      if (matchSegments(patternIndex + 1, names.drop_front(skip)))
        return true;
    return false;
  }
  if (names.empty() || !matchSegment(segment, names.front()))
    return false;
  return matchSegments(patternIndex + 1, names.drop_front());
}

bool Glob::matches(llvm::StringRef name) const {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  name.split(parts, '.');
  return matchSegments(0, parts);
}

bool Glob::isLiteral() const {
  return llvm::all_of(segments, [](const Segment &s) { return s.literal; });
}

std::string Glob::suggest(llvm::ArrayRef<std::string> names) const {
  std::vector<std::string> candidates(names.begin(), names.end());
  bool hasDoubleStar =
      llvm::any_of(segments, [](const Segment &s) { return s.doubleStar; });
  if (!hasDoubleStar && !isLiteral()) {
    // Keep the wildcard segments, take the literal ones from a name whose
    // segments the wildcards match: the pattern the user probably meant.
    for (const std::string &name : names) {
      llvm::SmallVector<llvm::StringRef, 8> parts;
      llvm::StringRef(name).split(parts, '.');
      if (parts.size() != segments.size())
        continue;
      std::string candidate;
      bool fits = true;
      for (size_t i = 0; i < parts.size() && fits; ++i) {
        if (i)
          candidate += '.';
        if (segments[i].literal) {
          candidate += parts[i].str();
        } else {
          fits = matchSegment(segments[i], parts[i]);
          candidate += segments[i].text;
        }
      }
      if (fits && !llvm::is_contained(candidates, candidate))
        candidates.push_back(std::move(candidate));
    }
  }
  return closestMatch(pattern, candidates);
}
