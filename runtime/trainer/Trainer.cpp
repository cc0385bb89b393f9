//===- Trainer.cpp - The training loop over a compiled step ---------------===//

#include "runtime/trainer/Trainer.h"

#include "runtime/backend/ThreadPool.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/trainer/QuantizationMeter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <numeric>
#include <sys/stat.h>

using namespace tetra;
using namespace tetra::trainer;

namespace {

/// What splitmix64 adds to its state a draw: the state after n draws is
/// the first plus n times this, so any element's draws can start at once.
constexpr uint64_t kSplitMixStep = 0x9E3779B97F4A7C15ull;

/// splitmix64: a small, well-mixed 64-bit generator, identical everywhere.
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += kSplitMixStep);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A uniform double in (0, 1].
double uniform(uint64_t &state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

const std::string kPrefixes[] = {"", "m.", "v."}; // parameter, moments

} // namespace

int64_t ParameterSpec::numElements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

namespace {

/// Each parameter's index by name.
std::map<std::string, size_t>
parameterIndex(const std::vector<tetra::trainer::ParameterSpec> &parameters) {
  std::map<std::string, size_t> index;
  for (size_t p = 0; p < parameters.size(); ++p)
    index[parameters[p].name] = p;
  return index;
}

/// The parameter whose moment `buffer` is ("m.NAME", "v.NAME"), or none.
std::optional<size_t>
momentParameter(const tetra::schedule::BufferDesc &buffer,
                const std::map<std::string, size_t> &parameterIndex) {
  if (buffer.role != tetra::schedule::BufferRole::AdamM &&
      buffer.role != tetra::schedule::BufferRole::AdamV)
    return std::nullopt;
  auto found = parameterIndex.find(buffer.name.substr(2));
  if (found == parameterIndex.end())
    return std::nullopt;
  return found->second;
}

} // namespace

std::vector<int> tetra::trainer::shardMoments(
    const schedule::Schedule &step, const std::vector<ParameterSpec> &parameters,
    int ranks) {
  const std::map<std::string, size_t> index = parameterIndex(parameters);
  // Each parameter's group: the lowest parameter of the update launches
  // naming its moments, joined across launches (union by the lower index).
  std::vector<size_t> group(parameters.size());
  std::iota(group.begin(), group.end(), size_t{0});
  std::function<size_t(size_t)> root = [&](size_t p) {
    return group[p] == p ? p : group[p] = root(group[p]);
  };
  for (int l = step.updateBegin();
       l >= 0 && l < static_cast<int>(step.launches.size()); ++l) {
    std::optional<size_t> joined;
    for (int b : step.launches[l].buffers) {
      std::optional<size_t> moment = momentParameter(step.buffers[b], index);
      if (!moment)
        continue;
      const size_t p = root(*moment);
      if (joined && *joined != p)
        group[std::max(*joined, p)] = std::min(*joined, p);
      joined = joined ? std::min(*joined, p) : p;
    }
  }
  std::vector<int64_t> elements(parameters.size(), 0);
  std::vector<size_t> order;
  for (size_t p = 0; p < parameters.size(); ++p) {
    elements[root(p)] += parameters[p].numElements();
    if (root(p) == p)
      order.push_back(p);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return elements[a] > elements[b];
  });
  std::vector<int64_t> held(static_cast<size_t>(std::max(ranks, 1)), 0);
  std::vector<int> groupOwner(parameters.size(), 0);
  for (size_t g : order) {
    auto least = std::min_element(held.begin(), held.end());
    groupOwner[g] = static_cast<int>(least - held.begin());
    *least += elements[g];
  }
  std::vector<int> owner(parameters.size());
  for (size_t p = 0; p < parameters.size(); ++p)
    owner[p] = groupOwner[root(p)];
  return owner;
}

