//===- GemmKernelPlan.h - One plan for every GPU target's GEMMs -*- C++ -*-===//
//
// The kernel plan both GPU conversions implement (TetraToNVVM, TetraToAMDGPU),
// the same for every chip:
//
//   - what a GEMM tetra.kernel must look like to be compiled: two operands,
//     each rotated or not, then MX (E8M0 scales on blocks of 32), NVFP4
//     (E4M3 scales on blocks of 16 under an fp32 tensor scale) or BF16;
//   - the prologue: per operand, launches that rotate and quantize it along
//     K through the shared QuantizationEmitter (bit for bit what
//     runtime/numerics computes) into scratch buffers that hold every
//     operand K-major ([M or N][K] codes, [M or N][K / block] scales),
//     whatever its own layout — one thread per segment along K (the larger
//     of the quantization and rotation blocks), every loop unrolled so the
//     segment is loaded once and rotated and encoded in registers; NVFP4
//     first takes the rotated tensor's amax (a clear launch and an
//     atomic-max launch);
//   - the GEMM launch's tiling and memory movement (GemmTiling): a block
//     (workgroup) per blockM x blockN tile of the result (where a long K's
//     largest tiles leave the chip's multiprocessors idle — a Wgrad of a
//     small weight — smaller tiles, down to 64 x 64, or for BF16, whose
//     contract sums all of K in any order, the same tiles with K split
//     across 2 to 16 blocks, their partial tiles added in split order by
//     a second launch, NAME__sum), one warp (wave)
//     per 32 x 32 of it or the chip's issuing group (groupTile: sm_90a's
//     wgmma warpgroups); K in steps of stepK staged in shared memory (LDS):
//     each step's codes and scales are loaded from global memory into
//     registers two steps ahead, 16 bytes per load and per store, into
//     K-major rows of one of two staged buffers (padded, or swizzled as
//     sm_90a's wgmma reads them: StagedLayout): while the matrix
//     instructions read step s from one buffer, step s + 1 is stored into
//     the other and the loads of step s + 2 are in flight — one barrier a
//     step (stepBarrier: where the chip's can, it also ANDs whether every
//     scale code of the step is moderate, StagedStep::moderateScales).
//     Where a step needs no change on its way (bf16 codes, folded MX
//     codes) and the chip copies asynchronously (copiesStagedAsync:
//     sm_90a's cp.async), 16 bytes a copy go straight from global to
//     shared memory through kCopyStages buffers, all but one in flight
//     (all but two where the chip's matrix instructions on a step may
//     still run while the next step's are issued), the same one barrier a
//     step;
//   - where the chip says so (specializesWarps: sm_90a's BF16 wgmma on
//     tiles up to 128 wide), the GEMM launch is persistent and
//     warp-specialized instead (buildSpecializedGemm): a block a
//     multiprocessor walks the tiles, a producer warpgroup copies the steps
//     into the kCopyStages buffers, each guarded by a `full` and an `empty`
//     barrier, the other warpgroups compute with no block-wide barrier in
//     the K loop, and each tile's results leave straight from the
//     accumulators, two adjacent ones a store, while the producers fill
//     the buffers for the next tile (no barrier between the consumers);
//   - scale folding (foldsScales: sm_90a's MXFP4 x MXFP4): after each
//     operand's quantization, fold launches give every fiber along K its
//     reference code and a copy of its codes with the block scales folded
//     in (buildFold); a tile all of whose fibers fold multiplies those;
//   - the accumulation: K in chunks of G (the smaller scale block, or all
//     of K for BF16 x BF16); each chunk's sum is exact when both operands
//     are block-scaled (started from zero, scaled in fp32);
//   - exact sums (sumsExactly: MXFP4 x MXFP4, the contract's — every chip):
//     the fold launches also give every fiber its exact reference code
//     (numerics::fiberSumsExactly) and a copy of its codes as integers
//     (exactCodes); a result whose row and column both sum exactly is
//     their exact sum over K rounded once to fp32. A tile all of whose
//     fibers sum exactly takes only the exact pass; any other tile takes
//     the chunked one, storing the other results, then, where some pair
//     sums exactly, the exact pass for those.
//
// A target adds only its innermost matrix instruction (accumulateStep), the
// encoding of codes in the scratch buffers (scratchCodes), its staged layout
// and shared-memory limit, its issuing groups (blockThreads, groupTile), the
// fence and barrier around the staged stores, and its fragment layout
// (storeAccumulators).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_GEMMKERNELPLAN_H
#define TETRA_LOWERING_CONVERSION_GEMMKERNELPLAN_H

