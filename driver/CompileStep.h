//===- CompileStep.h - A model and a policy into a runnable step -*- C++ -*-===//
//
// The compiler's API for whoever runs a training step (the trainer, a test,
// another program): an elaborated model and its resolved policy in, a
// schedule and its compiled CPU kernels out — everything the runtime's
// StepExecutor needs. Errors are reported through the MLIR context's
// diagnostic handler, located in the user's files.
//
//   tetra::CompileOptions options;
//   options.dimensions = {{"batch", 8}, {"seq", 128}};
//   FailureOr<CompiledStep> step =
//       compileTrainingStep(context, sourceMgr, model, &policy, options);
//   auto executor = schedule::StepExecutor::create(
//       backend, step->schedule, {libraryModule, compiledModule});
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_COMPILESTEP_H
#define TETRA_DRIVER_COMPILESTEP_H

#include "frontend/ModelGraph.h"
#include "frontend/Policy.h"
#include "frontend/Run.h"
#include "lowering/BuildSchedule.h"
#include "driver/CpuKernelTable.h"
#include "driver/GpuCode.h"
#include "driver/Target.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include <memory>

namespace tetra {

struct CompileOptions {
  /// Sizes of `batch` and `seq`: a schedule needs every size.
  std::map<std::string, int64_t> dimensions;
  /// AdamW and clipping (the run file's optimizer settings).
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double clip = 1.0; ///< 0 disables clipping.
  ScheduleOptions schedule;
  cpu::JitOptions jit;
};

/// What a run file sets of the step: batch = micro_batch, seq = seq_len,
/// AdamW's settings, clipping, and whether micro-batches accumulate.
CompileOptions compileOptionsFor(const frontend::RunConfig &run);

struct CompiledStep {
  /// @train_step as launches over bound buffers and one arena. Bound
  /// buffers: every parameter by name, "m.<name>", "v.<name>", "tokens",
  /// "targets", "loss", "grad_norm" (and "grad.<name>" when exposed);
  /// run-time scalars "step" (from 1), "lr", "seed".
  schedule::Schedule schedule;
  /// The JIT-compiled kernels the schedule launches beside the library's.
  std::unique_ptr<cpu::CompiledKernelTable> kernels;
};

/// Emits `model` under `policy` (null: f32 everywhere), builds the training
/// step, materializes its quantization, forms kernels, JIT-compiles them for
/// the CPU and schedules the step.
mlir::FailureOr<CompiledStep> compileTrainingStep(
    mlir::MLIRContext &context, const llvm::SourceMgr &sourceMgr,
    const frontend::ModelGraph &model, const frontend::ResolvedPolicy *policy,
    const CompileOptions &options);

/// The training step compiled for a GPU target: the schedule's launches
/// are GPU launches (each with its grid) of the functions in `code`, one code
/// object per gpu.module — a GEMM kernel's prologue and GEMM launches, an
/// elementwise kernel's launch, the library's functions (`tetra_library`).
/// Scratch buffers (quantized codes, scales, partial sums) are temporaries
/// of the arena.
struct CompiledGpuStep {
  schedule::Schedule schedule;
  std::vector<GpuKernelCode> code;
  /// The same step as the CPU runs it (library kernels by their registered
  /// names; its buffers are the first of `schedule`'s), and where each of
  /// its launches starts among `schedule`'s launches (one more entry: the
  /// end): what checks each GPU kernel against the CPU's.
  schedule::Schedule reference;
  std::vector<int> firstLaunch;
};

/// compileTrainingStep for `target` (sm_90a or gfx950): the same step, its
/// GEMMs from the shared GEMM plan, everything else from GpuStepKernels,
/// lowered to PTX or HSACO in process.
mlir::FailureOr<CompiledGpuStep> compileGpuTrainingStep(
    mlir::MLIRContext &context, const llvm::SourceMgr &sourceMgr,
    const frontend::ModelGraph &model, const frontend::ResolvedPolicy *policy,
    const CompileOptions &options, Target target, int64_t blockTile = 128);

} // namespace tetra

#endif // TETRA_DRIVER_COMPILESTEP_H
