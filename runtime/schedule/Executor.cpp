//===- Executor.cpp - Runs a schedule on a backend ------------------------===//

#include "runtime/schedule/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

using namespace tetra;
using namespace tetra::schedule;

io::Expected<std::unique_ptr<StepExecutor>>
StepExecutor::create(backend::Backend &backend, Schedule schedule,
                     const std::vector<backend::Module> &modules) {
  if (io::Status valid = validate(schedule); !valid)
    return valid.error();
  std::unique_ptr<StepExecutor> step(
      new StepExecutor(backend, std::move(schedule)));
  const Schedule &plan = step->schedule_;

  for (const Launch &launch : plan.launches) {
    backend::Kernel kernel;
    bool found = false;
    for (backend::Module module : modules) {
      io::Expected<backend::Kernel> candidate =
          backend.getKernel(module, launch.kernel);
      if (candidate) {
        kernel = *candidate;
        found = true;
        break;
      }
    }
    if (!found)
      return io::Error("schedule '" + plan.name + "': no kernel '" +
                       launch.kernel + "' in the loaded code (" +
                       launch.origin + ")");
    step->kernels_.push_back(kernel);
  }

  io::Expected<backend::Buffer> arena =
      backend.allocate(static_cast<size_t>(plan.arenaBytes));
  if (!arena)
    return io::Error(
        fmt::format("schedule '{}': cannot allocate its {}-byte arena: {}",
                    plan.name, plan.arenaBytes, arena.error().message()));
  step->arena_ = *arena;
  step->buffers_.resize(plan.buffers.size());
  step->bound_.assign(plan.buffers.size(), false);
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &buffer = plan.buffers[i];
    if (buffer.role == BufferRole::Constant) {
      if (buffer.type != backend::ElementType::F32)
        return io::Error("constant '" + buffer.name + "' must be f32");
      std::vector<float> values(buffer.numElements(),
                                static_cast<float>(buffer.splat));
      io::Expected<backend::Buffer> owned =
          backend.allocate(static_cast<size_t>(buffer.bytes()));
      if (!owned)
        return owned.error();
      step->constants_.push_back(*owned);
      if (io::Status copied = backend.copyToDevice(
              *owned, values.data(), static_cast<size_t>(buffer.bytes()));
          !copied)
        return copied.error();
      if (io::Status done = backend.synchronize(); !done)
        return done.error();
      step->buffers_[i] = *owned;
      step->bound_[i] = true;
      continue;
    }
    if (buffer.role != BufferRole::Temporary)
      continue;
    io::Expected<backend::Buffer> slice =
        step->arena_.slice(static_cast<size_t>(buffer.offset),
                           static_cast<size_t>(buffer.bytes()));
    if (!slice)
      return slice.error();
    step->buffers_[i] = *slice;
    step->bound_[i] = true;
  }
  return step;
}

StepExecutor::~StepExecutor() {
  forgetRecordings();
  if (!arena_.empty())
    (void)backend_.free(arena_);
  for (backend::Buffer constant : constants_)
    (void)backend_.free(constant);
}

void StepExecutor::setScalar(const std::string &name, backend::Scalar value) {
  scalars_[name] = value;
}

io::Status StepExecutor::bind(std::string_view name, backend::Buffer buffer) {
  int index = schedule_.findBuffer(name);
  if (index < 0)
    return io::Error("schedule '" + schedule_.name + "' has no buffer '" +
                     std::string(name) + "'");
  const BufferDesc &desc = schedule_.buffers[index];
  if (desc.role == BufferRole::Temporary)
    return io::Error("buffer '" + desc.name +
                     "' is a temporary: it lives in the arena");
  if (buffer.size() < static_cast<size_t>(desc.bytes()))
    return io::Error(fmt::format("buffer '{}' needs {} bytes, got {}",
                                 desc.name, desc.bytes(), buffer.size()));
  if (bound_[index] && buffers_[index].address() != buffer.address())
    forgetRecordings(); // they hold the buffer's old address
  buffers_[index] = buffer;
  bound_[index] = true;
  return io::success();
}

