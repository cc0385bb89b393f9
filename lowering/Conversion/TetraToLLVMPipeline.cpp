//===- TetraToLLVMPipeline.cpp - Kernels down to the LLVM dialect ---------===//
//
// buildTetraToLLVMPipeline(): --convert-tetra-to-cpu, then the upstream
// conversions that take its scf/arith/math/memref loops to the LLVM dialect.
// Includes each conversion's own header, not Conversion/Passes.h, to keep
// this translation unit small.
//
//===----------------------------------------------------------------------===//

#include "lowering/Conversion/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void tetra::buildTetraToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createConvertTetraToCPU());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createSCFToControlFlowPass());
  // memref.collapse_shape becomes reinterpret_cast plus affine.apply.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void tetra::registerTetraConversionPipelines() {
  registerTetraConversionPasses();
  PassPipelineRegistration<>(
      "tetra-to-llvm",
      "Generate CPU code for the module's kernels, down to the LLVM dialect",
      [](OpPassManager &pm) { buildTetraToLLVMPipeline(pm); });
}
