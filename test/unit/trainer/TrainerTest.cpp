//===- TrainerTest.cpp - What Trainer::create refuses, and its helpers ----===//
//
// The trainer runs a schedule's phases, so it refuses a schedule that has
// none, and a run of several micro-batches per step over a schedule that
// does not sum gradients — each with a message, before any step runs. (The
// training itself is tested end to end: CompiledStepTests, test/tools.)
// ZeRO-1's dealing of moments, and the parameters' initial values drawn on
// several threads.
//
//===----------------------------------------------------------------------===//

#include "runtime/trainer/Trainer.h"
#include "runtime/backend/CpuBackend.h"

#include <gtest/gtest.h>

#include <cmath>

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

/// A step updating `parameters` (name, elements) with `launches`, each the
/// list of parameters whose moments it names.
schedule::Schedule updateStep(
    const std::vector<std::pair<std::string, int64_t>> &parameters,
    const std::vector<std::vector<int>> &launches) {
  schedule::Schedule step;
  step.phases = {0, 0, 0};
  for (const auto &[name, elements] : parameters)
    for (auto [prefix, role] : {std::pair{"m.", schedule::BufferRole::AdamM},
                                std::pair{"v.", schedule::BufferRole::AdamV}}) {
      schedule::BufferDesc moment;
      moment.name = prefix + name;
      moment.role = role;
      moment.shape = {elements};
      step.buffers.push_back(moment);
    }
  for (const std::vector<int> &named : launches) {
    schedule::Launch launch;
    launch.kernel = "adamw";
    for (int p : named)
      launch.buffers.insert(launch.buffers.end(), {2 * p, 2 * p + 1});
    step.launches.push_back(launch);
  }
  return step;
}

std::vector<trainer::ParameterSpec>
specs(const std::vector<std::pair<std::string, int64_t>> &parameters) {
  std::vector<trainer::ParameterSpec> result;
  for (const auto &[name, elements] : parameters)
    result.push_back({name, {elements}});
  return result;
}

// ZeRO-1's dealing: a parameter a launch, largest first to the least
// loaded rank (the lower on a tie).
TEST(ShardMoments, DealsLargestFirstToTheLeastLoadedRank) {
  const std::vector<std::pair<std::string, int64_t>> parameters = {
      {"a", 10}, {"b", 40}, {"c", 30}, {"d", 20}};
  EXPECT_EQ(trainer::shardMoments(updateStep(parameters, {{0}, {1}, {2}, {3}}),
                                  specs(parameters), 2),
            (std::vector<int>{0, 0, 1, 1})); // b 40 -> 0, c 30 -> 1, d -> 1, a -> 0
}

// Parameters one launch updates together (a GPU step's multi-tensor
// launch) stay on one rank: the launch runs there or not at all.
TEST(ShardMoments, KeepsALaunchsParametersTogether) {
  const std::vector<std::pair<std::string, int64_t>> parameters = {
      {"a", 10}, {"b", 40}, {"c", 30}, {"d", 20}};
  // a with c, and (through a second launch) c with d: one group of 60.
  std::vector<int> owner = trainer::shardMoments(
      updateStep(parameters, {{0, 2}, {1}, {2, 3}}), specs(parameters), 2);
  EXPECT_EQ(owner, (std::vector<int>{0, 1, 0, 0}));
}

/// A parameter of 3M elements (three chunks and a part) drawn on four
/// threads: the values one thread drawing in order gives (splitmix64, two
/// draws an element, Box-Muller), bit for bit; another index, others.
TEST(InitialValues, ChunksOnThreadsDrawWhatOneThreadDraws) {
  trainer::ParameterSpec spec;
  spec.name = "w";
  spec.shape = {3, (1 << 20) + 5};
  spec.init = trainer::ParameterSpec::Init::Normal;
  spec.std = 0.02;
  const uint64_t seed = 7;
  const size_t index = 3;
  std::vector<float> expected(spec.numElements());
  uint64_t state = seed * 0x100000001B3ull + index;
  auto uniform = [&] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 1.0) * 0x1.0p-53;
  };
  for (float &x : expected) {
    double radius = std::sqrt(-2.0 * std::log(uniform()));
    double angle = 2.0 * M_PI * uniform();
    x = static_cast<float>(spec.std * radius * std::cos(angle));
  }
  backend::ThreadPool pool(4);
  std::vector<float> values = trainer::initialValues(spec, seed, index, pool);
  ASSERT_EQ(values.size(), expected.size());
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(values[i], expected[i]) << i;
  EXPECT_NE(trainer::initialValues(spec, seed, index + 1, pool), values);

  spec.init = trainer::ParameterSpec::Init::Ones;
  EXPECT_EQ(trainer::initialValues(spec, seed, index, pool),
            std::vector<float>(spec.numElements(), 1.0f));
}

} // namespace