#include "dialect/TetraOps.h"
#include "lowering/Conversion/QuantizationEmitter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>

namespace tetra::conversion {

/// How an operand reaches the matrix instructions.
enum class OperandKind {
  MX,    ///< E2M1 / E4M3 / E5M2 codes, an E8M0 scale per 32 along K
  NVFP4, ///< E2M1 codes, an E4M3 scale per 16 along K, an fp32 tensor scale
  BF16,  ///< bf16 values (rounded to nearest even), no scales
};

/// One operand of the GEMM as the plan implements it: the kernel input it
/// comes from, its rotation and its quantization along `axis`.
struct OperandPlan {
  OperandKind kind = OperandKind::MX;
  int input = -1; ///< Index among the kernel's inputs.
  mlir::RankedTensorType type;
  int64_t axis = 0;
  RotationAttr rotation;
  OperandQuantAttr quant;
  mlir::Location loc;     ///< The quantizer's.
  uint32_t tensorId = 0;  ///< Its stochastic-rounding stream.
  std::string side;       ///< "lhs" or "rhs": its launches' and buffers' names.
  /// Whether its scratch codes keep the input's own layout [K][M or N]
  /// (an unrotated BF16 operand reduced along its rows, axis 0: a Wgrad's
  /// two operands, a Dgrad's weight) for a chip whose matrix instructions
  /// read MN-major BF16 tiles (readsMNMajorBF16): the prologue only
  /// rounds, the same launch as a K-major operand's of the same tensor,
  /// and the staged tiles are MN-major. Else [M or N][K] (K-major).
  bool mnMajor = false;

