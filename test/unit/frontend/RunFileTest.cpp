//===- RunFileTest.cpp - Run files parsed, checked and resolved -----------===//

#include "frontend/Frontend.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace tetra;
using namespace tetra::frontend;

namespace {

class RunFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("tetra-run-test", directory));
    write("models/tiny.tetra", "model tiny\n");
    write("models/policies/bf16.tetra",
          "policy bf16\ndefault { all = bf16 }\n");
    write("data/tokenizers/gpt2/encoder.json", "{}");
    write("data/tokenizers/gpt2/vocab.bpe", "");
  }
  void TearDown() override { llvm::sys::fs::remove_directories(directory); }

  std::string path(llvm::StringRef name) {
    llvm::SmallString<256> result(directory);
    llvm::sys::path::append(result, name);
    return result.str().str();
  }

  void write(llvm::StringRef name, llvm::StringRef text) {
    std::string file = path(name);
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(file));
    std::error_code error;
    llvm::raw_fd_ostream os(file, error);
    ASSERT_FALSE(error) << file;
    os << text;
  }

  std::optional<RunConfig> load(llvm::StringRef name) {
    output.clear();
    llvm::SourceMgr sourceMgr;
    llvm::raw_string_ostream os(output);
    DiagnosticEngine diags(sourceMgr, os);
    std::optional<RunConfig> config = loadRun(diags, path(name));
    errors = diags.errorCount();
    return config;
  }

  void expectError(llvm::StringRef name, llvm::StringRef position,
                   llvm::StringRef message) {
    std::optional<RunConfig> config = load(name);
    EXPECT_FALSE(config.has_value());
    std::string expected =
        path(name) + ":" + position.str() + ": error: " + message.str();
    EXPECT_NE(output.find(expected), std::string::npos)
        << "expected: " << expected << "\ngot:\n"
        << output;
  }

  llvm::SmallString<128> directory;
  std::string output;
  unsigned errors = 0;
};

TEST_F(RunFileTest, FillsTheConfig) {
  write("models/runs/r.tetra",
        "run small\n"
        "model = \"../tiny.tetra\"\n"
        "policy = \"../policies/bf16.tetra\"\n"
        "data {\n"
        "  train = [\"../../data/c4/*.json.gz\", \"/abs/*.txt.gz\"]\n"
        "  eval = \"../../data/c4/c4-validation.sample.json.gz\"\n"
        "  tokenizer = gpt2(\"../../data/tokenizers/gpt2\")\n"
        "}\n"
        "seq_len = 256\n"
        "micro_batch = 8\n"
        "accumulation = 2\n"
        "tokens = 4.096e6\n"
        "optimizer = adamw(lr = 6e-4, betas = (0.9, 0.95), eps = 1e-8,\n"
        "                  weight_decay = 0.1)\n"
        "schedule = linear(warmup = 10, min_lr = 6e-5)\n"
        "clip = 1.0\n"
        "seed = 1_234\n"
        "target = sm_90a\n"
        "eval { interval = 50  batches = 4 }\n"
        "checkpoint { dir = \"ckpt\" interval = 100 }\n"
        "log_interval = 5\n");
  std::optional<RunConfig> config = load("models/runs/r.tetra");
  ASSERT_TRUE(config) << output;
  EXPECT_EQ(config->name, "small");
  EXPECT_EQ(config->modelPath, path("models/tiny.tetra"));
  EXPECT_EQ(config->policyPath, path("models/policies/bf16.tetra"));
  ASSERT_EQ(config->trainData.size(), 2u);
  EXPECT_EQ(config->trainData[0], path("data/c4/*.json.gz"));
  EXPECT_EQ(config->trainData[1], "/abs/*.txt.gz");
  ASSERT_EQ(config->evalData.size(), 1u);
  EXPECT_EQ(config->tokenizer.kind, TokenizerConfig::Kind::GPT2);
  EXPECT_EQ(config->tokenizer.path, path("data/tokenizers/gpt2"));
  EXPECT_EQ(config->seqLen, 256);
  EXPECT_EQ(config->microBatch, 8);
  EXPECT_EQ(config->accumulation, 2);
  EXPECT_EQ(config->steps, 0);
  EXPECT_EQ(config->tokens, 4096000);
  EXPECT_DOUBLE_EQ(config->lr, 6e-4);
  EXPECT_DOUBLE_EQ(config->beta2, 0.95);
  EXPECT_EQ(config->schedule.kind, ScheduleConfig::Kind::Linear);
  EXPECT_EQ(config->schedule.warmup, 10);
  EXPECT_DOUBLE_EQ(config->schedule.minLr, 6e-5);
  EXPECT_EQ(config->seed, 1234u);
  EXPECT_EQ(config->target, Target::Sm90a);
  EXPECT_EQ(config->evalInterval, 50);
  EXPECT_EQ(config->evalBatches, 4);
  EXPECT_EQ(config->checkpointDir, path("models/runs/ckpt"));
  EXPECT_EQ(config->checkpointInterval, 100);
  EXPECT_EQ(config->logInterval, 5);
}

