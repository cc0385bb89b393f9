//===- Executor.h - Runs a schedule on a backend ----------------*- C++ -*-===//
//
// The runtime half of a compiled step: resolves every launch's kernel once,
// allocates the arena the memory plan sized, takes the caller's bound buffers
// (parameters, moments, inputs, outputs) by name, and launches the list in
// order. No compiler inside: a schedule and its code objects are enough.
//
//   StepExecutor step = *StepExecutor::create(backend, schedule, {library});
//   step.bind("embed", embedBuffer);  ...
//   step.run();
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_SCHEDULE_EXECUTOR_H
#define TETRA_RUNTIME_SCHEDULE_EXECUTOR_H

#include "runtime/backend/Backend.h"
#include "runtime/schedule/Schedule.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::schedule {

class StepExecutor {
public:
  /// Checks the schedule, finds each launch's kernel in `modules` (the first
  /// module that has it), checks the arguments against the kernel's
  /// signature where the backend knows it, and allocates the arena.
  static io::Expected<std::unique_ptr<StepExecutor>>
  create(backend::Backend &backend, Schedule schedule,
         const std::vector<backend::Module> &modules);
  ~StepExecutor();
  StepExecutor(const StepExecutor &) = delete;
  StepExecutor &operator=(const StepExecutor &) = delete;

  /// Binds the bound buffer `name` to `buffer` (at least its size).
  io::Status bind(std::string_view name, backend::Buffer buffer);
  /// Sets the run-time scalar `name` ("step", "lr") that launches read.
  void setScalar(const std::string &name, backend::Scalar value);
  /// Launches every kernel in order on `stream`; an unbound buffer or a
  /// failing launch is an error that names the launch and its origin.
  io::Status run(backend::Stream stream = {});
  /// Like run(), but after each launch reads back every f32 buffer the
  /// kernel writes (out and inout, per its signature) and stops at the first
  /// NaN or Inf: the error names the buffer, the launch and its origin —
  /// which linear and which GEMM role ("layers.3.mlp.down.wgrad at
  /// model.tetra:41:7"). Slow; for finding where a step went non-finite.
  io::Status runCheckingFinite(backend::Stream stream = {});

  const Schedule &schedule() const { return schedule_; }
  /// The device buffer of `name`: a bound one, or a temporary's arena slice.
  io::Expected<backend::Buffer> buffer(std::string_view name) const;

private:
  io::Status runLaunches(backend::Stream stream, bool checkFinite);

  StepExecutor(backend::Backend &backend, Schedule schedule)
      : backend_(backend), schedule_(std::move(schedule)) {}

  backend::Backend &backend_;
  Schedule schedule_;
  backend::Buffer arena_;
  std::vector<backend::Buffer> buffers_; ///< Per schedule buffer.
  std::vector<bool> bound_;
  std::vector<backend::Kernel> kernels_;   ///< Per launch.
  std::vector<backend::Buffer> constants_; ///< Owned.
  std::map<std::string, backend::Scalar> scalars_;
};

} // namespace tetra::schedule

#endif // TETRA_RUNTIME_SCHEDULE_EXECUTOR_H