io::Expected<std::unique_ptr<Trainer>>
Trainer::create(backend::Backend &backend, const schedule::Schedule &step,
                const std::vector<backend::Module> &modules,
                TrainerConfig config, data::Packer train) {
  std::unique_ptr<Trainer> trainer(
      new Trainer(backend, std::move(config), std::move(train)));
  io::Expected<std::unique_ptr<schedule::StepExecutor>> executor =
      schedule::StepExecutor::create(backend, step, modules);
  if (!executor)
    return executor.error();
  trainer->executor_ = std::move(*executor);
  // The gradients side by side in one allocation (256-byte aligned, the
  // gaps zero): the ranks sum them with one collective.
  auto gradientBytes = [](const schedule::BufferDesc &buffer) {
    return (buffer.bytes() + 255) / 256 * 256;
  };
  int64_t gradientTotal = 0;
  for (const schedule::BufferDesc &buffer : step.buffers)
    if (buffer.role == schedule::BufferRole::Gradient)
      gradientTotal += gradientBytes(buffer);
  if (gradientTotal > 0) {
    io::Expected<backend::Buffer> allocated =
        backend.allocate(static_cast<size_t>(gradientTotal));
    if (!allocated)
      return allocated.error();
    trainer->gradients_ = *allocated;
    if (io::Status zeroed = backend.fill(*allocated, 0); !zeroed)
      return zeroed.error();
  }
  const std::vector<ParameterSpec> &parameters = trainer->config_.parameters;
  const std::map<std::string, size_t> index = parameterIndex(parameters);
  auto momentOf = [&](const schedule::BufferDesc &buffer) {
    return momentParameter(buffer, index);
  };
  const bool sharded = trainer->config_.shardOptimizer &&
                       trainer->config_.communicator && trainer->ranks() > 1;
  if (sharded) {
    trainer->owner_ = shardMoments(step, parameters, trainer->ranks());
    int64_t largest = 0;
    for (const ParameterSpec &parameter : parameters)
      largest = std::max(largest, parameter.numElements());
    io::Expected<backend::Buffer> receive =
        backend.allocate(static_cast<size_t>(largest) * sizeof(float));
    if (!receive)
      return receive.error();
    trainer->receiveBuffer_ = *receive;
  }
  // Every bound buffer of the step, allocated here and owned by the trainer
  // (sharded: the moments of this rank's parameters alone).
  int64_t gradientAt = 0;
  for (const schedule::BufferDesc &buffer : step.buffers) {
    if (buffer.role == schedule::BufferRole::Temporary ||
        buffer.role == schedule::BufferRole::Constant)
      continue;
    if (std::optional<size_t> p = momentOf(buffer); p && !trainer->ownsMoments(*p))
      continue;
    io::Expected<backend::Buffer> allocated =
        buffer.role == schedule::BufferRole::Gradient
            ? trainer->gradients_.slice(static_cast<size_t>(gradientAt),
                                        static_cast<size_t>(buffer.bytes()))
            : backend.allocate(static_cast<size_t>(buffer.bytes()));
    if (!allocated)
      return allocated.error();
    if (buffer.role == schedule::BufferRole::Gradient)
      gradientAt += gradientBytes(buffer);
    else
      trainer->buffers_.push_back({buffer.name, *allocated});
    if (io::Status bound = trainer->executor_->bind(buffer.name, *allocated);
        !bound)
      return bound.error();
  }
  const schedule::Schedule &schedule = trainer->executor_->schedule();
  // The update phase's launches this rank runs (sharded: all but those
  // naming another rank's moments), as ranges.
  for (int l = schedule.updateBegin();
       l >= 0 && l < static_cast<int>(schedule.launches.size()); ++l) {
    bool here = true;
    for (int b : schedule.launches[l].buffers)
      if (std::optional<size_t> p = momentOf(schedule.buffers[b]))
        here &= trainer->ownsMoments(*p);
    if (!here)
      continue;
    if (!trainer->updateRanges_.empty() &&
        trainer->updateRanges_.back().second == l)
      trainer->updateRanges_.back().second = l + 1;
    else
      trainer->updateRanges_.push_back({l, l + 1});
  }
  if (schedule.phases.gradientsEnd < 0)
    return io::Error("the compiled step '" + schedule.name +
                     "' has no optimizer phases: not a training step");
  if (trainer->config_.microBatches < 1)
    return io::Error("micro-batches per step must be at least 1");
  if (trainer->config_.communicator && !schedule.accumulatesGradients())
    return io::Error(fmt::format(
        "training on {} ranks sums gradients across them: compile the step "
        "with accumulateGradients",
        trainer->ranks()));
  if (trainer->config_.microBatches > 1 && !schedule.accumulatesGradients())
    return io::Error(fmt::format(
        "the compiled step does not accumulate gradients, but the run asks for "
        "{} micro-batches per step (compile it with accumulateGradients)",
        trainer->config_.microBatches));
  const data::PackerOptions &options = trainer->train_.options();
  for (const char *name : {"tokens", "targets"}) {
    int index = step.findBuffer(name);
    if (index < 0 ||
        step.buffers[index].numElements() != options.batchSize * options.seqLen)
      return io::Error(fmt::format(
          "the compiled step's '{}' is not [micro_batch, seq_len] = [{}, {}]",
          std::string(name), options.batchSize, options.seqLen));
  }
  return trainer;
}

