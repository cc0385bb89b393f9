//===- RunChecker.cpp - Checking run files --------------------------------===//

#include "frontend/RunChecker.h"
#include "dialect/LLVMFormatters.h"
#include "frontend/Frontend.h"
#include "frontend/PolicyGlob.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace tetra;
using namespace tetra::frontend;

namespace {

/// Where the settings that are not top-level keys live, for hints.
const std::pair<const char *, const char *> kArgumentHomes[] = {
    {"lr", "optimizer = adamw(lr = 3e-4)"},
    {"betas", "optimizer = adamw(betas = (0.9, 0.95))"},
    {"eps", "optimizer = adamw(eps = 1e-8)"},
    {"weight_decay", "optimizer = adamw(weight_decay = 0.1)"},
    {"warmup", "schedule = cosine(warmup = 100, min_lr = 3e-5)"},
    {"min_lr", "schedule = cosine(warmup = 100, min_lr = 3e-5)"},
    {"train", "data { train = \"...\" }"},
    {"tokenizer", "data { tokenizer = bytes }"},
    {"interval", "eval { interval = ... } or checkpoint { interval = ... }"},
    {"batches", "eval { batches = ... }"},
    {"dir", "checkpoint { dir = \"...\" }"},
    {"batch_size", "micro_batch = ... (sequences per step, before "
                   "accumulation)"},
};

} // namespace

std::optional<std::string> RunChecker::getString(const RunExpr &expr,
                                                 llvm::StringRef what) {
  if (expr.kind != RunExpr::Kind::String) {
    error(expr, what + " must be a string, got " + expr.describe());
    return std::nullopt;
  }
  return expr.text;
}

std::optional<int64_t> RunChecker::getInteger(const RunExpr &expr,
                                              llvm::StringRef what,
                                              int64_t minimum) {
  int64_t value = 0;
  if (expr.kind == RunExpr::Kind::Integer) {
    value = expr.integer;
  } else if (expr.kind == RunExpr::Kind::Float && std::isfinite(expr.number) &&
             expr.number == std::floor(expr.number) &&
             std::fabs(expr.number) < 9.0e18) {
    value = static_cast<int64_t>(expr.number); // 2.5e9 tokens
  } else {
    error(expr, what + " must be an integer, got " + expr.describe());
    return std::nullopt;
  }
  if (value < minimum) {
    error(expr, fmt::format("{} must be {}, got {}", what,
                            minimum == 1 ? std::string("positive")
                                         : fmt::format(">= {}", minimum),
                            value));
    return std::nullopt;
  }
  return value;
}

std::optional<double> RunChecker::getNumber(const RunExpr &expr,
                                            llvm::StringRef what) {
  if (!expr.isNumber()) {
    error(expr, what + " must be a number, got " + expr.describe());
    return std::nullopt;
  }
  return expr.number;
}

std::string RunChecker::resolvePath(llvm::StringRef path) const {
  if (llvm::sys::path::is_absolute(path))
    return path.str();
  llvm::SmallString<256> resolved(directory);
  llvm::sys::path::append(resolved, path);
  llvm::sys::path::remove_dots(resolved, /*remove_dot_dot=*/true);
  return resolved.str().str();
}

void RunChecker::checkFile(const RunExpr &expr, llvm::StringRef what,
                           std::string &target) {
  std::optional<std::string> path = getString(expr, what);
  if (!path)
    return;
  target = resolvePath(*path);
  if (!llvm::sys::fs::exists(target))
    error(expr,
          "the " + what + " file '" + *path + "' does not exist (looked for '" +
              target + "')",
          "paths are relative to the run file");
  else if (llvm::sys::fs::is_directory(target))
    error(expr, "the " + what + " file '" + *path + "' is a folder");
}

