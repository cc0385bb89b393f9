//===- CompareCommand.cpp - tetra compare: token overheads of runs --------===//
//
// `tetra compare RUN... [--baseline NAME]`: the study's measure of a
// precision policy — how many more tokens (or, --by elapsed_s, how much
// more time) it needs than the baseline to reach the same loss
// (docs/tools/compare.md). RUNs are found as tetra plot finds them
// (RunFiles.h); a policy's seeds are averaged into one curve. For each
// policy: its seeds, their final loss as mean ± standard deviation, where
// the smoothed mean curve first reaches the target (interpolated between
// logged steps), and that against the baseline's.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"
#include "tools/tetra/RunFiles.h"

#include "runtime/io/Json.h"
#include "runtime/plot/LineChart.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace tetra;
using tetra::driver::metricsFiles;
using tetra::driver::policyOf;

namespace {

int usageError(const std::string &message) {
  fmt::print(stderr, "tetra compare: error: {} (see 'tetra compare --help')\n",
             message);
  return 2;
}

int inputError(const std::string &message) {
  fmt::print(stderr, "tetra compare: error: {}\n", message);
  return 1;
}

/// One run: its name and its (x, metric) points in logged order, x the
/// field compared by (tokens, or elapsed_s), with each point's step.
struct Curve {
  std::string name, path;
  std::vector<double> xs, values;
  std::vector<int64_t> steps;
};

io::Expected<Curve> readCurve(const std::string &path,
                              const std::string &metric,
                              const std::string &by) {
  Curve curve;
  curve.path = path;
  io::Status read = io::forEachJsonLine(
      path, [&](int number, const io::JsonValue &value) -> io::Status {
        if (const io::JsonValue *run = value.find("run"); run && run->isString())
          curve.name = run->asString();
        const io::JsonValue *y = value.find(metric);
        if (!y || !y->isNumber())
          return io::success();
        const io::JsonValue *x = value.find(by);
        if (!x || !x->isNumber())
          return io::Error(fmt::format(
              "{}:{}: no numeric \"{}\"{}", path, number, by,
              by == "tokens" ? " (metrics written before Tetra logged them: "
                               "train again, or compare by steps with "
                               "'tetra plot')"
                             : ""));
        if (!curve.xs.empty() && x->asDouble() <= curve.xs.back())
          return io::Error(fmt::format(
              "{}:{}: \"{}\" {} does not follow {} (two runs in one "
              "file?)",
              path, number, by, x->asDouble(), curve.xs.back()));
        const io::JsonValue *step = value.find("step");
        curve.steps.push_back(step && step->isInteger() ? step->asInt64() : -1);
        curve.xs.push_back(x->asDouble());
        curve.values.push_back(y->asDouble());
        return io::success();
      });
  if (!read)
    return read.error();
  if (curve.values.empty())
    return io::Error(path + ": no \"" + metric + "\" in any line");
  if (curve.name.empty())
    curve.name = path;
  return curve;
}

/// The x at which `values` first reach `target` or below, linearly
/// interpolated between the two logged points around it; none if never.
std::optional<double> reachAt(const std::vector<double> &xs,
                              const std::vector<double> &values,
                              double target) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!(values[i] <= target))
      continue;
    if (i == 0)
      return xs[0];
    const double t = (values[i - 1] - target) / (values[i - 1] - values[i]);
    return xs[i - 1] + t * (xs[i] - xs[i - 1]);
  }
  return std::nullopt;
}

struct Stats {
  double mean = 0, sd = 0;
};
Stats statsOf(const std::vector<double> &xs) {
  Stats s;
  for (double x : xs)
    s.mean += x;
  s.mean /= xs.size();
  if (xs.size() > 1) {
    for (double x : xs)
      s.sd += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(s.sd / (xs.size() - 1));
  }
  return s;
}

