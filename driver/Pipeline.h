//===- Pipeline.h - The one pass pipeline, stage by stage -------*- C++ -*-===//
//
// Tetra's compiler pipeline, assembled in one place for everyone who runs it
// (the compile API, `tetra emit`, `tetra compile`), stopped after any stage:
//
//   train-step  --tetra-training-step        @train_step from @loss
//   quantized   --tetra-materialize-quantization
//   kernels     --tetra-form-kernels
//   code        the target's conversion: cpu: the tetra-to-llvm pipeline
//
// The target is a pipeline option, as a chip is a pass option.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_PIPELINE_H
#define TETRA_DRIVER_PIPELINE_H

#include "driver/Target.h"

#include <optional>
#include <string_view>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace tetra {

enum class PipelineStage { TrainingStep, Quantized, Kernels, Code };

/// "train-step", "quantized", "kernels", "code".
const char *stageName(PipelineStage stage);

struct PipelineOptions {
  Target target = Target::Cpu;
  /// GPU targets: the largest side of a GEMM block's result tile.
  int64_t blockTile = 128;
  /// The training step's AdamW and clipping (the run file's optimizer).
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double clip = 1.0; ///< 0 disables clipping.
};

/// Adds the passes from the first stage `from` to the stage `until`, both
/// included, to `pm`. A module that already holds @train_step starts from
/// PipelineStage::Quantized.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
                   PipelineStage until,
                   PipelineStage from = PipelineStage::TrainingStep);

} // namespace tetra

#endif // TETRA_DRIVER_PIPELINE_H
