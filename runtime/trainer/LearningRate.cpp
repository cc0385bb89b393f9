//===- LearningRate.cpp - Warmup and decay schedules ----------------------===//

#include "runtime/trainer/LearningRate.h"

#include <algorithm>
#include <cmath>

using namespace tetra::trainer;

double LearningRateSchedule::at(int64_t step) const {
  if (warmup > 0 && step <= warmup)
    return lr * static_cast<double>(step) / static_cast<double>(warmup);
  if (kind == Kind::Constant)
    return lr;
  int64_t span = std::max<int64_t>(1, total - warmup);
  double progress =
      std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  if (kind == Kind::Linear)
    return lr - (lr - minLr) * progress;
  return minLr + (lr - minLr) * 0.5 * (1 + std::cos(M_PI * progress));
}
