//===- RunPlan.cpp - What a compiled step needs of its run file -----------===//

#include "runtime/trainer/RunPlan.h"

#include "runtime/data/Documents.h"
#include "runtime/data/TokenFile.h"

#include <fmt/format.h>

using namespace tetra;
using namespace tetra::trainer;
using io::JsonValue;

namespace {

const char *initName(ParameterSpec::Init init) {
  switch (init) {
  case ParameterSpec::Init::Normal:
    return "normal";
  case ParameterSpec::Init::Ones:
    return "ones";
  case ParameterSpec::Init::Zeros:
    return "zeros";
  }
  return "zeros";
}

const char *scheduleName(LearningRateSchedule::Kind kind) {
  switch (kind) {
  case LearningRateSchedule::Kind::Constant:
    return "constant";
  case LearningRateSchedule::Kind::Linear:
    return "linear";
  case LearningRateSchedule::Kind::Cosine:
    return "cosine";
  }
  return "constant";
}

JsonValue strings(const std::vector<std::string> &values) {
  JsonValue array = JsonValue::array();
  for (const std::string &value : values)
    array.push(JsonValue::string(value));
  return array;
}

/// Reads fields of one object, keeping the first problem.
struct FieldReader {
  const JsonValue &object;
  std::string error;

  const JsonValue *get(const char *key, bool number) {
    const JsonValue *value = object.find(key);
    if (!error.empty())
      return nullptr;
    if (!value || (number ? !value->isNumber() : false))
      error = std::string("run plan: '") + key + "' is missing or not " +
              (number ? "a number" : "valid");
    return error.empty() ? value : nullptr;
  }
  int64_t integer(const char *key) {
    const JsonValue *value = get(key, true);
    return value ? static_cast<int64_t>(value->asDouble()) : 0;
  }
  double real(const char *key) {
    const JsonValue *value = get(key, true);
    return value ? value->asDouble() : 0.0;
  }
  std::string text(const char *key) {
    const JsonValue *value = get(key, false);
    if (value && !value->isString())
      error = std::string("run plan: '") + key + "' must be a string";
    return value && value->isString() ? value->asString() : "";
  }
  std::vector<std::string> texts(const char *key) {
    std::vector<std::string> result;
    const JsonValue *value = get(key, false);
    if (value && !value->isArray())
      error = std::string("run plan: '") + key + "' must be an array";
    if (value && value->isArray())
      for (const JsonValue &item : value->items())
        result.push_back(item.isString() ? item.asString() : "");
    return result;
  }
};

} // namespace

JsonValue RunPlan::toJson() const {
  JsonValue root = JsonValue::object();
  root.set("run", JsonValue::string(run));
  root.set("model", JsonValue::string(model));
  root.set("policy", JsonValue::string(policy));
  JsonValue params = JsonValue::array();
  for (const ParameterSpec &parameter : parameters) {
    JsonValue entry = JsonValue::object();
    entry.set("name", JsonValue::string(parameter.name));
    JsonValue shape = JsonValue::array();
    for (int64_t extent : parameter.shape)
      shape.push(JsonValue::integer(extent));
    entry.set("shape", std::move(shape));
    entry.set("init", JsonValue::string(initName(parameter.init)));
    entry.set("std", JsonValue::number(parameter.std));
    params.push(std::move(entry));
  }
  root.set("parameters", std::move(params));
  root.set("train_data", strings(trainData));
  root.set("eval_data", strings(evalData));
  root.set("tokenizer", JsonValue::string(
                            std::string(tokenizer::kindName(tokenizer.kind)) +
                            (tokenizer.path.empty() ? "" : ":" + tokenizer.path)));
  root.set("vocabulary", JsonValue::integer(vocabulary));
  root.set("seq_len", JsonValue::integer(seqLen));
  root.set("micro_batch", JsonValue::integer(microBatch));
  root.set("accumulation", JsonValue::integer(accumulation));
  root.set("steps", JsonValue::integer(steps));
  root.set("lr", JsonValue::number(lr.lr));
  root.set("min_lr", JsonValue::number(lr.minLr));
  root.set("warmup", JsonValue::integer(lr.warmup));
  root.set("schedule", JsonValue::string(scheduleName(lr.kind)));
  root.set("seed", JsonValue::integer(static_cast<int64_t>(seed)));
  root.set("log_interval", JsonValue::integer(logInterval));
  root.set("sqnr_interval", JsonValue::integer(sqnrInterval));
  root.set("eval_interval", JsonValue::integer(evalInterval));
  root.set("eval_batches", JsonValue::integer(evalBatches));
  root.set("checkpoint_interval", JsonValue::integer(checkpointInterval));
  return root;
}

