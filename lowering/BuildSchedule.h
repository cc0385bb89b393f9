//===- BuildSchedule.h - A func of tetra ops into a schedule ----*- C++ -*-===//
//
// The last compiler step for a target whose kernels are a library plus
// compiled code: every op of a straight-line function becomes one launch of
// a kernel named as the runtime registers it (runtime/kernels/*.h document
// each calling convention), every tensor value a buffer — arguments and
// results bound by name, the rest temporaries in one arena laid out by the
// memory plan. The runtime runs the result without a compiler.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_BUILDSCHEDULE_H
#define TETRA_LOWERING_BUILDSCHEDULE_H

#include "runtime/schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

namespace tetra {

struct ScheduleOptions {
  /// Keep every parameter's (clipped) gradient as an output buffer named
  /// "grad.<parameter>", so that a caller can read it after the step.
  bool exposeGradients = false;
  /// Sum every parameter's gradient over micro-batches: the gradient part of
  /// the step ends with one accumulate_gradient launch per parameter into a
  /// bound Gradient buffer "grad.<parameter>" (scaled by the run-time scalar
  /// "grad_scale", overwriting for "micro_batch" 0), and the norm, clipping
  /// and AdamW read those. Without it (one micro-batch per step) gradients
  /// stay temporaries.
  bool accumulateGradients = false;
  /// What the backward recomputes instead of keeping it from the forward
  /// (a run's `recompute`; schedule::rematerialize).
  schedule::Recompute recompute = schedule::Recompute::Cheap;
};

/// The schedule of `function`: all shapes must be static. Arguments with
/// `tetra.param` / `tetra.input` attributes are bound buffers under those
/// names; results are outputs named `result<N>` (or by a `tetra.output`
/// result attribute). Ops without a kernel are reported at their location.
/// The schedule's phases mark where the loss, the gradients and the global
/// norm are computed: a training step's optimizer ops (global norm,
/// clipping, AdamW) must come after everything else.
mlir::FailureOr<schedule::Schedule>
buildSchedule(mlir::func::FuncOp function, const ScheduleOptions &options = {});

} // namespace tetra

#endif // TETRA_LOWERING_BUILDSCHEDULE_H
