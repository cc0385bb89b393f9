//===- TetraTrainingOps.td - Gradients and the optimizer ----*- tablegen -*-===//
//
// The ops the training-step pass (lowering/TrainingStep.cpp) creates: the
// backward of each model op, the global gradient norm, clipping and AdamW.
// Included from TetraOps.td.
//
//===----------------------------------------------------------------------===//
