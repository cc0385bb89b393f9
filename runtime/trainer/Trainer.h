//===- Trainer.h - The training loop over a compiled step -------*- C++ -*-===//
//
// Runs a compiled training step (a schedule and its code objects) for a
// number of steps: micro-batches from the data packer, the learning-rate
// schedule, metrics and the progress line, periodic checkpoints, and resume
// with a bit-identical continuation. No compiler inside.
//
// A step runs the schedule's phases: the gradient part once per micro-batch
// (summing gradients when the step accumulates), then the global norm, then
// clipping and AdamW. The loss and the norm are checked before the update,
// so a NaN or Inf stops the run with the parameters untouched: the micro-
// batch is re-run checking every launch's outputs, and the error names the
// first launch that produced a non-finite value — the linear and GEMM role
// ("layers.3.mlp.down.wgrad") and its source location.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TRAINER_TRAINER_H
#define TETRA_RUNTIME_TRAINER_TRAINER_H

#include "runtime/backend/Backend.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/data/Packer.h"
#include "runtime/distributed/Communicator.h"
#include "runtime/schedule/Executor.h"
#include "runtime/trainer/LearningRate.h"
#include "runtime/trainer/Metrics.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tetra::checkpoint {
struct CheckpointSpec;
} // namespace tetra::checkpoint

namespace tetra::trainer {

struct ParameterSpec {
  enum class Init { Normal, Zeros, Ones };
  std::string name;
  std::vector<int64_t> shape;
  Init init = Init::Zeros;
  double std = 0;

  int64_t numElements() const;
};

struct TrainerConfig {
  std::string run, model, policy;
  std::vector<ParameterSpec> parameters;
  int64_t steps = 0; ///< Total steps of the run (a resumed run continues).
  /// Micro-batches per step, their gradients summed (the compiled step must
  /// accumulate gradients when this is above 1).
  int64_t microBatches = 1;
  int64_t logInterval = 1;
  LearningRateSchedule lr;
  uint64_t seed = 0;
  std::string metricsPath;   ///< Empty: no metrics file.
  std::string checkpointDir; ///< Empty: no checkpoints.
  int64_t checkpointInterval = 0;
  /// Measure the quantizers' SQNR every this many steps (0: never), on
  /// about `sqnrSampleElements` elements of each GEMM operand.
  int64_t sqnrInterval = 0;
  int64_t sqnrSampleElements = 16384;
  /// Stop after this step (0: run to `steps`), as an interruption would; the
  /// learning-rate schedule still spans `steps`.
  int64_t stopAfter = 0;
  bool quiet = false;       ///< No progress line.
  /// Asked after every step: true stops the run there, with a checkpoint
  /// (a SIGINT or SIGTERM). Empty: never.
  std::function<bool()> stopRequested;
  int64_t evalInterval = 0; ///< 0: no evaluation.
  int64_t evalBatches = 1;
  /// Data parallelism (null: one process, no collectives; a communicator of
  /// one rank runs them all, trivially). This process is rank r of N: a
  /// step's N x microBatches micro-batches are read by every rank, rank r
  /// running the r-th run of microBatches of them (the others' are read
  /// and skipped, so that every rank's data position is the run's); the
  /// gradients, scaled by 1 / (N x microBatches), are summed across the
  /// ranks by `reduction` before the norm, and every rank applies the same
  /// update. The loss reported is the mean over all N x microBatches. Only
  /// the caller decides which rank writes metrics and checkpoints.
  distributed::Communicator *communicator = nullptr;
  distributed::Reduction reduction = distributed::Reduction::Sum;
  /// ZeRO-1 (with a communicator of several ranks): each parameter's AdamW
  /// moments live on one rank, its owner (parameters dealt in order to the
  /// rank holding the fewest elements so far), which alone allocates them
  /// and runs the parameter's update; the owner then broadcasts the
  /// updated parameter. Every rank still sums the whole gradients. The
  /// values are those of the unsharded run, bit for bit; a checkpoint
  /// gathers the moments (every rank takes part), so it is the same file,
  /// resumable on any rank count, sharded or not.
  bool shardOptimizer = false;
};

struct TrainingSummary {
  int64_t firstStep = 0, lastStep = 0;
  double firstLoss = 0, lastLoss = 0;
  double seconds = 0; ///< This process's training time.
  double tokensPerSecond = 0;
  /// Tokens per second over the steps after this call's first (which
  /// also loads the kernels and records the step for replay): the
  /// steady rate a benchmark compares; 0 for a single step.
  double steadyTokensPerSecond = 0;
  /// " (N from step F on)" for the summary line, or "" for one step.
  std::string steadyRateText() const;
  /// Stopped before its last step by `stopRequested`.
  bool stopped = false;
  std::string checkpoint; ///< The last checkpoint written, if any.
  std::vector<double> losses;     ///< One per step run.
  std::optional<double> evalLoss; ///< The last evaluation.
};

/// One library kernel's GPU launches against the CPU kernel on the same
/// inputs (Trainer::checkKernels).
struct KernelCheck {
  std::string kernel; ///< "rmsnorm.forward"
  std::string origin; ///< The schedule launch's origin.
  std::string buffer; ///< Its output that differs most.
  /// max |gpu - cpu| / max |cpu| over that output (0: every bit equal).
  double error = 0;
  int64_t differing = 0, elements = 0; ///< Over all its outputs.
  /// Elements beyond kKernelCheckTolerance (relative to their output's
  /// largest), over all outputs.
  int64_t beyond = 0;
  /// The launch rounds its products' operands to BF16 (a scalar
  /// `bf16_operands` = 1): two targets' fp32 values a last bit apart may
  /// round to neighbouring BF16 values, so a few elements may move by up
  /// to kRoundedOperandTolerance.
  bool roundsOperands = false;