  explicit OperandPlan(mlir::Location loc) : loc(loc) {}
  bool scaled() const { return kind != OperandKind::BF16; }
  /// The scale block along K (0 for BF16).
  int64_t block() const {
    return kind == OperandKind::MX ? 32 : kind == OperandKind::NVFP4 ? 16 : 0;
  }
  /// Bytes per element in the scratch codes (and the staged tiles).
  int64_t elementBytes() const { return kind == OperandKind::BF16 ? 2 : 1; }
  int64_t count() const { return type.getDimSize(0) * type.getDimSize(1); }
};

/// How a staged tile's K-major rows of `pitch` bytes lie in shared memory.
enum class StagedLayout {
  /// Each row padded by 16 bytes: a warp's (wave's) reads of eight rows at
  /// the same K fall into distinct banks.
  Padded,
  /// Rows of 32, 64 or 128 bytes with no padding, the 16-byte chunk c of
  /// row r at c ^ ((r·pitch >> 7) & (pitch / 16 - 1)) — sm_90a's 32/64/128
  /// byte swizzle, which wgmma's shared-memory descriptors name (the tiles
  /// start on 1024-byte boundaries); distinct banks for the same reads.
  Swizzled,
};

/// The GEMM launch's tiling and staging, the same on every chip.
struct GemmTiling {
  int64_t blockM = 0, blockN = 0; ///< A block's tile of the result.
  static constexpr int64_t warpM = 32, warpN = 32; ///< A warp's (wave's).
  int64_t stepK = 0;  ///< K staged in shared memory (LDS) per step.
  int64_t threads = 0; ///< Threads per block (the chip's blockThreads()).
  int64_t chunk = 0;  ///< G: K summed before the scales apply (K: none).
  StagedLayout layout = StagedLayout::Padded; ///< The chip's choice.
  /// Per operand (lhs, rhs): whether its E2M1 codes are staged packed, two
  /// per byte as an MFMA reads them (the chip's choice, packsE2M1()), and
  /// the bytes per K-major row of its staged tile (with its padding).
  bool packed[2] = {false, false};
  int64_t pitch[2] = {0, 0};
  /// Blocks a tile's K is split across (BF16 alone, whose contract sums
  /// all of K in fp32 in any order): each sums its share into its own
  /// partial tile, and a second launch adds the partial tiles in split
  /// order (deterministic). 1: not split.
  int64_t splitK = 1;
  int64_t warps() const { return (blockM / warpM) * (blockN / warpN); }
};

/// The (linear.role) name of a kernel, for messages and manifests.
std::string gemmName(KernelOp kernel);

/// The unit attribute that marks a rounding prologue's gpu.func
/// (GemmKernelLowering::buildRoundingPrologue): its result is its input
/// (buffer 0) rounded to BF16 codes, nearest even, element for element in
/// the input's order (buffer 1, i32 words of two codes, the low half
/// first) — a producer that can write those codes itself may replace it.
constexpr llvm::StringLiteral kRoundsToBF16 = "tetra.rounds_to_bf16";

/// Variants of a kernel function, named after it with a suffix: no launch
/// of their own (their `tetra.launch` says `variant`), the compiler
/// launches one in the function's place where the schedule allows.
///   kBF16ResultSuffix: writes its results as those BF16 codes (each result
///     argument i32 words of two), where each result's one reader is a
///     rounding prologue.
///   kPlusAddendSuffix: writes its result plus a tensor of the result's
///     shape (an fp32 add, a trailing argument `addend`), where the
///     result's one reader is an elementwise kernel that sums its inputs
///     (`tetra.adds_its_inputs`) and the addend is written before it.
///   kBF16AlsoSuffix: writes its one result and, in a trailing argument,
///     its BF16 codes, where a rounding prologue is one of the result's
///     readers.
///   kLossPartsSuffix: writes its result (a cross-entropy's logits) and,
///     in a trailing argument "loss_parts", each row's partial
///     log-sum-exp over each slab of the chip's rowSlabs() columns: at f64
///     index 2 (row · slabs + col / width) the slab's largest logit m (an
///     fp32 value, widened), then the sum of fastExp(x - m) over the slab.
///     Its attribute kLossPartsAttr is [width, slabs]. Built where a
///     tetra.cross_entropy reads the result: the cross-entropy's forward
///     then reduces the parts instead of sweeping the logits
///     (GpuLibraryBuilder::LossParts).
constexpr llvm::StringLiteral kBF16ResultSuffix = "__bf16";
constexpr llvm::StringLiteral kBF16AlsoSuffix = "__and_bf16";
constexpr llvm::StringLiteral kPlusAddendSuffix = "__plus";
constexpr llvm::StringLiteral kLossPartsSuffix = "__and_loss_parts";
constexpr llvm::StringLiteral kLossPartsAttr = "tetra.loss_parts";
void markVariant(mlir::gpu::GPUFuncOp variant);
/// The unit attribute of an elementwise kernel's function that sums its
/// inputs in order, ((x0 + x1) + x2) + ..., and does nothing else
/// (addsItsInputs: two or more distinct inputs).
constexpr llvm::StringLiteral kAddsItsInputs = "tetra.adds_its_inputs";
bool addsItsInputs(KernelOp kernel);

/// The flat memref type of `count` elements of `element`.
mlir::MemRefType flat(int64_t count, mlir::Type element);

/// A kernel function (a gpu.func at the builder's point) with its launch
/// contract — grid, block and what each argument is — recorded as its
/// `tetra.launch` attribute (read by describeGpuKernels for manifests and
/// schedules); buffers 16-byte aligned, the block size known to the
/// backends' register allocation.
mlir::gpu::GPUFuncOp
createLaunch(mlir::OpBuilder &moduleBuilder, mlir::Location loc,
             const std::string &name,
             llvm::ArrayRef<std::pair<std::string, mlir::Type>> arguments,
             llvm::ArrayRef<int64_t> grid, llvm::ArrayRef<int64_t> block);

/// One GEMM kernel's lowering for a GPU chip: the shared plan, and a
/// target's matrix instructions through the virtual hooks.
class GemmKernelLowering {
public:
  GemmKernelLowering(KernelOp kernel, llvm::StringRef chip, int64_t lanes,
                     int64_t blockTile)
      : kernel(kernel), chip(chip), lanes(lanes), blockTile(blockTile),
        lhs(kernel.getLoc()), rhs(kernel.getLoc()) {}
  virtual ~GemmKernelLowering() = default;

