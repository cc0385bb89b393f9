//===- tetra-opt.cpp - mlir-opt for the tetra dialect ---------------------===//
//
// Behaves like mlir-opt (every standard flag), with the tetra dialect, the
// upstream dialects Tetra's IR mixes with, and Tetra's passes registered.
//
//===----------------------------------------------------------------------===//

#include "dialect/TetraOps.h"
#include "lowering/Conversion/Passes.h"
#include "lowering/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<tetra::TetraDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::tensor::TensorDialect>();
  // What CPU code generation produces, so that its output parses back.
  registry.insert<mlir::scf::SCFDialect, mlir::memref::MemRefDialect,
                  mlir::math::MathDialect, mlir::cf::ControlFlowDialect,
                  mlir::LLVM::LLVMDialect>();
  mlir::registerTransformsPasses();
  tetra::registerTetraTransformsPasses();
  tetra::registerTetraConversionPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tetra optimizer driver\n", registry));
}
