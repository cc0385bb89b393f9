//===- TrainingPasses.h - The training-step pass ----------------*- C++ -*-===//
//
// `--tetra-training-step` (TrainingPasses.td, TrainingStep.cpp):
// createTrainingStep(), TrainingStepOptions and registerTetraTrainingPasses().
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_TRAININGPASSES_H
#define TETRA_LOWERING_TRAININGPASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace tetra {

#define GEN_PASS_DECL
#include "lowering/TrainingPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/TrainingPasses.h.inc"

} // namespace tetra

#endif // TETRA_LOWERING_TRAININGPASSES_H
