//===- Trainer.h - The training loop over a compiled step -------*- C++ -*-===//
//
// Runs a compiled training step (a schedule and its code objects) for a
// number of steps: micro-batches from the data packer, the learning-rate
// schedule, metrics and the progress line, periodic checkpoints, and resume
// with a bit-identical continuation. No compiler inside.
//
// A NaN or Inf loss or gradient norm stops the run: the step is undone from
// a snapshot taken before it and re-run checking every launch's outputs, so
// the error names the first launch that produced a non-finite value — the
// linear and GEMM role ("layers.3.mlp.down.wgrad") and its source location.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TRAINER_TRAINER_H
#define TETRA_RUNTIME_TRAINER_TRAINER_H

#include "runtime/backend/Backend.h"
#include "runtime/data/Packer.h"
#include "runtime/schedule/Executor.h"
#include "runtime/trainer/LearningRate.h"
#include "runtime/trainer/Metrics.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  int64_t logInterval = 1;
  LearningRateSchedule lr;
  uint64_t seed = 0;
  std::string metricsPath;   ///< Empty: no metrics file.
  std::string checkpointDir; ///< Empty: no checkpoints.
  int64_t checkpointInterval = 0;
  bool guardNonFinite = true;
  /// Stop after this step (0: run to `steps`), as an interruption would; the
  /// learning-rate schedule still spans `steps`.
  int64_t stopAfter = 0;
  bool quiet = false;       ///< No progress line.
  int64_t evalInterval = 0; ///< 0: no evaluation.
  int64_t evalBatches = 1;
};

struct TrainingSummary {
  int64_t firstStep = 0, lastStep = 0;
  double firstLoss = 0, lastLoss = 0;
  double seconds = 0;
  double tokensPerSecond = 0;
  std::vector<double> losses;     ///< One per step run.
  std::optional<double> evalLoss; ///< The last evaluation.
};

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
  /// step and data position. An error (and nothing changed) for a corrupt
  /// checkpoint or one of another model.
  io::Status resume(const std::string &directory);
  /// Trains from the current step to config.steps.
  io::Expected<TrainingSummary> train();
  /// Evaluation data: every `evalInterval` steps (and at the end) the mean
  /// loss over `evalBatches` batches of it, from its start. The loss is the
  /// step's own forward — the same quantized GEMMs as training — computed
  /// by the step with a learning rate of 0, the optimizer state restored.
  void setEvaluation(data::Packer eval) { eval_.emplace(std::move(eval)); }
  io::Expected<double> evaluate();

  int64_t step() const { return step_; }
  /// The host copy of a bound f32 buffer ("embed", "m.embed", ...).
  io::Expected<std::vector<float>> read(const std::string &name);

private:
  Trainer(backend::Backend &backend, TrainerConfig config, data::Packer train)
      : backend_(backend), config_(std::move(config)),
        train_(std::move(train)) {}
  io::Status upload(const std::string &name, const void *data, size_t bytes);
  io::Status saveCheckpoint();
  /// Every parameter and moment, for undoing a step.
  io::Expected<std::vector<std::vector<float>>> snapshot();
  io::Status restore(const std::vector<std::vector<float>> &state);
  std::vector<std::string> stateBuffers() const;
  io::Status uploadBatch(const data::Batch &batch);

  backend::Backend &backend_;
  TrainerConfig config_;
  data::Packer train_;
  std::optional<data::Packer> eval_;
  std::unique_ptr<schedule::StepExecutor> executor_;
  std::vector<std::pair<std::string, backend::Buffer>> buffers_;
  int64_t step_ = 0;
};

} // namespace tetra::trainer

#endif // TETRA_RUNTIME_TRAINER_TRAINER_H
