//===- RunAST.cpp - The syntax tree of a run file -------------------------===//

#include "frontend/RunAST.h"
#include "frontend/Diagnostics.h"

#include <cmath>
#include <cstdio>

using namespace tetra::frontend;

std::string RunExpr::print() const {
  auto join = [&](llvm::StringRef open, llvm::StringRef close) {
    std::string text = open.str();
    for (size_t i = 0; i < elements.size(); ++i) {
      if (i)
        text += ", ";
      if (kind == Kind::Call && !argumentNames[i].empty())
        text += argumentNames[i] + " = ";
      text += elements[i].print();
    }
    return text + close.str();
  };
  switch (kind) {
  case Kind::Integer:
  case Kind::Float:
    return text; // As written: 3e-4, 128_256.
  case Kind::String: {
    std::string escaped;
    for (char c : text) {
      if (c == '"' || c == '\\')
        escaped += '\\';
      escaped += c;
    }
    return "\"" + escaped + "\"";
  }
  case Kind::Identifier:
    return text;
  case Kind::Call:
    return text + join("(", ")");
  case Kind::Tuple:
    return join("(", ")");
  case Kind::List:
    return join("[", "]");
  }
  return "";
}

std::string RunExpr::describe() const {
  switch (kind) {
  case Kind::Integer:
    return "the integer " + text;
  case Kind::Float:
    return "the number " + text;
  case Kind::String:
    return "a string";
  case Kind::Identifier:
    return "'" + text + "'";
  case Kind::Call:
    return "a call of '" + text + "'";
  case Kind::Tuple:
    return "a tuple";
  case Kind::List:
    return "a list";
  }
  return "";
}

void tetra::frontend::printSettings(const std::vector<RunSetting> &settings, unsigned depth,
                   llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os) {
  for (const RunSetting &setting : settings) {
    auto [line, column] = sourceMgr.getLineAndColumn(setting.getLoc());
    os.indent(2 * depth);
    if (setting.isBlock)
      os << "Block " << setting.name;
    else
      os << "Setting " << setting.name << " = " << setting.value.print();
    os << " @" << line << ":" << column << "\n";
    if (setting.isBlock)
      printSettings(setting.children, depth + 1, sourceMgr, os);
  }
}
