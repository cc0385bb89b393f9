//===- Diagnostics.h - Errors with file:line:col and a caret ----*- C++ -*-===//
//
// Every frontend error goes through a DiagnosticEngine: it prints
//   file:line:col: error: message
//   <the source line>
//        ^~~~
//   note: hint
// through llvm::SourceMgr, counts errors, and stops printing after a limit so
// that a fuzzed input cannot flood the terminal. Nothing in the frontend
// exits or aborts on bad input: it reports and returns failure.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_DIAGNOSTICS_H
#define TETRA_FRONTEND_DIAGNOSTICS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace tetra::frontend {

class DiagnosticEngine {
public:
  explicit DiagnosticEngine(llvm::SourceMgr &sourceMgr,
                            llvm::raw_ostream &os = llvm::errs(),
                            unsigned errorLimit = 50)
      : sourceMgr(sourceMgr), os(os), errorLimit(errorLimit) {}

  /// Reports an error at `loc` (highlighting `range` when given) with an
  /// optional hint printed as a note right after it.
  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::SMRange range = {}, const llvm::Twine &hint = {});
  /// A warning: printed like an error, but not counted as one (the input is
  /// accepted).
  void warning(llvm::SMLoc loc, const llvm::Twine &message,
               llvm::SMRange range = {}, const llvm::Twine &hint = {});
  /// A note attached to the previous error (e.g. "previous definition here").
  void note(llvm::SMLoc loc, const llvm::Twine &message);
  /// An error with no source location (a missing file, say).
  void error(const llvm::Twine &message);

  unsigned errorCount() const { return errors; }
  bool hadErrors() const { return errors != 0; }

  llvm::SourceMgr &getSourceMgr() { return sourceMgr; }

  /// "file:line:col" of a location, for messages that cite another place.
  std::string describe(llvm::SMLoc loc) const;

private:
  bool overLimit();
  /// An error's or a warning's message, its range and its hint.
  void print(llvm::SourceMgr::DiagKind kind, llvm::SMLoc loc,
             const llvm::Twine &message, llvm::SMRange range,
             const llvm::Twine &hint);

  llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream &os;
  unsigned errorLimit;
  unsigned errors = 0;
};

/// The closest candidate to `name` by edit distance, for "did you mean"
/// hints — the one such rule of every file kind and tool: empty when none
/// is close enough (distance <= max(1, len/3)), or, failing that, a
/// candidate that differs by one swap of adjacent characters ("trian" ->
/// "train", which edit distance counts as two edits).
std::string closestMatch(llvm::StringRef name,
                         llvm::ArrayRef<std::string> candidates);

/// "; did you mean 'x'?" with closestMatch's candidate, or "" when none is
/// close: the tail of an "unknown ..." message.
std::string didYouMeanSuffix(llvm::StringRef name,
                             llvm::ArrayRef<std::string> candidates);

/// A number as messages quote it: printf's %g (six significant digits).
std::string formatNumber(double value);

/// Loads `path` into `sourceMgr`, reporting a missing or unreadable file
/// (cited at `includedFrom` when it comes from another file). Returns the
/// buffer id, or 0 on failure.
unsigned loadSourceFile(llvm::SourceMgr &sourceMgr, DiagnosticEngine &diags,
                        llvm::StringRef path, llvm::SMLoc includedFrom = {});

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_DIAGNOSTICS_H
