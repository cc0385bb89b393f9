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
#include "tools/tetra/RunFiles.h"

#include "runtime/io/Json.h"
#include "runtime/plot/HeatMap.h"
#include "runtime/plot/LineChart.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <sys/stat.h>

using namespace tetra;

namespace {

int usageError(const std::string &message) {
  fmt::print(stderr, "tetra plot: error: {} (see 'tetra plot --help')\n",
             message);
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
/// an object field, at any depth, keys holding dots themselves
/// ("sqnr_db.wgrad.dy": "wgrad.dy" in "sqnr_db";
/// "sqnr_db_linear.layers.0.attn.wq.wgrad.dy": "wgrad.dy" in
/// "layers.0.attn.wq" in "sqnr_db_linear").
const io::JsonValue *findMetric(const io::JsonValue &line,
                                const std::string &metric) {
  if (const io::JsonValue *value = line.find(metric))
    return value;
  for (size_t dot = metric.find('.'); dot != std::string::npos;
       dot = metric.find('.', dot + 1))
    if (const io::JsonValue *object = line.find(metric.substr(0, dot));
        object && object->isObject())
      if (const io::JsonValue *value =
              findMetric(*object, metric.substr(dot + 1)))
        return value;
  return nullptr;
}

/// Reads `metric` (and "eval_<metric>") against `x` ("step", or another
/// numeric field such as "elapsed_s") from a metrics file; a "run" field on
/// any line names the series. A line without `x` adds no point.
io::Expected<std::vector<plot::Series>> readRun(const std::string &path,
                                                const std::string &metric,
                                                const std::string &x) {
  plot::Series train, eval;
  train.name = defaultName(path);
  eval.dashed = true;
  io::Status read = io::forEachJsonLine(
      path, [&](int number, const io::JsonValue &value) -> io::Status {
        const io::JsonValue *step = value.find("step");
        if (!step || !step->isNumber())
          return io::Error(
              fmt::format("{}:{}: no numeric \"step\"", path, number));
        if (const io::JsonValue *run = value.find("run"); run && run->isString())
          train.name = run->asString();
        const io::JsonValue *at = findMetric(value, x);
        if (!at || !at->isNumber())
          return io::success();
        if (const io::JsonValue *y = findMetric(value, metric);
            y && y->isNumber())
          train.points.push_back({at->asDouble(), y->asDouble()});
        if (const io::JsonValue *y = value.find("eval_" + metric);
            y && y->isNumber())
          eval.points.push_back({at->asDouble(), y->asDouble()});
        return io::success();
      });
  if (!read)
    return read.error();
  if (train.points.empty() && eval.points.empty())
    return io::Error(path + ": no \"" + metric + "\"" +
                     (x == "step" ? "" : " with \"" + x + "\"") +
                     " in any line");
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

/// Orders names with their numbers as numbers: layers.2 before layers.10.
bool naturalLess(const std::string &a, const std::string &b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei])))
        ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej])))
        ++ej;
      const long long x = std::stoll(a.substr(i, ei - i)),
                      y = std::stoll(b.substr(j, ej - j));
      if (x != y)
        return x < y;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j])
      return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

/// The y axis's label for `metric`, with its unit.
std::string axisLabel(const std::string &metric) {
  std::string base = metric;
  if (base.rfind("eval_", 0) == 0)
    base = base.substr(5);
  if (base == "loss")
    return metric + " (nats per token)";
  if (base.rfind("sqnr", 0) == 0)
    return metric + " (dB)";
  if (base == "lr")
    return "learning rate";
  if (base == "grad_norm")
    return "gradient norm (L2, before clipping)";
  if (base == "tokens_per_s")
    return "tokens per second";
  if (base == "elapsed_s")
    return "elapsed (s)";
  return metric;
}

