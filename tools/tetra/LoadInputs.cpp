//===- LoadInputs.cpp - A model, a policy and a run from the command line -===//

#include "tools/tetra/LoadInputs.h"

#include "runtime/kernels/Registry.h"

#include <fmt/format.h>

using namespace tetra;
using namespace tetra::frontend;
using namespace tetra::driver;

std::optional<LoadedInputs> tetra::driver::loadInputs(
    DiagnosticEngine &diags, const std::vector<std::string> &files,
    EmitOptions emit, const std::string &command, const std::string &needsModel,
    const std::vector<std::string> &overrides) {
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
      run = loadRun(diags, file, overrides);
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
  if (!run && !overrides.empty()) {
    diags.error(command + ": --set changes a run file's settings, and no run "
                          "file was given");
    return std::nullopt;
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
      tokensText = fmt::format("batch * seq = {} * {} = {} tokens",
                               batch->second, seq->second, tokens);
    }
    if (!checkReductionSizes(diags, *model, *policy, tokens, tokensText, ""))
      return std::nullopt;
  }
  return LoadedInputs{std::move(*model), std::move(policy), std::move(run),
                      std::move(emit)};
}

int64_t tetra::driver::embeddingRows(const frontend::ModelGraph &model) {
  int64_t rows = 0;
  for (const frontend::Function &function : model.functions)
    for (const frontend::Op &op : function.ops) {
      if (op.kind != frontend::OpKind::Embedding)
        continue;
      const frontend::Value &table = function.values[op.operands[0]];
      if (table.source == frontend::Value::Source::Parameter)
        rows = model.parameters[table.index].shape[0];
    }
  return rows;
}

trainer::RunPlan tetra::driver::runPlanOf(const frontend::RunConfig &run,
                                          const frontend::ModelGraph &model,
                                          const frontend::ResolvedPolicy &policy,
                                          int64_t steps) {
  trainer::RunPlan plan;
  plan.run = run.name;
  plan.model = model.name;
  plan.policy = policy.name;
  for (const frontend::Parameter &parameter : model.parameters) {
    trainer::ParameterSpec p;
    p.name = parameter.name;
    p.shape = parameter.shape;
    p.std = parameter.init.std;
    p.init = parameter.init.kind == frontend::Initializer::Kind::Normal
                 ? trainer::ParameterSpec::Init::Normal
             : parameter.init.kind == frontend::Initializer::Kind::Ones
                 ? trainer::ParameterSpec::Init::Ones
                 : trainer::ParameterSpec::Init::Zeros;
    plan.parameters.push_back(p);
  }
  plan.trainData = run.trainData;
  plan.evalData = run.evalData;
  switch (run.tokenizer.kind) {
  case frontend::TokenizerConfig::Kind::Bytes:
    plan.tokenizer.kind = tokenizer::TokenizerSpec::Kind::Bytes;
    break;
  case frontend::TokenizerConfig::Kind::GPT2:
    plan.tokenizer.kind = tokenizer::TokenizerSpec::Kind::GPT2;
    break;
  case frontend::TokenizerConfig::Kind::Llama3:
    plan.tokenizer.kind = tokenizer::TokenizerSpec::Kind::Llama3;
    break;
  }
  plan.tokenizer.path = run.tokenizer.path;
  plan.vocabulary = embeddingRows(model);
  plan.seqLen = run.seqLen;
  plan.microBatch = run.microBatch;
  plan.accumulation = run.accumulation;
  plan.steps = steps;
  plan.lr.lr = run.lr;
  plan.lr.minLr = run.schedule.minLr;
  plan.lr.warmup = run.schedule.warmup;
  plan.lr.total = steps;
  plan.lr.kind =
      run.schedule.kind == frontend::ScheduleConfig::Kind::Cosine
          ? trainer::LearningRateSchedule::Kind::Cosine
      : run.schedule.kind == frontend::ScheduleConfig::Kind::Linear
          ? trainer::LearningRateSchedule::Kind::Linear
          : trainer::LearningRateSchedule::Kind::Constant;
  plan.seed = run.seed;
  plan.logInterval = run.logInterval;
  plan.sqnrInterval = run.sqnrInterval < 0 ? run.logInterval : run.sqnrInterval;
  plan.evalInterval = run.evalData.empty() ? 0 : run.evalInterval;
  plan.evalBatches = run.evalBatches;
  plan.checkpointInterval = run.checkpointInterval;
  return plan;
}

io::Expected<tetra::driver::CpuStep>
tetra::driver::loadCpuStep(CompiledStep compiled) {
  io::Expected<std::unique_ptr<backend::CpuBackend>> created =
      backend::CpuBackend::create();
  if (!created)
    return created.error();
  CpuStep step;
  step.backend = std::move(*created);
  step.kernels = std::move(compiled.kernels);
  step.schedule = std::move(compiled.schedule);
  io::Expected<backend::Module> library = step.backend->loadModule(
      backend::CodeObject::cpuTable(kernels::libraryKernels(), "library"));
  if (!library)
    return library.error();
  io::Expected<backend::Module> kernels = step.backend->loadModule(
      backend::CodeObject::cpuTable(step.kernels->table(), "compiled"));
  if (!kernels)
    return kernels.error();
  step.modules = {*library, *kernels};
  return step;
}
