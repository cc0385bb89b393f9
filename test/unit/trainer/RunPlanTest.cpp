//===- RunPlanTest.cpp - A run's plan as a step bundle stores it ----------===//

#include "runtime/trainer/RunPlan.h"

#include <gtest/gtest.h>

using namespace tetra;
using namespace tetra::trainer;

namespace {

RunPlan samplePlan() {
  RunPlan plan;
  plan.run = "tiny";
  plan.model = "llama_tiny";
  plan.policy = "fp4_all_hadamard";
  ParameterSpec embed;
  embed.name = "embed";
  embed.shape = {256, 64};
  embed.init = ParameterSpec::Init::Normal;
  embed.std = 0.02;
  ParameterSpec norm;
  norm.name = "norm";
  norm.shape = {64};
  norm.init = ParameterSpec::Init::Ones;
  plan.parameters = {embed, norm};
  plan.trainData = {"/data/c4/*.json.gz", "/data/more.txt"};
  plan.evalData = {"/data/c4/val.json.gz"};
  plan.tokenizer.kind = tokenizer::TokenizerSpec::Kind::GPT2;
  plan.tokenizer.path = "/tok/gpt2";
  plan.vocabulary = 50304;
  plan.seqLen = 128;
  plan.microBatch = 8;
  plan.accumulation = 2;
  plan.steps = 200;
  plan.lr.lr = 1e-3;
  plan.lr.minLr = 1e-4;
  plan.lr.warmup = 20;
  plan.lr.kind = LearningRateSchedule::Kind::Linear;
  plan.seed = 7;
  plan.logInterval = 10;
  plan.sqnrInterval = 5;
  plan.evalInterval = 50;
  plan.evalBatches = 4;
  plan.checkpointInterval = 100;
  return plan;
}

TEST(RunPlan, RoundTrip) {
  RunPlan plan = samplePlan();
  io::Expected<RunPlan> back = RunPlan::fromJson(plan.toJson());
  ASSERT_TRUE(static_cast<bool>(back)) << back.error().message();
  EXPECT_EQ(io::writeJson(back->toJson()), io::writeJson(plan.toJson()));
  EXPECT_EQ(back->parameters.at(0).init, ParameterSpec::Init::Normal);
  EXPECT_EQ(back->parameters.at(1).init, ParameterSpec::Init::Ones);
  EXPECT_EQ(back->parameters.at(0).shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(back->tokenizer.kind, tokenizer::TokenizerSpec::Kind::GPT2);
  EXPECT_EQ(back->tokenizer.path, "/tok/gpt2");
  EXPECT_EQ(back->trainData, plan.trainData);
  EXPECT_EQ(back->lr.kind, LearningRateSchedule::Kind::Linear);

  // The trainer's configuration: the schedule spans the steps, micro-batches
  // are the accumulation.
  TrainerConfig config = back->trainerConfig();
  EXPECT_EQ(config.steps, 200);
  EXPECT_EQ(config.lr.total, 200);
  EXPECT_EQ(config.microBatches, 2);
  EXPECT_EQ(config.seed, 7u);
  EXPECT_EQ(config.evalInterval, 50);
  EXPECT_EQ(config.checkpointInterval, 100);
  RunPlan noEval = plan;
  noEval.evalData.clear();
  EXPECT_EQ(noEval.trainerConfig().evalInterval, 0);
}

TEST(RunPlan, MalformedIsAnError) {
  std::string good = io::writeJson(samplePlan().toJson());
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {"\"seq_len\":128", "\"seq_len\":\"x\"",
       "run plan: 'seq_len' is missing or not a number"},
      {"\"steps\":200", "\"steps\":0",
       "seq_len, micro_batch, accumulation and steps must be positive"},
      {"\"tokenizer\":\"gpt2:/tok/gpt2\"", "\"tokenizer\":\"sentencepiece\"",
       "run plan: "},
      {"\"shape\":[256,64]", "\"shape\":[256,-1]",
       "run plan: parameter 'embed': a bad extent"},
      {"\"parameters\":", "\"params\":",
       "run plan: 'parameters' is missing or not valid"},
  };
  for (const Case &c : cases) {
    std::string text = good;
    size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    io::Expected<io::JsonValue> json = io::parseJson(text);
    ASSERT_TRUE(static_cast<bool>(json));
    io::Expected<RunPlan> plan = RunPlan::fromJson(*json);
    ASSERT_FALSE(static_cast<bool>(plan)) << c.to;
    EXPECT_NE(plan.error().message().find(c.message), std::string::npos)
        << plan.error().message();
  }
}

} // namespace