/// tetra plot RUN --heatmap: the per-linear SQNR of one measured step
/// (`step`, or the last) as linears x GEMM role and operand.
int plotHeatMap(const std::string &run, const std::string &output,
                int64_t step, const std::string &title) {
  std::string path = run;
  if (isDirectory(path))
    path += "/metrics.jsonl";
  std::ifstream in(path);
  if (!in) {
    fmt::print(stderr, "tetra plot: error: cannot read '{}'\n", path);
    return 1;
  }
  std::optional<io::JsonValue> chosen;
  int64_t chosenStep = 0;
  std::string runName = defaultName(path);
  std::string line;
  for (int lineNumber = 1; std::getline(in, line); ++lineNumber) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    io::Expected<io::JsonValue> value = io::parseJson(line);
    if (!value) {
      fmt::print(stderr, "tetra plot: error: {}:{}: {}\n", path, lineNumber,
                 value.error().message());
      return 1;
    }
    const io::JsonValue *linear = value->find("sqnr_db_linear");
    const io::JsonValue *at = value->find("step");
    if (const io::JsonValue *name = value->find("run");
        name && name->isString())
      runName = name->asString();
    if (!linear || !linear->isObject() || !at || !at->isNumber())
      continue;
    const int64_t s = static_cast<int64_t>(at->asDouble());
    if (step > 0 && s != step)
      continue;
    chosen = *value;
    chosenStep = s;
  }
  if (!chosen) {
    fmt::print(stderr,
               "tetra plot: error: {}: no \"sqnr_db_linear\"{} (a run measures "
               "it every sqnr_interval steps)\n",
               path,
               step > 0 ? fmt::format(" at step {}", step)
                        : std::string(" in any line"));
    return 1;
  }
  static const char *kColumns[] = {"fprop.x",  "fprop.w",  "dgrad.dy",
                                    "dgrad.w",  "wgrad.dy", "wgrad.x"};
  plot::HeatMapData data;
  data.title = title.empty() ? fmt::format("{}: SQNR per linear at step {}",
                                           runName, chosenStep)
                             : title;
  const io::JsonValue &linears = *chosen->find("sqnr_db_linear");
  for (const io::JsonMember &member : linears.members())
    data.rows.push_back(member.key);
  std::sort(data.rows.begin(), data.rows.end(), naturalLess);
  for (const char *column : kColumns)
    data.columns.push_back(column);
  for (const std::string &row : data.rows) {
    std::vector<std::optional<double>> cells;
    const io::JsonValue *values = linears.find(row);
    for (const char *column : kColumns) {
      const io::JsonValue *value = values ? values->find(column) : nullptr;
      cells.push_back(value && value->isNumber()
                          ? std::optional<double>(value->asDouble())
                          : std::nullopt);
    }
    data.values.push_back(std::move(cells));
  }
  io::Status written = plot::drawHeatMap(data, output);
  if (!written) {
    fmt::print(stderr, "tetra plot: error: {}\n", written.error().message());
    return 1;
  }
  fmt::print("wrote {}: SQNR heat map of {} linears x {} operands, step {}\n",
             output, data.rows.size(), data.columns.size(), chosenStep);
  return 0;
}