  /// Within kKernelCheckTolerance everywhere, or (roundsOperands) beyond
  /// it for at most one element in 100 and never beyond
  /// kRoundedOperandTolerance. (Measured on the H200, tiny model, bf16
  /// attention: 0.04-0.16 % of a launch's elements beyond 1e-5, the worst
  /// 1.0e-4: an element moves when one P or dS of its row rounds to the
  /// other neighbour; an operand left unrounded moves nearly all of them.)
  bool passed() const;
};
constexpr double kKernelCheckTolerance = 1e-5;
constexpr double kRoundedOperandTolerance = 1e-2;

/// Which rank keeps each parameter's AdamW moments when the optimizer is
/// sharded (ZeRO-1): the parameters whose moments one update launch of
/// `step` names form a group (a launch runs on one rank or none: a GPU
/// step may update several tensors a launch); the groups, largest first
/// (in their first parameter's order among equals), each to the rank
/// holding the fewest elements so far, the lowest such rank. Llama
/// 3.1-8B's on 8 ranks, a parameter a launch: 1.003-1.007 G elements
/// each, where dealing them in order gave one rank 1.44 G.
std::vector<int> shardMoments(const schedule::Schedule &step,
                              const std::vector<ParameterSpec> &parameters,
                              int ranks);

/// The initial values of parameter `index` of a run seeded `seed`: Normal
/// draws (Box-Muller over splitmix64, the generator seeded by the run's
/// seed and the parameter's index, two draws an element, in element
/// order), zeros or ones. Computed in chunks on `pool`'s threads, each
/// chunk's generator started where its first element's draws start: the
/// values of one thread drawing in order, whatever the threads.
std::vector<float> initialValues(const ParameterSpec &spec, uint64_t seed,
                                 size_t index, backend::ThreadPool &pool);

class Trainer {
public:
  static io::Expected<std::unique_ptr<Trainer>>
  create(backend::Backend &backend, const schedule::Schedule &step,
         const std::vector<backend::Module> &modules, TrainerConfig config,
         data::Packer train);
  ~Trainer();