  /// Checks the kernel and builds its gpu.module at the end of `module`
  /// (an elementwise kernel without a scaled matmul: lowerElementwiseKernel).
  /// Failure: an error naming the GEMM and the chip was emitted.
  mlir::LogicalResult lower(mlir::ModuleOp module);

protected:
  /// What the GEMM launch's body sees of one staged step.
  struct StagedStep {
    mlir::Value words;      ///< The staged tiles as memref<? x i32, workgroup>.
    mlir::Value bytes;      ///< The same as memref<? x i8, workgroup>.
    /// The warp's 32 x 32 in the block's tile (index); a chip with its own
    /// issuing groups (groupTile) places its warps itself.
    mlir::Value warpRow;
    mlir::Value warpCol;
    mlir::Value lane;       ///< The thread's lane in its warp (index).
    mlir::Value thread;     ///< The thread in the block (index).
    mlir::Value stageAt;    ///< The step's staged buffer: its first byte.
    /// Whether every E8M0 scale code of the step (both operands) is
    /// moderate — within 2^±45 of 1, so that any two multiply to 2^s with
    /// s in [-90, 90] and neither is NaN: an i1 the same in every thread
    /// (stepBarrier's), or null where the chip's barrier gives none.
    mlir::Value moderateScales;
    /// The fp32 NVFP4 tensor scales (f32; null for other operands).
    mlir::Value lhsTensorScale, rhsTensorScale;
    /// Whether the step's scales are folded into its staged codes
    /// (foldsScales(): the accumulators then hold the tile's sums over
    /// 2^(ref(row) + ref(col)), and no scale codes are staged).
    bool folded = false;
    /// Whether the step is the exact pass's (sumsExactly()): its staged
    /// codes are the exact integers (exactCodes), no scales, and the
    /// accumulators (exactAccumulators) sum them exactly.
    bool exact = false;
    /// Where the exact references lie in `words` (sumsExactly): row r of
    /// the lhs tile's at exactRefsAt + r, column c of the rhs tile's at
    /// exactRefsAt + blockM + c (-1 where the fiber does not sum exactly).
    int64_t exactRefsAt = 0;
  };

