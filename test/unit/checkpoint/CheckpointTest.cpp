//===- CheckpointTest.cpp - Save, load, verify, refuse --------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/Packer.h"
#include "runtime/io/Safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace tetra;
using namespace tetra::checkpoint;

namespace {

::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << part << "\"";
}

struct TempDir {
  std::string path;
  TempDir() {
    char pattern[] = "/tmp/tetra-ckpt-test-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string file(const std::string &name) const { return path + "/" + name; }
};

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}
void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

Tensor floats(const std::string &name, std::vector<int64_t> shape,
              float base) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[i] = base + 0.001f * static_cast<float>(i) - 1e-30f * i;
  Tensor t{name, io::Dtype::F32, std::move(shape), {}};
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TrainingState sampleState(int64_t step) {
  TrainingState state;
  state.model = "llama_tiny";
  state.policy = "mxfp4_w_bf16_a";
  state.step = step;
  state.seed = 0xfedcba9876543210ull;
  state.rngState = "philox:12345:67";
  data::DataPosition position;
  position.epoch = 2;
  position.bufferStart = 1024;
  position.cursor = 17;
  position.offset = 99;
  position.seed = 42;
  position.seqLen = 256;
  position.shuffleBuffer = 1024;
  state.dataPosition = position.serialize();
  state.parameters = {floats("model.embed_tokens.weight", {16, 8}, 0.5f),
                      floats("model.norm.weight", {8}, 1.0f)};
  Tensor half{"lm_head.weight", io::Dtype::BF16, {4, 8}, {}};
  for (int i = 0; i < 64; ++i)
    half.bytes.push_back(static_cast<uint8_t>(i * 37));
  state.parameters.push_back(half);
  for (const Tensor &p : state.parameters) {
    Tensor m = floats(p.name, p.shape, 0.25f + step);
    Tensor v = floats(p.name, p.shape, 0.125f + step);
    state.optimizerM.push_back(m);
    state.optimizerV.push_back(v);
  }
  return state;
}

CheckpointSpec sampleSpec() {
  CheckpointSpec spec;
  spec.model = "llama_tiny";
  spec.parameters = {{"model.embed_tokens.weight", io::Dtype::F32, {16, 8}},
                     {"model.norm.weight", io::Dtype::F32, {8}},
                     {"lm_head.weight", io::Dtype::BF16, {4, 8}}};
  return spec;
}

void expectSame(const TrainingState &a, const TrainingState &b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.policy, b.policy);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.rngState, b.rngState);
  EXPECT_EQ(a.dataPosition, b.dataPosition);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.optimizerM, b.optimizerM);
  EXPECT_EQ(a.optimizerV, b.optimizerV);
}

} // namespace

TEST(Checkpoint, RoundTripIsBitIdentical) {
  TempDir dir;
  TrainingState state = sampleState(100);
  // A nested directory that does not exist yet.
  ASSERT_TRUE(saveCheckpoint(dir.file("a/b/c"), state).ok());
  EXPECT_EQ(readBytes(dir.file("a/b/c/latest")), "step_00000100.safetensors\n");
  writeBytes(dir.file("file"), "x");
  io::Expected<std::string> notDir = saveCheckpoint(dir.file("file"), state);
  ASSERT_FALSE(notDir.ok());
  EXPECT_TRUE(contains(notDir.error().message(), "file"));

  io::Expected<std::string> path = saveCheckpoint(dir.file("ckpt"), state);
  ASSERT_TRUE(path.ok()) << path.error().message();
  EXPECT_EQ(*path, dir.file("ckpt/step_00000100.safetensors"));
  EXPECT_EQ(readBytes(dir.file("ckpt/latest")), "step_00000100.safetensors\n");

  CheckpointSpec spec = sampleSpec();
  io::Expected<TrainingState> loaded = loadCheckpoint(*path, &spec);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  expectSame(state, *loaded);
  io::Expected<data::DataPosition> position =
      data::DataPosition::parse(loaded->dataPosition);
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(position->cursor, 17u);

  // Standard safetensors: parameters under their names, moments prefixed.
  io::Expected<io::SafetensorsFile> file = io::SafetensorsFile::open(*path);
  ASSERT_TRUE(file.ok());
  EXPECT_NE(file->find("model.norm.weight"), nullptr);
  EXPECT_NE(file->find("optimizer.m.model.norm.weight"), nullptr);
  EXPECT_NE(file->find("optimizer.v.lm_head.weight"), nullptr);
  EXPECT_EQ(file->tensors().size(), 9u);

  // A later step moves latest.
  TrainingState later = sampleState(200);
  ASSERT_TRUE(saveCheckpoint(dir.file("ckpt"), later).ok());
  io::Expected<TrainingState> latest =
      loadLatestCheckpoint(dir.file("ckpt"), &spec);
  ASSERT_TRUE(latest.ok()) << latest.error().message();
  expectSame(later, *latest);
  ASSERT_TRUE(loadCheckpoint(*path, &spec).ok()); // step 100 still there
}

