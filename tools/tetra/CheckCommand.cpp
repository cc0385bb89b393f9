//===- CheckCommand.cpp - tetra check -------------------------------------===//
//
// `tetra check FILES...`: loads every file as its header says (model, policy
// or run), reports every error with file:line:col, and prints a line per
// file that checked:
//
//   model llama3_8b: 291 parameter tensors, 8,030,261,248 parameters, ...
//   policy fp4_all: ok for 225 linears of model llama3_8b
//   run tiny_c4_cpu: ok (model llama_tiny, policy fp4_all_hadamard, 1,024 tokens ...)
//
// A policy is resolved against the model before it on the command line (or
// the first one after it). A run loads its own model and policy and checks
// that every block and rotation its policy uses divides the size its GEMM
// reduces over: the tokens of a micro-batch for Wgrad, the input and output
// features for Fprop and Dgrad, and that every data glob matches a file.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"
#include "tools/tetra/LoadInputs.h"

#include "frontend/Diagnostics.h"
#include "frontend/Frontend.h"
#include "runtime/data/Documents.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <map>
#include <optional>
#include <string>

using namespace tetra;
using namespace tetra::frontend;

namespace {

constexpr const char *kPrefix = "tetra check: ";

/// 8030261248 -> "8,030,261,248".
std::string withThousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      text += ',';
    text += digits[i];
  }
  return value < 0 ? "-" + text : text;
}

std::string plural(int64_t count, llvm::StringRef noun) {
  return withThousands(count) + " " + noun.str() + (count == 1 ? "" : "s");
}

/// The files of one `tetra check` and what loading them produced.
class Checker {
public:
  Checker() : diags(sourceMgr) {}

  /// Checks every file; true when all of them checked.
  bool run(const std::vector<std::string> &paths);
  /// Also print every linear of each model (a model file's, a run's).
  bool listLinears = false;

private:
  void printLinears(const ModelGraph &model) {
    if (listLinears)
      for (const std::string &name : model.linearNames())
        llvm::outs() << "  " << name << "\n";
  }
  bool checkModel(size_t index);
  bool checkPolicy(size_t index);
  bool checkRun(size_t index);
  /// The model loaded from file `index` (once), or null when it had errors.
  const ModelGraph *modelAt(size_t index);

  llvm::SourceMgr sourceMgr;
  DiagnosticEngine diags;
  std::vector<std::string> paths;
  std::vector<std::optional<FileKind>> kinds;
  std::map<size_t, std::optional<ModelGraph>> models;
};

bool Checker::run(const std::vector<std::string> &files) {
  paths = files;
  for (const std::string &path : paths)
    kinds.push_back(detectFileKind(diags, path));
  bool allChecked = true;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!kinds[i]) {
      allChecked = false;
      continue;
    }
    switch (*kinds[i]) {
    case FileKind::Model:
      allChecked &= checkModel(i);
      break;
    case FileKind::Policy:
      allChecked &= checkPolicy(i);
      break;
    case FileKind::Run:
      allChecked &= checkRun(i);
      break;
    }
  }
  return allChecked && !diags.hadErrors();
}

const ModelGraph *Checker::modelAt(size_t index) {
  auto it = models.find(index);
  if (it == models.end())
    it = models.emplace(index, loadModel(diags, paths[index])).first;
  return it->second ? &*it->second : nullptr;
}

bool Checker::checkModel(size_t index) {
  const ModelGraph *model = modelAt(index);
  if (!model)
    return false;
  llvm::outs() << "model " << model->name << ": "
               << plural(static_cast<int64_t>(model->parameters.size()),
                         "parameter tensor")
               << ", " << plural(model->parameterCount(), "parameter") << ", "
               << plural(static_cast<int64_t>(model->linearNames().size()),
                         "linear")
               << "\n";
  printLinears(*model);
  return true;
}

bool Checker::checkPolicy(size_t index) {
  // The model before the policy on the command line, else the first after.
  std::optional<size_t> modelIndex;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (kinds[i] != FileKind::Model)
      continue;
    if (i < index || !modelIndex)
      modelIndex = i;
    if (i > index)
      break;
  }
  if (!modelIndex) {
    diags.error("policy '" + paths[index] +
                "' needs a model to be checked against: tetra check MODEL "
                "POLICY");
    return false;
  }
  const ModelGraph *model = modelAt(*modelIndex);
  if (!model) {
    llvm::errs() << kPrefix << "policy '" << paths[index]
                 << "' not checked: its model '" << paths[*modelIndex]
                 << "' has errors\n";
    return false;
  }
  std::optional<ResolvedPolicy> policy =
      loadPolicy(diags, paths[index], model->linearNames());
  if (!policy || !checkReductionSizes(diags, *model, *policy, 0, "", ""))
    return false;
  llvm::outs() << "policy " << policy->name << ": ok for "
               << plural(static_cast<int64_t>(policy->linears.size()), "linear")
               << " of model " << model->name << "\n";
  return true;
}

