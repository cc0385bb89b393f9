//===- Frontend.h - The entry points the tetra driver calls -----*- C++ -*-===//
//
// Each function loads its file into the DiagnosticEngine's SourceMgr, reports
// every error it finds (file:line:col, source line, caret, hint), and returns
// nullopt / false when there was any. None of them exits or aborts.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_FRONTEND_H
#define TETRA_FRONTEND_FRONTEND_H

#include "frontend/Diagnostics.h"
#include "frontend/ModelGraph.h"
#include "frontend/Policy.h"
#include "frontend/Run.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace tetra::frontend {

enum class FileKind { Model, Policy, Run };

/// The kind of a .tetra file, from its header keyword (`model`, `policy`,
/// `run`); reports a file that starts with anything else.
std::optional<FileKind> detectFileKind(DiagnosticEngine &diags,
                                       llvm::StringRef path);

/// Parses and elaborates a model file (frontend/ModelElaborator.cpp).
std::optional<ModelGraph> loadModel(DiagnosticEngine &diags,
                                    llvm::StringRef path);

/// loadModel for a buffer already in the engine's SourceMgr (the fuzzer's
/// entry point).
std::optional<ModelGraph> loadModelBuffer(DiagnosticEngine &diags,
                                          unsigned bufferId);

/// Parses and checks a run file; resolves its paths relative to it
/// (frontend/RunFile.cpp). Each of `overrides` ("KEY=VALUE": a setting,
/// NAME.NAME for one inside a block or a call's named argument) replaces or
/// adds that setting before the check, which checks it as the file's own;
/// its strings are paths relative to the current directory.
std::optional<RunConfig> loadRun(DiagnosticEngine &diags, llvm::StringRef path,
                                 const std::vector<std::string> &overrides = {});

/// detectFileKind for a buffer already in the engine's SourceMgr.
std::optional<FileKind> detectFileKindBuffer(DiagnosticEngine &diags,
                                             unsigned bufferId);

/// `tetra emit --stage=ast`: parses the file (any kind) and prints its
/// syntax tree, one node per line, indented, with line:col.
bool dumpAST(DiagnosticEngine &diags, llvm::StringRef path,
             llvm::raw_ostream &os);

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_FRONTEND_H