  /// Fresh parameters from the config's initializers and seed (a normal
  /// draw is Box-Muller over a 64-bit generator keyed by the seed and the
  /// parameter's index: the same on every machine); moments zero.
  io::Status initialize();
  /// Restores the latest checkpoint of `directory`: parameters, moments,
  /// step, data position and training time. An error (and nothing changed)
  /// for a corrupt checkpoint or one of another model.
  io::Status resume(const std::string &directory);
  /// The parameters (not the moments, step or data position) of a
  /// checkpoint file, or of a directory's latest checkpoint, for
  /// evaluating them (`tetra eval`): step() becomes the checkpoint's step.
  /// An error (and nothing changed) for a corrupt checkpoint or one of
  /// another model.
  io::Status loadParameters(const std::string &path);
  /// After resume() or loadParameters(): the policy the checkpoint was
  /// trained under (its metadata's name), which may differ from
  /// config.policy.
  const std::string &resumedPolicy() const { return resumedPolicy_; }
  /// Trains from the current step to config.steps (or config.stopAfter).
  /// The metrics file is started afresh after initialize() (an error if it
  /// holds another run's lines) and continued after resume(), without the
  /// lines logged after the checkpoint.
  io::Expected<TrainingSummary> train();
  /// Evaluation data: every `evalInterval` steps (and at the end) the mean
  /// loss over `evalBatches` batches of it, from its start. The loss is the
  /// step's own forward — the same quantized GEMMs as training — run alone
  /// (the schedule's forward phase): nothing is updated.
  void setEvaluation(data::Packer eval) { eval_.emplace(std::move(eval)); }
  io::Expected<double> evaluate();

  /// Runs the next step's first micro-batch, the norm and the update with
  /// every launch of `reference` (the step as the CPU runs it: see
  /// driver/CompileStep.h) that is a library kernel also run by the CPU's
  /// library from the same inputs, and compares every output. The
  /// schedule's launches [firstLaunch[l], firstLaunch[l + 1]) do what
  /// reference launch l does. For checking a GPU build: the step's update
  /// is applied, its loss not logged.
  io::Expected<std::vector<KernelCheck>>
  checkKernels(const schedule::Schedule &reference,
               const std::vector<int> &firstLaunch);

  /// Runs the next step's first micro-batch, the norm and the update with a
  /// synchronize after every launch, and returns each launch's wall time in
  /// seconds (the launch's submission and its run): where a step's time
  /// goes. The update is applied, the loss not logged.
  io::Expected<std::vector<double>> profileStep();

  int64_t step() const { return step_; }
  /// The host copy of a bound f32 buffer ("embed", "m.embed", ...).
  io::Expected<std::vector<float>> read(const std::string &name);

