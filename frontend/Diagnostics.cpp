//===- Diagnostics.cpp - Errors with file:line:col and a caret ------------===//

#include "frontend/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdio>
#include <fmt/format.h>

using namespace tetra::frontend;

bool DiagnosticEngine::overLimit() {
  ++errors;
  if (errors == errorLimit + 1)
    os << "error: too many errors (" << errorLimit << "), stopping here\n";
  return errors > errorLimit;
}

void DiagnosticEngine::error(llvm::SMLoc loc, const llvm::Twine &message,
                             llvm::SMRange range, const llvm::Twine &hint) {
  if (overLimit())
    return;
  print(llvm::SourceMgr::DK_Error, loc, message, range, hint);
}

void DiagnosticEngine::warning(llvm::SMLoc loc, const llvm::Twine &message,
                               llvm::SMRange range, const llvm::Twine &hint) {
  print(llvm::SourceMgr::DK_Warning, loc, message, range, hint);
}

void DiagnosticEngine::print(llvm::SourceMgr::DiagKind kind, llvm::SMLoc loc,
                             const llvm::Twine &message, llvm::SMRange range,
                             const llvm::Twine &hint) {
  llvm::SmallVector<llvm::SMRange, 1> ranges;
  if (range.isValid())
    ranges.push_back(range);
  sourceMgr.PrintMessage(os, loc, kind, message, ranges);
  if (!hint.isTriviallyEmpty() && !hint.str().empty())
    os << "note: " << hint << "\n";
}

void DiagnosticEngine::note(llvm::SMLoc loc, const llvm::Twine &message) {
  if (errors > errorLimit)
    return;
  sourceMgr.PrintMessage(os, loc, llvm::SourceMgr::DK_Note, message);
}

void DiagnosticEngine::error(const llvm::Twine &message) {
  if (overLimit())
    return;
  os << "error: " << message << "\n";
}

std::string DiagnosticEngine::describe(llvm::SMLoc loc) const {
  unsigned buffer = sourceMgr.FindBufferContainingLoc(loc);
  if (!buffer)
    return "<unknown>";
  auto [line, column] = sourceMgr.getLineAndColumn(loc, buffer);
  return (sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier() + ":" +
          llvm::Twine(line) + ":" + llvm::Twine(column))
      .str();
}

std::string
tetra::frontend::closestMatch(llvm::StringRef name,
                              llvm::ArrayRef<std::string> candidates) {
  unsigned limit = std::max<unsigned>(1, name.size() / 3);
  std::string best;
  unsigned bestDistance = limit + 1;
  for (const std::string &candidate : candidates) {
    unsigned distance = name.edit_distance(candidate, true, limit);
    if (distance < bestDistance && candidate != name) {
      bestDistance = distance;
      best = candidate;
    }
  }
  if (!best.empty())
    return best;
  // One swap of adjacent characters ("trian" -> "train"), which edit
  // distance counts as two edits.
  for (const std::string &candidate : candidates) {
    if (candidate.size() != name.size() || candidate == name)
      continue;
    size_t first = 0;
    while (first < name.size() && name[first] == candidate[first])
      ++first;
    if (first + 1 < name.size() && name[first] == candidate[first + 1] &&
        name[first + 1] == candidate[first] &&
        name.drop_front(first + 2) ==
            llvm::StringRef(candidate).drop_front(first + 2))
      return candidate;
  }
  return best;
}

unsigned tetra::frontend::loadSourceFile(llvm::SourceMgr &sourceMgr,
                                         DiagnosticEngine &diags,
                                         llvm::StringRef path,
                                         llvm::SMLoc includedFrom) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    std::string message =
        ("cannot read '" + path + "': " + buffer.getError().message()).str();
    if (includedFrom.isValid())
      diags.error(includedFrom, message);
    else
      diags.error(message);
    return 0;
  }
  return sourceMgr.AddNewSourceBuffer(std::move(*buffer), includedFrom);
}

std::string tetra::frontend::formatNumber(double value) {
  return fmt::format("{:g}", value);
}

std::string
tetra::frontend::didYouMeanSuffix(llvm::StringRef name,
                                  llvm::ArrayRef<std::string> candidates) {
  std::string best = closestMatch(name, candidates);
  return best.empty() ? std::string() : "; did you mean '" + best + "'?";
}