TEST(Checkpoint, FailedWriteKeepsThePrevious) {
  TempDir dir;
  TrainingState state = sampleState(100);
  ASSERT_TRUE(saveCheckpoint(dir.path, state).ok());
  std::string before = readBytes(dir.file("step_00000100.safetensors"));

  // The same step again, with a write that fails (file-size limit).
  TrainingState changed = sampleState(100);
  changed.parameters[0] = floats("model.embed_tokens.weight", {16, 8}, 9.0f);
  for (int i = 0; i < 20; ++i)
    changed.parameters.push_back(
        floats("extra." + std::to_string(i), {64, 64}, 1.0f));
  rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit limited = old;
  limited.rlim_cur = 4096;
  auto previous = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  io::Expected<std::string> failed = saveCheckpoint(dir.path, changed);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(contains(failed.error().message(), "step_00000100.safetensors"));
  EXPECT_EQ(readBytes(dir.file("step_00000100.safetensors")), before);
  EXPECT_EQ(readBytes(dir.file("latest")), "step_00000100.safetensors\n");
  CheckpointSpec spec = sampleSpec();
  io::Expected<TrainingState> loaded = loadLatestCheckpoint(dir.path, &spec);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  expectSame(state, *loaded);
}

/// The free space of a directory not made yet is its nearest parent's: a
/// byte fits; more than any disk holds is refused, with both sizes named.
TEST(Checkpoint, RoomForACheckpointIsCheckedBeforeARun) {
  TempDir dir;
  const std::string inner = dir.path + "/not/made/yet";
  EXPECT_TRUE(checkRoomFor(inner, 1).ok());
  io::Status refused = checkRoomFor(inner, uint64_t{1} << 62);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message(), "takes 4611686018.4 GB"))
      << refused.error().message();
  EXPECT_TRUE(contains(refused.error().message(), "GB free"));
  EXPECT_FALSE(std::filesystem::exists(inner));
}