Trainer::~Trainer() {
  executor_.reset();
  for (auto &[name, buffer] : buffers_)
    (void)backend_.free(buffer);
  if (!gradients_.empty())
    (void)backend_.free(gradients_);
}

io::Status Trainer::upload(const std::string &name, const void *data,
                           size_t bytes) {
  io::Expected<backend::Buffer> buffer = executor_->buffer(name);
  if (!buffer)
    return buffer.error();
  if (io::Status copied = backend_.copyToDevice(*buffer, data, bytes); !copied)
    return copied;
  return backend_.synchronize();
}

io::Expected<std::vector<float>> Trainer::read(const std::string &name) {
  io::Expected<backend::Buffer> buffer = executor_->buffer(name);
  if (!buffer)
    return buffer.error();
  std::vector<float> values(buffer->size() / sizeof(float));
  if (io::Status copied =
          backend_.copyToHost(values.data(), *buffer, buffer->size());
      !copied)
    return copied.error();
  if (io::Status done = backend_.synchronize(); !done)
    return done.error();
  return values;
}

std::vector<float> trainer::initialValues(const ParameterSpec &spec,
                                          uint64_t seed, size_t index,
                                          backend::ThreadPool &pool) {
  std::vector<float> values(spec.numElements(), 0.0f);
  const uint64_t first = seed * 0x100000001B3ull + index;
  constexpr int64_t kGrain = 1 << 20;
  pool.parallelFor(
      0, static_cast<int64_t>(values.size()), kGrain,
      [&](int64_t begin, int64_t end) {
        uint64_t state =
            first + 2 * static_cast<uint64_t>(begin) * kSplitMixStep;
        for (int64_t i = begin; i < end; ++i) {
          switch (spec.init) {
          case ParameterSpec::Init::Zeros:
            break;
          case ParameterSpec::Init::Ones:
            values[i] = 1.0f;
            break;
          case ParameterSpec::Init::Normal: {
            double radius = std::sqrt(-2.0 * std::log(uniform(state)));
            double angle = 2.0 * M_PI * uniform(state);
            values[i] = static_cast<float>(spec.std * radius * std::cos(angle));
            break;
          }
          }
        }
      });
  return values;
}

io::Status Trainer::initialize() {
  // On every core: Llama 3.1-8B's 8 billion draws take minutes on one.
  io::Expected<int> threads = backend::ThreadPool::configuredThreadCount();
  if (!threads)
    return threads.error();
  backend::ThreadPool pool(*threads);
  for (size_t p = 0; p < config_.parameters.size(); ++p) {
    const ParameterSpec &spec = config_.parameters[p];
    std::vector<float> values = initialValues(spec, config_.seed, p, pool);
    std::vector<float> zeros(values.size(), 0.0f);
    if (io::Status s = upload(spec.name, values.data(), values.size() * 4); !s)
      return s;
    for (const char *prefix : {"m.", "v."}) {
      if (!ownsMoments(p))
        break; // another rank's shard
      if (io::Status s =
              upload(prefix + spec.name, zeros.data(), zeros.size() * 4);
          !s)
        return s;
    }
  }
  step_ = 0;
  continuing_ = false;
  elapsedBefore_ = 0;
  return io::success();
}

io::Status Trainer::uploadBatch(const data::Batch &batch) {
  if (io::Status s =
          upload("tokens", batch.tokens.data(), batch.tokens.size() * 4);
      !s)
    return s;
  return upload("targets", batch.targets.data(), batch.targets.size() * 4);
}

