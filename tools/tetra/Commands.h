//===- Commands.h - The subcommands of the tetra driver ---------*- C++ -*-===//
//
// `tetra <command> [options]`: each command lives in its own file and
// exposes an entry point and a help printer; tetra.cpp lists them in one
// table. Adding a command is a new file plus one line in that table.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_TOOLS_TETRA_COMMANDS_H
#define TETRA_TOOLS_TETRA_COMMANDS_H

#include "runtime/bundle/StepBundle.h"

#include <string_view>
#include <vector>

namespace tetra::driver {

/// `tetra --version`, and what each run records of the tool that trained it:
/// the runtime's version, which a step bundle must match.
constexpr const char *kTetraVersion = bundle::kRuntimeVersion;

/// A command's entry point: its arguments (after the command name); returns
/// the process exit status.
using CommandMain = int (*)(const std::vector<std::string_view> &args);
/// Prints the command's --help text to stdout.
using CommandHelp = void (*)();

struct Command {
  std::string_view name;
  std::string_view summary;
  CommandMain run;
  CommandHelp printHelp;
};

/// tools/tetra/QuantizeCommand.cpp
int quantizeMain(const std::vector<std::string_view> &args);
void printQuantizeHelp();

/// tools/tetra/CheckCommand.cpp
int checkMain(const std::vector<std::string_view> &args);
void printCheckHelp();

/// tools/tetra/EmitCommand.cpp
int emitMain(const std::vector<std::string_view> &args);
void printEmitHelp();

/// tools/tetra/ExplainPolicyCommand.cpp
int explainPolicyMain(const std::vector<std::string_view> &args);
void printExplainPolicyHelp();

/// tools/tetra/TokenizeCommand.cpp
int tokenizeMain(const std::vector<std::string_view> &args);
void printTokenizeHelp();

/// tools/tetra/PlotCommand.cpp
int plotMain(const std::vector<std::string_view> &args);
void printPlotHelp();

/// tools/tetra/CompareCommand.cpp
int compareMain(const std::vector<std::string_view> &args);
void printCompareHelp();

/// tools/tetra/TrainCommand.cpp
int trainMain(const std::vector<std::string_view> &args);
void printTrainHelp();

/// `tetra eval` (EvalCommand.cpp).
int evalMain(const std::vector<std::string_view> &args);
void printEvalHelp();

/// `tetra export` (ExportCommand.cpp).
int exportMain(const std::vector<std::string_view> &args);
void printExportHelp();

/// `tetra compile` (CompileCommand.cpp).
int compileMain(const std::vector<std::string_view> &args);
void printCompileHelp();

} // namespace tetra::driver

#endif // TETRA_TOOLS_TETRA_COMMANDS_H
