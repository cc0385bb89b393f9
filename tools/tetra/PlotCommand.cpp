//===- PlotCommand.cpp - tetra plot: loss curves as a picture -------------===//
//
// `tetra plot RUN... -o curves.png`: each RUN is a metrics file (JSON lines,
// one object per logged step: "step", "loss", and whatever else the trainer
// logs, e.g. "eval_loss", "lr", "grad_norm") or a run directory holding
// metrics.jsonl. Draws one curve per run (and the evaluation loss dashed)
// into a PNG a person can look at.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"

#include "runtime/io/Json.h"
#include "runtime/plot/LineChart.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <sys/stat.h>

using namespace tetra;

namespace {

int usageError(const std::string &message) {
  std::fprintf(stderr, "tetra plot: error: %s (see 'tetra plot --help')\n",
               message.c_str());
  return 2;
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

/// "runs/fp4_all_hadamard/metrics.jsonl" -> "fp4_all_hadamard";
/// "fp4.jsonl" -> "fp4".
std::string defaultName(const std::string &path) {
  std::string name = path;
  size_t slash = name.find_last_of('/');
  std::string file = slash == std::string::npos ? name : name.substr(slash + 1);
  if (file == "metrics.jsonl" && slash != std::string::npos) {
    std::string dir = name.substr(0, slash);
    size_t parent = dir.find_last_of('/');
    return parent == std::string::npos ? dir : dir.substr(parent + 1);
  }
  size_t dot = file.find_last_of('.');
  return dot == std::string::npos ? file : file.substr(0, dot);
}

/// `metric` in one metrics line: a top-level field ("loss"), or a member of
/// an object field ("sqnr_db.wgrad.dy": "wgrad.dy" in "sqnr_db").
const io::JsonValue *findMetric(const io::JsonValue &line,
                                const std::string &metric) {
  if (const io::JsonValue *value = line.find(metric))
    return value;
  for (size_t dot = metric.find('.'); dot != std::string::npos;
       dot = metric.find('.', dot + 1))
    if (const io::JsonValue *object = line.find(metric.substr(0, dot));
        object && object->isObject())
      if (const io::JsonValue *value = object->find(metric.substr(dot + 1)))
        return value;
  return nullptr;
}

/// Reads `metric` (and "eval_<metric>") per step from a metrics file; a
/// "run" field on any line names the series.
io::Expected<std::vector<plot::Series>> readRun(const std::string &path,
                                                const std::string &metric) {
  std::ifstream in(path);
  if (!in)
    return io::Error("cannot read '" + path + "'");
  plot::Series train, eval;
  train.name = defaultName(path);
  eval.dashed = true;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    io::Expected<io::JsonValue> value = io::parseJson(line);
    if (!value || !value->isObject())
      return io::Error(path + ":" + std::to_string(number) +
                       ": not a JSON object" +
                       (value ? "" : ": " + value.error().message()));
    const io::JsonValue *step = value->find("step");
    if (!step || !step->isNumber())
      return io::Error(path + ":" + std::to_string(number) +
                       ": no numeric \"step\"");
    if (const io::JsonValue *run = value->find("run"); run && run->isString())
      train.name = run->asString();
    if (const io::JsonValue *y = findMetric(*value, metric); y && y->isNumber())
      train.points.push_back({step->asDouble(), y->asDouble()});
    if (const io::JsonValue *y = value->find("eval_" + metric);
        y && y->isNumber())
      eval.points.push_back({step->asDouble(), y->asDouble()});
  }
  if (train.points.empty() && eval.points.empty())
    return io::Error(path + ": no \"" + metric + "\" in any line");
  std::vector<plot::Series> series;
  if (!train.points.empty())
    series.push_back(train);
  if (!eval.points.empty()) {
    eval.name = train.name + " (eval)";
    series.push_back(eval);
  }
  return series;
}

} // namespace