  /// The parameters' elements whose AdamW moments this rank keeps (all of
  /// them unless config.shardOptimizer).
  int64_t momentElementsHere() const;

private:
  Trainer(backend::Backend &backend, TrainerConfig config, data::Packer train)
      : backend_(backend), config_(std::move(config)),
        train_(std::move(train)) {}
  struct StepOutcome {
    double loss = 0, gradNorm = 0;
    std::map<std::string, double> sqnrDecibels, foldingTiles, exactPairs;
    std::map<std::string, std::map<std::string, double>> sqnrDecibelsByLinear;
  };
  /// One optimizer step over config.microBatches micro-batches. While the
  /// device runs a micro-batch, the host reads the next one (the next
  /// step's first where `another` step follows).
  io::Expected<StepOutcome> runStep(int64_t step, double lr, bool measure,
                                    bool another);
  /// The next training batch: the one read ahead, if any, else read now.
  io::Expected<bool> nextTrainingBatch(data::Batch &batch);
  /// Reads this rank's next micro-batch from the data, skipping the other
  /// ranks' (config.communicator); `stepStart`, where given, gets the data
  /// position at a step's first micro-batch when one is passed.
  io::Expected<bool> readOwnBatch(data::Batch &batch,
                                  data::DataPosition *stepStart);
  /// Reads and skips the rest of the current step's micro-batches (other
  /// ranks'), so that the data position is the next step's start.
  io::Status skipToStepBoundary();
  int ranks() const {
    return config_.communicator ? config_.communicator->size() : 1;
  }
  int rank() const {
    return config_.communicator ? config_.communicator->rank() : 0;
  }
  /// Sums the gradients across the ranks (config.communicator), all in
  /// one collective over `gradients_`.
  io::Status reduceGradients();
  /// Whether this rank keeps parameter p's moments and runs its update
  /// (always, unless config.shardOptimizer).
  bool ownsMoments(size_t p) const {
    return owner_.empty() || owner_[p] == rank();
  }
  /// The update phase: its launches, or (sharded) this rank's, then every
  /// parameter broadcast from its owner.
  io::Status runUpdate();
  /// Sharded: every rank takes part; rank 0 gets the moments it does not
  /// own into gatheredMoments_ (for its checkpoint).
  io::Status gatherMoments();
  /// Reads the next training batch into readAhead_ (its errors and the
  /// end of the data surface when nextTrainingBatch takes it).
  void readAhead();
  /// Re-runs the gradient part of the step's micro-batches from the first,
  /// checking every launch, to name where a non-finite value appeared.
  io::Error locateNonFinite(const std::string &what,
                            const std::vector<data::Batch> &batches);
  io::Status upload(const std::string &name, const void *data, size_t bytes);
  io::Expected<std::string> saveCheckpoint(double elapsedSeconds);
  io::Status uploadBatch(const data::Batch &batch);
  /// The run-time scalars the schedule's launches read in step `step`'s
  /// first micro-batch (step, lr, seed, grad_scale, micro_batch 0).
  std::map<std::string, backend::Scalar> stepScalars(int64_t step) const;
  /// Sets stepScalars(step() + 1) and uploads the next training batch: the
  /// next step's first micro-batch, ready to run (checkKernels,
  /// profileStep).
  io::Status prepareNextStep();

  backend::Backend &backend_;
  TrainerConfig config_;
  data::Packer train_;
  /// A batch read before its step (runStep's overlap of host and device),
  /// with the data position before it: what a checkpoint records.
  struct ReadAhead {
    data::Batch batch;
    io::Expected<bool> got = false;
    data::DataPosition before;
  };
  std::optional<ReadAhead> readAhead_;
  /// Micro-batches read from the data (every rank's) since the trainer
  /// started or resumed at a step boundary: a step reads ranks() x
  /// microBatches of them.
  int64_t consumed_ = 0;
  std::optional<data::Packer> eval_;
  std::unique_ptr<schedule::StepExecutor> executor_;
  /// Bound buffers the trainer allocated, but for the gradients: those
  /// are slices of `gradients_`, one allocation the ranks sum at once.
  std::vector<std::pair<std::string, backend::Buffer>> buffers_;
  backend::Buffer gradients_;
  /// Sharded optimizer state (config.shardOptimizer): each parameter's
  /// owner (empty: not sharded), the update phase's launch ranges this
  /// rank runs, a buffer the size of the largest parameter for receiving
  /// moments, and rank 0's gathered moments by name ("m.NAME", "v.NAME").
  std::vector<int> owner_;
  std::vector<std::pair<int, int>> updateRanges_;
  backend::Buffer receiveBuffer_;
  std::map<std::string, std::vector<float>> gatheredMoments_;
  int64_t step_ = 0;
  /// Whether train() continues a run (resume(), or an earlier train()): the
  /// metrics file is continued, not started.
  bool continuing_ = false;
  std::string resumedPolicy_;
  /// What a checkpoint of this model must hold.
  checkpoint::CheckpointSpec checkpointSpec() const;
  double elapsedBefore_ = 0; ///< Training time before this process's steps.
};

} // namespace tetra::trainer

#endif // TETRA_RUNTIME_TRAINER_TRAINER_H
