//===- RunChecker.h - Checking run files ------------------------*- C++ -*-===//
//
// A run file's syntax tree (RunAST.h) against the table of known settings
// — names, types, ranges, required settings, duplicates — into a RunConfig,
// paths resolved relative to the run file. The model and policy files (and
// the tokenizer) must exist; data globs must match a file.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_RUNCHECKER_H
#define TETRA_FRONTEND_RUNCHECKER_H

#include "frontend/Diagnostics.h"
#include "frontend/Run.h"
#include "frontend/RunAST.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Path.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tetra::frontend {

class RunChecker {
public:
  RunChecker(DiagnosticEngine &diags, const RunFileAST &file,
             llvm::StringRef path)
      : diags(diags), file(file) {
    config.name = file.name;
    config.path = path.str();
    directory = llvm::sys::path::parent_path(path).str();
  }

  std::optional<RunConfig> check();

private:
  using Handler = std::function<void(const RunSetting &)>;
  struct Key {
    const char *name;
    bool isBlock;
    Handler handler;
  };

  void checkScope(llvm::StringRef scope, const std::vector<RunSetting> &items,
                  const std::vector<Key> &keys);

  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::SMRange range = {}, const llvm::Twine &hint = {}) {
    diags.error(loc, message, range, hint);
  }
  void error(const RunExpr &expr, const llvm::Twine &message,
             const llvm::Twine &hint = {}) {
    diags.error(expr.getLoc(), message, expr.range, hint);
  }

  std::optional<std::string> getString(const RunExpr &expr,
                                       llvm::StringRef what);
  std::optional<int64_t> getInteger(const RunExpr &expr, llvm::StringRef what,
                                    int64_t minimum);
  std::optional<double> getNumber(const RunExpr &expr, llvm::StringRef what);
  std::string resolvePath(llvm::StringRef path) const;
  void checkFile(const RunExpr &expr, llvm::StringRef what,
                 std::string &target);

  /// Named arguments of a call against `known`: each (name, expr) found is
  /// handed to `onArgument`; unknown or positional ones are reported.
  void checkArguments(
      const RunExpr &call, const std::vector<std::string> &known,
      const std::function<void(llvm::StringRef, const RunExpr &)> &onArgument);

  void checkData(const RunSetting &setting);
  void checkGlobs(const RunExpr &expr, std::vector<std::string> &globs,
                  std::vector<llvm::SMLoc> &locs, llvm::StringRef what);
  void checkTokenizer(const RunExpr &expr);
  void checkOptimizer(const RunExpr &expr);
  void checkSchedule(const RunExpr &expr);

  DiagnosticEngine &diags;
  const RunFileAST &file;
  RunConfig config;
  std::string directory;

  // What was given, for required settings and cross-checks.
  llvm::StringMap<llvm::SMLoc> given;
  const RunSetting *dataBlock = nullptr;
  const RunSetting *evalBlock = nullptr;
  const RunSetting *checkpointBlock = nullptr;
  const RunExpr *warmupExpr = nullptr, *minLrExpr = nullptr;
  const RunExpr *lrExpr = nullptr;
};

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_RUNCHECKER_H