namespace {

/// The same kind and the same bits.
bool sameScalar(backend::Scalar a, backend::Scalar b) {
  double x = a.asFloat(), y = b.asFloat();
  return a.kind() == b.kind() && a.asInt() == b.asInt() &&
         std::memcmp(&x, &y, sizeof(x)) == 0;
}

} // namespace

io::Status StepExecutor::checkRange(int begin, int end) const {
  if (begin < 0 || end > static_cast<int>(schedule_.launches.size()) ||
      begin > end)
    return io::Error(fmt::format("schedule '{}': no launches [{}, {})",
                                 schedule_.name, begin, end));
  // Every buffer a launch of the range names (a rank that keeps a shard of
  // the optimizer state binds only its own moments, and runs only their
  // updates).
  for (int l = begin; l < end; ++l)
    for (int i : schedule_.launches[l].buffers)
      if (!bound_[i])
        return io::Error(
            "schedule '" + schedule_.name + "': buffer '" +
            schedule_.buffers[i].name + "' (" +
            std::string(bufferRoleName(schedule_.buffers[i].role)) +
            ") is not bound");
  return io::success();
}

io::Expected<backend::Scalar>
StepExecutor::boundValue(int l, const std::string &name) const {
  auto value = scalars_.find(name);
  if (value == scalars_.end()) {
    const Launch &launch = schedule_.launches[l];
    return io::Error(fmt::format("launch {} ({}, {}): scalar '{}' is not set",
                                 l, launch.kernel, launch.origin, name));
  }
  return value->second;
}

io::Status StepExecutor::resolve(int l, std::vector<backend::Buffer> &arguments,
                                 std::vector<backend::Scalar> &scalars) const {
  const Launch &launch = schedule_.launches[l];
  arguments.clear();
  for (int buffer : launch.buffers)
    arguments.push_back(buffers_[buffer]);
  scalars = launch.scalars;
  for (const auto &[position, name] : launch.boundScalars) {
    io::Expected<backend::Scalar> value = boundValue(l, name);
    if (!value)
      return value.error();
    scalars[position] = *value;
  }
  return io::success();
}

io::Status StepExecutor::run(int begin, int end, backend::Stream stream) {
  if (io::Status ready = checkRange(begin, end); !ready)
    return ready;
  auto recording = recorded_.find({begin, end});
  if (recording == recorded_.end()) {
    std::vector<backend::ListedLaunch> launches(end - begin);
    for (int l = begin; l < end; ++l) {
      backend::ListedLaunch &listed = launches[l - begin];
      if (io::Status resolved = resolve(l, listed.buffers, listed.scalars);
          !resolved)
        return resolved;
      listed.kernel = kernels_[l];
      listed.config = schedule_.launches[l].config;
    }
    Recording recorded;
    for (const backend::ListedLaunch &listed : launches)
      recorded.scalars.push_back(listed.scalars);
    io::Expected<backend::LaunchList> list =
        backend_.recordLaunches(std::move(launches));
    if (!list)
      return io::Error(
          fmt::format("schedule '{}': recording launches [{}, {}): {}",
                      schedule_.name, begin, end, list.error().message()));
    recorded.list = *list;
    recording = recorded_.emplace(std::pair{begin, end}, std::move(recorded))
                    .first;
  }
  // The run-time scalars that changed since the last replay.
  Recording &recorded = recording->second;
  std::vector<backend::ScalarChange> changes;
  for (int l = begin; l < end; ++l) {
    const Launch &launch = schedule_.launches[l];
    for (const auto &[position, name] : launch.boundScalars) {
      io::Expected<backend::Scalar> value = boundValue(l, name);
      if (!value)
        return value.error();
      backend::Scalar &last = recorded.scalars[l - begin][position];
      if (sameScalar(last, *value))
        continue;
      last = *value;
      changes.push_back({l - begin, position, *value});
    }
  }
  int refused = -1;
  io::Status replayed = backend_.replay(
      recorded.list, backend::ArrayView<backend::ScalarChange>(changes), stream,
      &refused);
  if (replayed)
    return replayed;
  if (refused < 0)
    return io::Error(fmt::format("schedule '{}': launches [{}, {}): {}",
                                 schedule_.name, begin, end,
                                 replayed.error().message()));
  const Launch &launch = schedule_.launches[begin + refused];
  return io::Error(fmt::format("launch {} ({}, {}): {}", begin + refused,
                               launch.kernel, launch.origin,
                               replayed.error().message()));
}

