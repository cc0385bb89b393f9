//===- Executor.cpp - Runs a schedule on a backend ------------------------===//

#include "runtime/schedule/Executor.h"

#include <algorithm>
#include <cmath>

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
    return io::Error("schedule '" + plan.name + "': cannot allocate its " +
                     std::to_string(plan.arenaBytes) +
                     "-byte arena: " + arena.error().message());
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
    return io::Error("buffer '" + desc.name + "' needs " +
                     std::to_string(desc.bytes()) + " bytes, got " +
                     std::to_string(buffer.size()));
  buffers_[index] = buffer;
  bound_[index] = true;
  return io::success();
}

io::Status StepExecutor::run(int begin, int end, backend::Stream stream) {
  return runLaunches(begin, end, stream, /*checkFinite=*/false, nullptr);
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
  if (begin < 0 || end > static_cast<int>(schedule_.launches.size()) ||
      begin > end)
    return io::Error("schedule '" + schedule_.name + "': no launches [" +
                     std::to_string(begin) + ", " + std::to_string(end) + ")");
  for (size_t i = 0; i < bound_.size(); ++i)
    if (!bound_[i])
      return io::Error("schedule '" + schedule_.name + "': buffer '" +
                       schedule_.buffers[i].name + "' (" +
                       std::string(bufferRoleName(schedule_.buffers[i].role)) +
                       ") is not bound");
  std::vector<backend::Buffer> arguments;
  std::vector<backend::Scalar> scalars;
  for (int l = begin; l < end; ++l) {
    const Launch &launch = schedule_.launches[l];
    arguments.clear();
    for (int buffer : launch.buffers)
      arguments.push_back(buffers_[buffer]);
    scalars = launch.scalars;
    for (const auto &[position, name] : launch.boundScalars) {
      auto value = scalars_.find(name);
      if (value == scalars_.end())
        return io::Error("launch " + std::to_string(l) + " (" + launch.kernel +
                         ", " + launch.origin + "): scalar '" + name +
                         "' is not set");
      scalars[position] = value->second;
    }
    io::Status launched = backend_.launch(
        kernels_[l], launch.config,
        backend::ArrayView<backend::Buffer>(arguments),
        backend::ArrayView<backend::Scalar>(scalars), stream);
    if (!launched)
      return io::Error("launch " + std::to_string(l) + " (" + launch.kernel +
                       ", " + launch.origin +
                       "): " + launched.error().message());
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
          return io::Error("non-finite value (" + std::to_string(values[i]) +
                           ") at element " + std::to_string(i) + " of '" +
                           desc.name + "', written by launch " +
                           std::to_string(l) + " (" + launch.kernel + ", " +
                           launch.origin + ")");
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