TEST_F(RunFileTest, DefaultsAndBytes) {
  write("r.tetra", "run r\n"
                   "model = \"models/tiny.tetra\"\n"
                   "policy = \"models/policies/bf16.tetra\"\n"
                   "data { train = \"x.txt\" tokenizer = bytes }\n"
                   "seq_len = 64\n"
                   "steps = 10\n");
  std::optional<RunConfig> config = load("r.tetra");
  ASSERT_TRUE(config) << output;
  EXPECT_EQ(config->tokenizer.kind, TokenizerConfig::Kind::Bytes);
  EXPECT_EQ(config->steps, 10);
  EXPECT_EQ(config->target, Target::Cpu);
  EXPECT_EQ(config->schedule.kind, ScheduleConfig::Kind::Cosine);
  EXPECT_DOUBLE_EQ(config->lr, 3e-4);
  EXPECT_EQ(config->evalInterval, 0);
  EXPECT_TRUE(config->checkpointDir.empty());
}

TEST_F(RunFileTest, Errors) {
  write("r.tetra",
        "run r\n"
        "model = \"models/nothere.tetra\"\n"                      // 2
        "policy = \"models/policies/bf16.tetra\"\n"               // 3
        "data { train = \"x.txt\" tokenizer = bites }\n"          // 4
        "seq_len = 64.5\n"                                        // 5
        "steps = 10\n"                                            // 6
        "tokens = 100\n"                                          // 7
        "optimizer = adamw(lr = 0, betas = (0.9, 1.0), wd = 1)\n" // 8
        "schedule = cosine(warmup = 20)\n"                        // 9
        "targt = cpu\n"                                           // 10
        "lr = 1\n"                                                // 11
        "seed = 1\n"                                              // 12
        "seed = 2\n"                                              // 13
        "eval = 3\n");                                            // 14
  std::optional<RunConfig> config = load("r.tetra");
  EXPECT_FALSE(config);
  auto expect = [&](const std::string &at, const std::string &message) {
    std::string expected = path("r.tetra") + ":" + at + ": error: " + message;
    EXPECT_NE(output.find(expected), std::string::npos)
        << "expected: " << expected << "\ngot:\n"
        << output;
  };
  expect("2:9", "the model file 'models/nothere.tetra' does not exist");
  expect("4:36", "unknown tokenizer 'bites'; did you mean 'bytes'?");
  expect("5:11", "seq_len must be an integer, got the number 64.5");
  expect("7:1", "give the run's length as steps or as tokens, not both");
  expect("8:24", "lr must be positive, got 0");
  expect("8:41", "beta2 must be in [0, 1), got 1");
  expect("8:47", "unknown argument 'wd' of adamw");
  expect("9:28", "warmup (20 steps) is longer than the run (10 steps)");
  expect("10:1", "unknown setting 'targt'; did you mean 'target'?");
  expect("11:1", "unknown setting 'lr'");
  expect("13:1", "'seed' is set twice");
  expect("14:1", "'eval' is a block: write eval { ... }");
  EXPECT_EQ(errors, 12u) << output;
}

TEST_F(RunFileTest, MissingSettings) {
  write("r.tetra", "run r\ndata { train = \"x\" }\n");
  std::optional<RunConfig> config = load("r.tetra");
  EXPECT_FALSE(config);
  for (const char *message :
       {"1:5: error: missing required setting 'model'",
        "1:5: error: missing required setting 'policy'",
        "2:1: error: missing required setting 'data.tokenizer'",
        "1:5: error: missing required setting 'seq_len'",
        "1:5: error: missing the run's length: set 'steps' or 'tokens'"})
    EXPECT_NE(output.find(message), std::string::npos) << message << "\n"
                                                       << output;
  EXPECT_EQ(errors, 5u) << output;
}

TEST_F(RunFileTest, DumpAST) {
  write("r.tetra", "run r\n"
                   "data { train = [\"a\", \"b\",] tokenizer = gpt2(\"x\") }\n"
                   "optimizer = adamw(lr = 3e-4, betas = (0.9, 0.95))\n"
                   "clip = -1.0\n");
  llvm::SourceMgr sourceMgr;
  std::string errors, dump;
  llvm::raw_string_ostream errorStream(errors), dumpStream(dump);
  DiagnosticEngine engine(sourceMgr, errorStream);
  EXPECT_TRUE(dumpRunAST(engine, path("r.tetra"), dumpStream)) << errors;
  EXPECT_EQ(dump, "Run r @1:5\n"
                  "  Block data @2:1\n"
                  "    Setting train = [\"a\", \"b\"] @2:8\n"
                  "    Setting tokenizer = gpt2(\"x\") @2:28\n"
                  "  Setting optimizer = adamw(lr = 3e-4, betas = (0.9, 0.95)) "
                  "@3:1\n"
                  "  Setting clip = -1.0 @4:1\n");
}

} // namespace