  /// A target's refusal of an operand pair the plan supports, or success.
  virtual mlir::LogicalResult checkTarget() { return mlir::success(); }
  /// The accumulators a thread carries over K, zero.
  virtual llvm::SmallVector<mlir::Value>
  initialAccumulators(QuantizationEmitter &e) = 0;
  /// The exact pass's (sumsExactly): integers, zero.
  virtual llvm::SmallVector<mlir::Value>
  exactAccumulators(QuantizationEmitter &e) = 0;
  /// One staged step of K: the matrix instructions on the staged tiles.
  virtual llvm::SmallVector<mlir::Value>
  accumulateStep(QuantizationEmitter &e, const StagedStep &step,
                 mlir::ValueRange accumulators) = 0;
  /// The thread's accumulators into the result at (row0, col0), the block's
  /// tile origin: `store(value, row, col)` with rows and columns inside the
  /// block's tile — for the exact pass (step.exact), each exact sum as the
  /// fp32 nearest to it (the plan then multiplies by the pair's scale).
  /// A chip that specializes warps (specializesWarps) gives the values in
  /// pairs: the (2p)-th and (2p + 1)-th lie in one row, at an even column
  /// and the next (sm_90a's wgmma fragment), and the specialized launch
  /// stores each pair at once (storeResultPair). Other chips' orders are
  /// their own (gfx950's MFMA: a lane's values down a column).
  virtual void
  storeAccumulators(QuantizationEmitter &e, const StagedStep &step,
                    mlir::ValueRange accumulators,
                    llvm::function_ref<void(mlir::Value, mlir::Value,
                                            mlir::Value)> store) = 0;
  /// A word (i32) of four element codes of a block-scaled operand, one per
  /// byte, on its way into the scratch codes: the chip's encoding of codes
  /// its instructions cannot read as they are (sm_90a: E2M1 codes as the
  /// E4M3 bytes of their values). scratchEncoding: its name in the
  /// manifest, "code" if none.
  virtual mlir::Value scratchCodes(QuantizationEmitter &e, mlir::Value word,
                                   const OperandPlan &operand) {
    return word;
  }
  virtual llvm::StringRef scratchEncoding(const OperandPlan &operand) const {
    return "code";
  }
  /// Whether the chip folds the block scales into the codes where a tile
  /// allows it. The prologue's fold launches give each fiber along K (a
  /// row of the lhs, a column of the rhs) a reference code ref = max - 6
  /// over its E8M0 codes, or -1 where it does not fold (a code outside
  /// [ref - 5, ref + 6], a NaN, or ref beyond 2^±45 of 1:
  /// numerics::fiberFolds), and a copy of its codes where each block's 32,
  /// through foldCodes(vector, c - ref), are the codes of their values times
  /// 2^(c - ref), exactly. A tile whose rows and columns all fold (ANDed at
  /// the launch's start, one barrier) stages those codes and no scales; the
  /// tensor cores' sums are then the contract's scaled sums over
  /// 2^(ref(row) + ref(col)), which the last store multiplies back (exact:
  /// a normal fp32 power of two). Other tiles take the step-by-step path.
  virtual bool foldsScales() const { return false; }
  virtual mlir::Value foldCodes(QuantizationEmitter &e, mlir::Value vector,
                                mlir::Value offset) {
    return vector;
  }
  /// Exact sums (the contract's, every chip): whether the GEMM has them —
  /// MXFP4 x MXFP4 with K <= numerics::kExactMaxK.
  bool sumsExactly() const;
  /// Sixteen scratch codes (vector<4 x i32>, a byte each, the chip's
  /// scratchCodes encoding) of a block `offset` (i32, 0..3) above its
  /// fiber's exact reference, as the int8 bytes of their integers
  /// (numerics::exactInteger).
  /// Only where the exact pass copies its codes (copyStaged); elsewhere it
  /// stages the codes and scales as the chunked pass does, and the chip's
  /// accumulateStep sums them exactly.
  virtual mlir::Value exactCodes(QuantizationEmitter &e, mlir::Value vector,
                                 mlir::Value offset) {
    return vector;
  }
  /// Whether the chip copies steps that need no change on their way into
  /// shared memory (bf16 codes, folded MX codes: copyStaged()) straight
  /// from global memory, asynchronously (sm_90a: cp.async), instead of
  /// through registers two steps ahead: kCopyStages staged buffers, all but
  /// one in flight — all but two where the chip leaves a step's matrix
  /// instructions running while the next step's are issued
  /// (leavesStepsInFlight: sm_90a's bf16 wgmma), a buffer then refilled two
  /// steps after its last reader rather than one. copyAsync:
  /// 16 bytes from word `wordIndex` of `global` (memref<? x i32>) to byte
  /// `byteOffset` of the staged buffers `shared`; commitCopies closes a
  /// group of them; waitCopies waits until at most `pending` groups are in
  /// flight.
  virtual bool copiesStagedAsync() const { return false; }
  virtual void copyAsync(QuantizationEmitter &e, mlir::Value shared,
                         mlir::Value byteOffset, mlir::Value global,
                         mlir::Value wordIndex) {}
  virtual void commitCopies(QuantizationEmitter &e) {}
  virtual void waitCopies(QuantizationEmitter &e, int64_t pending) {}
  virtual bool leavesStepsInFlight(bool exact) const { return false; }
  /// Six buffers were measured slower for MXFP4 on the H200 than four
  /// (docs/benchmarks.md, variant 11a); bf16's 128 x 256 tiles fit four.
  static constexpr int64_t kCopyStages = 4;
  /// Whether the GEMM launch is persistent and warp-specialized (sm_90a's
  /// BF16 wgmma; buildSpecializedGemm): a block a multiprocessor walks the
  /// tiles (and K splits) launch order would give it, its last
  /// kProducerThreads threads (a warpgroup) copying step after step into the
  /// kCopyStages staged buffers — across tile boundaries, ahead of the
  /// matrix instructions by as many buffers as are free — while the
  /// others compute. No block-wide barrier in the K loop: each buffer has
  /// a `full` barrier (its producers' copies landed) and an `empty` one
  /// (its consumers' matrix instructions on it finished: every consumer's,
  /// or in ping-pong the one warpgroup's), each waited on by phase parity.
  /// A tile's results leave from the accumulators (storeResultPair).
  virtual bool specializesWarps() const { return false; }
  static constexpr int64_t kProducerThreads = 128;
  /// A warpgroup's threads (ping-pong's unit of work).
  static constexpr int64_t kGroupThreads = 128;
  /// The specialized launch's synchronization (only where
  /// specializesWarps()): a barrier object at byte `at` of the block's
  /// shared memory `bytes` (memref<? x i8, workgroup>) initialized for
  /// `count` arrivals; an arrival once the thread's earlier async copies
  /// have landed (without counting them: each producer arrives once); a
  /// plain arrival; a wait for the phase of parity `parity` (i32, 0 or 1)
  /// to complete; and a barrier of the block's first `threads` threads,
  /// numbered `id` (not 0: the block's).
  virtual void initBarrier(QuantizationEmitter &e, mlir::Value bytes,
                           int64_t at, int64_t count) {}
  virtual void arriveOnCopies(QuantizationEmitter &e, mlir::Value bytes,
                              mlir::Value at) {}
  virtual void arriveOn(QuantizationEmitter &e, mlir::Value bytes,
                        mlir::Value at) {}
  virtual void waitOn(QuantizationEmitter &e, mlir::Value bytes,
                      mlir::Value at, mlir::Value parity) {}
  virtual void groupBarrier(QuantizationEmitter &e, int64_t id,
                            int64_t threads) {}
  /// An arrival at barrier `id` of `threads` threads without waiting.
  virtual void arriveAtGroupBarrier(QuantizationEmitter &e, int64_t id,
                                    int64_t threads) {}
  /// Whether the specialized launch's consumer warpgroups each take whole
  /// tiles, one after the other (ping-pong): warpgroup w the block's tiles
  /// w, w + 2, ..., its K loop after the other's (a barrier between them
  /// each way), so one's epilogue runs while the other's products do.
  /// Each buffer is then released by one warpgroup.
  virtual bool pingPong() const { return false; }
  /// Where pingPong(): the producers' and the consumers' register budgets
  /// set at their roles' start.
  virtual void budgetRegisters(QuantizationEmitter &e, bool producer) {}
  /// Two adjacent fp32 results, `first` and `second`, stored at elements
  /// `at` (even) and at + 1 of the global buffer `out` (one 8-byte store).
  virtual void storeResultPair(QuantizationEmitter &e, mlir::Value out,
                               mlir::Value at, mlir::Value first,
                               mlir::Value second);
  /// How a thread's results lie in rows, for per-row reductions in the
  /// epilogue (kLossPartsSuffix), on chips that give them (width 0: none):
  /// the lanes whose lane indices differ by the bits of `laneMasks` (and
  /// no others) hold the rest of each of a thread's rows within a slab of
  /// `width` columns (at a multiple of `width`); storeAccumulators' value
  /// v lies in the thread's row `slotOf(v)`.
  struct RowSlabs {
    int64_t width = 0;
    llvm::SmallVector<int32_t> laneMasks;
    std::function<int64_t(int64_t)> slotOf;
  };
  virtual RowSlabs rowSlabs() const { return {}; }
  /// Tile rows a group of consecutively launched blocks walks down before
  /// the next tile column (the launch's grouped tile order), and the rhs
  /// size past which the launch takes that order: measured on the H200
  /// (docs/benchmarks.md, variant 12), grouped order is faster where the
  /// rhs does not fit about half of its 50 MB L2, slower (MXFP4) where it
  /// does.
  static constexpr int64_t kTileGroup = 8;
  static constexpr int64_t kL2Budget = int64_t{24} << 20;
  /// The name of the matrix instruction, for the plan's description; the
  /// exact pass's (sumsExactly), where it is another.
  virtual std::string instruction() = 0;
  virtual std::string exactInstruction() { return instruction(); }
  /// Whether the chip reads E2M1 codes packed two per byte (its staged
  /// tiles then hold them so).
  virtual bool packsE2M1() const { return false; }
  /// How the chip's matrix instructions want the staged rows laid out.
  virtual StagedLayout stagedLayout() const { return StagedLayout::Padded; }
  /// Whether the chip's matrix instructions for this tiling read a BF16
  /// tile MN-major (sm_90a's wgmma, transposed through its descriptor: K
  /// rows of 64 elements, 128 bytes swizzled, in chunks of 64 along M or N
  /// stepK rows long — OperandPlan::mnMajor), so that an operand reduced
  /// along its rows needs no transposing prologue.
  virtual bool readsMNMajorBF16() const { return false; }
  /// Threads per block for `tiling`'s block tile: by default a warp (wave)
  /// per 32 x 32 of it.
  virtual int64_t blockThreads() const { return tiling.warps() * lanes; }
  /// The result tile one issuing group computes: a warp's 32 x 32, or (a
  /// chip whose matrix instructions are a warpgroup's) that group's.
  virtual llvm::SmallVector<int64_t, 2> groupTile() const {
    return {GemmTiling::warpM, GemmTiling::warpN};
  }
  /// The widest block tile along N: the option's block tile, or where the
  /// chip's matrix instructions read less shared memory per product on a
  /// wider one (sm_90a's bf16 wgmma: 256), that.
  virtual int64_t widestTileN() const { return blockTile; }
  /// The most shared memory (LDS) a block may stage in, bytes.
  virtual int64_t sharedLimit() const = 0;
  /// The chip's multiprocessors (compute units): a GEMM with fewer tiles
  /// than these takes smaller ones (chooseTiling).
  virtual int64_t multiprocessors() const = 0;
  /// After a thread's stores into a staged buffer, before the barrier
  /// after which the matrix instructions read it: what the chip needs
  /// (sm_90a's wgmma reads through the async proxy: a proxy fence).
  virtual void fenceStagedStores(QuantizationEmitter &e) {}
  /// The barrier after a step's stores into a staged buffer. Where the
  /// chip's barrier also ANDs a predicate over the block (sm_90a), the
  /// result for `predicate` (i1, the same in every thread); else null.
  virtual mlir::Value stepBarrier(QuantizationEmitter &e,
                                  mlir::Value predicate);

