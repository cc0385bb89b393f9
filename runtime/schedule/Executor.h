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

#include <functional>
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
  /// Launches [begin, end) of the schedule, in order, on `stream` (the
  /// phases of Schedule::phases are such ranges); an unbound buffer or a
  /// failing launch is an error that names the launch and its origin. The
  /// first run of a range records it (Backend::recordLaunches: a CUDA
  /// graph) and later runs replay it, passing on the run-time scalars that
  /// changed: one submission, not one per launch.
  io::Status run(int begin, int end, backend::Stream stream = {});
  /// Every launch.
  io::Status run(backend::Stream stream = {}) {
    return run(0, static_cast<int>(schedule_.launches.size()), stream);
  }
  /// Like run(), but after each launch reads back every f32 buffer the
  /// kernel writes (out and inout, per its signature; every f32 buffer it
  /// touches where the backend knows no signature, as for GPU functions)
  /// and stops at the first
  /// NaN or Inf: the error names the buffer, the launch and its origin —
  /// which linear and which GEMM role ("layers.3.mlp.down.wgrad at
  /// model.tetra:41:7"). Slow; for finding where a step went non-finite.
  io::Status runCheckingFinite(int begin, int end, backend::Stream stream = {});
  io::Status runCheckingFinite(backend::Stream stream = {}) {
    return runCheckingFinite(0, static_cast<int>(schedule_.launches.size()),
                             stream);
  }
  /// Like run(begin, end), calling `observe(launch)` after each launch has
  /// finished, while its operands are still in place (temporaries may be
  /// overwritten by later launches): for measurements such as the
  /// quantization error of a GEMM's operands.
  io::Status runObserving(int begin, int end,
                          const std::function<io::Status(int)> &observe,
                          backend::Stream stream = {});
  /// The buffer behind launch `launch`'s argument `argument`.
  backend::Buffer argument(int launch, int argument) const {
    return buffers_[schedule_.launches[launch].buffers[argument]];
  }

  /// The device buffer of schedule buffer `index` (bound or a temporary).
  backend::Buffer bufferAt(int index) const { return buffers_[index]; }

  const Schedule &schedule() const { return schedule_; }
  /// The device buffer of `name`: a bound one, or a temporary's arena slice.
  io::Expected<backend::Buffer> buffer(std::string_view name) const;

private:
  io::Status runLaunches(int begin, int end, backend::Stream stream,
                         bool checkFinite,
                         const std::function<io::Status(int)> *observe);

  StepExecutor(backend::Backend &backend, Schedule schedule)
      : backend_(backend), schedule_(std::move(schedule)) {}
  /// A valid range with every buffer bound, else the error.
  io::Status checkRange(int begin, int end) const;
  /// Launch `l`'s buffers and scalars, run-time scalars filled in.
  /// The value set for launch l's bound scalar `name`; an error naming
  /// the launch where none is.
  io::Expected<backend::Scalar> boundValue(int l,
                                           const std::string &name) const;
  io::Status resolve(int l, std::vector<backend::Buffer> &arguments,
                     std::vector<backend::Scalar> &scalars) const;
  /// Releases every recorded range (before a rebinding or the end).
  void forgetRecordings();
  /// A recorded range and the scalars each launch last ran with.
  struct Recording {
    backend::LaunchList list;
    std::vector<std::vector<backend::Scalar>> scalars;
  };

  backend::Backend &backend_;
  Schedule schedule_;
  backend::Buffer arena_;
  std::vector<backend::Buffer> buffers_; ///< Per schedule buffer.
  std::vector<bool> bound_;
  std::vector<backend::Kernel> kernels_;   ///< Per launch.
  std::vector<backend::Buffer> constants_; ///< Owned.
  std::map<std::string, backend::Scalar> scalars_;
  std::map<std::pair<int, int>, Recording> recorded_;
};

} // namespace tetra::schedule

#endif // TETRA_RUNTIME_SCHEDULE_EXECUTOR_H