std::string groupedInteger(double value) {
  std::string digits = fmt::format("{:.0f}", value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

} // namespace

void tetra::driver::printCompareHelp() {
  std::printf(
      "USAGE: tetra compare RUN... [--baseline NAME] [--metric NAME] [--by FIELD]\n"
      "                     [--smooth W] [--at FRACTION | --target LOSS]\n"
      "\n"
      "Token overheads: how many more tokens each policy needs than the\n"
      "baseline to reach the same loss. RUN is a metrics file, a run folder\n"
      "holding metrics.jsonl, or a folder of such run folders (seed=N, as\n"
      "tetra-run --seed writes them); runs whose names differ only by a\n"
      "trailing /seed=N are one policy's seeds.\n"
      "\n"
      "OPTIONS:\n"
      "  --baseline NAME  the policy the others are measured against (default:\n"
      "                   the first run's)\n"
      "  --by FIELD       compare at equal tokens (default) or equal time\n"
      "                   (elapsed_s: time to a loss, the kernels' speed with\n"
      "                   the convergence; seeds are averaged by step)\n"
      "  --metric NAME    the loss to compare (default loss; eval_loss for the\n"
      "                   evaluation loss, on the steps that logged it)\n"
      "  --smooth W       each curve's moving average, the past weighing W in\n"
      "                   [0, 1) (default 0.9; 0: the raw values)\n"
      "  --at FRACTION    the loss to reach is the baseline's (its seeds' mean\n"
      "                   curve, smoothed) where it had trained FRACTION of its\n"
      "                   tokens (default 0.9: a policy up to about 11 %% slower\n"
      "                   still reaches it within the run)\n"
      "  --target LOSS    the loss to reach, given\n");
}

int tetra::driver::compareMain(const std::vector<std::string_view> &args) {
  std::vector<std::string> runs;
  std::string baseline, metric = "loss", by = "tokens";
  double smooth = 0.9, at = 0.9;
  std::optional<double> target;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg(args[i]);
    auto value = [&](std::string &into) {
      if (i + 1 >= args.size())
        return false;
      into = std::string(args[++i]);
      return true;
    };
    auto number = [&](double &into) -> bool {
      std::string text;
      if (!value(text))
        return false;
      char *end = nullptr;
      into = std::strtod(text.c_str(), &end);
      return end != text.c_str() && !*end && std::isfinite(into);
    };
    if (arg == "-h" || arg == "--help") {
      printCompareHelp();
      return 0;
    } else if (arg == "--baseline") {
      if (!value(baseline))
        return usageError("'--baseline' needs a policy's run name");
    } else if (arg == "--by") {
      if (!value(by) || (by != "tokens" && by != "elapsed_s"))
        return usageError("'--by' takes tokens or elapsed_s");
    } else if (arg == "--metric") {
      if (!value(metric))
        return usageError("'--metric' needs a field name");
    } else if (arg == "--smooth") {
      if (!number(smooth) || !(smooth >= 0 && smooth < 1))
        return usageError("'--smooth' needs a weight in [0, 1)");
    } else if (arg == "--at") {
      if (!number(at) || !(at > 0 && at <= 1))
        return usageError("'--at' needs a fraction in (0, 1]");
    } else if (arg == "--target") {
      double loss = 0;
      if (!number(loss))
        return usageError("'--target' needs a loss");
      target = loss;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else {
      runs.push_back(arg);
    }
  }
  if (runs.empty())
    return usageError("no runs given");

  // Policies in the order first seen, each with its seeds' curves.
  std::vector<std::string> order;
  std::map<std::string, std::vector<Curve>> policies;
  for (const std::string &run : runs) {
    io::Expected<std::vector<std::string>> files = metricsFiles(run);
    if (!files)
      return inputError(files.error().message());
    for (const std::string &file : *files) {
      io::Expected<Curve> curve = readCurve(file, metric, by);
      if (!curve)
        return inputError(curve.error().message());
      std::string policy = policyOf(curve->name);
      if (!policies.count(policy))
        order.push_back(policy);
      for (const Curve &seen : policies[policy])
        if (seen.name == curve->name)
          return inputError("'" + file + "' and '" + seen.path +
                            "' are both run '" + curve->name +
                            "': name each seed's run apart (--label, --seed)");
      policies[policy].push_back(std::move(*curve));
    }
  }
  if (baseline.empty())
    baseline = order.front();
  if (!policies.count(baseline)) {
    std::string names;
    for (const std::string &name : order)
      names += (names.empty() ? "" : ", ") + name;
    return usageError("no run of baseline '" + baseline + "' among " + names);
  }
  // Each policy's curve: the mean over its seeds at each logged point
  // (seeds log the same tokens — by elapsed_s, the same steps, at the mean
  // of their times: their common first points), smoothed.
  struct Policy {
    std::vector<double> xs, curve, finals;
  };
  std::map<std::string, Policy> means;
  for (const std::string &name : order) {
    const std::vector<Curve> &seeds = policies[name];
    Policy &p = means[name];
    size_t points = seeds.front().values.size();
    for (const Curve &c : seeds)
      points = std::min(points, c.values.size());
    for (size_t i = 0; i < points; ++i) {
      double sum = 0, x = 0;
      for (const Curve &c : seeds) {
        const bool byTokens = by == "tokens";
        const double mine = byTokens ? c.xs[i] : c.steps[i],
                     theirs = byTokens ? seeds.front().xs[i]
                                       : seeds.front().steps[i];
        if (mine != theirs)
          return inputError(fmt::format(
              "'{}' and '{}' (seeds of '{}') log {} at different {} ({} and "
              "{}): their runs differ in more than the seed",
              seeds.front().path, c.path, name, metric,
              byTokens ? "tokens" : "steps", theirs, mine));
        sum += c.values[i];
        x += c.xs[i];
      }
      p.xs.push_back(x / seeds.size());
      p.curve.push_back(sum / seeds.size());
    }
    for (const Curve &c : seeds)
      p.finals.push_back(c.values[points - 1]);
    p.curve = plot::smoothed(p.curve, smooth);
  }
  // The target: the baseline's curve where it has trained `at` of its
  // tokens (interpolated), unless given.
  auto valueAt = [](const Policy &p, double x) {
    size_t i = 0;
    while (i + 1 < p.xs.size() && p.xs[i + 1] < x)
      ++i;
    if (i + 1 >= p.xs.size() || x <= p.xs[i])
      return x <= p.xs.front() ? p.curve.front() : p.curve.back();
    const double t = (x - p.xs[i]) / (p.xs[i + 1] - p.xs[i]);
    return p.curve[i] + t * (p.curve[i + 1] - p.curve[i]);
  };
  const Policy &base = means[baseline];
  const double goal =
      target ? *target : valueAt(base, at * base.xs.back());
  const std::optional<double> baseReach =
      reachAt(means[baseline].xs, means[baseline].curve, goal);

  bool seeded = false;
  for (const auto &[name, p] : means)
    seeded |= p.finals.size() > 1;
  const std::string curve = seeded ? "the seeds' mean curve" : "the curve";
  std::string smoothing =
      smooth > 0 ? fmt::format("{} smoothed {}", curve, smooth) : curve;
  fmt::print("{} of {} reaching {:.4f} ({}), against {}\n", metric, smoothing,
             goal,
             target ? std::string("--target")
                    : fmt::format("the baseline's at {:g} % of its {}",
                                  100 * at,
                                  by == "tokens" ? "tokens" : "time"),
             baseline);
  size_t width = 6;
  for (const std::string &name : order)
    width = std::max(width, name.size());
  const bool byTokens = by == "tokens";
  auto amount = [&](double x) {
    return byTokens ? groupedInteger(x) : fmt::format("{:.1f} s", x);
  };
  fmt::print("{:<{}}  {:>5}  {:>17}  {:>16}  {:>16}  {:>10}\n", "policy", width,
             "seeds", "final (mean ± sd)",
             byTokens ? "tokens trained" : "seconds trained",
             byTokens ? "tokens to reach" : "seconds to reach", "overhead");
  for (const std::string &name : order) {
    const Policy &p = means[name];
    Stats last = statsOf(p.finals);
    std::optional<double> at = reachAt(p.xs, p.curve, goal);
    std::string overhead =
        name == baseline                ? "baseline"
        : at && baseReach && *baseReach > 0
            ? fmt::format("{:+.1f} %", 100 * (*at / *baseReach - 1))
            : "-";
    std::string final = p.finals.size() > 1
                            ? fmt::format("{:.4f} ± {:.4f}", last.mean, last.sd)
                            : fmt::format("{:.4f}", last.mean);
    fmt::print("{:<{}}  {:>5}  {:>17}  {:>16}  {:>16}  {:>10}\n", name, width,
               p.finals.size(), final, amount(p.xs.back()),
               at ? amount(*at) : "not reached", overhead);
  }
  if (!baseReach)
    fmt::print("the baseline does not reach {:.4f}: no overheads (give a "
               "--target it reaches)\n",
               goal);
  return 0;
}
