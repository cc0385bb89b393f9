//===- LoadInputs.cpp - A model, a policy and a run from the command line -===//

#include "tools/tetra/LoadInputs.h"

using namespace tetra;
using namespace tetra::frontend;
using namespace tetra::driver;

std::optional<LoadedInputs>
tetra::driver::loadInputs(DiagnosticEngine &diags,
                          const std::vector<std::string> &files,
                          EmitOptions emit, const std::string &command,
                          const std::string &needsModel) {
  std::string modelPath, policyPath;
  std::optional<RunConfig> run;
  for (const std::string &file : files) {
    std::optional<FileKind> kind = detectFileKind(diags, file);
    if (!kind)
      return std::nullopt;
    std::string *slot = nullptr;
    if (*kind == FileKind::Model)
      slot = &modelPath;
    else if (*kind == FileKind::Policy)
      slot = &policyPath;
    if (*kind == FileKind::Run) {
      if (run) {
        diags.error(command + ": more than one run file given");
        return std::nullopt;
      }
      run = loadRun(diags, file);
      if (!run)
        return std::nullopt;
      continue;
    }
    if (!slot->empty()) {
      diags.error(command + ": more than one " +
                  llvm::Twine(*kind == FileKind::Model ? "model" : "policy") +
                  " file given ('" + *slot + "' and '" + file + "')");
      return std::nullopt;
    }
    *slot = file;
  }
  if (run) {
    if (modelPath.empty())
      modelPath = run->modelPath;
    if (policyPath.empty())
      policyPath = run->policyPath;
    emit.dimensions.try_emplace("batch", run->microBatch);
    emit.dimensions.try_emplace("seq", run->seqLen);
  }
  if (modelPath.empty()) {
    diags.error(command + ": " + needsModel +
                " needs a model file (or a run file naming one)");
    return std::nullopt;
  }
  std::optional<ModelGraph> model = loadModel(diags, modelPath);
  if (!model)
    return std::nullopt;
  std::optional<ResolvedPolicy> policy;
  if (!policyPath.empty()) {
    policy = loadPolicy(diags, policyPath, model->linearNames());
    if (!policy)
      return std::nullopt;
    // The checks `tetra check` makes, so that the IR verifier never has to:
    // Wgrad's tokens count once batch and seq are both known.
    auto batch = emit.dimensions.find("batch");
    auto seq = emit.dimensions.find("seq");
    int64_t tokens = 0;
    std::string tokensText;
    if (batch != emit.dimensions.end() && seq != emit.dimensions.end()) {
      tokens = batch->second * seq->second;
      tokensText = "batch * seq = " + std::to_string(batch->second) + " * " +
                   std::to_string(seq->second) + " = " +
                   std::to_string(tokens) + " tokens";
    }
    if (!checkReductionSizes(diags, *model, *policy, tokens, tokensText, ""))
      return std::nullopt;
  }
  return LoadedInputs{std::move(*model), std::move(policy), std::move(run),
                      std::move(emit)};
}