int tetra::driver::plotMain(const std::vector<std::string_view> &args) {
  std::vector<std::string> runs;
  std::string output, metric = "loss", title;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg(args[i]);
    auto value = [&](std::string &slot) {
      if (i + 1 == args.size())
        return false;
      slot = std::string(args[++i]);
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      printPlotHelp();
      return 0;
    }
    if (arg == "-o" || arg == "--output") {
      if (!value(output))
        return usageError("'" + arg + "' needs a file name");
    } else if (arg == "--metric") {
      if (!value(metric))
        return usageError("'--metric' needs a name");
    } else if (arg == "--title") {
      if (!value(title))
        return usageError("'--title' needs a text");
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else {
      runs.push_back(arg);
    }
  }
  if (runs.empty())
    return usageError("no runs given");
  if (output.empty())
    return usageError("no output: -o curves.png");

  // Each run's curves, then their names: runs that share a name (two
  // seeds trained under one label, one run file trained twice) are told
  // apart by their output folders, as given.
  std::vector<std::vector<plot::Series>> read;
  for (std::string path : runs) {
    if (isDirectory(path))
      path += "/metrics.jsonl";
    io::Expected<std::vector<plot::Series>> run = readRun(path, metric);
    if (!run) {
      std::fprintf(stderr, "tetra plot: error: %s\n",
                   run.error().message().c_str());
      return 1;
    }
    read.push_back(std::move(*run));
  }
  std::vector<std::string> runNames;
  for (const std::vector<plot::Series> &run : read)
    runNames.push_back(run.front().name);
  for (size_t i = 0; i < read.size(); ++i) {
    if (std::count(runNames.begin(), runNames.end(), runNames[i]) == 1)
      continue;
    std::string folder = runs[i];
    const std::string file = "/metrics.jsonl";
    if (folder.size() > file.size() &&
        folder.compare(folder.size() - file.size(), file.size(), file) == 0)
      folder.resize(folder.size() - file.size());
    while (folder.size() > 1 && folder.back() == '/')
      folder.pop_back();
    for (plot::Series &s : read[i])
      s.name = s.dashed ? folder + " (eval)" : folder;
  }
  std::vector<plot::Series> series;
  for (std::vector<plot::Series> &run : read) {
    // One color per run: its evaluation curve is dashed in the same color.
    int color = 0;
    for (const plot::Series &s : series)
      color = std::max(color, s.color + 1);
    for (plot::Series &s : run)
      s.color = color;
    series.insert(series.end(), run.begin(), run.end());
  }
  plot::ChartOptions options;
  options.title = title.empty() ? metric : title;
  options.yLabel = metric;
  io::Status written = plot::drawLineChart(series, options).writePng(output);
  if (!written) {
    std::fprintf(stderr, "tetra plot: error: %s\n",
                 written.error().message().c_str());
    return 1;
  }
  std::string names;
  for (const plot::Series &s : series)
    names += (names.empty() ? "" : ", ") + s.name;
  std::printf("wrote %s: %zu curves (%s)\n", output.c_str(), series.size(),
              names.c_str());
  return 0;
}

void tetra::driver::printPlotHelp() {
  std::printf(
      "USAGE: tetra plot RUN... -o OUT.png [--metric NAME] [--title TEXT]\n"
      "\n"
      "Draws the loss curves of several runs side by side into a PNG.\n"
      "\n"
      "RUN is a metrics file (JSON lines, one object per logged step with\n"
      "\"step\" and the metric, optionally \"run\" naming the curve) or a run\n"
      "directory holding metrics.jsonl. \"eval_<metric>\" values are drawn\n"
      "dashed beside the training curve. Runs that share a name are named\n"
      "by their folders, as given.\n"
      "\n"
      "OPTIONS\n"
      "  -o, --output OUT.png  the picture (written atomically)\n"
      "  --metric NAME         what to draw (default loss; also lr,\n"
      "                        grad_norm, sqnr_db.wgrad.dy, ...: a\n"
      "                        member of an object field by its path)\n"
      "  --title TEXT          the chart's title (default: the metric)\n"
      "  -h, --help            print this help\n");
}