io::Expected<double> Trainer::evaluate() {
  if (!eval_)
    return io::Error("no evaluation data");
  if (io::Status reset = eval_->reset(); !reset)
    return reset.error();
  // The forward phase alone: the loss, nothing updated.
  executor_->setScalar("step",
                       backend::Scalar::integer(std::max<int64_t>(1, step_)));
  executor_->setScalar(
      "seed", backend::Scalar::integer(static_cast<int64_t>(config_.seed)));
  int forwardEnd = executor_->schedule().forwardEnd();
  double total = 0;
  int64_t batches = 0;
  data::Batch batch;
  while (batches < std::max<int64_t>(1, config_.evalBatches)) {
    io::Expected<bool> got = eval_->nextBatch(batch);
    if (!got)
      return got.error();
    if (!*got)
      break;
    if (io::Status s = uploadBatch(batch); !s)
      return s.error();
    if (io::Status ran = executor_->run(0, forwardEnd); !ran)
      return io::Error("evaluation: " + ran.error().message());
    io::Expected<std::vector<float>> loss = read("loss");
    if (!loss)
      return loss.error();
    total += (*loss)[0];
    ++batches;
  }
  if (batches == 0)
    return io::Error("evaluation: the evaluation data holds no full batch");
  return total / static_cast<double>(batches);
}

io::Error Trainer::locateNonFinite(const std::string &what,
                                   const std::vector<data::Batch> &batches) {
  int gradientsEnd = executor_->schedule().gradientsEnd();
  for (size_t i = 0; i < batches.size(); ++i) {
    if (io::Status s = uploadBatch(batches[i]); !s)
      return s.error();
    executor_->setScalar("micro_batch",
                         backend::Scalar::integer(static_cast<int64_t>(i)));
    io::Status checked = executor_->runCheckingFinite(0, gradientsEnd);
    if (!checked)
      return io::Error(what +
                       (config_.microBatches > 1
                            ? fmt::format("; micro-batch {}", i)
                            : std::string()) +
                       ": " + checked.error().message());
  }
  return io::Error(what + " (not reproduced by a checked re-run)");
}

std::map<std::string, backend::Scalar>
Trainer::stepScalars(int64_t step) const {
  return {{"step", backend::Scalar::integer(step)},
          {"lr", backend::Scalar::real(config_.lr.at(step))},
          {"seed", backend::Scalar::integer(static_cast<int64_t>(config_.seed))},
          {"grad_scale",
           backend::Scalar::real(1.0 / static_cast<double>(
                                           config_.microBatches * ranks()))},
          {"micro_batch", backend::Scalar::integer(0)}};
}

io::Status Trainer::prepareNextStep() {
  for (const auto &[name, value] : stepScalars(step_ + 1))
    executor_->setScalar(name, value);
  data::Batch batch;
  io::Expected<bool> got = nextTrainingBatch(batch);
  if (!got)
    return got.error();
  if (!*got)
    return io::Error(
        fmt::format("step {}: the training data ran out", step_ + 1));
  if (io::Status uploaded = uploadBatch(batch); !uploaded)
    return uploaded;
  return backend_.synchronize();
}

std::string TrainingSummary::steadyRateText() const {
  if (steadyTokensPerSecond <= 0)
    return "";
  return fmt::format(" ({:.0f} from step {} on)", steadyTokensPerSecond,
                     firstStep + 1);
}

io::Expected<bool> Trainer::readOwnBatch(data::Batch &batch,
                                         data::DataPosition *stepStart) {
  const int64_t perStep = config_.microBatches * ranks();
  const int64_t first = config_.microBatches * rank();
  while (true) {
    const int64_t at = consumed_ % perStep;
    if (at == 0 && stepStart)
      *stepStart = train_.position();
    io::Expected<bool> got = train_.nextBatch(batch);
    if (!got || !*got)
      return got;
    ++consumed_;
    if (at >= first && at < first + config_.microBatches)
      return true;
  }
}

io::Status Trainer::skipToStepBoundary() {
  const int64_t perStep = config_.microBatches * ranks();
  data::Batch skipped;
  while (consumed_ % perStep != 0) {
    io::Expected<bool> got = train_.nextBatch(skipped);
    if (!got)
      return got.error();
    if (!*got)
      break; // the data ends with this step
    ++consumed_;
  }
  return io::success();
}

