//===- Metrics.cpp - One JSON line per logged step ------------------------===//

#include "runtime/trainer/Metrics.h"

#include "runtime/io/Json.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <unistd.h>

using namespace tetra;
using namespace tetra::trainer;

io::Expected<MetricsWriter> MetricsWriter::open(const std::string &path,
                                                std::string run) {
  std::FILE *file = std::fopen(path.c_str(), "a");
  if (!file)
    return io::Error("cannot open metrics file '" + path +
                     "': " + std::strerror(errno));
  return MetricsWriter(file, std::move(run));
}

MetricsWriter::MetricsWriter(MetricsWriter &&other) noexcept
    : file_(other.file_), run_(std::move(other.run_)) {
  other.file_ = nullptr;
}

MetricsWriter::~MetricsWriter() {
  if (file_)
    std::fclose(file_);
}

io::Status MetricsWriter::write(const StepRecord &record) {
  std::string line = "{";
  auto field = [&](const char *key) {
    if (line.size() > 1)
      line += ',';
    io::appendJsonString(line, key);
    line += ':';
  };
  field("run");
  io::appendJsonString(line, run_);
  field("step");
  io::appendJsonInteger(line, record.step);
  field("loss");
  io::appendJsonNumber(line, record.loss);
  field("lr");
  io::appendJsonNumber(line, record.lr);
  field("grad_norm");
  io::appendJsonNumber(line, record.gradNorm);
  field("tokens_per_s");
  io::appendJsonNumber(line, record.tokensPerSecond);
  field("elapsed_s");
  io::appendJsonNumber(line, record.elapsedSeconds);
  if (record.evalLoss) {
    field("eval_loss");
    io::appendJsonNumber(line, *record.evalLoss);
  }
  if (!record.sqnrDecibels.empty()) {
    field("sqnr_db");
    line += "{";
    const char *separator = "";
    for (const auto &[key, value] : record.sqnrDecibels) {
      line += separator;
      io::appendJsonString(line, key);
      line += ':';
      io::appendJsonNumber(line, value);
      separator = ",";
    }
    line += "}";
  }
  line += "}\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0)
    return io::Error(std::string("cannot write metrics: ") +
                     std::strerror(errno));
  return io::success();
}

std::string tetra::trainer::progressLine(const StepRecord &record,
                                         int64_t totalSteps) {
  char text[256];
  double rate = record.tokensPerSecond;
  const char *unit = "";
  if (rate >= 1e6) {
    rate /= 1e6;
    unit = "M";
  } else if (rate >= 1e3) {
    rate /= 1e3;
    unit = "k";
  }
  double perStep = record.step > 0 ? record.elapsedSeconds / record.step : 0;
  int64_t eta = static_cast<int64_t>(
      std::lround(perStep * static_cast<double>(totalSteps - record.step)));
  int written = std::snprintf(
      text, sizeof(text),
      "step %lld/%lld | loss %.4f | lr %.2e | %.1f%s tok/s | ETA %lld:%02lld",
      static_cast<long long>(record.step), static_cast<long long>(totalSteps),
      record.loss, record.lr, rate, unit, static_cast<long long>(eta / 60),
      static_cast<long long>(eta % 60));
  std::string line(text, written > 0 ? static_cast<size_t>(written) : 0);
  if (record.evalLoss) {
    std::snprintf(text, sizeof(text), " | eval %.4f", *record.evalLoss);
    line += text;
  }
  return line;
}

void tetra::trainer::printProgress(const StepRecord &record, int64_t totalSteps,
                                   int64_t interval, std::FILE *out) {
  bool last = record.step == totalSteps;
  if (isatty(fileno(out))) {
    std::fprintf(out, "\r\033[K%s%s", progressLine(record, totalSteps).c_str(),
                 last ? "\n" : "");
    std::fflush(out);
    return;
  }
  if (last || interval <= 1 || record.step % interval == 0 || record.evalLoss)
    std::fprintf(out, "%s\n", progressLine(record, totalSteps).c_str());
}
