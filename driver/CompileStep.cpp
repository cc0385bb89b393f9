//===- CompileStep.cpp - A model and a policy into a runnable step --------===//

#include "driver/CompileStep.h"

#include "driver/Pipeline.h"
#include "frontend/MLIRGen.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace tetra;

FailureOr<CompiledStep> tetra::compileTrainingStep(
    MLIRContext &context, const llvm::SourceMgr &sourceMgr,
    const frontend::ModelGraph &model, const frontend::ResolvedPolicy *policy,
    const CompileOptions &options) {
  frontend::EmitOptions emit;
  emit.dimensions = options.dimensions;
  OwningOpRef<ModuleOp> module =
      frontend::emitModule(context, sourceMgr, model, policy, emit);
  if (!module)
    return failure();

  PassManager pm(&context);
  PipelineOptions pipeline;
  pipeline.beta1 = options.beta1;
  pipeline.beta2 = options.beta2;
  pipeline.eps = options.eps;
  pipeline.weightDecay = options.weightDecay;
  pipeline.clip = options.clip;
  buildPipeline(pm, pipeline, PipelineStage::Kernels);
  if (failed(pm.run(*module)))
    return failure();

  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  FailureOr<schedule::Schedule> plan = buildSchedule(step, options.schedule);
  if (failed(plan))
    return failure();
  llvm::Expected<std::unique_ptr<cpu::CompiledKernelTable>> kernels =
      cpu::CompiledKernelTable::compile(*module, options.jit);
  if (!kernels)
    return emitError(module->getLoc()) << "compiling the CPU kernels: "
                                       << llvm::toString(kernels.takeError());
  return CompiledStep{std::move(*plan), std::move(*kernels)};
}