void RunChecker::checkScope(llvm::StringRef scope,
                            const std::vector<RunSetting> &items,
                            const std::vector<Key> &keys) {
  std::vector<std::string> names;
  for (const Key &key : keys)
    names.push_back(key.name);
  llvm::StringMap<llvm::SMLoc> seen;
  for (const RunSetting &item : items) {
    std::string qualified =
        scope.empty() ? item.name : (scope + "." + item.name).str();
    auto key =
        llvm::find_if(keys, [&](const Key &k) { return item.name == k.name; });
    if (key == keys.end()) {
      std::string message = "unknown setting '" + qualified + "'";
      std::string best = closestMatch(item.name, names);
      std::string hint;
      if (!best.empty()) {
        message += "; did you mean '" + best + "'?";
        // Not also "missing required setting" for the one it stands for.
        given.try_emplace(scope.empty() ? best : (scope + "." + best).str(),
                          item.getLoc());
      } else {
        for (auto [name, home] : kArgumentHomes)
          if (item.name == name)
            hint = std::string("'") + name + "' belongs elsewhere: " + home;
        if (hint.empty())
          hint = "settings" +
                 (scope.empty() ? std::string() : " of " + scope.str()) + ": " +
                 llvm::join(names, ", ");
      }
      error(item.getLoc(), message, item.nameRange, hint);
      continue;
    }
    auto [previous, inserted] = seen.try_emplace(item.name, item.getLoc());
    if (!inserted) {
      error(item.getLoc(), "'" + qualified + "' is set twice", item.nameRange);
      diags.note(previous->second, "first set here");
      continue;
    }
    given[qualified] = item.getLoc();
    if (item.isBlock != key->isBlock) {
      if (key->isBlock)
        error(item.getLoc(),
              "'" + qualified + "' is a block: write " + qualified + " { ... }",
              item.nameRange);
      else
        error(item.getLoc(),
              "'" + qualified + "' takes a value: write " + qualified +
                  " = ...",
              item.nameRange);
      continue;
    }
    key->handler(item);
  }
}

void RunChecker::checkArguments(
    const RunExpr &call, const std::vector<std::string> &known,
    const std::function<void(llvm::StringRef, const RunExpr &)> &onArgument) {
  llvm::StringMap<llvm::SMLoc> seen;
  for (size_t i = 0; i < call.elements.size(); ++i) {
    const std::string &name = call.argumentNames[i];
    const RunExpr &value = call.elements[i];
    if (name.empty()) {
      error(value, "the arguments of " + call.text +
                       " are named: " + call.text + "(" +
                       (known.empty() ? "" : known.front() + " = ...") + ")");
      continue;
    }
    if (!llvm::is_contained(known, name)) {
      error(
          call.argumentLocs[i],
          "unknown argument '" + name + "' of " + call.text +
              didYouMeanSuffix(name, known),
          {},
          known.empty() ? call.text + " takes no arguments"
                        : "arguments: " + llvm::join(known, ", "));
      continue;
    }
    auto [previous, inserted] = seen.try_emplace(name, call.argumentLocs[i]);
    if (!inserted) {
      error(call.argumentLocs[i], "argument '" + name + "' is given twice");
      diags.note(previous->second, "first given here");
      continue;
    }
    onArgument(name, value);
  }
}

void RunChecker::checkGlobs(const RunExpr &expr,
                            std::vector<std::string> &globs,
                            std::vector<llvm::SMLoc> &locs,
                            llvm::StringRef what) {
  if (expr.kind == RunExpr::Kind::String) {
    globs.push_back(resolvePath(expr.text));
    locs.push_back(expr.getLoc());
    return;
  }
  if (expr.kind == RunExpr::Kind::List) {
    if (expr.elements.empty())
      error(expr, what + " is an empty list");
    for (const RunExpr &element : expr.elements)
      if (std::optional<std::string> glob =
              getString(element, ("each path of " + what).str())) {
        globs.push_back(resolvePath(*glob));
        locs.push_back(element.getLoc());
      }
    return;
  }
  error(expr, what +
                  " must be a path (a string, globs allowed) or a list of "
                  "them, got " +
                  expr.describe());
}

