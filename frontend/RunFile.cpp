//===- RunFile.cpp - Loading run files ------------------------------------===//
//
// loadRun: a run file parsed (RunParser.h), the command line's `--set`
// overrides put into its tree, then checked (RunChecker.h) into a
// RunConfig; dumpRunAST prints the tree.
//
//===----------------------------------------------------------------------===//

#include "frontend/Frontend.h"
#include "frontend/Run.h"
#include "frontend/RunChecker.h"
#include "frontend/RunParser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace tetra;
using namespace tetra::frontend;

namespace {

/// A --set value's strings (paths, in a run) made absolute from the current
/// directory, where the file's own are relative to the run file.
void absolutePaths(RunExpr &expr) {
  if (expr.kind == RunExpr::Kind::String && !expr.text.empty() &&
      !llvm::sys::path::is_absolute(expr.text)) {
    llvm::SmallString<256> absolute(expr.text);
    if (!llvm::sys::fs::make_absolute(absolute))
      expr.text = std::string(absolute.str());
  }
  for (RunExpr &element : expr.elements)
    absolutePaths(element);
}

/// Puts `override` into the file's tree: it replaces the setting it names
/// (a top-level one, one inside a block, or a named argument of a call such
/// as `optimizer = adamw(...)`), or adds it; the checker then checks it as
/// if the file said it, its messages pointing into the --set text.
bool applyOverride(DiagnosticEngine &diags, RunFileAST &file,
                   RunOverride override) {
  absolutePaths(override.value);
  const std::string &name = override.key.front().first;
  const llvm::SMRange range = override.key.front().second;
  if (override.key.size() > 2) {
    diags.error(override.key[2].second.Start,
                "--set reaches at most one level down (NAME or NAME.NAME)",
                override.key[2].second);
    return false;
  }
  auto found = llvm::find_if(file.settings, [&](const RunSetting &setting) {
    return setting.name == name;
  });
  auto newSetting = [&](const std::string &settingName, llvm::SMRange at) {
    RunSetting setting;
    setting.name = settingName;
    setting.nameRange = at;
    return setting;
  };
  if (override.key.size() == 1) {
    if (found == file.settings.end()) {
      file.settings.push_back(newSetting(name, range));
      found = std::prev(file.settings.end());
    } else if (found->isBlock) {
      diags.error(range.Start,
                  "'" + name + "' is a block: set one of its settings",
                  range, "--set " + name + ".NAME=VALUE");
      return false;
    }
    found->value = std::move(override.value);
    return true;
  }
  const std::string &inner = override.key[1].first;
  const llvm::SMRange innerRange = override.key[1].second;
  if (found == file.settings.end()) {
    file.settings.push_back(newSetting(name, range));
    found = std::prev(file.settings.end());
    found->isBlock = true;
  }
  if (found->isBlock) {
    auto child = llvm::find_if(found->children, [&](const RunSetting &s) {
      return s.name == inner;
    });
    if (child == found->children.end()) {
      found->children.push_back(newSetting(inner, innerRange));
      child = std::prev(found->children.end());
    }
    child->value = std::move(override.value);
    return true;
  }
  RunExpr &call = found->value;
  if (call.kind != RunExpr::Kind::Call) {
    diags.error(range.Start,
                "'" + name + "' is " + call.describe() +
                    ", neither a block nor a call with named arguments",
                range, "--set " + name + "=VALUE");
    return false;
  }
  for (size_t i = 0; i < call.elements.size(); ++i)
    if (call.argumentNames[i] == inner) {
      call.elements[i] = std::move(override.value);
      return true;
    }
  call.elements.push_back(std::move(override.value));
  call.argumentNames.push_back(inner);
  call.argumentLocs.push_back(innerRange.Start);
  return true;
}

} // namespace

std::optional<RunConfig>
tetra::frontend::loadRun(DiagnosticEngine &diags, llvm::StringRef path,
                         const std::vector<std::string> &overrides) {
  RunFileAST file;
  if (!parseRunBuffer(diags, path, file))
    return std::nullopt;
  bool ok = true;
  for (const std::string &argument : overrides) {
    // A bare path or glob (`data.train=../c4/*.json.gz`) is taken as the
    // string it spells; anything else (numbers, names, calls, tuples,
    // lists, quoted strings) is an expression of the run language.
    std::string text = argument;
    size_t equal = text.find('=');
    if (equal != std::string::npos) {
      llvm::StringRef value = llvm::StringRef(text).drop_front(equal + 1);
      double number;
      bool bare = !value.empty() && value.getAsDouble(number) &&
                  !llvm::StringRef("\"([").contains(value.front()) &&
                  !value.contains('(') &&
                  (value.contains('/') || value.contains('.') ||
                   value.contains('*'));
      if (bare) {
        std::string quoted = "\"";
        for (char c : value) {
          if (c == '"' || c == '\\')
            quoted += '\\';
          quoted += c;
        }
        text = text.substr(0, equal + 1) + quoted + "\"";
      }
    }
    unsigned bufferId = diags.getSourceMgr().AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "--set " + argument),
        llvm::SMLoc());
    RunParser parser(diags, bufferId);
    RunOverride override;
    ok = parser.parseOverride(override) &&
         applyOverride(diags, file, std::move(override)) && ok;
  }
  if (!ok)
    return std::nullopt;
  RunChecker checker(diags, file, path);
  return checker.check();
}

bool tetra::frontend::dumpRunAST(DiagnosticEngine &diags, llvm::StringRef path,
                                 llvm::raw_ostream &os) {
  RunFileAST file;
  bool ok = parseRunBuffer(diags, path, file);
  if (!file.name.empty()) {
    auto [line, column] = diags.getSourceMgr().getLineAndColumn(file.nameLoc);
    os << "Run " << file.name << " @" << line << ":" << column << "\n";
    printSettings(file.settings, 1, diags.getSourceMgr(), os);
  }
  return ok;
}