  mlir::InFlightDiagnostic refuse(const llvm::Twine &why);

  /// Inside the staged tiles: the i32 word holding K-element `kk` (a
  /// multiple of 4 / elementBytes, or of 8 when packed) of row `row` of the
  /// left operand's tile (a row of the block's result tile) or column `col`
  /// of the right's. stagedIndex: the index of that word in step.words;
  /// stagedByte: the byte offset of K-element kk in the staged buffers,
  /// in the buffer starting at byte `stageAt`.
  mlir::Value lhsWord(QuantizationEmitter &e, const StagedStep &step,
                      mlir::Value row, mlir::Value kk);
  mlir::Value rhsWord(QuantizationEmitter &e, const StagedStep &step,
                      mlir::Value col, mlir::Value kk);
  mlir::Value stagedIndex(QuantizationEmitter &e, const StagedStep &step,
                          int side, mlir::Value row, mlir::Value kk);
  mlir::Value stagedByte(QuantizationEmitter &e, mlir::Value stageAt,
                         int side, mlir::Value row, mlir::Value kk);
  /// Byte offsets of the staged tiles and scales in a staged buffer (on a
  /// 1024-byte boundary: stageBytes() apart).
  int64_t lhsTileAt() const { return 0; }
  int64_t rhsTileAt() const { return tiling.blockM * tiling.pitch[0]; }
  /// The staged scale code (i32) of row `row` (column `col`) for its scale
  /// block `blockInStep` of the step.
  mlir::Value lhsScaleCode(QuantizationEmitter &e, const StagedStep &step,
                           mlir::Value row, mlir::Value blockInStep);
  /// The exact reference (i32, -1 where the fiber does not sum exactly)
  /// of row `at` of the lhs tile (side 0) or column `at` of the rhs tile
  /// (side 1), from the staged references (StagedStep::exactRefsAt); and
  /// a scale code's offset above it (0 where the fiber does not sum
  /// exactly).
  mlir::Value exactReference(QuantizationEmitter &e, const StagedStep &step,
                             int side, mlir::Value at);
  mlir::Value exactOffset(QuantizationEmitter &e, const StagedStep &step,
                          int side, mlir::Value at, mlir::Value code);
  mlir::Value rhsScaleCode(QuantizationEmitter &e, const StagedStep &step,
                           mlir::Value col, mlir::Value blockInStep);

