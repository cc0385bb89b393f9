//===- GpuStepKernels.h - The step's other kernels on GPU chips -*- C++ -*-===//
//
// Everything of a training step that is not a GEMM, as the compiler's own
// GPU code for every chip (sm_90a and gfx950 alike: gpu/arith/memref/scf
// ops only, no vendor library and no device math library, so a bundle runs
// with nothing but the driver):
//
//   - elementwise tetra.kernels (chains of add, sub, mul, scale, silu): one
//     thread per element (lowerElementwiseKernel);
//   - the runtime's library kernels (runtime/kernels/README.md: embedding,
//     RMSNorm, RoPE, attention, cross-entropy, the elementwise family, the
//     global norm, clipping, gradient accumulation, AdamW), one GPU
//     function per kernel and shape (GpuLibraryBuilder). Each takes the
//     registry's arguments in the registry's order (KernelABI.h) — buffers
//     as device addresses, scalars as i64/f64 — with the shapes built in, so
//     a schedule launch keeps its arguments and gains a function and a grid.
//     A kernel that needs several passes (attention's and RMSNorm's
//     backward, cross-entropy's loss, the embedding's gradient: its tokens
//     listed by row first) becomes several launches; the variadic global
//     norm and clipping one launch for all their tensors.
//
// Each computes what the CPU kernel computes, in the same order wherever
// that costs nothing on a GPU (columns of the scatter-style sums are summed over rows in order,
// with no atomics): results are deterministic, and equal to the CPU's or
// within the rounding of a different summation tree (block reductions).
// Attention runs on the matrix units (AttentionKernelPlan.h) where its
// head_dim allows (a multiple of 16, at most 128), else a thread per query
// row (and per key row for dK, dV) runs the CPU's loops.
// exp is the CPU's fastExp (Cephes) and log a series in fp64, both in arith
// ops; RoPE's cos/sin come from the same function as the CPU's table
// (kernels::ropeCosSin), as constant tables in the module.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_GPUSTEPKERNELS_H
#define TETRA_LOWERING_CONVERSION_GPUSTEPKERNELS_H

#include "dialect/TetraOps.h"
#include "runtime/schedule/Schedule.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tetra::conversion {

class AttentionMatrixTile;

/// Threads per block of the one-thread-per-element launches.
constexpr int64_t kElementwiseThreads = 256;

/// Builds the gpu.module of an elementwise tetra.kernel (no scaled matmul)
/// at the end of `module`: one function named as the kernel, its arguments
/// "input:N" then "result:N", one thread per element. An error at the
/// kernel's op for anything else (a non-f32 tensor, an op it cannot run).
mlir::LogicalResult lowerElementwiseKernel(KernelOp kernel,
                                           mlir::ModuleOp module);

/// The GPU functions of a schedule's library launches, in one gpu.module
/// (`tetra_library`) at the end of a module.
class GpuLibraryBuilder {
public:
  /// `chip` ("sm_90a", "gfx950") picks the matrix instruction of the tiled
  /// attention (AttentionKernelPlan.h).
  GpuLibraryBuilder(mlir::ModuleOp module, llvm::StringRef chip);
  ~GpuLibraryBuilder();

  /// How expand() writes a launch's result.
  enum class Result {
    F32, ///< As the library kernel does.
    /// The buffer at bf16ResultPosition(launch) takes its result as BF16
    /// codes, nearest even (i32 words of two, the low half first:
    /// QuantizationEmitter::bf16Pair) — what a BF16 operand's rounding
    /// prologue makes of the fp32 result, bit for bit.
    BF16,
    /// BF16 codes as above, in the memory of the input they are computed
    /// from, which dies at this launch (cross_entropy.backward only: its
    /// gradient over its logits). The launches then each declare the pair
    /// (codes, logits) in place, and together read every element before
    /// any of them writes over it.
    BF16OverInput,
  };

  /// A cross-entropy forward's logits whose writer also wrote their loss
  /// parts (a GEMM's kLossPartsSuffix variant): the schedule buffer that
  /// holds them and the slabs of each row.
  struct LossParts {
    int buffer = -1;
    int64_t slabs = 0;
  };

  /// Appends to `launches` the GPU launches that do what `launch` (a
  /// library kernel's launch of `schedule`) does, building their functions
  /// once per shape; scratch buffers they need are appended to the
  /// schedule's buffers as temporaries. An error (at `loc`) for a kernel
  /// with no GPU implementation, or none writing `result` so. With
  /// `parts` (cross_entropy.forward only), the row's log-sum-exps are
  /// reduced from the parts and the logits read at the targets alone.
  mlir::LogicalResult expand(const schedule::Launch &launch,
                             schedule::Schedule &schedule, mlir::Location loc,
                             std::vector<schedule::Launch> &launches,
                             Result result = Result::F32,
                             std::optional<LossParts> parts = std::nullopt);
  /// The position among `launch`'s buffers of the result expand() can
  /// write as BF16 codes, for the kernels that can: cross_entropy.backward
  /// (the logits' gradient), rmsnorm.forward (its output, not rstd),
  /// rope.backward. Each then expands to one launch as Result::BF16.
  static std::optional<size_t> bf16ResultPosition(const schedule::Launch &launch);

private:
  mlir::gpu::GPUModuleOp library_;
  std::unique_ptr<AttentionMatrixTile> attentionTile_;
  /// Functions built so far, by kernel and shape.
  std::map<std::string, std::string> built_;
  std::map<std::string, int> perKernel_;
};

} // namespace tetra::conversion

#endif // TETRA_LOWERING_CONVERSION_GPUSTEPKERNELS_H