void RunChecker::checkTokenizer(const RunExpr &expr) {
  static const std::vector<std::string> kinds = {"bytes", "gpt2", "llama3"};
  config.tokenizerLoc = expr.getLoc();
  if (expr.kind != RunExpr::Kind::Identifier &&
      expr.kind != RunExpr::Kind::Call) {
    error(expr, "data.tokenizer must be bytes, gpt2(\"dir\") or "
                "llama3(\"tokenizer.model\"), got " +
                    expr.describe());
    return;
  }
  if (!llvm::is_contained(kinds, expr.text)) {
    error(expr,
          "unknown tokenizer '" + expr.text + "'" +
              didYouMeanSuffix(expr.text, kinds),
          "tokenizers: bytes, gpt2(\"dir\") (encoder.json + vocab.bpe), "
          "llama3(\"tokenizer.model\")");
    return;
  }
  if (expr.text == "bytes") {
    config.tokenizer.kind = TokenizerConfig::Kind::Bytes;
    if (expr.kind == RunExpr::Kind::Call && !expr.elements.empty())
      error(expr, "the bytes tokenizer takes no arguments");
    return;
  }
  bool gpt2 = expr.text == "gpt2";
  config.tokenizer.kind =
      gpt2 ? TokenizerConfig::Kind::GPT2 : TokenizerConfig::Kind::Llama3;
  std::string example = gpt2 ? "gpt2(\"../../data/tokenizers/gpt2\")"
                             : "llama3(\"../../data/tokenizers/llama3/"
                               "tokenizer.model\")";
  if (expr.kind != RunExpr::Kind::Call || expr.elements.size() != 1 ||
      !expr.argumentNames.front().empty()) {
    error(expr,
          "the " + expr.text + " tokenizer takes one argument, the path of " +
              (gpt2 ? "its folder" : "its tokenizer.model"),
          "e.g. " + example);
    return;
  }
  std::optional<std::string> path =
      getString(expr.elements.front(), "the tokenizer path");
  if (!path)
    return;
  config.tokenizer.path = resolvePath(*path);
  const RunExpr &pathExpr = expr.elements.front();
  if (gpt2) {
    if (!llvm::sys::fs::is_directory(config.tokenizer.path)) {
      error(pathExpr, "the gpt2 tokenizer folder '" + *path +
                          "' does not exist (looked for '" +
                          config.tokenizer.path + "')");
      return;
    }
    for (const char *name : {"encoder.json", "vocab.bpe"}) {
      llvm::SmallString<256> file(config.tokenizer.path);
      llvm::sys::path::append(file, name);
      if (!llvm::sys::fs::exists(file))
        error(pathExpr,
              "the gpt2 tokenizer folder '" + *path + "' has no " + name);
    }
  } else if (!llvm::sys::fs::exists(config.tokenizer.path) ||
             llvm::sys::fs::is_directory(config.tokenizer.path)) {
    error(pathExpr, "the llama3 tokenizer file '" + *path +
                        "' does not exist (looked for '" +
                        config.tokenizer.path + "')");
  }
}

