//===- TrainerTest.cpp - What Trainer::create refuses ---------------------===//
//
// The trainer runs a schedule's phases, so it refuses a schedule that has
// none, and a run of several micro-batches per step over a schedule that
// does not sum gradients — each with a message, before any step runs. (The
// training itself is tested end to end: CompiledStepTests, test/tools.)
//
//===----------------------------------------------------------------------===//

#include "runtime/trainer/Trainer.h"
#include "runtime/backend/CpuBackend.h"

#include <gtest/gtest.h>

using namespace tetra;

namespace {

/// One document of `count` ids, forever.
class RepeatingSource : public data::TokenSource {
public:
  explicit RepeatingSource(uint32_t count) : count_(count) {}
  io::Expected<bool> next(std::vector<uint32_t> &ids) override {
    ids.assign(count_, 7);
    return true;
  }
  io::Status rewind() override { return io::success(); }

private:
  uint32_t count_;
};

data::Packer packer() {
  data::PackerOptions options;
  options.seqLen = 4;
  options.batchSize = 2;
  return std::move(
      *data::Packer::create(std::make_unique<RepeatingSource>(64), options));
}

/// A schedule with the trainer's inputs and outputs and no launches.
schedule::Schedule emptyStep() {
  schedule::Schedule step;
  step.name = "train_step";
  auto bound = [&](const char *name, schedule::BufferRole role,
                   backend::ElementType type, std::vector<int64_t> shape) {
    schedule::BufferDesc buffer;
    buffer.name = name;
    buffer.role = role;
    buffer.type = type;
    buffer.shape = std::move(shape);
    step.buffers.push_back(buffer);
  };
  bound("tokens", schedule::BufferRole::Input, backend::ElementType::I32,
        {2, 4});
  bound("targets", schedule::BufferRole::Input, backend::ElementType::I32,
        {2, 4});
  bound("loss", schedule::BufferRole::Output, backend::ElementType::F32, {1});
  return step;
}

std::string createError(const schedule::Schedule &step, int64_t microBatches) {
  backend::CpuBackend cpu(1);
  trainer::TrainerConfig config;
  config.steps = 1;
  config.microBatches = microBatches;
  auto trainer = trainer::Trainer::create(cpu, step, {}, config, packer());
  return trainer ? std::string() : trainer.error().message();
}

TEST(TrainerCreate, RefusesAScheduleWithoutPhases) {
  EXPECT_EQ(createError(emptyStep(), 1),
            "the compiled step 'train_step' has no optimizer phases: not a "
            "training step");
}

TEST(TrainerCreate, RefusesMicroBatchesWithoutGradientSums) {
  schedule::Schedule step = emptyStep();
  step.phases = {0, 0, 0};
  EXPECT_EQ(createError(step, 1), "");
  EXPECT_EQ(createError(step, 2),
            "the compiled step does not accumulate gradients, but the run "
            "asks for 2 micro-batches per step (compile it with "
            "accumulateGradients)");
  EXPECT_EQ(createError(step, 0), "micro-batches per step must be at least 1");
  // With a gradient sum, two micro-batches are fine.
  schedule::BufferDesc sum;
  sum.name = "grad.w";
  sum.role = schedule::BufferRole::Gradient;
  sum.shape = {3};
  step.buffers.push_back(sum);
  EXPECT_EQ(createError(step, 2), "");
}

} // namespace