io::Status Trainer::reduceGradients() {
  if (!config_.communicator)
    return io::success();
  if (io::Status done = backend_.synchronize(); !done)
    return done;
  // Every gradient at once: they share one allocation.
  if (io::Status summed = config_.communicator->allReduceSum(
          reinterpret_cast<float *>(gradients_.address()),
          gradients_.size() / sizeof(float), config_.reduction);
      !summed)
    return io::Error("gradients: " + summed.error().message());
  return io::success();
}

int64_t Trainer::momentElementsHere() const {
  int64_t elements = 0;
  for (size_t p = 0; p < config_.parameters.size(); ++p)
    if (ownsMoments(p))
      elements += config_.parameters[p].numElements();
  return elements;
}

io::Status Trainer::runUpdate() {
  for (auto [begin, end] : updateRanges_)
    if (io::Status ran = executor_->run(begin, end); !ran)
      return ran;
  if (owner_.empty())
    return io::success();
  if (io::Status done = backend_.synchronize(); !done)
    return done;
  for (size_t p = 0; p < config_.parameters.size(); ++p) {
    const ParameterSpec &spec = config_.parameters[p];
    io::Expected<backend::Buffer> parameter = executor_->buffer(spec.name);
    if (!parameter)
      return parameter.error();
    if (io::Status sent = config_.communicator->broadcast(
            reinterpret_cast<float *>(parameter->address()),
            static_cast<size_t>(spec.numElements()), owner_[p]);
        !sent)
      return io::Error(fmt::format("parameter '{}' from rank {}: {}",
                                   spec.name, owner_[p],
                                   sent.error().message()));
  }
  return io::success();
}

io::Status Trainer::gatherMoments() {
  gatheredMoments_.clear();
  if (owner_.empty())
    return io::success();
  for (size_t p = 0; p < config_.parameters.size(); ++p) {
    if (owner_[p] == 0)
      continue; // rank 0 has them
    const ParameterSpec &spec = config_.parameters[p];
    const size_t count = static_cast<size_t>(spec.numElements());
    for (const char *prefix : {"m.", "v."}) {
      const std::string name = prefix + spec.name;
      backend::Buffer at = receiveBuffer_;
      if (ownsMoments(p)) {
        io::Expected<backend::Buffer> own = executor_->buffer(name);
        if (!own)
          return own.error();
        at = *own;
      }
      if (io::Status sent = config_.communicator->broadcast(
              reinterpret_cast<float *>(at.address()), count, owner_[p]);
          !sent)
        return io::Error(fmt::format("moments '{}' from rank {}: {}", name,
                                     owner_[p], sent.error().message()));
      if (rank() != 0)
        continue;
      std::vector<float> &values = gatheredMoments_[name];
      values.resize(count);
      if (io::Status copied = backend_.copyToHost(values.data(), at,
                                                  count * sizeof(float));
          !copied)
        return copied;
      if (io::Status done = backend_.synchronize(); !done)
        return done;
    }
  }
  return io::success();
}

io::Expected<bool> Trainer::nextTrainingBatch(data::Batch &batch) {
  if (!readAhead_)
    return readOwnBatch(batch, nullptr);
  io::Expected<bool> got = std::move(readAhead_->got);
  batch = std::move(readAhead_->batch);
  readAhead_.reset();
  return got;
}

void Trainer::readAhead() {
  if (readAhead_)
    return;
  readAhead_.emplace();
  readAhead_->before = train_.position();
  readAhead_->got = readOwnBatch(readAhead_->batch, &readAhead_->before);
}