namespace {

/// --seeds: the runs of one policy (names differing only by "/seed=N")
/// as one curve, the mean over its seeds at each x they all logged, with
/// their lowest and highest values as its band; its evaluation curve the
/// same way. The policies in the order first read.
io::Expected<std::vector<std::vector<plot::Series>>>
meanOverSeeds(const std::vector<std::vector<plot::Series>> &runs) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const std::vector<plot::Series> *>> byPolicy;
  for (const std::vector<plot::Series> &run : runs) {
    const std::string policy = driver::policyOf(run.front().name);
    if (!byPolicy.count(policy))
      order.push_back(policy);
    byPolicy[policy].push_back(&run);
  }
  std::vector<std::vector<plot::Series>> merged;
  for (const std::string &policy : order) {
    const auto &seeds = byPolicy[policy];
    std::vector<plot::Series> curves;
    for (bool eval : {false, true}) {
      // Each seed's curve of this kind, by x.
      std::vector<std::map<double, double>> byX;
      for (const std::vector<plot::Series> *run : seeds)
        for (const plot::Series &s : *run)
          if (s.dashed == eval)
            byX.emplace_back(s.points.begin(), s.points.end());
      if (byX.empty())
        continue;
      if (byX.size() != seeds.size())
        return io::Error("'" + policy + "': only some of its seeds have " +
                         (eval ? "an evaluation curve" : "a training curve"));
      plot::Series mean;
      mean.dashed = eval;
      mean.name = fmt::format("{} ({}{} seed{})", policy, eval ? "eval, " : "",
                              seeds.size(), seeds.size() == 1 ? "" : "s");
      for (auto [x, first] : byX.front()) {
        double sum = 0, low = first, high = first;
        bool everywhere = true;
        for (const std::map<double, double> &seed : byX) {
          auto at = seed.find(x);
          if (at == seed.end()) {
            everywhere = false;
            break;
          }
          sum += at->second;
          low = std::min(low, at->second);
          high = std::max(high, at->second);
        }
        if (!everywhere)
          continue;
        mean.points.push_back({x, sum / byX.size()});
        mean.band.push_back({low, high});
      }
      if (mean.points.empty())
        return io::Error("'" + policy + "': its seeds share no logged point");
      if (seeds.size() == 1)
        mean.band.clear();
      curves.push_back(std::move(mean));
    }
    merged.push_back(std::move(curves));
  }
  return merged;
}

} // namespace

