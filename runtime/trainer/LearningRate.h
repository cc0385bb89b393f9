//===- LearningRate.h - Warmup and decay schedules --------------*- C++ -*-===//
//
// The learning rate of step t (1-based): a linear warmup from 0 over
// `warmup` steps, then constant, linear or cosine decay to `minLr` at
// `total` steps (held at minLr after).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TRAINER_LEARNINGRATE_H
#define TETRA_RUNTIME_TRAINER_LEARNINGRATE_H

#include <cstdint>

namespace tetra::trainer {

struct LearningRateSchedule {
  enum class Kind { Constant, Linear, Cosine };
  Kind kind = Kind::Cosine;
  double lr = 3e-4;
  double minLr = 0;
  int64_t warmup = 0;
  int64_t total = 1;

  /// The rate at step `step` (1-based).
  double at(int64_t step) const;
};

} // namespace tetra::trainer

#endif // TETRA_RUNTIME_TRAINER_LEARNINGRATE_H
