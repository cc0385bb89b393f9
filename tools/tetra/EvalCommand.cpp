//===- EvalCommand.cpp - tetra eval: a checkpoint's loss, no training -----===//
//
// `tetra eval RUN.tetra --checkpoint FILE|DIR [--policy POLICY] [--data GLOB]
// [--batches N] [--dump-batches FILE]`: the mean loss (and perplexity) of a checkpoint's
// parameters on the run's evaluation data — the run's own step forward on
// the CPU, under the run's policy or another, the same batches in the same
// order as `tetra train`'s evaluations (so a checkpoint of step S gives that
// run's eval loss at step S). Nothing is written but --dump-batches' file:
// the batches' tokens and targets (I32 [batches, batch, seq]) and the loss,
// for checking another implementation on the same tokens (an export's).
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"
#include "tools/tetra/LoadInputs.h"

#include "driver/CompileStep.h"
#include "runtime/trainer/RunPlan.h"
#include "runtime/io/Safetensors.h"
#include "runtime/trainer/Trainer.h"

#include "llvm/Support/FileSystem.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <cstdlib>

using namespace tetra;
using namespace tetra::driver;

namespace {

int usageError(const std::string &message) {
  fmt::print(stderr, "tetra eval: error: {} (see 'tetra eval --help')\n",
             message);
  return 2;
}

int fail(const std::string &message) {
  fmt::print(stderr, "tetra eval: error: {}\n", message);
  return 1;
}

} // namespace

int tetra::driver::evalMain(const std::vector<std::string_view> &args) {
  std::string runPath, checkpointPath, policyOverride, dataGlob, dumpPath;
  int64_t batches = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg(args[i]);
    auto value = [&](std::string &slot) {
      if (i + 1 == args.size())
        return false;
      slot = std::string(args[++i]);
      return true;
    };
    std::string text;
    if (arg == "-h" || arg == "--help") {
      printEvalHelp();
      return 0;
    }
    if (arg == "--checkpoint") {
      if (!value(checkpointPath))
        return usageError("--checkpoint takes a checkpoint file or directory");
    } else if (arg == "--policy") {
      if (!value(policyOverride))
        return usageError("--policy takes a policy file");
    } else if (arg == "--data") {
      if (!value(dataGlob))
        return usageError("--data takes a file or glob");
    } else if (arg == "--dump-batches") {
      if (!value(dumpPath))
        return usageError("--dump-batches takes a file to write");
    } else if (arg == "--batches") {
      if (!value(text) || (batches = std::atoll(text.c_str())) <= 0)
        return usageError("--batches takes a positive number");
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else if (runPath.empty()) {
      runPath = arg;
    } else {
      return usageError("one run file at a time ('" + runPath + "', '" + arg +
                        "')");
    }
  }
  if (runPath.empty())
    return usageError("no run file");
  if (checkpointPath.empty())
    return usageError("no checkpoint (--checkpoint FILE|DIR)");
  if (!dumpPath.empty() && llvm::sys::fs::exists(dumpPath))
    return fail("'" + dumpPath + "' exists; --dump-batches never writes over "
                "a file");

  llvm::SourceMgr sourceMgr;
  frontend::DiagnosticEngine diags(sourceMgr);
  std::vector<std::string> files = {runPath};
  if (!policyOverride.empty())
    files.push_back(policyOverride);
  std::optional<LoadedInputs> inputs =
      loadInputs(diags, files, {}, "tetra eval", "an evaluation");
  if (!inputs)
    return 1;
  if (!inputs->run)
    return usageError("'" + runPath + "' is not a run file");
  const frontend::RunConfig *run = &*inputs->run;
  const frontend::ModelGraph *model = &inputs->model;
  const frontend::ResolvedPolicy *policy = &*inputs->policy;
  std::vector<std::string> data =
      dataGlob.empty() ? run->evalData : std::vector<std::string>{dataGlob};
  if (data.empty())
    return fail("run '" + run->name +
                "' has no evaluation data (data.eval): give --data GLOB");
  if (batches == 0)
    batches = run->evalBatches > 0 ? run->evalBatches : 1;

  trainer::RunPlan plan = runPlanOf(*run, *model, *policy, /*steps=*/1);
  io::Expected<std::shared_ptr<tokenizer::Tokenizer>> encoder =
      trainer::openTokenizer(plan.tokenizer, plan.vocabulary);
  if (!encoder)
    return fail(encoder.error().message());
  auto evalPacker = [&]() {
    return trainer::openPacker(
        data, *encoder,
        data::PackerOptions::validation(run->seqLen, run->microBatch,
                                        (*encoder)->endOfText()));
  };
  io::Expected<data::Packer> packer = evalPacker();
  io::Expected<data::Packer> unused = evalPacker(); // the trainer's "train"
  if (!packer || !unused)
    return fail(packer ? unused.error().message() : packer.error().message());

  mlir::MLIRContext context;
  context.printOpOnDiagnostic(false);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::FailureOr<CompiledStep> compiled = compileTrainingStep(
      context, sourceMgr, *model, policy, compileOptionsFor(*run));
  if (mlir::failed(compiled))
    return 1;
  io::Expected<CpuStep> step = loadCpuStep(std::move(*compiled));
  if (!step)
    return fail(step.error().message());

  trainer::TrainerConfig config = plan.trainerConfig();
  config.metricsPath.clear();
  config.checkpointDir.clear();
  config.quiet = true;
  config.evalBatches = batches;
  io::Expected<std::unique_ptr<trainer::Trainer>> trainer =
      trainer::Trainer::create(*step->backend, step->schedule, step->modules,
                               config, std::move(*unused));
  if (!trainer)
    return fail(trainer.error().message());
  (*trainer)->setEvaluation(std::move(*packer));
  if (io::Status ready = (*trainer)->initialize(); !ready)
    return fail(ready.error().message());
  if (io::Status loaded = (*trainer)->loadParameters(checkpointPath); !loaded)
    return fail(loaded.error().message());
  io::Expected<double> loss = (*trainer)->evaluate();
  if (!loss)
    return fail(loss.error().message());
  if (!dumpPath.empty()) {
    // The same batches again, from a packer of their own.
    io::Expected<data::Packer> again = evalPacker();
    if (!again)
      return fail(again.error().message());
    std::vector<int32_t> tokens, targets;
    int64_t read = 0;
    data::Batch batch;
    for (; read < batches; ++read) {
      io::Expected<bool> got = again->nextBatch(batch);
      if (!got)
        return fail(got.error().message());
      if (!*got)
        break;
      tokens.insert(tokens.end(), batch.tokens.begin(), batch.tokens.end());
      targets.insert(targets.end(), batch.targets.begin(), batch.targets.end());
    }
    const std::vector<int64_t> shape = {read, run->microBatch, run->seqLen};
    io::SafetensorsWriter writer;
    writer.setMetadata("eval_loss", fmt::format("{:.9g}", *loss));
    writer.setMetadata("checkpoint", checkpointPath);
    if (io::Status added = writer.addTensor("tokens", io::Dtype::I32, shape,
                                            tokens.data(),
                                            tokens.size() * sizeof(int32_t));
        !added)
      return fail(added.error().message());
    if (io::Status added = writer.addTensor("targets", io::Dtype::I32, shape,
                                            targets.data(),
                                            targets.size() * sizeof(int32_t));
        !added)
      return fail(added.error().message());
    if (io::Status written = writer.write(dumpPath); !written)
      return fail(written.error().message());
  }
  fmt::print(
      "checkpoint {} (step {}, trained under {}): eval loss {:.6f}, perplexity "
      "{:.4f} on {} batches of {} x {} tokens under policy {}\n",
      checkpointPath, (*trainer)->step(), (*trainer)->resumedPolicy(), *loss,
      std::exp(*loss), batches, run->microBatch, run->seqLen, policy->name);
  return 0;
}