bool Checker::checkRun(size_t index) {
  std::optional<RunConfig> run = loadRun(diags, paths[index]);
  if (!run)
    return false;
  std::optional<ModelGraph> model = loadModel(diags, run->modelPath);
  if (!model)
    return false;
  std::optional<ResolvedPolicy> policy =
      loadPolicy(diags, run->policyPath, model->linearNames());
  if (!policy)
    return false;
  int64_t tokens = 0;
  if (__builtin_mul_overflow(run->seqLen, run->microBatch, &tokens)) {
    diags.error("run '" + run->name +
                "': seq_len * micro_batch does not fit in 64 bits");
    return false;
  }
  std::string tokensText =
      fmt::format("seq_len * micro_batch = {} * {} = {} tokens", run->seqLen,
                  run->microBatch, tokens);
  if (!checkReductionSizes(diags, *model, *policy, tokens, tokensText,
                           "run '" + run->name + "': "))
    return false;
  // Every data glob matches a file, as training will need (data::expandGlobs,
  // what the trainer expands them with).
  bool matched = true;
  for (auto [globs, locs, what] :
       {std::make_tuple(&run->trainData, &run->trainDataLocs, "data.train"),
        std::make_tuple(&run->evalData, &run->evalDataLocs, "data.eval")})
    for (size_t i = 0; i < globs->size(); ++i)
      if (io::Expected<std::vector<std::string>> files =
              data::expandGlobs({(*globs)[i]});
          !files) {
        diags.error((*locs)[i], std::string(what) + ": " +
                                    files.error().message());
        matched = false;
      }
  if (!matched)
    return false;
  // The tokenizer's ids must be rows of the model's embedding, as training
  // checks before its first step.
  tokenizer::TokenizerSpec spec =
      driver::runPlanOf(*run, *model, *policy, 1).tokenizer;
  io::Expected<std::shared_ptr<tokenizer::Tokenizer>> encoder =
      trainer::openTokenizer(spec, driver::embeddingRows(*model));
  if (!encoder) {
    diags.error(run->tokenizerLoc,
                "data.tokenizer: " + encoder.error().message() +
                    " (model '" + model->name + "', " +
                    run->modelPath + "): every token id must be a row");
    return false;
  }
  llvm::outs() << "run " << run->name << ": ok (model " << model->name
               << ", policy " << policy->name << ", " << plural(tokens, "token")
               << " per micro-batch)\n";
  printLinears(*model);
  return true;
}

} // namespace

namespace tetra::driver {

void printCheckHelp() {
  llvm::outs() << R"(USAGE: tetra check FILE...

Checks model, policy and run files (each file's first word says which) and
reports every error with its file, line and column. Prints one line per file
that checks; exits with 0 only if every file checked.

  model FILE   parsed and elaborated: names, shapes of every built-in,
               parameters (an unused one is an error)
  policy FILE  resolved against the model before it on the command line (or
               the first after it): tetra check MODEL POLICY
  run FILE     its model and policy loaded and resolved; every block and
               rotation of the policy must divide the size its GEMM reduces
               over: seq_len * micro_batch tokens for Wgrad, the input
               features for Fprop, the output features for Dgrad; every
               data glob must match a file, and every id of the tokenizer
               must be a row of the model's embedding

OPTIONS
  --linears    also print every linear of each model (a model file's, a run's),
               one name a line: the names a policy's rules match
  -h, --help   print this help

EXAMPLES
  tetra check models/llama3_8b.tetra
  tetra check models/llama3_8b.tetra models/policies/fp4_all.tetra
  tetra check models/runs/tiny_c4_cpu.tetra
  tetra check --linears models/llama_tiny.tetra
)";
}

int checkMain(const std::vector<std::string_view> &args) {
  std::vector<std::string> files;
  bool positionalOnly = false, listLinears = false;
  for (std::string_view arg : args) {
    if (!positionalOnly && (arg == "-h" || arg == "--help")) {
      printCheckHelp();
      return 0;
    }
    if (!positionalOnly && arg == "--linears") {
      listLinears = true;
      continue;
    }
    if (!positionalOnly && arg == "--") {
      positionalOnly = true;
      continue;
    }
    if (!positionalOnly && arg.size() > 1 && arg[0] == '-') {
      llvm::errs() << kPrefix << "error: unknown option '" << arg
                   << "' (see 'tetra check --help')\n";
      return 1;
    }
    files.emplace_back(arg);
  }
  if (files.empty()) {
    llvm::errs() << kPrefix
                 << "error: no input files (usage: tetra check FILE...)\n";
    return 1;
  }
  Checker checker;
  checker.listLinears = listLinears;
  return checker.run(files) ? 0 : 1;
}

} // namespace tetra::driver
