//===- RunParser.h - Parsing run files --------------------------*- C++ -*-===//
//
// The run language's parser: a file into its syntax tree (RunAST.h), or a
// command line's `--set KEY=VALUE` into an override, with error recovery
// at the next setting.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_RUNPARSER_H
#define TETRA_FRONTEND_RUNPARSER_H

#include "frontend/Diagnostics.h"
#include "frontend/Lexer.h"
#include "frontend/ParserBase.h"
#include "frontend/RunAST.h"

#include "llvm/ADT/StringRef.h"

namespace tetra::frontend {

class RunParser : ParserBase {
public:
  RunParser(DiagnosticEngine &diags, unsigned bufferId)
      : ParserBase(diags, bufferId) {}

  bool parseFile(RunFileAST &file);
  /// `KEY=VALUE` (KEY: NAME or NAME.NAME) up to the end of the buffer.
  bool parseOverride(RunOverride &override);

private:
  bool parseSetting(RunSetting &setting);
  bool parseExpr(RunExpr &expr);
  bool parseSequence(TokenKind close, RunExpr &expr, bool isCall);

  static constexpr unsigned kMaxDepth = 64;
  unsigned depth = 0;
};

/// Loads `path` into the diagnostics' source manager and parses it.
bool parseRunBuffer(DiagnosticEngine &diags, llvm::StringRef path,
                    RunFileAST &file);

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_RUNPARSER_H