void tetra::driver::printEvalHelp() {
  std::printf(
      "USAGE: tetra eval RUN.tetra --checkpoint FILE|DIR [options]\n"
      "\n"
      "The evaluation loss (and perplexity) of a checkpoint's parameters: the\n"
      "run's own step forward on this CPU, over the run's evaluation data\n"
      "from its start, as 'tetra train' evaluates (a checkpoint of step S\n"
      "gives that run's eval_loss at step S). Nothing is trained or written.\n"
      "\n"
      "OPTIONS\n"
      "  --checkpoint FILE|DIR  a checkpoint file (step_N.safetensors) or a\n"
      "                         checkpoint directory (its latest)\n"
      "  --policy FILE          evaluate under this policy instead of the run's\n"
      "  --data GLOB            these documents instead of the run's data.eval\n"
      "  --batches N            this many batches (default: the run's\n"
      "                         eval.batches)\n"
      "  --dump-batches FILE    also write the batches' tokens and targets\n"
      "                         (I32 [batches, batch, seq]) and the loss\n"
      "                         (metadata eval_loss) as safetensors\n"
      "  -h, --help             print this help\n"
      "\n"
      "EXAMPLES\n"
      "  tetra eval models/runs/tiny_c4_cpu.tetra --checkpoint out/tiny_c4_cpu/checkpoints\n"
      "  tetra eval models/runs/tiny_c4_cpu.tetra --checkpoint out/tiny_c4_cpu/checkpoints \\\n"
      "      --policy models/policies/bf16.tetra --batches 16\n");
}
