//===- Passes.h - Tetra's target-independent transforms --------*- C++ -*-===//
//
// `--tetra-training-step` (TrainingStep.cpp), `--tetra-materialize-
// quantization` (MaterializeQuantization.cpp) and `--tetra-form-kernels`
// (FormKernels.cpp), declared in Passes.td: their create functions, option
// structs and registerTetraTransformsPasses().
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_TRANSFORMS_PASSES_H
#define TETRA_LOWERING_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace tetra {

#define GEN_PASS_DECL
#include "lowering/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/Transforms/Passes.h.inc"

} // namespace tetra

#endif // TETRA_LOWERING_TRANSFORMS_PASSES_H