void RunChecker::checkOptimizer(const RunExpr &expr) {
  if (expr.kind != RunExpr::Kind::Call &&
      expr.kind != RunExpr::Kind::Identifier) {
    error(expr, "optimizer must be adamw(...), got " + expr.describe());
    return;
  }
  if (expr.text != "adamw") {
    error(expr,
          "unknown optimizer '" + expr.text + "'" +
              didYouMeanSuffix(expr.text, {"adamw"}),
          "the optimizer is adamw(lr = ..., betas = (b1, b2), eps = ..., "
          "weight_decay = ...)");
    return;
  }
  checkArguments(
      expr, {"lr", "betas", "eps", "weight_decay"},
      [&](llvm::StringRef name, const RunExpr &value) {
        if (name == "lr") {
          lrExpr = &value;
          if (std::optional<double> lr = getNumber(value, "lr")) {
            if (!(*lr > 0))
              error(value, "lr must be positive, got " + value.print());
            else
              config.lr = *lr;
          }
        } else if (name == "betas") {
          if (value.kind != RunExpr::Kind::Tuple ||
              value.elements.size() != 2) {
            error(value, "betas must be a pair (beta1, beta2), got " +
                             value.describe());
            return;
          }
          double *targets[2] = {&config.beta1, &config.beta2};
          for (int i = 0; i < 2; ++i) {
            std::string what = i == 0 ? "beta1" : "beta2";
            const RunExpr &element = value.elements[i];
            std::optional<double> beta = getNumber(element, what);
            if (!beta)
              continue;
            if (!(*beta >= 0 && *beta < 1))
              error(element,
                    what + " must be in [0, 1), got " + element.print());
            else
              *targets[i] = *beta;
          }
        } else if (name == "eps") {
          if (std::optional<double> eps = getNumber(value, "eps")) {
            if (!(*eps > 0))
              error(value, "eps must be positive, got " + value.print());
            else
              config.eps = *eps;
          }
        } else if (std::optional<double> decay =
                       getNumber(value, "weight_decay")) {
          if (!(*decay >= 0))
            error(value, "weight_decay must be >= 0, got " + value.print());
          else
            config.weightDecay = *decay;
        }
      });
}

void RunChecker::checkSchedule(const RunExpr &expr) {
  static const std::vector<std::string> kinds = {"cosine", "linear",
                                                 "constant"};
  if (expr.kind != RunExpr::Kind::Call &&
      expr.kind != RunExpr::Kind::Identifier) {
    error(expr, "schedule must be cosine(...), linear(...) or constant(...), "
                "got " +
                    expr.describe());
    return;
  }
  if (!llvm::is_contained(kinds, expr.text)) {
    error(expr,
          "unknown schedule '" + expr.text + "'" +
              didYouMeanSuffix(expr.text, kinds),
          "schedules: cosine(warmup = N, min_lr = x), linear(warmup = N, "
          "min_lr = x), constant(warmup = N)");
    return;
  }
  config.schedule.kind = expr.text == "cosine" ? ScheduleConfig::Kind::Cosine
                         : expr.text == "linear"
                             ? ScheduleConfig::Kind::Linear
                             : ScheduleConfig::Kind::Constant;
  std::vector<std::string> known = {"warmup"};
  if (config.schedule.kind != ScheduleConfig::Kind::Constant)
    known.push_back("min_lr");
  checkArguments(expr, known, [&](llvm::StringRef name, const RunExpr &value) {
    if (name == "warmup") {
      if (std::optional<int64_t> warmup = getInteger(value, "warmup", 0)) {
        config.schedule.warmup = *warmup;
        warmupExpr = &value;
      }
      return;
    }
    if (std::optional<double> minLr = getNumber(value, "min_lr")) {
      if (!(*minLr >= 0)) {
        error(value, "min_lr must be >= 0, got " + value.print());
        return;
      }
      config.schedule.minLr = *minLr;
      minLrExpr = &value;
    }
  });
}

void RunChecker::checkData(const RunSetting &setting) {
  dataBlock = &setting;
  checkScope("data", setting.children,
             {{"train", false,
               [&](const RunSetting &s) {
                 checkGlobs(s.value, config.trainData, config.trainDataLocs,
                            "data.train");
               }},
              {"eval", false,
               [&](const RunSetting &s) {
                 checkGlobs(s.value, config.evalData, config.evalDataLocs,
                            "data.eval");
               }},
              {"tokenizer", false,
               [&](const RunSetting &s) { checkTokenizer(s.value); }}});
}

