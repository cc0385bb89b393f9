//===- Metrics.cpp - One JSON line per logged step ------------------------===//

#include "runtime/trainer/Metrics.h"

#include "runtime/io/AtomicFile.h"
#include "runtime/io/Json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace tetra;
using namespace tetra::trainer;

namespace {

io::Expected<std::FILE *> openFile(const std::string &path, const char *mode) {
  std::FILE *file = std::fopen(path.c_str(), mode);
  if (!file)
    return io::Error("cannot open metrics file '" + path +
                     "': " + std::strerror(errno));
  return file;
}

} // namespace

io::Expected<MetricsWriter> MetricsWriter::create(const std::string &path,
                                                  std::string run) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && info.st_size > 0)
    return io::Error("'" + path +
                     "' already holds another run's metrics; a fresh run "
                     "does not replace them");
  io::Expected<std::FILE *> file = openFile(path, "w");
  if (!file)
    return file.error();
  return MetricsWriter(*file, std::move(run));
}

io::Expected<MetricsWriter> MetricsWriter::resume(const std::string &path,
                                                  std::string run,
                                                  int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    std::string all = text.str(), kept;
    size_t begin = 0;
    for (int line = 1; begin < all.size(); ++line) {
      size_t end = all.find('\n', begin);
      bool terminated = end != std::string::npos;
      std::string_view record(all.data() + begin,
                              (terminated ? end : all.size()) - begin);
      begin = terminated ? end + 1 : all.size();
      io::Expected<io::JsonValue> parsed = io::parseJson(record);
      const io::JsonValue *logged = parsed ? parsed->find("step") : nullptr;
      if (!logged || !logged->isInteger()) {
        // A line cut short by a killed process is its last: drop it.
        if (!terminated)
          break;
        return io::Error(fmt::format(
            "{}:{}: not a metrics record ({}); the file is left as it was",
            path, line,
            (parsed ? std::string("no integer \"step\"")
                    : parsed.error().message())));
      }
      if (logged->asInt64() <= step) {
        kept.append(record);
        kept += '\n';
      }
    }
    if (kept.size() != all.size())
      if (io::Status written = io::writeFileAtomically(path, kept); !written)
        return written.error();
  }
  io::Expected<std::FILE *> file = openFile(path, "a");
  if (!file)
    return file.error();
  return MetricsWriter(*file, std::move(run));
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
  field("tokens");
  io::appendJsonInteger(line, record.tokens);
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
  // {"key":number,...}
  auto numbers = [&](const std::map<std::string, double> &map) {
    line += "{";
    const char *separator = "";
    for (const auto &[key, value] : map) {
      line += separator;
      io::appendJsonString(line, key);
      line += ':';
      io::appendJsonNumber(line, value);
      separator = ",";
    }
    line += "}";
  };
  auto object = [&](const char *name, const std::map<std::string, double> &map) {
    if (map.empty())
      return;
    field(name);
    numbers(map);
  };
  object("sqnr_db", record.sqnrDecibels);
  if (!record.sqnrDecibelsByLinear.empty()) {
    field("sqnr_db_linear");
    line += "{";
    const char *separator = "";
    for (const auto &[linear, values] : record.sqnrDecibelsByLinear) {
      line += separator;
      io::appendJsonString(line, linear);
      line += ':';
      numbers(values);
      separator = ",";
    }
    line += "}";
  }
  object("sm90a_folding_tiles", record.foldingTiles);
  object("exact_pairs", record.exactPairs);
  line += "}\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0)
    return io::Error(std::string("cannot write metrics: ") +
                     std::strerror(errno));
  return io::success();
}

std::string tetra::trainer::progressLine(const StepRecord &record,
                                         const Progress &progress) {
  double rate = record.tokensPerSecond;
  const char *unit = "";
  if (rate >= 1e6) {
    rate /= 1e6;
    unit = "M";
  } else if (rate >= 1e3) {
    rate /= 1e3;
    unit = "k";
  }
  double perStep = progress.stepsRun > 0
                       ? progress.secondsRun / progress.stepsRun
                       : 0;
  int64_t eta = static_cast<int64_t>(std::lround(
      perStep *
      static_cast<double>(std::max<int64_t>(0, progress.stopStep - record.step))));
  std::string line = fmt::format(
      "step {}/{} | loss {:.4f} | lr {:.2e} | {:.1f}{} tok/s | ETA {}:{:02}",
      record.step, progress.totalSteps, record.loss, record.lr, rate, unit,
      eta / 60, eta % 60);
  if (progress.stopStep < progress.totalSteps)
    line += fmt::format(" to step {}", progress.stopStep);
  if (record.evalLoss)
    line += fmt::format(" | eval {:.4f}", *record.evalLoss);
  return line;
}

void tetra::trainer::printProgress(const StepRecord &record,
                                   const Progress &progress, int64_t interval,
                                   bool last, std::FILE *out) {
  if (isatty(fileno(out))) {
    fmt::print(out, "\r\033[K{}{}", progressLine(record, progress),
               last ? "\n" : "");
    std::fflush(out);
    return;
  }
  if (last || interval <= 1 || record.step % interval == 0 || record.evalLoss) {
    fmt::print(out, "{}\n", progressLine(record, progress));
    std::fflush(out);
  }
}
