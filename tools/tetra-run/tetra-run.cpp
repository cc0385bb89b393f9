//===- tetra-run.cpp - Train from a step bundle, with no compiler ---------===//
//
// `tetra-run BUNDLE [options]`: trains the training step that
// `tetra compile RUN --target=T -o BUNDLE` compiled, on the GPU the bundle
// was compiled for, with nothing but the runtime and the GPU's driver (it
// links no LLVM and no MLIR: test/tools/tetra-run.test checks). The data,
// step counts, learning rate, seed, evaluation and checkpoints are the run
// file's (the bundle's run_plan.json); options override where the run's
// files live on this machine. docs/tools/run.md has the details.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CudaBackend.h"
#include "runtime/backend/HipBackend.h"
#include "runtime/bundle/StepBundle.h"
#include "runtime/distributed/Launcher.h"
#include "runtime/distributed/NcclCommunicator.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/trainer/RunPlan.h"
#include "runtime/trainer/Trainer.h"

#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace tetra;

namespace {

std::atomic<int> stopSignal{0};
/// "rank R: " in a multi-rank run's messages, else "".
std::string rankPrefix;

int fail(const std::string &message) {
  fmt::print(stderr, "tetra-run: {}error: {}\n", rankPrefix, message);
  return 1;
}

int usageError(const std::string &message) {
  fmt::print(stderr, "tetra-run: error: {} (see 'tetra-run --help')\n",
             message);
  return 2;
}

void printHelp() {
  std::printf(
      "USAGE: tetra-run BUNDLE [--data GLOB]... [--eval-data GLOB]...\n"
      "                 [--tokenizer SPEC] [--steps N] [--until N] [--seed N]\n"
      "                 [--checkpoint-every N] [--out DIR] [--resume DIR]\n"
      "                 [--label NAME] [--device N] [--quiet] [--gpus N [--shard-optimizer]]\n"
      "                 [--check-kernels] [--profile]\n"
      "\n"
      "Trains the step a GPU bundle holds ('tetra compile RUN --target=T -o\n"
      "BUNDLE') with the run's data, steps, learning rate and seed, on the\n"
      "GPU it was compiled for, needing only the GPU driver. Writes\n"
      "DIR/metrics.jsonl and checkpoints (DIR/checkpoints), as 'tetra train'\n"
      "does. Refuses a bundle for another chip, a corrupt one, or one of\n"
      "another runtime version.\n"
      "\n"
      "OPTIONS\n"
      "  --data GLOB       training data on this machine (text, C4 JSON lines\n"
      "                    or .tokens files), instead of the run's paths\n"
      "  --eval-data GLOB  evaluation data, instead of the run's\n"
      "  --tokenizer SPEC  bytes, gpt2:DIR or llama3:FILE, instead of the run's\n"
      "  --steps N         train N steps in all (the schedule spans them)\n"
      "  --until N         stop after step N, with a checkpoint\n"
      "  --seed N          the run's seed instead of the bundle's (data order,\n"
      "                    initialization, stochastic rounding): outputs in\n"
      "                    out/RUN-TARGET/seed=N, curves named RUN/seed=N\n"
      "  --checkpoint-every N  a checkpoint every N steps (default: the run's)\n"
      "  --out DIR         outputs (default out/RUN-TARGET)\n"
      "  --label NAME      the run's name in metrics and plots (default RUN)\n"
      "  --resume DIR      continue from the latest checkpoint in DIR\n"
      "  --device N        the GPU's ordinal (default 0)\n"
      "  --gpus N          train on N GPUs of this machine, data parallel\n"
      "                    through NCCL: one process a GPU (rank r on GPU r),\n"
      "                    each running its share of a step's N x\n"
      "                    accumulation micro-batches (the bundle must be\n"
      "                    compiled to accumulate gradients); RANK,\n"
      "                    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT\n"
      "                    (torchrun's, SLURM's) join a process to a run\n"
      "  --shard-optimizer ZeRO-1 across the GPUs: each parameter's AdamW\n"
      "                    moments on one GPU, which updates it and\n"
      "                    broadcasts it; checkpoints gather the moments\n"
      "  --quiet           no progress line\n"
      "  --check-kernels   run one step with every library kernel also run\n"
      "                    by the CPU from the same inputs; print each one's\n"
      "                    largest difference and fail above 1e-5 of its\n"
      "                    output's largest magnitude (writes nothing)\n"
      "  --profile         time every launch of one step (a synchronize after\n"
      "                    each) and print where the step's time goes, by\n"
      "                    kernel family (writes nothing)\n");
}

bool exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

/// tetra-run --check-kernels: one step, every library kernel against the
/// CPU's; a table, worst first.
int runChecks(trainer::Trainer &trainer, const bundle::StepBundle &bundle) {
  io::Expected<std::vector<trainer::KernelCheck>> checks =
      trainer.checkKernels(bundle.reference, bundle.firstLaunch);
  if (!checks)
    return fail(checks.error().message());
  // One row per kernel: its launches, the worst of them.
  struct Row {
    int launches = 0;
    trainer::KernelCheck worst;
    int64_t differing = 0, elements = 0, beyond = 0;
    bool passed = true;
  };
  std::map<std::string, Row> rows;
  for (const trainer::KernelCheck &check : *checks) {
    Row &row = rows[check.kernel];
    if (row.launches++ == 0 || check.error > row.worst.error)
      row.worst = check;
    row.differing += check.differing;
    row.elements += check.elements;
    row.beyond += check.beyond;
    row.passed &= check.passed();
  }
  fmt::print("{:<24} {:>8} {:>12} {:>16}  {}\n", "kernel", "launches",
             "max error", "differing", "worst output (origin)");
  bool passed = true;
  bool rounded = false;
  for (const auto &[kernel, row] : rows) {
    passed &= row.passed;
    std::string note = row.passed ? "" : "  FAILED";
    if (row.worst.roundsOperands && row.beyond > 0) {
      rounded = true;
      note =
          fmt::format(" [{} beyond 1e-5, BF16 operands]{}", row.beyond, note);
    }
    fmt::print("{:<24} {:8} {:12.3g} {:7}/{:<8}  {} ({}){}\n", kernel,
               row.launches, row.worst.error, row.differing, row.elements,
               row.worst.buffer, row.worst.origin, note);
  }
  fmt::print(
      "{}: {} launches of {} library kernels checked against the CPU's; {}\n",
      bundle.directory, checks->size(), rows.size(),
      !passed   ? "some differ by more than allowed"
      : rounded ? "all within 1e-5 but for BF16 operands rounded to "
                  "the other neighbour (at most 1 element in 100, "
                  "within 1e-2)"
                : "all within 1e-5");
  return passed ? 0 : 1;
}

/// tetra-run --profile: one step's launches timed, by kernel family (the
/// function's name without its shape number; a GEMM's launches by role).
int runProfile(trainer::Trainer &trainer, const bundle::StepBundle &bundle) {
  // A warm-up step first: the driver's first launch of a function loads it.
  if (io::Expected<std::vector<double>> warm = trainer.profileStep(); !warm)
    return fail(warm.error().message());
  io::Expected<std::vector<double>> seconds = trainer.profileStep();
  if (!seconds)
    return fail(seconds.error().message());
  struct Row {
    int launches = 0;
    double seconds = 0;
  };
  std::map<std::string, Row> rows;
  double total = 0;
  for (size_t l = 0; l < seconds->size(); ++l) {
    const schedule::Launch &launch = bundle.schedule.launches[l];
    std::string family = launch.kernel;
    if (launch.gemm)
      family = "gemm " + launch.gemm->role;
    else if (family.find("__") != std::string::npos)
      family = "gemm prologue";
    else if (family.rfind("elementwise_", 0) == 0)
      family = "elementwise";
    else
      while (!family.empty() &&
             (std::isdigit(static_cast<unsigned char>(family.back())) ||
              family.back() == '_'))
        family.pop_back();
    rows[family].launches++;
    rows[family].seconds += (*seconds)[l];
    total += (*seconds)[l];
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  fmt::print("{:<32} {:>8} {:>12} {:>7}\n", "kernel family", "launches", "ms",
             "share");
  for (const auto &[family, row] : sorted)
    fmt::print("{:<32} {:8} {:12.3f} {:6.1f}%\n", family, row.launches,
               row.seconds * 1e3, 100.0 * row.seconds / total);
  fmt::print(
      "{}: one step, {} launches, {:.3f} ms with a synchronize after each\n",
      bundle.directory, seconds->size(), total * 1e3);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string bundlePath, outDir, resumeDir, tokenizerText, label;
  std::vector<std::string> data, evalData;
  int64_t steps = 0, until = 0, checkpointEvery = 0, gpus = 0;
  std::optional<uint64_t> seed;
  int device = 0;
  bool quiet = false, checkKernels = false, profile = false,
       shardOptimizer = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &into) {
      if (i + 1 >= argc)
        return false;
      into = argv[++i];
      return true;
    };
    std::string text;
    if (arg == "-h" || arg == "--help") {
      printHelp();
      return 0;
    } else if (arg == "--data" || arg == "--eval-data") {
      if (!value(text))
        return usageError(arg + " takes a glob");
      (arg == "--data" ? data : evalData).push_back(text);
    } else if (arg == "--tokenizer") {
      if (!value(tokenizerText))
        return usageError("--tokenizer takes bytes, gpt2:DIR or llama3:FILE");
    } else if (arg == "--steps" || arg == "--device" || arg == "--until" ||
               arg == "--checkpoint-every" || arg == "--gpus" ||
               arg == "--seed") {
      if (!value(text) || text.empty() || text.size() > 12 ||
          text.find_first_not_of("0123456789") != std::string::npos)
        return usageError(arg + " takes a non-negative integer");
      const int64_t number = std::stoll(text);
      if (arg == "--steps")
        steps = number;
      else if (arg == "--until")
        until = number;
      else if (arg == "--checkpoint-every")
        checkpointEvery = number;
      else if (arg == "--gpus")
        gpus = number;
      else if (arg == "--seed")
        seed = static_cast<uint64_t>(number);
      else
        device = static_cast<int>(number);
    } else if (arg == "--label") {
      if (!value(label) || label.empty())
        return usageError("--label takes a name");
    } else if (arg == "--out") {
      if (!value(outDir))
        return usageError("--out takes a directory");
    } else if (arg == "--resume") {
      if (!value(resumeDir))
        return usageError("--resume takes a directory");
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--shard-optimizer") {
      shardOptimizer = true;
    } else if (arg == "--check-kernels") {
      checkKernels = true;
    } else if (arg == "--profile") {
      profile = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else if (bundlePath.empty()) {
      bundlePath = arg;
    } else {
      return usageError("one bundle at a time ('" + bundlePath + "' and '" +
                        arg + "')");
    }
  }
  if (bundlePath.empty())
    return usageError("no bundle");
  if (gpus > 64)
    return usageError("--gpus takes a number of GPUs from 1 to 64");
  if (shardOptimizer && (checkKernels || profile))
    return usageError(fmt::format(
        "--shard-optimizer trains on several GPUs; {} runs one step of the "
        "whole schedule on one",
        checkKernels ? "--check-kernels" : "--profile"));

  // Several GPUs: started here (--gpus N), or this process is one of them.
  io::Expected<distributed::RankInfo> rankInfo =
      distributed::RankInfo::fromEnvironment();
  if (!rankInfo)
    return fail(rankInfo.error().message());
  if (shardOptimizer && gpus < 2 && rankInfo->worldSize < 2)
    return usageError("--shard-optimizer shards AdamW's moments across GPUs: "
                      "give --gpus N (N > 1), or start the ranks with RANK "
                      "and WORLD_SIZE");
  if (gpus > 1 && !rankInfo->launched) {
    std::vector<std::string> arguments(argv, argv + argc);
    return distributed::launchRanks(static_cast<int>(gpus), arguments,
                                    "tetra-run", rankInfo->launcherGrace());
  }
  if (gpus > 1 && gpus != rankInfo->worldSize)
    return usageError(fmt::format("--gpus {} in a run of WORLD_SIZE={}", gpus,
                                  rankInfo->worldSize));
  const bool lead = rankInfo->rank == 0;
  if (rankInfo->launched)
    device = rankInfo->localRank;
  io::Expected<std::string> prefix = distributed::enterRank(*rankInfo);
  if (!prefix)
    return fail(prefix.error().message());
  rankPrefix = *prefix;

  io::Expected<bundle::StepBundle> bundle = bundle::StepBundle::open(bundlePath);
  if (!bundle)
    return fail(bundle.error().message());
  trainer::RunPlan &plan = bundle->plan;
  if (steps > 0) {
    plan.steps = steps;
    plan.lr.total = steps;
  }
  if (seed)
    plan.seed = *seed;
  if (!data.empty())
    plan.trainData = data;
  if (!evalData.empty())
    plan.evalData = evalData;
  if (!tokenizerText.empty()) {
    io::Expected<tokenizer::TokenizerSpec> spec =
        tokenizer::parseTokenizerSpec(tokenizerText);
    if (!spec)
      return usageError(spec.error().message());
    plan.tokenizer = *spec;
  }

  // The device the bundle was compiled for.
  io::Expected<std::unique_ptr<backend::Backend>> gpu =
      bundle::openDevice(bundle->target, device);
  if (!gpu)
    return fail("bundle '" + bundlePath + "' (" + bundle->target +
                "): " + gpu.error().message());
  io::Expected<std::vector<backend::Module>> modules =
      bundle::loadCode(**gpu, bundle->code);
  if (!modules)
    return fail("bundle '" + bundlePath + "': " + modules.error().message());

  io::Expected<std::shared_ptr<tokenizer::Tokenizer>> encoder =
      trainer::openTokenizer(plan.tokenizer, plan.vocabulary);
  if (!encoder)
    return fail(encoder.error().message());
  data::PackerOptions packing;
  packing.seqLen = plan.seqLen;
  packing.batchSize = plan.microBatch;
  packing.endOfText = (*encoder)->endOfText();
  packing.seed = plan.seed;
  io::Expected<data::Packer> packer =
      trainer::openPacker(plan.trainData, *encoder, packing);
  if (!packer)
    return fail(packer.error().message());

  // The ranks meet: rank 0 serves the rendezvous store, NCCL (RCCL) joins
  // every GPU through it.
  distributed::RankConnection ranksMet;
  if (rankInfo->launched) {
    // NCCL on the CUDA backend, RCCL on the HIP backend: the same API,
    // each awaited through its backend's stream.
    distributed::GpuCollectives collectives;
    distributed::StreamIdle idle;
    if (auto *cuda = dynamic_cast<backend::CudaBackend *>(gpu->get())) {
      collectives = distributed::GpuCollectives::Nccl;
      idle = [cuda] { return cuda->idle(); };
    } else if (auto *hip = dynamic_cast<backend::HipBackend *>(gpu->get())) {
      collectives = distributed::GpuCollectives::Rccl;
      idle = [hip] { return hip->idle(); };
    } else {
      return fail("bundle '" + bundlePath + "' (" + bundle->target +
                  "): several ranks need a GPU backend with NCCL or RCCL");
    }
    const std::chrono::seconds timeout = rankInfo->timeout;
    io::Expected<distributed::RankConnection> connected =
        distributed::connectRanks(
            *rankInfo, timeout, [&](distributed::TcpStore &store) {
              return distributed::createNcclCommunicator(
                  collectives, *rankInfo, store, idle, timeout);
            });
    if (!connected)
      return fail(connected.error().message());
    ranksMet = std::move(*connected);
  }
  distributed::Communicator *communicator = ranksMet.communicator.get();

  // Another seed is a variant of the run: outputs and curves of its own,
  // as `tetra train --set seed=N`.
  const std::string variant = seed ? fmt::format("/seed={}", *seed) : "";
  if (outDir.empty())
    outDir = "out/" + plan.run + "-" + bundle->target + variant;
  trainer::TrainerConfig config = plan.trainerConfig();
  config.communicator = communicator;
  config.reduction = distributed::Reduction::Sum;
  config.shardOptimizer = shardOptimizer;
  config.metricsPath = outDir + "/metrics.jsonl";
  config.checkpointDir = outDir + "/checkpoints";
  config.quiet = quiet;
  config.run = label.empty() ? config.run + variant : label;
  config.stopAfter = until;
  if (checkpointEvery > 0)
    config.checkpointInterval = checkpointEvery;
  config.stopRequested = [] { return stopSignal.load() != 0; };
  if (checkKernels || profile || !lead) {
    config.metricsPath.clear();
    config.checkpointDir.clear();
    config.quiet = config.quiet || !lead;
  }
  if (lead && !checkKernels && !profile && resumeDir.empty() &&
      exists(config.metricsPath))
    return fail("'" + config.metricsPath +
                "' exists: another run's results are never overwritten "
                "(choose --out, or --resume " + outDir + ")");
  if (lead && !checkKernels && !profile)
    if (io::Status created = io::createDirectories(outDir); !created)
      return fail(created.error().message());

  io::Expected<std::unique_ptr<trainer::Trainer>> trainer =
      trainer::Trainer::create(**gpu, bundle->schedule, *modules, config,
                               std::move(*packer));
  if (!trainer)
    return fail(trainer.error().message());
  if (config.evalInterval > 0 && lead) {
    io::Expected<data::Packer> eval = trainer::openPacker(
        plan.evalData, *encoder,
        data::PackerOptions::validation(plan.seqLen, plan.microBatch,
                                        (*encoder)->endOfText()));
    if (!eval)
      return fail(eval.error().message());
    (*trainer)->setEvaluation(std::move(*eval));
  }
  io::Status ready = resumeDir.empty() ? (*trainer)->initialize()
                                       : (*trainer)->resume(resumeDir);
  if (!ready)
    return fail(ready.error().message());
  if (checkKernels)
    return runChecks(**trainer, *bundle);
  if (profile)
    return runProfile(**trainer, *bundle);
  std::signal(SIGINT, [](int signal) { stopSignal = signal; });
  std::signal(SIGTERM, [](int signal) { stopSignal = signal; });
  fmt::print(
      "run {}: policy {}, {} steps of {} x {} tokens on {} (bundle {})\n",
      plan.run, plan.policy, plan.steps,
      plan.microBatch * plan.accumulation * rankInfo->worldSize,
      plan.seqLen, (*gpu)->description(), bundlePath);
  if (communicator)
    fmt::print("  on {} rank{} ({} processes, a GPU each, through {}{})\n",
               communicator->size(), communicator->size() == 1 ? "" : "s",
               communicator->size(), communicator->engine(),
               shardOptimizer && communicator->size() > 1
                   ? fmt::format(", AdamW's moments sharded: rank 0 keeps "
                                 "those of {} parameters",
                                 (*trainer)->momentElementsHere())
                   : "");
  io::Expected<trainer::TrainingSummary> summary = (*trainer)->train();
  if (!summary)
    return fail(summary.error().message());
  std::string evalText;
  if (summary->evalLoss)
    evalText = fmt::format(", eval loss {}", *summary->evalLoss);
  fmt::print("run {}: steps {}-{}, loss {:.4f} -> {:.4f}{}, {:.1f} s, {:.0f} "
             "tokens/s{}; metrics {}\n",
             plan.run, summary->firstStep, summary->lastStep,
             summary->firstLoss, summary->lastLoss, evalText, summary->seconds,
             summary->tokensPerSecond, summary->steadyRateText(),
             config.metricsPath);
  return summary->stopped ? 128 + stopSignal.load() : 0;
}
