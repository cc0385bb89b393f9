//===- Frontend.cpp - File kinds and the AST dump -------------------------===//
//
// What the driver needs before it knows a file's kind: the header keyword
// that names it (`model`, `policy`, `run`), and `emit --stage=ast`, which
// dispatches to the parser of that kind.
//
//===----------------------------------------------------------------------===//

#include "frontend/Frontend.h"

#include "frontend/Lexer.h"
#include "frontend/ModelAST.h"

using namespace tetra::frontend;

std::optional<FileKind>
tetra::frontend::detectFileKindBuffer(DiagnosticEngine &diags,
                                      unsigned bufferId) {
  Lexer lexer(diags, bufferId);
  Token first = lexer.next();
  if (first.isIdentifier("model"))
    return FileKind::Model;
  if (first.isIdentifier("policy"))
    return FileKind::Policy;
  if (first.isIdentifier("run"))
    return FileKind::Run;
  if (first.is(TokenKind::Error))
    return std::nullopt; // The lexer reported it.
  if (first.is(TokenKind::EndOfFile)) {
    diags.error(first.getLoc(),
                "empty file: a Tetra file starts with 'model', 'policy' or "
                "'run'");
    return std::nullopt;
  }
  std::string hint;
  if (first.is(TokenKind::Identifier)) {
    std::string close =
        closestMatch(first.spelling, {"model", "policy", "run"});
    if (!close.empty())
      hint = "did you mean '" + close + "'?";
  }
  diags.error(first.getLoc(),
              "expected 'model', 'policy' or 'run' at the start of a Tetra "
              "file",
              first.getRange(), hint);
  return std::nullopt;
}

std::optional<FileKind> tetra::frontend::detectFileKind(DiagnosticEngine &diags,
                                                        llvm::StringRef path) {
  unsigned bufferId = loadSourceFile(diags.getSourceMgr(), diags, path);
  if (!bufferId)
    return std::nullopt;
  return detectFileKindBuffer(diags, bufferId);
}

bool tetra::frontend::dumpAST(DiagnosticEngine &diags, llvm::StringRef path,
                              llvm::raw_ostream &os) {
  unsigned bufferId = loadSourceFile(diags.getSourceMgr(), diags, path);
  if (!bufferId)
    return false;
  std::optional<FileKind> kind = detectFileKindBuffer(diags, bufferId);
  if (!kind)
    return false;
  switch (*kind) {
  case FileKind::Model: {
    std::unique_ptr<modelast::ModelFile> file =
        modelast::parseModelFile(diags, bufferId);
    if (!file)
      return false;
    modelast::printModelAST(*file, diags.getSourceMgr(), os);
    return true;
  }
  case FileKind::Policy:
    return dumpPolicyAST(diags, path, os);
  case FileKind::Run:
    return dumpRunAST(diags, path, os);
  }
  return false;
}
