//===- StepBundle.h - A whole training step, compiled for a GPU -*- C++ -*-===//
//
// What `tetra compile RUN --target=T -o DIR` writes and `tetra-run DIR`
// trains with nothing but the runtime and a GPU driver (docs/tools/run.md):
//
//   manifest.json   format, runtime version, target, model, policy, run, the
//                   code objects (name, file, format), and the files below
//   schedule.json   the step's GPU launches (runtime/schedule/Schedule.h):
//                   every kernel, its arguments and grid, the memory plan
//   run_plan.json   parameters, data, steps, learning rate, seed, eval,
//                   checkpoints (runtime/trainer/RunPlan.h)
//   reference.json  the same step as the CPU runs it, and (the manifest's
//                   "first_launch") where each of its launches starts among
//                   schedule.json's: `tetra-run --check-kernels` checks each
//                   GPU kernel against the CPU's with it
//   CODE.ptx|.hsaco one code object per GPU module (CODE.s: gfx950 assembly)
//   sources/        the model, policy and run files it was compiled from
//   checksum        "fnv1a64 HEX" over every file above but sources/
//
// Opening a bundle checks everything before any of it runs: the checksum
// (a corrupt or edited bundle), the runtime version (a bundle of another
// Tetra), the target (a bundle for another chip, checked by the caller
// against its device), the schedule and the run plan.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BUNDLE_STEPBUNDLE_H
#define TETRA_RUNTIME_BUNDLE_STEPBUNDLE_H

#include "runtime/backend/Backend.h"
#include "runtime/io/Json.h"
#include "runtime/schedule/Schedule.h"
#include "runtime/trainer/RunPlan.h"

#include <string>
#include <vector>

namespace tetra::bundle {

/// The runtime's version: a step bundle runs only on the runtime that
/// matches the compiler that wrote it.
constexpr const char *kRuntimeVersion = "0.3.0";

struct StepCode {
  std::string name, file;
  backend::CodeObjectFormat format = backend::CodeObjectFormat::Ptx;
  std::string bytes; ///< Read by open().
};

struct StepBundle {
  std::string directory;
  /// The manifest as read (a gfx950 bundle's code entries carry each
  /// function's resources and kernel-argument layout).
  io::JsonValue manifest;
  std::string target, model, policy, run;
  schedule::Schedule schedule;
  schedule::Schedule reference;
  std::vector<int> firstLaunch;
  trainer::RunPlan plan;
  std::vector<StepCode> code;

  /// Reads and checks DIR; an error names the file and what is wrong.
  static io::Expected<StepBundle> open(const std::string &directory);
};

/// The GPU a step for `target` runs on: "sm_90a" a CUDA device of compute
/// capability 9.0, "gfx950" a HIP device; `ordinal` picks among several.
/// An error (never a crash) when the driver or the device is missing or of
/// another kind.
io::Expected<std::unique_ptr<backend::Backend>> openDevice(const std::string &target,
                                                           int ordinal = 0);

/// Loads every code object into `device`, in order.
io::Expected<std::vector<backend::Module>>
loadCode(backend::Backend &device, const std::vector<StepCode> &code);

/// FNV-1a (64 bits) of each file's name and bytes, in order, as 16 hex
/// digits: the checksum a step bundle stores and checks.
io::Expected<std::string> checksumOf(const std::string &directory,
                                     const std::vector<std::string> &files);

} // namespace tetra::bundle

#endif // TETRA_RUNTIME_BUNDLE_STEPBUNDLE_H
