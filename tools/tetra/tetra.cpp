//===- tetra.cpp - The Tetra driver ---------------------------------------===//
//
// `tetra <command> [options]`. The commands are listed in kCommands; each is
// implemented in its own file (see Commands.h).
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"

#include <cstdio>
#include <fmt/format.h>
#include <string>

using namespace tetra::driver;

namespace {

const Command kCommands[] = {
    {"check", "check model, policy and run files and report every error",
     checkMain, printCheckHelp},
    {"explain-policy",
     "show the policy every GEMM of a model gets, and which setting chose it",
     explainPolicyMain, printExplainPolicyHelp},
    {"emit",
     "print what a stage produced: ast, tetra, train-step, quantized, "
     "kernels, cpu, nvvm, ptx, amdgpu, isa or schedule",
     emitMain, printEmitHelp},
    {"train", "compile a run's training step and train it", trainMain,
     printTrainHelp},
    {"eval", "the eval loss of a checkpoint, under the run's policy or another",
     evalMain, printEvalHelp},
    {"export", "write a checkpoint as a Hugging Face Llama (config, safetensors, tokenizer)",
     exportMain, printExportHelp},
    {"compile", "compile a training step into a GPU bundle (tetra-run trains it)",
     compileMain, printCompileHelp},
    {"plot", "draw the loss curves of several runs into a PNG", plotMain,
     printPlotHelp},
    {"compare",
     "token overheads: the tokens each policy needs to reach the baseline's loss",
     compareMain, printCompareHelp},
    {"quantize",
     "quantize the tensors of a safetensors file and report the error",
     quantizeMain, printQuantizeHelp},
    {"tokenize", "encode text files into a token file (bytes, gpt2, llama3)",
     tokenizeMain, printTokenizeHelp},
};

const Command *findCommand(std::string_view name) {
  for (const Command &command : kCommands)
    if (command.name == name)
      return &command;
  return nullptr;
}

void printUsage() {
  std::printf("Tetra: a compiler and trainer for quantized LLM training.\n"
              "\n"
              "USAGE: tetra <command> [options]\n"
              "       tetra <command> --help\n"
              "       tetra --version\n"
              "\n"
              "COMMANDS:\n");
  for (const Command &command : kCommands)
    fmt::print("  {:<16} {}\n", command.name, command.summary);
  std::printf("\nRun 'tetra <command> --help' for a command's options.\n");
}

std::string commandList() {
  std::string list;
  for (const Command &command : kCommands) {
    if (!list.empty())
      list += ", ";
    list += command.name;
  }
  return list;
}

} // namespace

int main(int argc, char **argv) {
  // Every line reaches a log file when it is printed (`tetra train > log`
  // killed with -9 keeps all it printed), as it does a terminal.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    fmt::print(
        stderr,
        "tetra: error: no command given (commands: {}; see 'tetra --help')\n",
        commandList());
    return 1;
  }
  std::string_view first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    if (first == "help" && argc > 2) {
      if (const Command *command = findCommand(argv[2])) {
        command->printHelp();
        return 0;
      }
      fmt::print(stderr, "tetra: error: unknown command '{}' (commands: {})\n",
                 argv[2], commandList());
      return 1;
    }
    printUsage();
    return 0;
  }
  if (first == "--version") {
    fmt::print("tetra version {}\n", kTetraVersion);
    return 0;
  }
  if (!first.empty() && first[0] == '-') {
    fmt::print(stderr,
               "tetra: error: unknown option '{}' before the command (see "
               "'tetra --help')\n",
               argv[1]);
    return 1;
  }
  const Command *command = findCommand(first);
  if (!command) {
    fmt::print(stderr,
               "tetra: error: unknown command '{}' (commands: {}; see 'tetra "
               "--help')\n",
               argv[1], commandList());
    return 1;
  }
  std::vector<std::string_view> args(argv + 2, argv + argc);
  return command->run(args);
}