io::Expected<Trainer::StepOutcome> Trainer::runStep(int64_t step, double lr,
                                                    bool measure,
                                                    bool another) {
  const schedule::Schedule &schedule = executor_->schedule();
  const int64_t micro = config_.microBatches;
  for (const auto &[name, value] : stepScalars(step))
    executor_->setScalar(name, value);
  executor_->setScalar("lr", backend::Scalar::real(lr));
  std::vector<data::Batch> batches(static_cast<size_t>(micro));
  StepOutcome outcome;
  std::string where = fmt::format("step {}: ", step);
  for (int64_t i = 0; i < micro; ++i) {
    data::Batch &batch = batches[static_cast<size_t>(i)];
    io::Expected<bool> got = nextTrainingBatch(batch);
    if (!got)
      return got.error();
    if (!*got)
      return io::Error(where + "the training data ran out");
    if (io::Status s = uploadBatch(batch); !s)
      return s.error();
    executor_->setScalar("micro_batch", backend::Scalar::integer(i));
    io::Status ran = io::success();
    if (measure && i == 0) {
      QuantizationMeter meter(backend_, *executor_, config_.seed, step,
                              config_.sqnrSampleElements);
      ran =
          executor_->runObserving(0, schedule.gradientsEnd(), [&](int launch) {
            return meter.observe(launch);
          });
      outcome.sqnrDecibels = meter.decibels();
      outcome.sqnrDecibelsByLinear = meter.linearDecibels();
      outcome.foldingTiles = meter.foldingTiles();
      outcome.exactPairs = meter.exactPairs();
    } else {
      ran = executor_->run(0, schedule.gradientsEnd());
    }
    if (!ran)
      return io::Error(where + ran.error().message());
    // The device runs the micro-batch; the host reads the next one.
    if (i + 1 < micro || another)
      readAhead();
    io::Expected<std::vector<float>> loss = read("loss");
    if (!loss)
      return loss.error();
    if (!std::isfinite((*loss)[0])) {
      batches.resize(static_cast<size_t>(i + 1));
      return locateNonFinite(fmt::format("{}loss {}", where, (*loss)[0]),
                             batches);
    }
    outcome.loss += (*loss)[0];
  }
  outcome.loss /= static_cast<double>(micro);
  if (config_.communicator) {
    if (io::Status reduced = reduceGradients(); !reduced)
      return io::Error(where + reduced.error().message());
    double loss = outcome.loss;
    if (io::Status summed = config_.communicator->allReduceHost(&loss, 1);
        !summed)
      return io::Error(where + "loss: " + summed.error().message());
    outcome.loss = loss / ranks();
  }
  if (io::Status ran =
          executor_->run(schedule.gradientsEnd(), schedule.updateBegin());
      !ran)
    return io::Error(where + ran.error().message());
  io::Expected<std::vector<float>> norm = read("grad_norm");
  if (!norm)
    return norm.error();
  outcome.gradNorm = (*norm)[0];
  if (!std::isfinite(outcome.gradNorm))
    return locateNonFinite(fmt::format("{}loss {}, gradient norm {}", where,
                                       outcome.loss, outcome.gradNorm),
                           batches);
  if (io::Status ran = runUpdate(); !ran)
    return io::Error(where + ran.error().message());
  if (io::Status done = backend_.synchronize(); !done)
    return done.error();
  return outcome;
}

io::Expected<std::string> Trainer::saveCheckpoint(double elapsedSeconds) {
  checkpoint::TrainingState state;
  state.run = config_.run;
  state.elapsedSeconds = elapsedSeconds;
  state.model = config_.model;
  state.policy = config_.policy;
  state.step = step_;
  state.seed = config_.seed;
  if (!readAhead_)
    if (io::Status skipped = skipToStepBoundary(); !skipped)
      return skipped.error();
  state.dataPosition =
      (readAhead_ ? readAhead_->before : train_.position()).serialize();
  std::vector<checkpoint::Tensor> *lists[] = {
      &state.parameters, &state.optimizerM, &state.optimizerV};
  for (int list = 0; list < 3; ++list)
    for (const ParameterSpec &spec : config_.parameters) {
      // Sharded: another rank's moments, gathered (gatherMoments).
      auto gathered = gatheredMoments_.find(kPrefixes[list] + spec.name);
      io::Expected<std::vector<float>> values =
          list > 0 && gathered != gatheredMoments_.end()
              ? io::Expected<std::vector<float>>(gathered->second)
              : read(kPrefixes[list] + spec.name);
      if (!values)
        return values.error();
      checkpoint::Tensor tensor;
      tensor.name = spec.name;
      tensor.shape = spec.shape;
      tensor.bytes.resize(values->size() * sizeof(float));
      std::memcpy(tensor.bytes.data(), values->data(), tensor.bytes.size());
      lists[list]->push_back(std::move(tensor));
    }
  return checkpoint::saveCheckpoint(config_.checkpointDir, state);
}

