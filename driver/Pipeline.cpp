//===- Pipeline.cpp - The one pass pipeline, stage by stage ---------------===//

#include "driver/Pipeline.h"

#include "lowering/Conversion/Passes.h"
#include "lowering/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

using namespace tetra;

const char *tetra::stageName(PipelineStage stage) {
  switch (stage) {
  case PipelineStage::TrainingStep:
    return "train-step";
  case PipelineStage::Quantized:
    return "quantized";
  case PipelineStage::Kernels:
    return "kernels";
  case PipelineStage::Code:
    return "code";
  }
  return "?";
}

void tetra::buildPipeline(mlir::OpPassManager &pm,
                          const PipelineOptions &options, PipelineStage until,
                          PipelineStage from) {
  auto runs = [&](PipelineStage stage) {
    return static_cast<int>(from) <= static_cast<int>(stage) &&
           static_cast<int>(stage) <= static_cast<int>(until);
  };
  if (runs(PipelineStage::TrainingStep)) {
    TrainingStepOptions training;
    training.beta1 = options.beta1;
    training.beta2 = options.beta2;
    training.eps = options.eps;
    training.weightDecay = options.weightDecay;
    training.clip = options.clip;
    pm.addPass(createTrainingStep(training));
  }
  if (runs(PipelineStage::Quantized))
    pm.addPass(createMaterializeQuantization());
  if (runs(PipelineStage::Kernels))
    pm.addPass(createFormKernels());
  if (runs(PipelineStage::Code)) {
    switch (options.target) {
    case Target::Cpu:
      buildTetraToLLVMPipeline(pm);
      break;
    case Target::Sm90a: {
      ConvertTetraToNVVMOptions nvvm;
      nvvm.chip = targetName(options.target);
      nvvm.blockTile = options.blockTile;
      pm.addPass(createConvertTetraToNVVM(nvvm));
      break;
    }
    case Target::Gfx950: {
      ConvertTetraToAMDGPUOptions amdgpu;
      amdgpu.chip = targetName(options.target);
      amdgpu.blockTile = options.blockTile;
      pm.addPass(createConvertTetraToAMDGPU(amdgpu));
      break;
    }
    }
  }
}