std::optional<RunConfig> RunChecker::check() {
  unsigned errorsBefore = diags.errorCount();
  auto integer = [&](llvm::StringRef what, int64_t minimum, int64_t &target) {
    return [this, what, minimum, &target](const RunSetting &s) {
      if (std::optional<int64_t> value = getInteger(s.value, what, minimum))
        target = *value;
    };
  };
  int64_t seed = 0;
  std::vector<Key> keys = {
      {"model", false,
       [&](const RunSetting &s) {
         checkFile(s.value, "model", config.modelPath);
       }},
      {"policy", false,
       [&](const RunSetting &s) {
         checkFile(s.value, "policy", config.policyPath);
       }},
      {"data", true, [&](const RunSetting &s) { checkData(s); }},
      {"seq_len", false, integer("seq_len", 1, config.seqLen)},
      {"micro_batch", false, integer("micro_batch", 1, config.microBatch)},
      {"accumulation", false, integer("accumulation", 1, config.accumulation)},
      {"steps", false, integer("steps", 1, config.steps)},
      {"tokens", false, integer("tokens", 1, config.tokens)},
      {"optimizer", false,
       [&](const RunSetting &s) { checkOptimizer(s.value); }},
      {"schedule", false, [&](const RunSetting &s) { checkSchedule(s.value); }},
      {"clip", false,
       [&](const RunSetting &s) {
         if (std::optional<double> clip = getNumber(s.value, "clip")) {
           if (!(*clip >= 0))
             error(s.value, "clip must be >= 0 (0: no clipping), got " +
                                s.value.print());
           else
             config.clip = *clip;
         }
       }},
      {"recompute", false,
       [&](const RunSetting &s) {
         const RunExpr &value = s.value;
         std::optional<schedule::Recompute> mode;
         if (value.kind == RunExpr::Kind::Identifier ||
             value.kind == RunExpr::Kind::String)
           mode = schedule::parseRecompute(value.text);
         if (!mode) {
           error(value,
                 "recompute must be none, cheap, products or layers, got " +
                     value.describe(),
                 "cheap (the default): RMSNorms' and elementwise kernels' "
                 "large outputs; products: cheap's and the GEMMs' and "
                 "RoPE's outputs, attention kept; layers: everything but "
                 "the RMSNorms' inputs");
           return;
         }
         config.recompute = *mode;
       }},
      {"seed", false, integer("seed", 0, seed)},
      {"target", false,
       [&](const RunSetting &s) {
         const RunExpr &value = s.value;
         if (value.kind != RunExpr::Kind::Identifier &&
             value.kind != RunExpr::Kind::String) {
           error(value, "target must be " + targetNameList() + ", got " +
                            value.describe());
           return;
         }
         std::optional<Target> target = parseTarget(value.text);
         if (!target) {
           error(value,
                 "unknown target '" + value.text + "'" +
                     didYouMeanSuffix(value.text, targetNames()),
                 "targets: cpu, sm_90a (NVIDIA Hopper), gfx950 (AMD MI355X)");
           return;
         }
         config.target = *target;
       }},
      {"eval", true,
       [&](const RunSetting &s) {
         evalBlock = &s;
         checkScope("eval", s.children,
                    {{"interval", false,
                      integer("eval.interval", 1, config.evalInterval)},
                     {"batches", false,
                      integer("eval.batches", 1, config.evalBatches)}});
       }},
      {"checkpoint", true,
       [&](const RunSetting &s) {
         checkpointBlock = &s;
         checkScope(
             "checkpoint", s.children,
             {{"dir", false,
               [&](const RunSetting &d) {
                 if (std::optional<std::string> dir =
                         getString(d.value, "checkpoint.dir"))
                   config.checkpointDir = resolvePath(*dir);
               }},
              {"interval", false,
               integer("checkpoint.interval", 1, config.checkpointInterval)}});
       }},
      {"log_interval", false, integer("log_interval", 1, config.logInterval)},
      {"sqnr_interval", false,
       integer("sqnr_interval", 0, config.sqnrInterval)},
  };
  checkScope("", file.settings, keys);
  config.seed = static_cast<uint64_t>(seed);

  // Required settings, reported at the run's name.
  auto require = [&](llvm::StringRef name, llvm::StringRef example) {
    if (given.count(name))
      return;
    error(file.nameLoc, "missing required setting '" + name + "'", {},
          "e.g. " + example);
  };
  require("model", "model = \"../llama_tiny.tetra\"");
  require("policy", "policy = \"../policies/bf16.tetra\"");
  if (!dataBlock) {
    if (!given.count("data"))
      error(file.nameLoc, "missing required setting 'data'", {},
            "e.g. data { train = \"../../data/c4/*.json.gz\", tokenizer = "
            "bytes }");
  } else {
    for (const char *name : {"train", "tokenizer"})
      if (!given.count(std::string("data.") + name))
        error(dataBlock->getLoc(),
              "missing required setting 'data." + std::string(name) + "'",
              dataBlock->nameRange,
              name == std::string("train")
                  ? "e.g. train = \"../../data/c4/c4-train.*.json.gz\""
                  : "e.g. tokenizer = bytes");
  }
  require("seq_len", "seq_len = 256");
  bool hasSteps = given.count("steps"), hasTokens = given.count("tokens");
  if (hasSteps && hasTokens) {
    error(given["tokens"], "give the run's length as steps or as tokens, not "
                           "both");
    diags.note(given["steps"], "steps is set here");
  } else if (!hasSteps && !hasTokens) {
    error(file.nameLoc, "missing the run's length: set 'steps' or 'tokens'", {},
          "e.g. steps = 1000");
  }

  // Cross-checks between settings that were each valid.
  // In double: the factors are each checked, their product may not fit.
  double stepTokens = static_cast<double>(config.seqLen) *
                      static_cast<double>(config.microBatch) *
                      static_cast<double>(config.accumulation);
  int64_t tokensPerStep =
      stepTokens < 9.0e18 ? static_cast<int64_t>(stepTokens) : 0;
  if (hasTokens && !hasSteps && config.tokens > 0 && tokensPerStep > 0 &&
      config.tokens < tokensPerStep)
    error(given["tokens"],
          fmt::format("tokens ({}) is less than one step (seq_len x "
                      "micro_batch x accumulation = {} tokens)",
                      config.tokens, tokensPerStep));
  int64_t steps = config.steps;
  if (!hasSteps && tokensPerStep > 0)
    steps = config.tokens / tokensPerStep;
  if (warmupExpr && steps > 0 && config.schedule.warmup > steps)
    error(*warmupExpr,
          fmt::format("warmup ({} steps) is longer than the run ({} steps)",
                      config.schedule.warmup, steps));
  if (minLrExpr && config.schedule.minLr > config.lr)
    error(*minLrExpr, "min_lr (" + minLrExpr->print() +
                          ") is larger than the optimizer's lr (" +
                          (lrExpr ? lrExpr->print()
                                  : formatNumber(config.lr) + ", the default") +
                          ")");
  if (evalBlock) {
    if (!given.count("eval.interval"))
      error(evalBlock->getLoc(), "missing required setting 'eval.interval'",
            evalBlock->nameRange, "e.g. interval = 100");
    if (!given.count("eval.batches"))
      error(evalBlock->getLoc(), "missing required setting 'eval.batches'",
            evalBlock->nameRange, "e.g. batches = 20");
    if (!given.count("data.eval"))
      error(evalBlock->getLoc(),
            "evaluation needs evaluation data: set data.eval",
            evalBlock->nameRange);
  }
  if (checkpointBlock && !given.count("checkpoint.dir"))
    error(checkpointBlock->getLoc(),
          "missing required setting "
          "'checkpoint.dir'",
          checkpointBlock->nameRange, "e.g. dir = \"checkpoints/tiny\"");

  if (diags.errorCount() != errorsBefore)
    return std::nullopt;
  return config;
}