  KernelOp kernel;
  llvm::StringRef chip;
  int64_t lanes;     ///< Threads per warp (wave).
  int64_t blockTile; ///< The largest side of a block's tile (the option).
  ScaledMatmulOp matmul;
  OperandPlan lhs, rhs;
  int64_t m = 0, n = 0, k = 0;
  GemmTiling tiling;

private:
  mlir::FailureOr<OperandPlan> planOperand(mlir::Value operand,
                                           mlir::Value scales,
                                           OperandQuantAttr quant,
                                           llvm::StringRef which);
  void chooseTiling();
  void buildPrologue(mlir::OpBuilder &moduleBuilder, const OperandPlan &operand);
  /// The prologue of an unrotated BF16 operand whose scratch keeps the
  /// input's layout (reduced along its columns, or mnMajor): each element
  /// rounded to BF16 in place, eight a thread — the same code for every
  /// operand of the same shape, so that the launches of two GEMMs reading
  /// one tensor (a Dgrad's and a Wgrad's output gradient) are one.
  void buildRoundingPrologue(mlir::OpBuilder &moduleBuilder,
                             const OperandPlan &operand);
  /// The fold launches of an operand (foldsScales() or sumsExactly()): its
  /// fibers' reference codes, then its folded and exact codes.
  void buildFold(mlir::OpBuilder &moduleBuilder, const OperandPlan &operand);
  /// What a GEMM launch writes: its result; its result plus an addend
  /// (kPlusAddendSuffix); its result and its loss parts
  /// (kLossPartsSuffix).
  enum class Epilogue { Result, PlusAddend, AndLossParts };
  /// The GEMM launch, writing `epilogue`.
  void buildGemm(mlir::OpBuilder &moduleBuilder,
                 Epilogue epilogue = Epilogue::Result);
  /// Its persistent, warp-specialized form (specializesWarps()): the
  /// launch's body from the point where buildGemm has its operands.
  struct SpecializedGemm;
  void buildSpecializedGemm(SpecializedGemm &gemm);
  /// The specialized launch's blocks: one a multiprocessor, or one a tile.
  int64_t specializedBlocks() const {
    return std::min((m / tiling.blockM) * (n / tiling.blockN) * tiling.splitK,
                    multiprocessors());
  }
  /// The launch adding a split GEMM's partial tiles (tiling.splitK > 1);
  /// `plusAddend`: its kPlusAddendSuffix variant.
  void buildSplitSum(mlir::OpBuilder &moduleBuilder, bool plusAddend = false);
  /// Whether the result's one reader is an elementwise kernel that only
  /// adds it to another tensor (then the last launch gets a
  /// kPlusAddendSuffix variant).
  bool resultIsAddedTo() const;
  /// Whether a tetra.cross_entropy reads the result as its logits and the
  /// launch can write their loss parts (kLossPartsSuffix: a chip with
  /// rowSlabs(), neither split nor summing exactly).
  bool feedsCrossEntropy() const;
  /// A kLossPartsSuffix epilogue: the thread's results (value, element of
  /// the result), in storeAccumulators' order, into `parts`.
  void
  storeLossParts(QuantizationEmitter &e, mlir::Value lane,
                 llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> results,
                 mlir::Value parts);
  /// What the kernel computes, for the bundle's manifest and its checks.
  mlir::DictionaryAttr describe(mlir::Builder &b);
  mlir::DictionaryAttr describeOperand(mlir::Builder &b,
                                       const OperandPlan &operand);
  mlir::Value stagedWord(QuantizationEmitter &e, const StagedStep &step,
                         int side, mlir::Value row, mlir::Value kk);
  mlir::Value stagedScale(QuantizationEmitter &e, const StagedStep &step,
                          int64_t base, int64_t rows, mlir::Value row,
                          mlir::Value blockInStep);
  int64_t lhsScalesAt() const {
    return rhsTileAt() + tiling.blockN * tiling.pitch[1];
  }
  int64_t rhsScalesAt() const {
    return lhsScalesAt() + scalesPerStep(lhs, tiling.blockM);
  }
  int64_t stagedBytes() const {
    return rhsScalesAt() + scalesPerStep(rhs, tiling.blockN);
  }
  int64_t stageBytes() const { return (stagedBytes() + 1023) / 1024 * 1024; }
  /// The first byte of the staged buffer step `s` (index) uses, of
  /// `buffers` in turn.
  mlir::Value stagedBufferAt(QuantizationEmitter &e, mlir::Value s,
                             int64_t buffers) const {
    return e.mulIndex(mlir::arith::RemUIOp::create(e.b, s, e.cIndex(buffers)),
                      e.cIndex(stageBytes()));
  }
  /// Whether the K loop stages by asynchronous copies (copiesStagedAsync):
  /// bf16 codes, or a folding plan's folded codes.
  bool copyStaged() const {
    return copiesStagedAsync() &&
           (lhs.kind == OperandKind::BF16 || foldsScales() || sumsExactly());
  }
  /// Staged buffers: kCopyStages where the K loop copies asynchronously,
  /// else two (a folding plan's step-by-step path uses the first two).
  int64_t stagedBuffers() const { return copyStaged() ? kCopyStages : 2; }
  /// The i32 reference codes of the tile's rows and columns: the fold
  /// references (foldsScales), then the exact ones (sumsExactly).
  int64_t referenceBytes() const {
    return ((foldsScales() ? 1 : 0) + (sumsExactly() ? 1 : 0)) * 4 *
           (tiling.blockM + tiling.blockN);
  }
  /// The specialized launch's barriers: two for each staged buffer.
  int64_t barriersBytes() const {
    return specializesWarps() ? 2 * 8 * stagedBuffers() : 0;
  }
  /// The launch's shared memory: the staged buffers, the i32 reference
  /// codes of the tile's rows and columns, then (specializesWarps()) the
  /// barriers.
  int64_t sharedBytes() const {
    return stagedBuffers() * stageBytes() + referenceBytes() + barriersBytes();
  }
  int64_t scalesPerStep(const OperandPlan &operand, int64_t rows) const {
    return operand.scaled() ? rows * (tiling.stepK / operand.block()) : 0;
  }
};

/// A GPU conversion's pass body: lowers every GEMM kernel of `module`
/// with `lowerKernel`, then keeps only the gpu.modules (the host side and
/// the kernels the CPU runs are not this conversion's output).
mlir::LogicalResult
lowerGemmKernels(mlir::ModuleOp module,
                 llvm::function_ref<mlir::LogicalResult(KernelOp)> lowerKernel);

} // namespace tetra::conversion

#endif // TETRA_LOWERING_CONVERSION_GEMMKERNELPLAN_H
