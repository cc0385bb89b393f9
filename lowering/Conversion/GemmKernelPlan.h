//===- GemmKernelPlan.h - One plan for every GPU target's GEMMs -*- C++ -*-===//
//
// The kernel plan both GPU conversions implement (TetraToNVVM, TetraToAMDGPU):
// what a GEMM tetra.kernel must look like to be compiled (two block-scaled
// operands, each rotated or not, quantized along K), its gpu.module with
// what it computes (`tetra.gemm`), and the two operand launches — rotation
// and quantization, one thread per segment along K, through the shared
// QuantizationEmitter — which are the same on every chip. A target adds
// only its GEMM launch (the innermost matrix instruction) and its MMA tile.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_GEMMKERNELPLAN_H
#define TETRA_LOWERING_CONVERSION_GEMMKERNELPLAN_H

#include "dialect/TetraOps.h"
#include "lowering/Conversion/QuantizationEmitter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <string>

namespace tetra::conversion {

/// One operand of the GEMM as the plan implements it: the kernel input it
/// comes from, its rotation and its quantization along `axis`.
struct OperandPlan {
  int input = -1; ///< Index among the kernel's inputs.
  mlir::RankedTensorType type;
  int64_t axis = 0;
  RotationAttr rotation;
  QuantizeOp quantize;
  OperandQuantAttr quant;
};

/// The (linear.role) name of a kernel, for messages and manifests.
std::string gemmName(KernelOp kernel);

/// The flat memref type of `count` elements of `element`.
mlir::MemRefType flat(int64_t count, mlir::Type element);

/// One GEMM kernel's lowering for a GPU chip: the shared plan, and a
/// target's GEMM launch in buildGemm().
class GemmKernelLowering {
public:
  GemmKernelLowering(KernelOp kernel, llvm::StringRef chip,
                     std::array<int64_t, 3> tile)
      : kernel(kernel), chip(chip), tile(tile) {}
  virtual ~GemmKernelLowering() = default;

  /// Checks the kernel and builds its gpu.module at the end of `module`
  /// (nothing for a kernel without a scaled matmul, which the CPU runs).
  /// Failure: an error naming the GEMM and the chip was emitted.
  mlir::LogicalResult lower(mlir::ModuleOp module);

protected:
  /// The target's GEMM launch, `NAME__gemm`, into the gpu.module.
  virtual void buildGemm(mlir::OpBuilder &moduleBuilder) = 0;

  mlir::InFlightDiagnostic refuse(const llvm::Twine &why);
  /// `NAME__gemm(lhs codes, lhs scales, rhs codes, rhs scales, result)`,
  /// the plan's GEMM launch, with its launch geometry; its body is empty.
  mlir::gpu::GPUFuncOp createGemmFunction(mlir::OpBuilder &moduleBuilder,
                                          llvm::ArrayRef<int64_t> grid,
                                          llvm::ArrayRef<int64_t> block);
  /// Where A(row, kk) and B(kk, col) lie among the operands' codes, and
  /// the scales of their K-chunk `chunk`, in the operands' own layouts (as
  /// every role's transposes store them): index values.
  mlir::Value lhsIndex(QuantizationEmitter &e, mlir::Value row, mlir::Value kk);
  mlir::Value rhsIndex(QuantizationEmitter &e, mlir::Value kk, mlir::Value col);
  mlir::Value lhsScaleIndex(QuantizationEmitter &e, mlir::Value row,
                            mlir::Value chunk);
  mlir::Value rhsScaleIndex(QuantizationEmitter &e, mlir::Value chunk,
                            mlir::Value col);
  void setLaunch(mlir::gpu::GPUFuncOp func, llvm::ArrayRef<int64_t> grid,
                 llvm::ArrayRef<int64_t> block,
                 llvm::ArrayRef<std::string> arguments);

  KernelOp kernel;
  llvm::StringRef chip;
  std::array<int64_t, 3> tile; ///< The MMA tile M x N x K the shape must fit.
  ScaledMatmulOp matmul;
  OperandPlan lhs, rhs;
  int64_t m = 0, n = 0, k = 0;

private:
  mlir::FailureOr<OperandPlan> planOperand(mlir::Value codes,
                                           mlir::Value scales,
                                           OperandQuantAttr quant,
                                           llvm::StringRef which);
  void buildQuantize(mlir::OpBuilder &moduleBuilder, OperandPlan operand,
                     llvm::StringRef suffix);
  /// What the kernel computes, for the bundle's manifest and its checks.
  mlir::DictionaryAttr describe(mlir::Builder &b);
  mlir::DictionaryAttr describeOperand(mlir::Builder &b, OperandPlan operand);
};

/// A GPU conversion's pass body: lowers every GEMM kernel of `module`
/// with `lowerKernel`, then keeps only the gpu.modules (the host side and
/// the kernels the CPU runs are not this conversion's output).
mlir::LogicalResult
lowerGemmKernels(mlir::ModuleOp module,
                 llvm::function_ref<mlir::LogicalResult(KernelOp)> lowerKernel);

} // namespace tetra::conversion

#endif // TETRA_LOWERING_CONVERSION_GEMMKERNELPLAN_H
