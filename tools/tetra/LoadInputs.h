//===- LoadInputs.h - A model, a policy and a run from the command line ---===//
//
// What `tetra emit` and `tetra compile` take: one model, at most one policy
// and at most one run file, in any order (recognized by their first
// keyword); a run names the model and policy itself and fixes batch =
// micro_batch, seq = seq_len. The policy is checked as `tetra check` checks
// it (Wgrad's tokens once batch and seq are known), so that the IR verifier
// never has to.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_TOOLS_TETRA_LOADINPUTS_H
#define TETRA_TOOLS_TETRA_LOADINPUTS_H

#include "frontend/Frontend.h"
#include "frontend/MLIRGen.h"
#include "driver/CompileStep.h"
#include "runtime/backend/CpuBackend.h"
#include "runtime/trainer/RunPlan.h"

#include <optional>
#include <string>
#include <vector>

namespace tetra::driver {

struct LoadedInputs {
  frontend::ModelGraph model;
  std::optional<frontend::ResolvedPolicy> policy;
  std::optional<frontend::RunConfig> run;
  frontend::EmitOptions emit; ///< With the run's batch and seq.
};

/// Loads `files`, the run file's settings changed by `overrides` (--set
/// KEY=VALUE: frontend::loadRun). The command line's own errors read
/// "COMMAND: ..." (and "COMMAND: NEEDSMODEL needs a model file ...").
/// Every error is reported on `diags`.
std::optional<LoadedInputs>
loadInputs(frontend::DiagnosticEngine &diags,
           const std::vector<std::string> &files, frontend::EmitOptions emit,
           const std::string &command, const std::string &needsModel,
           const std::vector<std::string> &overrides = {});

/// The rows of the model's embedding table (its vocabulary), or 0.
int64_t embeddingRows(const frontend::ModelGraph &model);

/// What the runtime needs of `run` (RunPlan.h) for `model` under `policy`,
/// training `steps` steps: the one translation of a run file that
/// `tetra train` and a step bundle share.
trainer::RunPlan runPlanOf(const frontend::RunConfig &run,
                           const frontend::ModelGraph &model,
                           const frontend::ResolvedPolicy &policy,
                           int64_t steps);

/// A training step compiled for this CPU, loaded into a CPU backend: the
/// runtime's library and the step's JIT-compiled kernels.
struct CpuStep {
  std::unique_ptr<backend::CpuBackend> backend;
  std::unique_ptr<cpu::CompiledKernelTable> kernels;
  schedule::Schedule schedule;
  std::vector<backend::Module> modules;
};
io::Expected<CpuStep> loadCpuStep(CompiledStep compiled);

} // namespace tetra::driver

#endif // TETRA_TOOLS_TETRA_LOADINPUTS_H
