//===- MetricsTest.cpp - The metrics file reads as one run ----------------===//
//
// A fresh run starts metrics.jsonl and never replaces another run's; a
// resumed run drops the lines after its checkpoint (a torn last line too)
// and refuses a file it cannot read, leaving it as it was. The progress
// line's ETA extrapolates this process's steps to where it stops.
//
//===----------------------------------------------------------------------===//

#include "runtime/trainer/Metrics.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace tetra;
using namespace tetra::trainer;

namespace {

std::string temporaryPath(const char *name) {
  return testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

StepRecord record(int64_t step) {
  StepRecord r;
  r.step = step;
  r.loss = 1.5;
  return r;
}

} // namespace

TEST(MetricsWriter, AFreshRunRefusesAnotherRunsFile) {
  std::string path = temporaryPath("fresh.jsonl");
  writeText(path, "{\"step\":1}\n");
  io::Expected<MetricsWriter> refused = MetricsWriter::create(path, "r");
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(refused.error().message().find("already holds another run's"),
            std::string::npos);
  EXPECT_EQ(readText(path), "{\"step\":1}\n");

  // An empty file holds nothing: it is started.
  writeText(path, "");
  {
    io::Expected<MetricsWriter> created = MetricsWriter::create(path, "r");
    ASSERT_TRUE(static_cast<bool>(created));
    ASSERT_TRUE(static_cast<bool>(created->write(record(1))));
  }
  EXPECT_EQ(readText(path).rfind("{\"run\":\"r\",\"step\":1,", 0), 0u);
  std::remove(path.c_str());
}

TEST(MetricsWriter, AResumeDropsTheStepsAfterItsCheckpoint) {
  std::string path = temporaryPath("resume.jsonl");
  // Steps 1-7 logged, the last line cut short by a kill -9.
  writeText(path, "{\"step\":1}\n{\"step\":5}\n{\"step\":6}\n{\"step\":7}\n"
                  "{\"step\":8,\"lo");
  {
    io::Expected<MetricsWriter> resumed = MetricsWriter::resume(path, "r", 5);
    ASSERT_TRUE(static_cast<bool>(resumed)) << resumed.error().message();
    EXPECT_EQ(readText(path), "{\"step\":1}\n{\"step\":5}\n");
    ASSERT_TRUE(static_cast<bool>(resumed->write(record(6))));
  }
  std::string text = readText(path);
  EXPECT_EQ(text.rfind("{\"step\":1}\n{\"step\":5}\n{\"run\":\"r\",\"step\":6,", 0),
            0u)
      << text;
  std::remove(path.c_str());
}

TEST(MetricsWriter, AResumeRefusesAFileItCannotRead) {
  std::string path = temporaryPath("damaged.jsonl");
  std::string damaged = "{\"step\":1}\nnot json\n{\"step\":9}\n";
  writeText(path, damaged);
  io::Expected<MetricsWriter> refused = MetricsWriter::resume(path, "r", 5);
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(refused.error().message().find(path + ":2: not a metrics record"),
            std::string::npos)
      << refused.error().message();
  EXPECT_EQ(readText(path), damaged);
  std::remove(path.c_str());
}

TEST(ProgressLine, TheEtaExtrapolatesThisProcessToItsStop) {
  // Resumed at step 50 of 100: 10 steps in 5 s here, stopping at step 80.
  StepRecord r = record(60);
  r.elapsedSeconds = 1000; // the whole run's time: not the ETA's basis
  Progress progress;
  progress.totalSteps = 100;
  progress.stopStep = 80;
  progress.stepsRun = 10;
  progress.secondsRun = 5;
  EXPECT_NE(progressLine(r, progress).find("| ETA 0:10 to step 80"),
            std::string::npos)
      << progressLine(r, progress);
  progress.stopStep = 100;
  EXPECT_NE(progressLine(r, progress).find("| ETA 0:20"), std::string::npos);
  EXPECT_EQ(progressLine(r, progress).find("to step"), std::string::npos);
}