int tetra::driver::plotMain(const std::vector<std::string_view> &args) {
  std::vector<std::string> runs;
  std::string output, metric = "loss", title, stepText, smoothText,
      xName = "step";
  bool heatMap = false, logY = false, seeds = false;
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
    } else if (arg == "--heatmap") {
      heatMap = true;
    } else if (arg == "--x") {
      if (!value(xName) || xName.empty())
        return usageError("'--x' needs a field: step, elapsed_s, ...");
    } else if (arg == "--log-y") {
      logY = true;
    } else if (arg == "--seeds") {
      seeds = true;
    } else if (arg == "--smooth") {
      char *end = nullptr;
      if (!value(smoothText))
        return usageError("'--smooth' needs a weight in [0, 1)");
      const double weight = std::strtod(smoothText.c_str(), &end);
      if (end == smoothText.c_str() || *end || !(weight >= 0 && weight < 1))
        return usageError("'--smooth' needs a weight in [0, 1), not '" +
                          smoothText + "'");
    } else if (arg == "--step") {
      if (!value(stepText) || std::atoll(stepText.c_str()) <= 0)
        return usageError("'--step' needs a positive step number");
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
  if (io::Expected<plot::FigureFormat> format = plot::figureFormat(output);
      !format)
    return usageError(format.error().message());
  if (!stepText.empty() && !heatMap)
    return usageError("'--step' goes with --heatmap");
  if (heatMap) {
    if (runs.size() != 1)
      return usageError("--heatmap draws one run");
    if (logY || !smoothText.empty() || seeds)
      return usageError("'--log-y', '--smooth' and '--seeds' go with curves, "
                        "not --heatmap");
    return plotHeatMap(runs[0], output,
                       stepText.empty() ? 0 : std::atoll(stepText.c_str()),
                       title);
  }

  // Each run's curves, then their names: runs that share a name (two
  // seeds trained under one label, one run file trained twice) are told
  // apart by their output folders, as given.
  std::vector<std::vector<plot::Series>> read;
  std::vector<std::string> files; // each read run's metrics file
  for (const std::string &run : runs) {
    io::Expected<std::vector<std::string>> found = metricsFiles(run);
    if (!found) {
      fmt::print(stderr, "tetra plot: error: {}\n", found.error().message());
      return 1;
    }
    for (const std::string &path : *found) {
      io::Expected<std::vector<plot::Series>> curves =
          readRun(path, metric, xName);
      if (!curves) {
        fmt::print(stderr, "tetra plot: error: {}\n",
                   curves.error().message());
        return 1;
      }
      read.push_back(std::move(*curves));
      files.push_back(path);
    }
  }
  if (seeds) {
    io::Expected<std::vector<std::vector<plot::Series>>> merged =
        meanOverSeeds(read);
    if (!merged) {
      fmt::print(stderr, "tetra plot: error: {}\n", merged.error().message());
      return 1;
    }
    read = std::move(*merged);
    files.assign(read.size(), "");
  }
  std::vector<std::string> runNames;
  for (const std::vector<plot::Series> &run : read)
    runNames.push_back(run.front().name);
  for (size_t i = 0; i < read.size(); ++i) {
    if (std::count(runNames.begin(), runNames.end(), runNames[i]) == 1)
      continue;
    std::string folder = files[i];
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
  options.yLabel = axisLabel(metric);
  options.xLabel = axisLabel(xName);
  options.logY = logY;
  options.smooth = smoothText.empty() ? 0 : std::strtod(smoothText.c_str(), nullptr);
  io::Status written = plot::drawLineChart(series, options, output);
  if (!written) {
    fmt::print(stderr, "tetra plot: error: {}\n", written.error().message());
    return 1;
  }
  std::string names;
  for (const plot::Series &s : series)
    names += (names.empty() ? "" : ", ") + s.name;
  fmt::print("wrote {}: {} curves ({})\n", output, series.size(), names);
  return 0;
}

void tetra::driver::printPlotHelp() {
  std::printf(
      "USAGE: tetra plot RUN... -o OUT.png [--metric NAME] [--title TEXT]\n"
      "                  [--x FIELD] [--log-y] [--smooth W] [--seeds]\n"
      "       tetra plot RUN --heatmap [--step N] -o OUT.png [--title TEXT]\n"
      "\n"
      "Draws the loss curves of several runs side by side into a picture:\n"
      "PNG, SVG or PDF, as OUT's name ends.\n"
      "\n"
      "RUN is a metrics file (JSON lines, one object per logged step with\n"
      "\"step\" and the metric, optionally \"run\" naming the curve) or a run\n"
      "directory holding metrics.jsonl, or a folder of run directories (a\n"
      "policy's seed=N runs). \"eval_<metric>\" values are drawn dashed\n"
      "beside the training curve. Runs that share a name are named by their\n"
      "folders, as given.\n"
      "\n"
      "OPTIONS\n"
      "  -o, --output OUT      the picture, .png, .svg or .pdf (written\n"
      "                        atomically)\n"
      "  --metric NAME         what to draw (default loss; also lr,\n"
      "                        grad_norm, sqnr_db.wgrad.dy, ...: a\n"
      "                        member of an object field by its path)\n"
      "  --title TEXT          the chart's title (default: the metric)\n"
      "  --x FIELD             the x axis: step (default), tokens (equal\n"
      "                        data), elapsed_s (time to a loss), or another\n"
      "                        numeric field\n"
      "  --log-y               a logarithmic y axis\n"
      "  --smooth W            each curve's moving average, the past weighing\n"
      "                        W in [0, 1) (0.9: about the last 10 points),\n"
      "                        drawn over the faint raw curve\n"
      "  --seeds               a policy's seeds (runs named .../seed=N) as one\n"
      "                        curve: their mean, their spread filled behind\n"
      "  --heatmap             the run's per-linear SQNR (sqnr_db_linear) as\n"
      "                        a heat map: linears x GEMM role and operand,\n"
      "                        colour = dB (low red, high blue)\n"
      "  --step N              the measured step to draw (default: the last)\n"
      "  -h, --help            print this help\n");
}