TEST(Checkpoint, CorruptFilesAreRefused) {
  TempDir dir;
  io::Expected<std::string> saved = saveCheckpoint(dir.path, sampleState(5));
  ASSERT_TRUE(saved.ok());
  std::string bytes = readBytes(*saved);
  CheckpointSpec spec = sampleSpec();

  // A flipped bit in the data section: checksum.
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x01;
  writeBytes(dir.file("flipped.safetensors"), flipped);
  io::Expected<TrainingState> r =
      loadCheckpoint(dir.file("flipped.safetensors"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(),
                       "flipped.safetensors: checksum mismatch"));

  // Truncated.
  writeBytes(dir.file("cut.safetensors"), bytes.substr(0, bytes.size() - 100));
  r = loadCheckpoint(dir.file("cut.safetensors"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(), "cut.safetensors"));

  // Missing tensor, wrong shape, other model: written consistently (valid
  // checksum) but not fitting the spec.
  TrainingState missing = sampleState(6);
  missing.parameters.pop_back();
  ASSERT_TRUE(saveCheckpoint(dir.file("m"), missing).ok());
  r = loadLatestCheckpoint(dir.file("m"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(), "missing tensor \"lm_head.weight\""));

  TrainingState noMoment = sampleState(6);
  noMoment.optimizerV.pop_back();
  ASSERT_TRUE(saveCheckpoint(dir.file("nv"), noMoment).ok());
  r = loadLatestCheckpoint(dir.file("nv"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(),
                       "missing tensor \"optimizer.v.lm_head.weight\""));

  TrainingState shape = sampleState(7);
  shape.parameters[1] = floats("model.norm.weight", {9}, 1.0f);
  ASSERT_TRUE(saveCheckpoint(dir.file("s"), shape).ok());
  r = loadLatestCheckpoint(dir.file("s"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(),
                       "\"model.norm.weight\" has shape [9], the model "
                       "expects [8]"));

  TrainingState dtype = sampleState(7);
  dtype.parameters[2].dtype = io::Dtype::F16;
  ASSERT_TRUE(saveCheckpoint(dir.file("d"), dtype).ok());
  r = loadLatestCheckpoint(dir.file("d"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(),
                       "\"lm_head.weight\" is F16, the model expects BF16"));

  TrainingState extra = sampleState(7);
  extra.parameters.push_back(floats("stray.weight", {2}, 0.0f));
  ASSERT_TRUE(saveCheckpoint(dir.file("e"), extra).ok());
  r = loadLatestCheckpoint(dir.file("e"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(),
                       "\"stray.weight\" is not a parameter of model"));

  TrainingState other = sampleState(8);
  other.model = "gpt2_small";
  ASSERT_TRUE(saveCheckpoint(dir.file("o"), other).ok());
  r = loadLatestCheckpoint(dir.file("o"), &spec);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(),
                       "checkpoint of model \"gpt2_small\", expected "
                       "\"llama_tiny\""));

  // A plain safetensors file without Tetra metadata.
  io::SafetensorsWriter plain;
  float x = 1;
  ASSERT_TRUE(plain.addTensor("w", io::Dtype::F32, {1}, &x, 4).ok());
  ASSERT_TRUE(plain.write(dir.file("plain.safetensors")).ok());
  r = loadCheckpoint(dir.file("plain.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(), "not a Tetra checkpoint"));

  // A missing latest pointer.
  r = loadLatestCheckpoint(dir.file("nowhere"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(), "latest: cannot open"));

  // Loading touched nothing.
  EXPECT_EQ(readBytes(*saved), bytes);
}

TEST(Checkpoint, ChecksumCoversNamesAndShapes) {
  Tensor a = floats("a", {2, 2}, 1.0f);
  Tensor b = a;
  b.name = "b";
  Tensor c = a;
  c.shape = {4};
  uint32_t ca = checksumTensors({&a}), cb = checksumTensors({&b}),
           cc = checksumTensors({&c});
  EXPECT_NE(ca, cb);
  EXPECT_NE(ca, cc);
  EXPECT_EQ(checksumTensors({&a, &b}), checksumTensors({&b, &a}));
}

/// The run's name and its training time travel with the checkpoint; a
/// directory says whether it holds checkpoints, and removing them leaves
/// every other file.
TEST(Checkpoint, RunNameElapsedTimeAndRemoval) {
  TempDir dir;
  TrainingState state = sampleState(100);
  state.run = "tiny/bf16";
  state.elapsedSeconds = 12.625;
  EXPECT_FALSE(holdsCheckpoints(dir.file("ckpt")));
  io::Expected<std::string> path = saveCheckpoint(dir.file("ckpt"), state);
  ASSERT_TRUE(path.ok()) << path.error().message();
  io::Expected<TrainingState> loaded = loadCheckpoint(*path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_EQ(loaded->run, "tiny/bf16");
  EXPECT_EQ(loaded->elapsedSeconds, 12.625);

  EXPECT_TRUE(holdsCheckpoints(dir.file("ckpt")));
  writeBytes(dir.file("ckpt/notes.txt"), "keep me");
  ASSERT_TRUE(removeCheckpoints(dir.file("ckpt")).ok());
  EXPECT_FALSE(holdsCheckpoints(dir.file("ckpt")));
  EXPECT_EQ(readBytes(dir.file("ckpt/notes.txt")), "keep me");
  // A lone step file (no latest) still counts as checkpoints.
  writeBytes(dir.file("ckpt/step_00000007.safetensors"), "x");
  EXPECT_TRUE(holdsCheckpoints(dir.file("ckpt")));
  ASSERT_TRUE(removeCheckpoints(dir.file("ckpt")).ok());
  writeBytes(dir.file("ckpt/step_.safetensors"), "x");
  writeBytes(dir.file("ckpt/step_12a.safetensors"), "x");
  EXPECT_FALSE(holdsCheckpoints(dir.file("ckpt")));
}
