//===- RunPlan.h - What a compiled step needs of its run file ---*- C++ -*-===//
//
// The part of a run file the runtime needs to train a compiled step with no
// compiler present: the parameters and their initializers, the data (globs,
// tokenizer, packing), the step counts, the learning-rate schedule, the
// seed, evaluation and checkpoints. `tetra compile RUN` writes it into a
// step bundle's manifest (JSON); `tetra-run` reads it back and trains.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TRAINER_RUNPLAN_H
#define TETRA_RUNTIME_TRAINER_RUNPLAN_H

#include "runtime/data/Packer.h"
#include "runtime/io/Json.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/trainer/Trainer.h"

#include <memory>
#include <string>
#include <vector>

namespace tetra::trainer {

struct RunPlan {
  std::string run, model, policy;
  std::vector<ParameterSpec> parameters;
  /// Absolute globs of the training and evaluation text or token files.
  std::vector<std::string> trainData, evalData;
  tokenizer::TokenizerSpec tokenizer;
  /// Rows of the embedding (the model's vocabulary): the tokenizer's ids
  /// must fit.
  int64_t vocabulary = 0;
  int64_t seqLen = 0, microBatch = 0, accumulation = 1;
  int64_t steps = 0;
  LearningRateSchedule lr;
  uint64_t seed = 0;
  int64_t logInterval = 1, sqnrInterval = 0;
  int64_t evalInterval = 0, evalBatches = 1;
  int64_t checkpointInterval = 0;

  io::JsonValue toJson() const;
  /// Reads a plan back; the first problem names its field.
  static io::Expected<RunPlan> fromJson(const io::JsonValue &value);

  /// The trainer's configuration (outputs, stopping and quietness are the
  /// caller's).
  TrainerConfig trainerConfig() const;
};

/// The tokenizer of `spec`, checked against a vocabulary of `vocabulary`
/// rows (0: unchecked).
io::Expected<std::shared_ptr<tokenizer::Tokenizer>>
openTokenizer(const tokenizer::TokenizerSpec &spec, int64_t vocabulary);

/// A packer over `globs`: token files (`.tokens`, from `tetra tokenize`) or
/// text (C4 JSON lines, plain text) tokenized by `encoder` as it is read.
io::Expected<data::Packer>
openPacker(const std::vector<std::string> &globs,
           std::shared_ptr<tokenizer::Tokenizer> encoder,
           const data::PackerOptions &options);

} // namespace tetra::trainer

#endif // TETRA_RUNTIME_TRAINER_RUNPLAN_H
