//===- RunAST.h - The syntax tree of a run file -----------------*- C++ -*-===//
//
// A run file as written (docs/language.md, "Run files"): a tree of
// settings whose values are small expressions — numbers, strings,
// identifiers, calls with named arguments (`adamw(lr = 3e-4, betas = (0.9,
// 0.95))`), tuples and lists — with their locations. The parser
// (RunParser.h) builds it with no knowledge of the settings; the checker
// (RunChecker.h) walks it against the table of known settings.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_RUNAST_H
#define TETRA_FRONTEND_RUNAST_H

#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tetra::frontend {

struct RunExpr {
  enum class Kind { Integer, Float, String, Identifier, Call, Tuple, List };
  Kind kind = Kind::Integer;
  llvm::SMRange range;
  int64_t integer = 0;
  double number = 0; ///< Float (and Integer, converted).
  std::string text;  ///< String value, identifier, callee; a number as written.
  std::vector<RunExpr> elements; ///< Call arguments, tuple/list elements.
  std::vector<std::string> argumentNames; ///< Call: "" when positional.
  std::vector<llvm::SMLoc> argumentLocs;  ///< Call: each argument's start.

  llvm::SMLoc getLoc() const { return range.Start; }
  bool isNumber() const { return kind == Kind::Integer || kind == Kind::Float; }

  /// The expression in source syntax.
  std::string print() const;
  /// "a string", "an identifier", ... for "got X" messages.
  std::string describe() const;
};

struct RunSetting {
  std::string name;
  llvm::SMRange nameRange;
  bool isBlock = false;
  RunExpr value;                    ///< When !isBlock.
  std::vector<RunSetting> children; ///< When isBlock.

  llvm::SMLoc getLoc() const { return nameRange.Start; }
};

struct RunFileAST {
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<RunSetting> settings;
};

/// A command line's `--set KEY=VALUE`: the setting (or a block's setting,
/// or a call's named argument) it replaces, and the new value.
struct RunOverride {
  std::vector<std::pair<std::string, llvm::SMRange>> key;
  RunExpr value;
};

/// The settings as `tetra emit --stage=ast` prints them, `depth` levels in.
void printSettings(const std::vector<RunSetting> &settings, unsigned depth,
                   llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os);

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_RUNAST_H
