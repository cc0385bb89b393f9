//===- TrainCommand.cpp - tetra train: compile a run and train it ---------===//
//
// `tetra train RUN.tetra [--steps N] [--out DIR] [--resume DIR]`: loads the
// run, its model and policy (every error with file:line:col), compiles the
// training step for the run's target, reads and tokenizes the data, and
// trains with a progress line, metrics (DIR/metrics.jsonl) and checkpoints.
//
// Nothing is lost: a fresh run refuses outputs that hold another run's
// metrics or checkpoints (--resume continues it, --force replaces it), each
// --policy variant of a run file writes its own outputs, and SIGINT/SIGTERM
// stop at the next step boundary with a checkpoint (a second one at once).
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"

#include "frontend/Frontend.h"
#include "driver/CompileStep.h"
#include "runtime/bundle/StepBundle.h"
#include "runtime/backend/CpuBackend.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/Documents.h"
#include "runtime/data/Packer.h"
#include "runtime/distributed/GlooCommunicator.h"
#include "runtime/distributed/Launcher.h"
#include "tools/tetra/LoadInputs.h"

#include "runtime/io/AtomicFile.h"
#include "runtime/io/Json.h"
#include "runtime/kernels/Registry.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/trainer/Trainer.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

using namespace tetra;

namespace {

/// "rank R: " in a multi-rank run's messages, else "".
std::string rankPrefix;

int fail(const std::string &message) {
  fmt::print(stderr, "tetra train: {}error: {}\n", rankPrefix, message);
  return 1;
}

int usageError(const std::string &message) {
  fmt::print(stderr, "tetra train: error: {} (see 'tetra train --help')\n",
             message);
  return 2;
}

bool exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

bool sameDirectory(const std::string &a, const std::string &b) {
  struct stat x, y;
  return stat(a.c_str(), &x) == 0 && stat(b.c_str(), &y) == 0 &&
         x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/// The signal that asked the run to stop (0: none). The first SIGINT or
/// SIGTERM stops at the next step boundary; a second exits at once.
std::atomic<int> stopSignal{0};

extern "C" void onStopSignal(int signal) {
  if (stopSignal.exchange(signal) != 0)
    _exit(128 + signal);
  const char message[] =
      "\ntetra train: stopping after this step (a checkpoint follows); "
      "signal again to stop at once\n";
  (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
}

void installStopHandlers() {
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

/// Where --resume ARG's checkpoints are: ARG itself when it holds them, the
/// run folder's checkpoint directory when ARG is the run folder (the folder
/// `tetra train` prints: its --out).
io::Expected<std::string> resumeDirectory(const std::string &arg,
                                          const std::string &outDir,
                                          const std::string &checkpointDir) {
  if (exists(arg + "/latest"))
    return arg;
  if (exists(arg + "/checkpoints/latest"))
    return arg + "/checkpoints";
  if ((arg == outDir || sameDirectory(arg, outDir)) &&
      exists(checkpointDir + "/latest"))
    return checkpointDir;
  if (!exists(arg))
    return io::Error("--resume " + arg + ": no such directory");
  return io::Error("--resume " + arg +
                   ": holds no checkpoints (no 'latest' in it, in " + arg +
                   "/checkpoints or in " + checkpointDir + ")");
}

/// A fresh run's outputs must not hold another run's results. With `force`
/// they are removed; without, an error says how to continue or go elsewhere.
io::Status claimOutputs(const std::string &metricsPath,
                        const std::string &checkpointDir, bool force,
                        const std::string &outDir) {
  struct stat info;
  bool metrics = stat(metricsPath.c_str(), &info) == 0 && info.st_size > 0;
  bool checkpoints = checkpoint::holdsCheckpoints(checkpointDir);
  if (!metrics && !checkpoints)
    return io::success();
  if (!force) {
    std::string what = metrics && checkpoints
                           ? "'" + metricsPath + "' and checkpoints in '" +
                                 checkpointDir + "'"
                       : metrics ? "'" + metricsPath + "'"
                                 : "checkpoints in '" + checkpointDir + "'";
    return io::Error("a run was already trained here (" + what +
                     "); continue it with --resume " +
                     (metrics ? outDir : checkpointDir) +
                     ", train into a new --out DIR, or replace it with "
                     "--force");
  }
  if (checkpoints)
    if (io::Status removed = checkpoint::removeCheckpoints(checkpointDir);
        !removed)
      return removed;
  if (metrics && std::remove(metricsPath.c_str()) != 0)
    return io::Error("cannot remove '" + metricsPath + "'");
  return io::success();
}

/// The number of rows of the embedding table the model reads tokens with:
/// every token id must be below it.
/// FNV-1a (64 bits) of the files' bytes in order, as 16 hex digits: the same
/// files give the same resolved policy.
io::Expected<std::string> hashFiles(const std::vector<std::string> &files) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const std::string &file : files) {
    FILE *in = std::fopen(file.c_str(), "rb");
    if (!in)
      return io::Error("cannot read '" + file + "'");
    for (int c; (c = std::fgetc(in)) != EOF;)
      hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    std::fclose(in);
  }
  return fmt::format("{:016x}", hash);
}

/// OUT/run.json: what was trained and how — written once, when a run starts
/// fresh (a resumed run keeps the record of the run it continues).
io::Status writeRunRecord(const std::string &outDir, const std::string &name,
                          const frontend::RunConfig &run,
                          const frontend::ModelGraph &model,
                          const frontend::ResolvedPolicy &policy,
                          const std::vector<std::string> &settings,
                          const std::vector<std::string_view> &args) {
  io::Expected<std::string> policyHash = hashFiles(policy.files);
  if (!policyHash)
    return policyHash.error();
  io::JsonValue record = io::JsonValue::object();
  auto strings = [](const auto &texts) {
    io::JsonValue array = io::JsonValue::array();
    for (const auto &text : texts)
      array.push(io::JsonValue::string(std::string(text)));
    return array;
  };
  std::vector<std::string_view> command = {"tetra", "train"};
  command.insert(command.end(), args.begin(), args.end());
  record.set("run", io::JsonValue::string(name));
  llvm::SmallString<256> runFile(run.path);
  (void)llvm::sys::fs::make_absolute(runFile);
  record.set("run_file", io::JsonValue::string(std::string(runFile.str())));
  record.set("model", io::JsonValue::string(model.name));
  record.set("model_file", io::JsonValue::string(run.modelPath));
  record.set("policy", io::JsonValue::string(policy.name));
  record.set("policy_files", strings(policy.files));
  record.set("policy_hash", io::JsonValue::string(*policyHash));
  record.set("settings", strings(settings));
  record.set("seed", io::JsonValue::integer(static_cast<int64_t>(run.seed)));
  record.set("target", io::JsonValue::string(targetName(run.target)));
  record.set("tetra_version", io::JsonValue::string(driver::kTetraVersion));
  record.set("command", strings(command));
  io::Expected<io::AtomicFileWriter> writer =
      io::AtomicFileWriter::create(outDir + "/run.json");
  if (!writer)
    return writer.error();
  if (io::Status written = writer->write(io::writeJson(record) + "\n");
      !written)
    return written;
  return writer->commit();
}

} // namespace

int tetra::driver::trainMain(const std::vector<std::string_view> &args) {
  std::string runPath, outDir, resumeDir, policyOverride, targetOverride,
      label;
  std::vector<std::string> settings; // --set KEY=VALUE, in order
  int64_t steps = 0, until = 0, checkpointEvery = 0, ranks = 0;
  distributed::Reduction reduction = distributed::Reduction::Sum;
  bool quiet = false, force = false, shardOptimizer = false;
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
      printTrainHelp();
      return 0;
    }
    if (arg == "--steps") {
      if (!value(text) || (steps = std::atoll(text.c_str())) <= 0)
        return usageError("--steps takes a positive number");
    } else if (arg == "--until") {
      if (!value(text) || (until = std::atoll(text.c_str())) <= 0)
        return usageError("--until takes a positive step");
    } else if (arg == "--ranks") {
      if (!value(text) || (ranks = std::atoll(text.c_str())) < 1 ||
          ranks > 64)
        return usageError("--ranks takes a number of processes from 1 to 64");
    } else if (arg == "--reduction") {
      std::optional<distributed::Reduction> parsed;
      if (!value(text) || !(parsed = distributed::parseReduction(text)))
        return usageError("--reduction takes sum or fixed_order");
      reduction = *parsed;
    } else if (arg == "--checkpoint-every") {
      if (!value(text) || (checkpointEvery = std::atoll(text.c_str())) <= 0)
        return usageError("--checkpoint-every takes a positive number");
    } else if (arg == "--target") {
      if (!value(targetOverride) || !parseTarget(targetOverride))
        return usageError("--target takes " + targetNameList());
    } else if (arg == "--policy") {
      if (!value(policyOverride))
        return usageError("--policy takes a policy file");
    } else if (arg == "--out") {
      if (!value(outDir))
        return usageError("--out takes a directory");
    } else if (arg == "--resume") {
      if (!value(resumeDir))
        return usageError("--resume takes a checkpoint directory");
    } else if (arg == "--label") {
      if (!value(label) || label.empty())
        return usageError("--label takes a name for the run's curves");
    } else if (arg == "--set") {
      if (!value(text))
        return usageError("--set takes KEY=VALUE (--set seed=3)");
      settings.push_back(text);
    } else if (arg == "--shard-optimizer") {
      shardOptimizer = true;
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--force") {
      force = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
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

  // Several ranks: started here (--ranks N), or this process is one of
  // them (the launcher's variables, ours or torchrun's / SLURM's).
  io::Expected<distributed::RankInfo> rankInfo =
      distributed::RankInfo::fromEnvironment();
  if (!rankInfo)
    return fail(rankInfo.error().message());
  if (shardOptimizer && ranks < 2 && rankInfo->worldSize < 2)
    return usageError("--shard-optimizer shards AdamW's moments across ranks: "
                      "give --ranks N (N > 1), or start the ranks with RANK "
                      "and WORLD_SIZE");
  if (ranks > 1 && !rankInfo->launched) {
    std::vector<std::string> argv = {"tetra", "train"};
    argv.insert(argv.end(), args.begin(), args.end());
    return distributed::launchRanks(static_cast<int>(ranks), argv,
                                    "tetra train", rankInfo->launcherGrace());
  }
  if (ranks > 1 && ranks != rankInfo->worldSize)
    return usageError(fmt::format("--ranks {} in a run of WORLD_SIZE={}", ranks,
                                  rankInfo->worldSize));
  const bool lead = rankInfo->rank == 0;
  io::Expected<std::string> prefix = distributed::enterRank(*rankInfo);
  if (!prefix)
    return fail(prefix.error().message());
  rankPrefix = *prefix;

  llvm::SourceMgr sourceMgr;
  frontend::DiagnosticEngine diags(sourceMgr);
  std::optional<frontend::RunConfig> run =
      frontend::loadRun(diags, runPath, settings);
  if (!run)
    return 1;
  if (!targetOverride.empty())
    run->target = *parseTarget(targetOverride);
  if (rankInfo->launched && run->target != Target::Cpu)
    return fail(fmt::format(
        "{} ranks on target '{}': 'tetra train' runs several ranks on the "
        "CPU (Gloo); GPU ranks train from a step bundle: 'tetra compile' it, "
        "then 'tetra-run BUNDLE --gpus N' (NCCL)",
        rankInfo->worldSize, targetName(run->target)));
  // A GPU run needs its GPU here: opened first, so that a machine without
  // one says so before anything is compiled.
  std::unique_ptr<backend::Backend> gpu;
  if (run->target != Target::Cpu) {
    io::Expected<std::unique_ptr<backend::Backend>> device =
        bundle::openDevice(targetName(run->target));
    if (!device)
      return fail(std::string("target '") + targetName(run->target) + "': " +
                  device.error().message() +
                  "; compile a step bundle here ('tetra compile') and train "
                  "it with 'tetra-run' where the GPU is");
    gpu = std::move(*device);
  }
  std::optional<frontend::ModelGraph> model =
      frontend::loadModel(diags, run->modelPath);
  if (!model)
    return 1;
  if (!policyOverride.empty())
    run->policyPath = policyOverride;
  std::optional<frontend::ResolvedPolicy> policy =
      frontend::loadPolicy(diags, run->policyPath, model->linearNames());
  if (!policy)
    return 1;
  int64_t tokensPerMicroBatch = run->seqLen * run->microBatch;
  int64_t tokensPerStep =
      tokensPerMicroBatch * run->accumulation * rankInfo->worldSize;
  if (!frontend::checkReductionSizes(
          diags, *model, *policy, tokensPerMicroBatch,
          fmt::format("seq_len * micro_batch = {} tokens", tokensPerMicroBatch),
          "run '" + run->name + "': "))
    return 1;
  if (steps == 0)
    steps = run->steps > 0 ? run->steps
                           : std::max<int64_t>(1, run->tokens / tokensPerStep);

  // Where the run writes. A --policy or --set variant of a run file writes
  // outputs of its own (out/RUN/POLICY/KEY=VALUE,..., and the same folders
  // under the run file's checkpoint directory), so the variants of one run
  // file never collide.
  std::string variant = policyOverride.empty() ? "" : "/" + policy->name;
  if (!settings.empty()) {
    std::string folder;
    for (const std::string &setting : settings)
      folder += (folder.empty() ? "" : ",") + setting;
    for (char &c : folder)
      if (c == '/' || c == ' ' || c == '"')
        c = '_';
    variant += "/" + folder;
  }
  if (outDir.empty())
    outDir = "out/" + run->name + variant;
  std::string metricsPath = outDir + "/metrics.jsonl";
  std::string checkpointDir = run->checkpointDir.empty()
                                  ? outDir + "/checkpoints"
                                  : run->checkpointDir + variant;
  std::string resumeFrom;
  if (!resumeDir.empty()) {
    io::Expected<std::string> found =
        resumeDirectory(resumeDir, outDir, checkpointDir);
    if (!found)
      return fail(found.error().message());
    resumeFrom = *found;
  }
  // A fresh run, or a resumed one writing somewhere new, claims its outputs
  // (rank 0 alone writes them).
  if (lead && (resumeFrom.empty() || !sameDirectory(resumeFrom, checkpointDir)))
    if (io::Status claimed =
            claimOutputs(metricsPath, checkpointDir, force, outDir);
        !claimed)
      return fail(claimed.error().message());
  if (io::Status created = lead ? io::createDirectories(outDir) : io::success();
      !created)
    return fail(created.error().message());
  // The curves' name: the label, else the run's with its variant.
  const std::string runName = label.empty() ? run->name + variant : label;
  if (struct stat info;
      lead && (resumeFrom.empty() ||
               stat((outDir + "/run.json").c_str(), &info) != 0))
    if (io::Status recorded = writeRunRecord(outDir, runName, *run,
                                             *model, *policy, settings, args);
        !recorded)
      return fail(recorded.error().message());

  // Tokenizer and data.
  trainer::RunPlan plan = runPlanOf(*run, *model, *policy, steps);
  io::Expected<std::shared_ptr<tokenizer::Tokenizer>> encoder =
      trainer::openTokenizer(plan.tokenizer, plan.vocabulary);
  if (!encoder)
    return fail(encoder.error().message());
  data::PackerOptions packing;
  packing.seqLen = run->seqLen;
  packing.batchSize = run->microBatch;
  packing.endOfText = (*encoder)->endOfText();
  packing.seed = run->seed;
  io::Expected<data::Packer> packer =
      trainer::openPacker(run->trainData, *encoder, packing);
  if (!packer)
    return fail(packer.error().message());

  // Compile.
  mlir::MLIRContext context;
  context.printOpOnDiagnostic(false);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  CompileOptions options = compileOptionsFor(*run);
  // Ranks sum their gradients: the step keeps them in Gradient buffers.
  options.schedule.accumulateGradients |= rankInfo->launched;
  std::optional<CpuStep> cpu;
  schedule::Schedule step;
  std::vector<backend::Module> modules;
  if (!gpu) {
    mlir::FailureOr<CompiledStep> compiled =
        compileTrainingStep(context, sourceMgr, *model, &*policy, options);
    if (mlir::failed(compiled))
      return 1;
    io::Expected<CpuStep> loaded = loadCpuStep(std::move(*compiled));
    if (!loaded)
      return fail(loaded.error().message());
    cpu.emplace(std::move(*loaded));
    step = cpu->schedule;
    modules = cpu->modules;
  } else {
    mlir::FailureOr<CompiledGpuStep> compiled = compileGpuTrainingStep(
        context, sourceMgr, *model, &*policy, options, run->target);
    if (mlir::failed(compiled))
      return 1;
    step = std::move(compiled->schedule);
    std::vector<bundle::StepCode> code;
    for (GpuKernelCode &kernel : compiled->code) {
      bundle::StepCode object;
      object.name = kernel.name;
      object.format = run->target == Target::Gfx950
                          ? backend::CodeObjectFormat::Hsaco
                          : backend::CodeObjectFormat::Ptx;
      object.bytes = std::move(kernel.code);
      code.push_back(std::move(object));
    }
    io::Expected<std::vector<backend::Module>> loaded =
        bundle::loadCode(*gpu, code);
    if (!loaded)
      return fail(loaded.error().message());
    modules = std::move(*loaded);
  }
  backend::Backend &device =
      gpu ? *gpu : static_cast<backend::Backend &>(*cpu->backend);

  // Evaluation data, read in order from its start each time.
  std::optional<data::Packer> evalPacker;
  if (run->evalInterval > 0 && !run->evalData.empty()) {
    io::Expected<data::Packer> created = trainer::openPacker(
        run->evalData, *encoder,
        data::PackerOptions::validation(run->seqLen, run->microBatch,
                                        (*encoder)->endOfText()));
    if (!created)
      return fail(created.error().message());
    evalPacker.emplace(std::move(*created));
  }

  // The ranks meet: rank 0 serves the rendezvous store, Gloo connects
  // every pair through it.
  distributed::RankConnection ranksMet;
  if (rankInfo->launched) {
    const std::chrono::seconds timeout = rankInfo->timeout;
    io::Expected<distributed::RankConnection> connected =
        distributed::connectRanks(
            *rankInfo, timeout, [&](distributed::TcpStore &store) {
              return distributed::createGlooCommunicator(*rankInfo, store,
                                                         timeout);
            });
    if (!connected)
      return fail(connected.error().message());
    ranksMet = std::move(*connected);
  }
  distributed::Communicator *communicator = ranksMet.communicator.get();

  trainer::TrainerConfig config = plan.trainerConfig();
  config.communicator = communicator;
  config.reduction = reduction;
  config.shardOptimizer = shardOptimizer;
  // A policy or settings given on the command line name the curve too: one
  // run file, several policies and seeds, told apart in metrics and plots.
  config.run = runName;
  config.metricsPath = lead ? metricsPath : "";
  config.checkpointDir = lead ? checkpointDir : "";
  config.checkpointInterval = checkpointEvery > 0 ? checkpointEvery
                              : run->checkpointInterval > 0
                                  ? run->checkpointInterval
                                  : steps;
  config.stopAfter = until;
  config.quiet = quiet || !lead;
  config.stopRequested = [] { return stopSignal.load() != 0; };
  // Fault injection for the tests: TETRA_TEST_RANK_FAULT=kill:R:S kills
  // rank R (SIGKILL, as a crash would) after its step S; hang:R:S stops it
  // there for good, as a stuck process would.
  if (const char *fault = std::getenv("TETRA_TEST_RANK_FAULT")) {
    char kind[8] = {};
    int victim = -1;
    long long at = 0;
    if (std::sscanf(fault, "%7[a-z]:%d:%lld", kind, &victim, &at) == 3 &&
        victim == rankInfo->rank) {
      const bool hang = std::string(kind) == "hang";
      auto steps = std::make_shared<long long>(0);
      config.stopRequested = [steps, at, hang] {
        if (++*steps == at) {
          if (!hang)
            std::raise(SIGKILL);
          while (true)
            ::pause();
        }
        return stopSignal.load() != 0;
      };
    }
  }
  config.evalInterval = evalPacker ? run->evalInterval : 0;
  config.evalBatches = run->evalBatches;

  io::Expected<std::unique_ptr<trainer::Trainer>> trainer =
      trainer::Trainer::create(device, step, modules,
                               config, std::move(*packer));
  if (!trainer)
    return fail(trainer.error().message());
  if (evalPacker && lead)
    (*trainer)->setEvaluation(std::move(*evalPacker));
  io::Status ready = resumeFrom.empty() ? (*trainer)->initialize()
                                        : (*trainer)->resume(resumeFrom);
  if (!ready)
    return fail(ready.error().message());
  if (!resumeFrom.empty() && (*trainer)->resumedPolicy() != config.policy)
    fmt::print(stderr,
               "tetra train: note: the checkpoint in '{}' was trained under "
               "policy '{}'; it continues under policy '{}'\n",
               resumeFrom, (*trainer)->resumedPolicy(), config.policy);
  int64_t stopStep = until > 0 ? std::min(until, steps) : steps;
  if (!resumeFrom.empty() && (*trainer)->step() >= stopStep) {
    const int64_t at = (*trainer)->step();
    if (at >= steps)
      fmt::print("run {}: already complete: trained to step {} of {} "
                 "(checkpoints {})\n",
                 config.run, at, steps, resumeFrom);
    else
      fmt::print(
          "run {}: already at step {}, past --until {}; nothing to train\n",
          config.run, at, until);
    return 0;
  }
  fmt::print("run {}: model {} ({} parameters), policy {}, {} steps of {} "
             "tokens on {} ({} micro-batch{} of {} x {} per step)\n",
             run->name, model->name, model->parameterCount(), policy->name,
             steps, tokensPerStep, device.description(), run->accumulation,
             run->accumulation == 1 ? "" : "es", run->microBatch, run->seqLen);
  if (communicator)
    fmt::print("  on {} ranks ({} processes through {}, gradients summed by "
               "'{}'{})\n",
               communicator->size(), communicator->size(),
               communicator->engine(), distributed::reductionName(reduction),
               shardOptimizer && communicator->size() > 1
                   ? fmt::format(", AdamW's moments sharded: rank 0 keeps "
                                 "those of {} of {} parameters",
                                 (*trainer)->momentElementsHere(),
                                 model->parameterCount())
                   : "");
  installStopHandlers();
  io::Expected<trainer::TrainingSummary> summary = (*trainer)->train();
  if (!summary)
    return fail(summary.error().message());
  if (summary->stopped) {
    int signal = stopSignal.load();
    std::string again = "tetra train " + runPath;
    if (!policyOverride.empty())
      again += " --policy " + policyOverride;
    if (!targetOverride.empty())
      again += " --target " + targetOverride;
    if (steps != run->steps)
      again += fmt::format(" --steps {}", steps);
    if (until > 0)
      again += fmt::format(" --until {}", until);
    if (checkpointEvery > 0)
      again += fmt::format(" --checkpoint-every {}", checkpointEvery);
    if (ranks > 1)
      again += fmt::format(" --ranks {} --reduction {}", ranks,
                           distributed::reductionName(reduction));
    if (ranks > 1 && shardOptimizer)
      again += " --shard-optimizer";
    again += " --out " + outDir + " --resume " + outDir;
    fmt::print("run {}: stopped by {} after step {} of {}; checkpoint {}\n  "
               "resume with: {}\n",
               config.run, signal == SIGTERM ? "SIGTERM" : "SIGINT",
               summary->lastStep, steps, summary->checkpoint, again);
    return 128 + signal;
  }
  std::string evalText;
  if (summary->evalLoss)
    evalText = fmt::format(", eval loss {}", *summary->evalLoss);
  fmt::print("run {}: steps {}-{}, loss {:.4f} -> {:.4f}{}, {:.1f} s, {:.0f} "
             "tokens/s{}; metrics {}, checkpoints {}\n",
             config.run, summary->firstStep, summary->lastStep,
             summary->firstLoss, summary->lastLoss, evalText, summary->seconds,
             summary->tokensPerSecond, summary->steadyRateText(),
             config.metricsPath, config.checkpointDir);
  return 0;
}

void tetra::driver::printTrainHelp() {
  std::printf(
      "USAGE: tetra train RUN.tetra [--target T] [--steps N] [--until N]\n"
      "                   [--policy P] [--set KEY=VALUE]... [--label NAME]\n"
      "                   [--out DIR] [--resume DIR]\n"
      "                   [--checkpoint-every N] [--force] [--quiet]\n"
      "                   [--ranks N [--reduction sum|fixed_order] [--shard-optimizer]]\n"
      "\n"
      "Compiles the run's training step (model + policy) for its target and\n"
      "trains: a progress line, DIR/metrics.jsonl (one JSON object per\n"
      "logged step, with the quantizers' SQNR per GEMM role every\n"
      "sqnr_interval steps; draw it with 'tetra plot'), and checkpoints in\n"
      "the run's checkpoint directory (default DIR/checkpoints). A step sums\n"
      "the gradients of the run's 'accumulation' micro-batches. A NaN or Inf\n"
      "stops the run before the update, naming the step, the linear and the\n"
      "GEMM role it appeared in. SIGINT or SIGTERM (Ctrl-C, a cluster's\n"
      "pre-emption) stops after the step in progress with a checkpoint and\n"
      "prints how to resume; a second signal stops at once.\n"
      "docs/tools/train.md has the details.\n"
      "\n"
      "OPTIONS\n"
      "  --target T    train for target T instead of the run's: cpu, or\n"
      "                sm_90a / gfx950 where that GPU and its driver are\n"
      "                (elsewhere: 'tetra compile' a bundle, 'tetra-run' it)\n"
      "  --steps N     train N steps in all (default: the run's steps; the\n"
      "                learning-rate schedule spans them)\n"
      "  --until N     stop after step N (as an interruption would)\n"
      "  --policy P    train with policy file P instead of the run's; its\n"
      "                outputs are its own (default out/RUN/POLICY)\n"
      "  --label NAME  name the run's curves NAME in metrics.jsonl and\n"
      "                'tetra plot' (default RUN[/POLICY][/KEY=VALUE,...])\n"
      "  --set KEY=VALUE\n"
      "                override a run setting, checked as the file's own:\n"
      "                --set seed=3, --set eval.interval=20 (a block's),\n"
      "                --set optimizer.lr=3e-4 (a call's argument); paths\n"
      "                from the current directory; outputs of their own\n"
      "                (default out/RUN/KEY=VALUE,...)\n"
      "  --checkpoint-every N\n"
      "                a checkpoint every N steps (default: the run's\n"
      "                interval, else at the end)\n"
      "  --out DIR     metrics and default checkpoints (default out/RUN);\n"
      "                a fresh run refuses one holding another run's\n"
      "                metrics or checkpoints\n"
      "  --resume DIR  continue from the latest checkpoint in DIR (a run\n"
      "                folder or its checkpoint folder): the same data\n"
      "                position, step and optimizer state; the metrics\n"
      "                file continues without the steps after it\n"
      "  --force       replace the metrics and checkpoints a fresh run finds\n"
      "                in its outputs (they are deleted)\n"
      "  --quiet       no progress line\n"
      "  --ranks N     train as N CPU processes, data parallel through Gloo\n"
      "                (rank r runs the r-th of each step's N x accumulation\n"
      "                micro-batches; RANK, WORLD_SIZE, MASTER_ADDR and\n"
      "                MASTER_PORT, as torchrun and SLURM set them, join a\n"
      "                process to a run without it)\n"
      "  --reduction R sum (Gloo's all-reduce, default) or fixed_order (rank\n"
      "                order: N ranks equal one rank accumulating N, bit for\n"
      "                bit)\n"
      "  --shard-optimizer\n"
      "                ZeRO-1: each parameter's AdamW moments on one rank,\n"
      "                which updates it and broadcasts it (the same values;\n"
      "                checkpoints gather the moments: the same files)\n"
      "  -h, --help    print this help\n");
}