io::Expected<RunPlan> RunPlan::fromJson(const JsonValue &value) {
  if (!value.isObject())
    return io::Error("run plan: not an object");
  FieldReader read{value, ""};
  RunPlan plan;
  plan.run = read.text("run");
  plan.model = read.text("model");
  plan.policy = read.text("policy");
  plan.trainData = read.texts("train_data");
  plan.evalData = read.texts("eval_data");
  std::string tokenizerText = read.text("tokenizer");
  plan.vocabulary = read.integer("vocabulary");
  plan.seqLen = read.integer("seq_len");
  plan.microBatch = read.integer("micro_batch");
  plan.accumulation = read.integer("accumulation");
  plan.steps = read.integer("steps");
  plan.lr.lr = read.real("lr");
  plan.lr.minLr = read.real("min_lr");
  plan.lr.warmup = read.integer("warmup");
  std::string schedule = read.text("schedule");
  plan.seed = static_cast<uint64_t>(read.integer("seed"));
  plan.logInterval = read.integer("log_interval");
  plan.sqnrInterval = read.integer("sqnr_interval");
  plan.evalInterval = read.integer("eval_interval");
  plan.evalBatches = read.integer("eval_batches");
  plan.checkpointInterval = read.integer("checkpoint_interval");
  const JsonValue *params = read.get("parameters", false);
  if (!read.error.empty())
    return io::Error(read.error);
  plan.lr.kind = schedule == "cosine"   ? LearningRateSchedule::Kind::Cosine
                 : schedule == "linear" ? LearningRateSchedule::Kind::Linear
                                        : LearningRateSchedule::Kind::Constant;
  plan.lr.total = plan.steps;
  io::Expected<tokenizer::TokenizerSpec> spec =
      tokenizer::parseTokenizerSpec(tokenizerText);
  if (!spec)
    return io::Error("run plan: " + spec.error().message());
  plan.tokenizer = *spec;
  if (!params->isArray())
    return io::Error("run plan: 'parameters' must be an array");
  for (const JsonValue &entry : params->items()) {
    FieldReader field{entry, ""};
    if (!entry.isObject())
      return io::Error("run plan: a parameter is not an object");
    ParameterSpec parameter;
    parameter.name = field.text("name");
    std::string init = field.text("init");
    parameter.std = field.real("std");
    const JsonValue *shape = field.get("shape", false);
    if (!field.error.empty())
      return io::Error(field.error);
    parameter.init = init == "normal" ? ParameterSpec::Init::Normal
                     : init == "ones" ? ParameterSpec::Init::Ones
                                      : ParameterSpec::Init::Zeros;
    if (!shape->isArray())
      return io::Error("run plan: parameter '" + parameter.name +
                       "': 'shape' must be an array");
    for (const JsonValue &extent : shape->items()) {
      if (!extent.isNumber() || extent.asDouble() < 0)
        return io::Error("run plan: parameter '" + parameter.name +
                         "': a bad extent");
      parameter.shape.push_back(static_cast<int64_t>(extent.asDouble()));
    }
    plan.parameters.push_back(std::move(parameter));
  }
  if (plan.seqLen < 1 || plan.microBatch < 1 || plan.accumulation < 1 ||
      plan.steps < 1)
    return io::Error("run plan: seq_len, micro_batch, accumulation and steps "
                     "must be positive");
  return plan;
}

TrainerConfig RunPlan::trainerConfig() const {
  TrainerConfig config;
  config.run = run;
  config.model = model;
  config.policy = policy;
  config.parameters = parameters;
  config.steps = steps;
  config.microBatches = accumulation;
  config.logInterval = logInterval;
  config.sqnrInterval = sqnrInterval;
  config.lr = lr;
  config.lr.total = steps;
  config.seed = seed;
  config.checkpointInterval = checkpointInterval > 0 ? checkpointInterval
                                                     : steps;
  config.evalInterval = evalData.empty() ? 0 : evalInterval;
  config.evalBatches = evalBatches;
  return config;
}

io::Expected<std::shared_ptr<tokenizer::Tokenizer>>
trainer::openTokenizer(const tokenizer::TokenizerSpec &spec,
                       int64_t vocabulary) {
  io::Expected<std::unique_ptr<tokenizer::Tokenizer>> made =
      tokenizer::makeTokenizer(spec);
  if (!made)
    return made.error();
  std::shared_ptr<tokenizer::Tokenizer> encoder(std::move(*made));
  if (vocabulary > 0 && encoder->vocabSize() > static_cast<uint64_t>(vocabulary))
    return io::Error(fmt::format(
        "tokenizer {} has {} tokens but the model's embedding has {} rows",
        std::string(encoder->name()), encoder->vocabSize(), vocabulary));
  return encoder;
}

io::Expected<data::Packer>
trainer::openPacker(const std::vector<std::string> &globs,
                    std::shared_ptr<tokenizer::Tokenizer> encoder,
                    const data::PackerOptions &options) {
  bool tokenFiles = !globs.empty();
  for (const std::string &glob : globs)
    tokenFiles &= glob.size() >= 7 && glob.compare(glob.size() - 7, 7,
                                                   ".tokens") == 0;
  std::unique_ptr<data::TokenSource> source;
  if (tokenFiles) {
    io::Expected<std::vector<std::string>> files = data::expandGlobs(globs);
    if (!files)
      return files.error();
    source = std::make_unique<data::TokenFileSource>(std::move(*files),
                                                     encoder->endOfText());
  } else {
    io::Expected<data::DocumentReader> reader =
        data::DocumentReader::fromGlobs(globs);
    if (!reader)
      return reader.error();
    source = std::make_unique<data::TextTokenSource>(
        std::move(*reader),
        [encoder](std::string_view text) { return encoder->encode(text); });
  }
  return data::Packer::create(std::move(source), options);
}