void StepExecutor::forgetRecordings() {
  for (auto &[range, recording] : recorded_)
    (void)backend_.releaseLaunches(recording.list);
  recorded_.clear();
}

io::Status StepExecutor::runCheckingFinite(int begin, int end,
                                           backend::Stream stream) {
  return runLaunches(begin, end, stream, /*checkFinite=*/true, nullptr);
}

io::Status
StepExecutor::runObserving(int begin, int end,
                           const std::function<io::Status(int)> &observe,
                           backend::Stream stream) {
  return runLaunches(begin, end, stream, /*checkFinite=*/false, &observe);
}

io::Status
StepExecutor::runLaunches(int begin, int end, backend::Stream stream,
                          bool checkFinite,
                          const std::function<io::Status(int)> *observe) {
  if (io::Status ready = checkRange(begin, end); !ready)
    return ready;
  std::vector<backend::Buffer> arguments;
  std::vector<backend::Scalar> scalars;
  for (int l = begin; l < end; ++l) {
    const Launch &launch = schedule_.launches[l];
    if (io::Status resolved = resolve(l, arguments, scalars); !resolved)
      return resolved;
    io::Status launched = backend_.launch(
        kernels_[l], launch.config,
        backend::ArrayView<backend::Buffer>(arguments),
        backend::ArrayView<backend::Scalar>(scalars), stream);
    if (!launched)
      return io::Error(fmt::format("launch {} ({}, {}): {}", l, launch.kernel,
                                   launch.origin, launched.error().message()));
    if (observe) {
      if (io::Status done = backend_.synchronize(stream); !done)
        return done.error();
      if (io::Status observed = (*observe)(l); !observed)
        return observed;
    }
    if (!checkFinite)
      continue;
    // A kernel without a signature (a GPU function) has every f32 buffer it
    // touches checked: its inputs were checked where they were written (or
    // are parameters, finite before the update), so the first launch
    // whose buffers hold a non-finite value is the one that made it.
    const backend::KernelSignature *signature = backend_.signature(kernels_[l]);
    for (size_t a = 0; a < launch.buffers.size(); ++a) {
      const BufferDesc &desc = schedule_.buffers[launch.buffers[a]];
      if (desc.type != backend::ElementType::F32)
        continue;
      // Variadic signatures repeat their last buffer parameter.
      if (signature &&
          signature->buffers[std::min(a, signature->buffers.size() - 1)]
                  .access == backend::BufferAccess::In)
        continue;
      std::vector<float> values(desc.numElements());
      if (io::Status copied =
              backend_.copyToHost(values.data(), arguments[a],
                                  values.size() * sizeof(float), stream);
          !copied)
        return copied.error();
      if (io::Status done = backend_.synchronize(stream); !done)
        return done.error();
      for (size_t i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i]))
          return io::Error(fmt::format("non-finite value ({}) at element {} of "
                                       "'{}', written by launch {} ({}, {})",
                                       values[i], i, desc.name, l,
                                       launch.kernel, launch.origin));
    }
  }
  return io::success();
}

io::Expected<backend::Buffer>
StepExecutor::buffer(std::string_view name) const {
  int index = schedule_.findBuffer(name);
  if (index < 0 || !bound_[index])
    return io::Error("no bound buffer '" + std::string(name) + "'");
  return buffers_[index];
}