checkpoint::CheckpointSpec Trainer::checkpointSpec() const {
  checkpoint::CheckpointSpec spec;
  spec.model = config_.model;
  for (const ParameterSpec &parameter : config_.parameters)
    spec.parameters.push_back(
        {parameter.name, io::Dtype::F32, parameter.shape});
  return spec;
}

io::Status Trainer::loadParameters(const std::string &path) {
  checkpoint::CheckpointSpec spec = checkpointSpec();
  struct stat info;
  const bool directory =
      stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
  io::Expected<checkpoint::TrainingState> state =
      directory ? checkpoint::loadLatestCheckpoint(path, &spec)
                : checkpoint::loadCheckpoint(path, &spec);
  if (!state)
    return state.error();
  for (const ParameterSpec &parameter : config_.parameters) {
    const checkpoint::Tensor *tensor =
        checkpoint::TrainingState::find(state->parameters, parameter.name);
    if (!tensor)
      return io::Error("checkpoint '" + path + "' has no '" + parameter.name +
                       "'");
    if (io::Status s = upload(kPrefixes[0] + parameter.name,
                              tensor->bytes.data(), tensor->bytes.size());
        !s)
      return s;
  }
  step_ = state->step;
  resumedPolicy_ = state->policy;
  return io::success();
}

io::Status Trainer::resume(const std::string &directory) {
  checkpoint::CheckpointSpec spec = checkpointSpec();
  io::Expected<checkpoint::TrainingState> state =
      checkpoint::loadLatestCheckpoint(directory, &spec);
  if (!state)
    return state.error();
  // The data's order and every random stream (initialization aside) are
  // the seed's: another seed would continue a different run.
  if (state->seed != config_.seed)
    return io::Error(fmt::format(
        "the checkpoint in '{}' was trained with seed {}, this run has seed "
        "{}: resume it with its own seed",
        directory, state->seed, config_.seed));
  io::Expected<data::DataPosition> position =
      data::DataPosition::parse(state->dataPosition);
  if (!position)
    return position.error();
  const std::vector<checkpoint::Tensor> *lists[] = {
      &state->parameters, &state->optimizerM, &state->optimizerV};
  for (int list = 0; list < 3; ++list)
    for (size_t p = 0; p < config_.parameters.size(); ++p) {
      const ParameterSpec &parameter = config_.parameters[p];
      const checkpoint::Tensor *tensor =
          checkpoint::TrainingState::find(*lists[list], parameter.name);
      if (!tensor)
        return io::Error("checkpoint in '" + directory + "' has no '" +
                         kPrefixes[list] + parameter.name + "'");
      if (list > 0 && !ownsMoments(p))
        continue; // another rank's shard
      if (io::Status s = upload(kPrefixes[list] + parameter.name,
                                tensor->bytes.data(), tensor->bytes.size());
          !s)
        return s;
    }
  if (io::Status restored = train_.restore(*position); !restored)
    return restored;
  readAhead_.reset();
  consumed_ = 0; // checkpoints are taken at step boundaries
  step_ = state->step;
  continuing_ = true;
  resumedPolicy_ = state->policy;
  elapsedBefore_ = state->elapsedSeconds;
  return io::success();
}

io::Expected<TrainingSummary> Trainer::train() {
  // Llama 3.1-8B's checkpoints are 96 GB: refuse before the first step
  // rather than fail after the run's first interval.
  if (!config_.checkpointDir.empty()) {
    uint64_t bytes = 0;
    for (const ParameterSpec &spec : config_.parameters)
      bytes += 3 * 4 * static_cast<uint64_t>(spec.numElements());
    if (io::Status room = checkpoint::checkRoomFor(config_.checkpointDir, bytes);
        !room)
      return room.error();
  }
  std::optional<MetricsWriter> metrics;
  if (!config_.metricsPath.empty()) {
    io::Expected<MetricsWriter> opened =
        continuing_
            ? MetricsWriter::resume(config_.metricsPath, config_.run, step_)
            : MetricsWriter::create(config_.metricsPath, config_.run);
    if (!opened)
      return opened.error();
    metrics.emplace(std::move(*opened));
  }
  continuing_ = true;
  TrainingSummary summary;
  summary.firstStep = step_ + 1;
  auto start = std::chrono::steady_clock::now();
  int64_t tokensPerStep = train_.options().batchSize * train_.options().seqLen *
                          config_.microBatches * ranks();
  int64_t last = config_.stopAfter > 0
                     ? std::min(config_.stopAfter, config_.steps)
                     : config_.steps;
  double firstStepSeconds = 0;
  Progress progress;
  progress.totalSteps = config_.steps;
  progress.stopStep = last;
  while (step_ < last) {
    int64_t step = step_ + 1;
    double lr = config_.lr.at(step);
    bool measure = config_.sqnrInterval > 0 &&
                   (step % config_.sqnrInterval == 0 || step == 1);
    io::Expected<StepOutcome> outcome =
        runStep(step, lr, measure, /*another=*/step < last);
    if (!outcome)
      return outcome.error();
    step_ = step;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    StepRecord record;
    record.step = step;
    record.tokens = tokensPerStep * step;
    record.loss = outcome->loss;
    record.lr = lr;
    record.gradNorm = outcome->gradNorm;
    record.sqnrDecibels = std::move(outcome->sqnrDecibels);
    record.sqnrDecibelsByLinear = std::move(outcome->sqnrDecibelsByLinear);
    record.foldingTiles = std::move(outcome->foldingTiles);
    record.exactPairs = std::move(outcome->exactPairs);
    record.elapsedSeconds = elapsedBefore_ + seconds;
    record.tokensPerSecond =
        seconds > 0 ? tokensPerStep * (step - summary.firstStep + 1) / seconds
                    : 0;
    summary.losses.push_back(record.loss);
    if (eval_ && config_.evalInterval > 0 &&
        (step % config_.evalInterval == 0 || step == last)) {
      io::Expected<double> evalLoss = evaluate();
      if (!evalLoss)
        return evalLoss.error();
      record.evalLoss = *evalLoss;
      summary.evalLoss = *evalLoss;
    }
    // A stop request is honoured here, between steps: this step is logged
    // and checkpointed like the last one.
    bool stopping =
        step < last && config_.stopRequested && config_.stopRequested();
    if (config_.communicator && step < last) { // every rank stops alike
      double requested = stopping ? 1 : 0;
      if (io::Status summed =
              config_.communicator->allReduceHost(&requested, 1);
          !summed)
        return io::Error(fmt::format("after step {}: {}", step,
                                     summed.error().message()));
      stopping = requested > 0;
    }
    if (metrics &&
        (step % std::max<int64_t>(1, config_.logInterval) == 0 ||
         step == last || stopping || record.evalLoss ||
         !record.sqnrDecibels.empty()))
      if (io::Status written = metrics->write(record); !written)
        return written.error();
    progress.stepsRun = step - summary.firstStep + 1;
    progress.secondsRun = seconds;
    if (!config_.quiet)
      printProgress(record, progress, config_.logInterval,
                    step == last || stopping);
    bool periodic = config_.checkpointInterval > 0 &&
                    (step % config_.checkpointInterval == 0 || step == last);
    if (!owner_.empty() && (periodic || stopping))
      if (io::Status gathered = gatherMoments(); !gathered)
        return io::Error(fmt::format("checkpoint after step {}: {}", step,
                                     gathered.error().message()));
    if (!config_.checkpointDir.empty() && (periodic || stopping)) {
      io::Expected<std::string> saved = saveCheckpoint(record.elapsedSeconds);
      if (!saved)
        return saved.error();
      summary.checkpoint = *saved;
    }
    if (step == summary.firstStep)
      firstStepSeconds = seconds;
    else
      summary.steadyTokensPerSecond =
          tokensPerStep * (step - summary.firstStep) /
          (seconds - firstStepSeconds);
    summary.seconds = seconds;
    summary.tokensPerSecond = record.tokensPerSecond;
    if (stopping) {
      summary.stopped = true;
      break;
    }
  }
  elapsedBefore_ += summary.seconds;
  summary.lastStep = step_;
  if (!summary.losses.empty()) {
    summary.firstLoss = summary.losses.front();
    summary.lastLoss = summary.losses.back();
  }
  return summary;
}
