//===- TetraToNVVM.cpp - sm_90a code for tetra GEMM kernels ---------------===//
//
// `--convert-tetra-to-nvvm{chip=sm_90a}`: every GEMM `tetra.kernel` becomes a
// `gpu.module` from the shared plan (GemmKernelPlan.h): its prologue
// launches (rotation and quantization, the same on every chip; E2M1 codes
// written as the E4M3 bytes of their values, exact) and its GEMM launch,
// whose swizzled staged tiles sm_90a's tensor cores read:
//
//   MXFP4 x MXFP4    on 64 x 64 multiples, one warpgroup per 64 x 128 (or
//                    64 x 64) with wgmma.m64nNk32 through shared-memory
//                    descriptors, one per scale block of 32, from zero;
//                    every E2M1 product and sum of 32 is exact in its
//                    accumulator. Its results, pinned after the wait, are
//                    scaled in fp32 in order (addScaled).
//   bf16 x bf16      on 64 x 64 multiples, wgmma.m64nNk16 accumulating all
//                    of K (the contract's G = K), within bound.
//   FP8, NVFP4, or   one warp per 32 x 32 with mma.sync.m16n8k32 (2 x 4
//   32-wide tiles    tiles of 16 x 8) per chunk, from zero; bf16 with
//                    mma.sync.m16n8k16. Hopper's FP8 wgmma adds E4M3
//                    products with about 14 bits (measured on the H200:
//                    far outside the contract's bound); mma.sync's stay
//                    within it.
//
// MX x MX applies the two E8M0 scales exactly — one integer add and one
// fma where the step's scale codes are moderate (the block's barrier ANDs
// that: a uniform branch), the scales' halves (scaleHalves) elsewhere — so
// MXFP4 x MXFP4 is the scaled_matmul contract bit for bit. With an NVFP4
// operand the chunk is 16: each m16n8k32 sees one half of K, the other
// zeroed, and each side's factor is decodeE4M3(scale) x tensor scale (MX:
// 2^e), within the contract's error bound.
//
// Do not chain K = 32 FP8 steps in the tensor-core accumulator: Hopper's
// FP8 accumulation keeps about 14 bits. The launch contract (grid, block,
// arguments) is recorded on each gpu.func (`tetra.launch`) for the
// bundle's manifest. A kernel the target cannot implement is an error
// naming the linear, the GEMM role and the target; nothing unsupported
// reaches LLVM (its NVPTX backend aborts on E2M1 conversions for sm_90a,
// which is why none are emitted: E2M1 codes are widened with integer
// arithmetic).
//
//===----------------------------------------------------------------------===//

#include "lowering/Conversion/Passes.h"

#include "dialect/LLVMFormatters.h"
#include "dialect/TetraOps.h"
#include "lowering/Conversion/AttentionKernelPlan.h"
#include "lowering/Conversion/GemmKernelPlan.h"
#include "lowering/Conversion/QuantizationEmitter.h"
#include "lowering/NumericsOf.h"
#include "runtime/numerics/Hadamard.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tetra {
#define GEN_PASS_DEF_CONVERTTETRATONVVM
#include "lowering/Conversion/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;

namespace {

/// An LLVM pointer in address space `space` (3: shared, 1: global) to
/// byte `byteOffset` of `memref`.
Value pointerInto(QuantizationEmitter &e, Value memref, Value byteOffset,
                  unsigned space) {
  Value base = arith::IndexCastUIOp::create(
      e.b, e.i64(), memref::ExtractAlignedPointerAsIndexOp::create(e.b, memref));
  return LLVM::IntToPtrOp::create(
      e.b, LLVM::LLVMPointerType::get(e.b.getContext(), space),
      e.add(base, arith::IndexCastUIOp::create(e.b, e.i64(), byteOffset)));
}

/// One warp's mma.sync (`intrinsic`, an m16n8kK with fp32 accumulators): the
/// lane's A then B registers and its four accumulators in, the four results
/// out.
SmallVector<Value> mmaSync(QuantizationEmitter &e, StringRef intrinsic,
                           ArrayRef<Value> a, ArrayRef<Value> b,
                           ArrayRef<Value> c) {
  Type f32 = e.f32();
  Type fragment = LLVM::LLVMStructType::getLiteral(e.b.getContext(),
                                                   {f32, f32, f32, f32});
  SmallVector<Value> args(a);
  args.append(b.begin(), b.end());
  args.append(c.begin(), c.end());
  Value d = LLVM::CallIntrinsicOp::create(e.b, fragment,
                                          e.b.getStringAttr(intrinsic), args)
                .getResult(0);
  SmallVector<Value> results;
  for (int64_t r = 0; r < 4; ++r)
    results.push_back(LLVM::ExtractValueOp::create(e.b, d, r));
  return results;
}

/// sm_90a's matrix instructions on the plan's staged tiles (swizzled, as
/// wgmma's shared-memory descriptors name them). MXFP4 x MXFP4 and bf16 x
/// bf16 on tiles of 64 x 64 multiples: each warpgroup (four warps) one
/// 64 x groupN() of the block's tile with wgmma, its A and B read by the
/// tensor cores from the staged tiles; elsewhere (FP8 codes, NVFP4, tiles
/// of 32) each warp one 32 x 32 with mma.sync, as 2 x 4 tiles of 16 x 8.
/// Either way a thread holds four results of each of its tilesM() x
/// tilesN() tiles of 16 x 8 (rows g, g + 8 and columns 2t, 2t + 1 of the
/// tile, for lane 4g + t) — wgmma's fragment of m64nN is warp w's rows
/// 16w .. 16w + 15 as 1 x N/8 such tiles.
class NVVMGemmLowering : public GemmKernelLowering {
public:
  NVVMGemmLowering(KernelOp kernel, StringRef chip, int64_t blockTile)
      : GemmKernelLowering(kernel, chip, /*lanes=*/32, blockTile) {}

private:
  /// Whether the block's tile is computed by warpgroups with wgmma: both
  /// operands E2M1 (MX) or both bf16, and the tile made of 64 x 64 tiles.
  /// Not FP8 codes: Hopper's FP8 wgmma adds a slice's products with about
  /// 14 bits (measured on the H200: E4M3 x E4M3 sums of 32 far outside the
  /// contract's bound), which every E2M1 product and sum of 32 fits exactly
  /// (multiples of 1/4 below 2^11); mma.sync's are within bound.
  bool wgmma() const {
    const bool pair =
        (lhs.kind == OperandKind::MX && rhs.kind == OperandKind::MX &&
         isE2M1(lhs) && isE2M1(rhs)) ||
        lhs.kind == OperandKind::BF16;
    return pair && tiling.blockM % 64 == 0 && tiling.blockN % 64 == 0;
  }
  /// A warpgroup's tile: 64 x 256 or 64 x 128 where the block's tile is
  /// that wide (wgmma reads less shared memory per product), else 64 x 64.
  /// Only bf16 x bf16 takes tiles 256 wide (128 x 256 with the default
  /// option): its 128 accumulators a thread fit, where MX x MX also holds
  /// two slices' sums in flight.
  int64_t groupN() const {
    return tiling.blockN >= 256 ? 256 : tiling.blockN >= 128 ? 128 : 64;
  }
  int64_t widestTileN() const override {
    return lhs.kind == OperandKind::BF16 && blockTile == 128 ? 256 : blockTile;
  }
  int64_t tilesM() const { return wgmma() ? 1 : 2; }
  int64_t tilesN() const { return wgmma() ? groupN() / 8 : 4; }
  StagedLayout stagedLayout() const override { return StagedLayout::Swizzled; }
  /// bf16 wgmma reads either major-ness through its descriptors.
  bool readsMNMajorBF16() const override {
    return wgmma() && lhs.kind == OperandKind::BF16;
  }
  /// A block's shared memory on an H100/H200: 227 KB, static (ptxas and
  /// the driver take static shared memory past 48 KB for sm_90a).
  int64_t sharedLimit() const override { return 227 * 1024; }
  /// An H100's or H200's (SXM) multiprocessors.
  int64_t multiprocessors() const override { return 132; }
  SmallVector<int64_t, 2> groupTile() const override {
    if (!wgmma())
      return GemmKernelLowering::groupTile();
    return {64, groupN()};
  }
  int64_t blockThreads() const override {
    if (!wgmma())
      return GemmKernelLowering::blockThreads();
    return (tiling.blockM / 64) * (tiling.blockN / groupN()) * 128 +
           (specializesWarps() ? kProducerThreads : 0);
  }
  /// BF16 on wgmma with tiles up to 128 wide: persistent and
  /// warp-specialized (buildSpecializedGemm), its steps copied by cp.async
  /// into buffers guarded by mbarriers, its results stored from the
  /// accumulators (storeResultPair); the producers are the block's last
  /// warpgroup (with 384 threads ptxas allows 168 registers a thread: 128
  /// producers hold few copy addresses each, and nothing spills). Tiles 256
  /// wide stay a block a tile with one barrier a step: on the H200 they
  /// were faster so (125M's 32768 x 1792 x 640: 0.176 against 0.180 ms as
  /// specialized 128 x 128; Llama 8B's BF16 GEMMs 688-740 against 628-691
  /// TFLOP/s; docs/benchmarks.md) when the specialized launch still staged
  /// its results in shared memory, which left no room for four 48 KB
  /// buffers of 256-wide tiles.
  bool specializesWarps() const override {
    return chainsSteps() && tiling.blockN <= 128;
  }
  Value sharedPointer(QuantizationEmitter &e, Value bytes, Value at) {
    return pointerInto(e, bytes, at, 3);
  }
  void initBarrier(QuantizationEmitter &e, Value bytes, int64_t at,
                   int64_t count) override {
    NVVM::MBarrierInitOp::create(e.b, sharedPointer(e, bytes, e.cIndex(at)),
                                 e.c32(count), /*predicate=*/Value());
  }
  void arriveOnCopies(QuantizationEmitter &e, Value bytes, Value at) override {
    NVVM::CpAsyncMBarrierArriveOp::create(e.b, sharedPointer(e, bytes, at),
                                          /*noinc=*/true);
  }
  void arriveOn(QuantizationEmitter &e, Value bytes, Value at) override {
    NVVM::MBarrierArriveOp::create(e.b, TypeRange{}, sharedPointer(e, bytes, at),
                                   /*count=*/Value());
  }
  void waitOn(QuantizationEmitter &e, Value bytes, Value at,
              Value parity) override {
    NVVM::MBarrierTryWaitParityOp::create(e.b, sharedPointer(e, bytes, at),
                                          parity, e.c32(0x989680));
  }
  /// Ping-pong where the specialized block's two consumer warpgroups
  /// would share a 128-row tile and each block has two tiles (or K
  /// splits) at least: each warpgroup takes whole 128 x groupN() tiles
  /// instead, as two m64 fragments (128 accumulators a thread). With one
  /// tile a block (the 640 x 640 Wgrads' 100 splits) the second would
  /// idle.
  bool pingPong() const override {
    return specializesWarps() && tiling.blockM == 128 &&
           tiling.blockN == groupN() &&
           (m / tiling.blockM) * (n / tiling.blockN) * tiling.splitK >=
               2 * multiprocessors();
  }
  /// The wgmma fragments of a warpgroup's rows: one m64, or two in
  /// ping-pong (rows 0..63 and 64..127 of the tile).
  int64_t fragments() const { return pingPong() ? 2 : 1; }
  /// 384 threads of 168 registers at launch (ptxas reports 168 for every
  /// launch with setmaxnreg): the producers give 40 back (128), the
  /// consumers take 16 more (184: 128 x 128 + 256 x 184 = 63,488 of the
  /// 64,512). setmaxnreg is .sync.aligned over the warpgroup; with it
  /// ptxas neither spills nor serializes the consumers' wgmmas, as it did
  /// without. (Were a launch given fewer than 168 at launch, the
  /// consumers' increase would wait for registers that never come: a hang
  /// of the launch is the first thing to suspect.)
  void budgetRegisters(QuantizationEmitter &e, bool producer) override {
    NVVM::SetMaxRegisterOp::create(e.b, producer ? 128 : 184,
                                   producer
                                       ? NVVM::SetMaxRegisterAction::decrease
                                       : NVVM::SetMaxRegisterAction::increase);
  }
  void arriveAtGroupBarrier(QuantizationEmitter &e, int64_t id,
                            int64_t threads) override {
    NVVM::BarrierArriveOp::create(e.b, e.c32(id), e.c32(threads));
  }
  void groupBarrier(QuantizationEmitter &e, int64_t id,
                    int64_t threads) override {
    NVVM::BarrierOp::create(e.b, TypeRange{}, e.c32(id), e.c32(threads),
                            /*reductionOp=*/nullptr,
                            /*reductionPredicate=*/Value());
  }
  Value stepBarrier(QuantizationEmitter &e, Value predicate) override {
    Value all = NVVM::BarrierOp::create(
                    e.b, e.i32(), /*barrierId=*/nullptr,
                    /*numberOfThreads=*/nullptr,
                    NVVM::BarrierReductionAttr::get(
                        e.b.getContext(), NVVM::BarrierReduction::AND),
                    e.zext(predicate, e.i32()))
                    .getRes();
    return e.cmp(CmpIPredicate::ne, all, e.c32(0));
  }
  void fenceStagedStores(QuantizationEmitter &e) override {
    if (wgmma())
      NVVM::FenceProxyOp::create(
          e.b, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(e.b.getContext(),
                                     NVVM::SharedSpace::shared_cta));
  }

  /// bf16 on wgmma carries its accumulators as the one wgmma fragment
  /// (an LLVM struct), each step's group left in flight (accumulateWgmma);
  /// everything else as f32 values.
  /// So does the exact pass (s8 wgmma into s32, exact).
  bool chainsSteps() const { return wgmma() && lhs.kind == OperandKind::BF16; }
  bool leavesStepsInFlight(bool exact) const override {
    return exact || chainsSteps();
  }
  Type fragmentType(bool exact = false) {
    MLIRContext *context = kernel.getContext();
    Type element = exact ? Type(IntegerType::get(context, 32))
                         : Type(Float32Type::get(context));
    return LLVM::LLVMStructType::getLiteral(
        context, SmallVector<Type>(tilesM() * tilesN() * 4, element));
  }
  SmallVector<Value> exactAccumulators(QuantizationEmitter &e) override {
    if (!wgmma())
      return SmallVector<Value>(tilesM() * tilesN() * 4, e.c32(0));
    Value d = LLVM::UndefOp::create(e.b, fragmentType(/*exact=*/true));
    for (int64_t r = 0; r < tilesM() * tilesN() * 4; ++r)
      d = LLVM::InsertValueOp::create(e.b, d, e.c32(0), r);
    return {d};
  }
  /// E4M3 bytes of E2M1 values (scratchCodes) as the int8 bytes of
  /// 2 · value · 2^offset (numerics::exactInteger).
  Value exactCodes(QuantizationEmitter &e, Value vector,
                   Value offset) override;
  SmallVector<Value> initialAccumulators(QuantizationEmitter &e) override {
    SmallVector<Value> zeros(tilesM() * tilesN() * 4, e.cF32(0.0f));
    if (!chainsSteps())
      return zeros;
    Value d = LLVM::UndefOp::create(e.b, fragmentType());
    for (auto [r, zero] : llvm::enumerate(zeros))
      d = LLVM::InsertValueOp::create(e.b, d, zero, r);
    return SmallVector<Value>(fragments(), d);
  }
  SmallVector<Value> accumulateStep(QuantizationEmitter &e,
                                    const StagedStep &step,
                                    ValueRange accumulators) override;
  /// A quad of lanes (lane / 4 alike) holds a row's 2 · tilesN() column
  /// pairs of the warp's tilesN() tiles of 8 columns: result r of tile
  /// (i, j) lies in row 16i + 8(r / 2) + lane / 4 (storeAccumulators).
  RowSlabs rowSlabs() const override {
    const int64_t perTileRow = 4 * tilesN();
    return {8 * tilesN(), {1, 2}, [perTileRow](int64_t v) {
              return 2 * (v / perTileRow) + v % 4 / 2;
            }};
  }
  void storeAccumulators(
      QuantizationEmitter &e, const StagedStep &step, ValueRange accumulators,
      function_ref<void(Value, Value, Value)> store) override;
  static bool isE2M1(const OperandPlan &operand) {
    return operand.scaled() && operand.quant.getFormat() == ElementFormat::E2M1;
  }
  /// E2M1 codes are written to the scratch buffers as the E4M3 bytes of
  /// their values (exact), which the FP8 instructions read as they are.
  Value scratchCodes(QuantizationEmitter &e, Value word,
                     const OperandPlan &operand) override;
  StringRef scratchEncoding(const OperandPlan &operand) const override {
    return isE2M1(operand) ? "e4m3" : "code";
  }
  /// MX x MX on wgmma folds where the tile allows (foldsScales): its
  /// codes are staged as E4M3 bytes of E2M1 values (nonzero magnitudes
  /// 0x30 .. 0x4C), so a fold by d in [-5, 6] adds 8d to each nonzero
  /// byte: normal E4M3 values from 2^-6 to 384, exact.
  bool foldsScales() const override {
    return wgmma() && lhs.kind == OperandKind::MX;
  }
  Value foldCodes(QuantizationEmitter &e, Value vector,
                  Value offset) override;
  /// The wgmma plans' steps go into shared memory by cp.async.cg, 16
  /// bytes a copy (through L2 only), one commit group a step.
  bool copiesStagedAsync() const override { return wgmma(); }
  void copyAsync(QuantizationEmitter &e, Value shared, Value byteOffset,
                 Value global, Value wordIndex) override {
    NVVM::CpAsyncOp::create(
        e.b, pointerInto(e, shared, byteOffset, 3),
        pointerInto(e, global, e.mulIndex(wordIndex, e.cIndex(4)), 1), 16,
        NVVM::LoadCacheModifierKind::CG, /*cpSize=*/nullptr);
  }
  void commitCopies(QuantizationEmitter &e) override {
    NVVM::CpAsyncCommitGroupOp::create(e.b);
  }
  void waitCopies(QuantizationEmitter &e, int64_t pending) override {
    NVVM::CpAsyncWaitGroupOp::create(e.b, pending);
  }
  std::string instruction() override {
    const bool bf16 = lhs.kind == OperandKind::BF16;
    if (wgmma())
      return fmt::format("wgmma.m64n{}{}", groupN(),
                         (bf16 ? "k16.f32.bf16.bf16" : "k32.f32.e4m3.e4m3"));
    return bf16 ? "mma.sync.m16n8k16.bf16"
                : "mma.sync.m16n8k32." + mmaType(lhs) + "." + mmaType(rhs);
  }
  /// The exact pass: s8 wgmma into s32 (the integers exactCodes gives);
  /// on mma.sync the chunk sums of the same instruction, as integers.
  std::string exactInstruction() override {
    if (wgmma())
      return fmt::format("wgmma.m64n{}k32.s32.s8.s8", groupN());
    return instruction();
  }
  static std::string mmaType(const OperandPlan &operand) {
    return operand.quant.getFormat() == ElementFormat::E5M2 ? "e5m2" : "e4m3";
  }
  SmallVector<Value> accumulateBlockScaled(QuantizationEmitter &e,
                                           const StagedStep &step,
                                           ValueRange accumulators);
  SmallVector<Value> accumulateBF16(QuantizationEmitter &e,
                                    const StagedStep &step,
                                    ValueRange accumulators);
  SmallVector<Value> accumulateWgmma(QuantizationEmitter &e,
                                     const StagedStep &step,
                                     ValueRange accumulators);
  /// The thread's scale codes (i32) of its rows (2 · tilesM()) and columns
  /// (2 · tilesN()) for scale block `block` of the step.
  std::pair<SmallVector<Value>, SmallVector<Value>>
  scaleCodes(QuantizationEmitter &e, const StagedStep &step,
             Value lhsBlock, Value rhsBlock) {
    SmallVector<Value> rowCode, colCode;
    for (int64_t i = 0; i < tilesM(); ++i)
      for (int64_t half = 0; half < 2; ++half)
        rowCode.push_back(
            lhsScaleCode(e, step, resultRow(e, step, i, 2 * half), lhsBlock));
    for (int64_t j = 0; j < tilesN(); ++j)
      for (int64_t c = 0; c < 2; ++c)
        colCode.push_back(
            rhsScaleCode(e, step, resultCol(e, step, j, c), rhsBlock));
    return {rowCode, colCode};
  }
  /// The warp's A and B fragments of the K elements from k0 on, `perWord`
  /// of them a 32-bit register (g = lane / 4, t = lane % 4): A register r
  /// holds row g (+8 for odd r), K perWord·t (+4·perWord for r >= 2); B
  /// register r holds column g, K perWord·t (+4·perWord for r = 1).
  std::pair<SmallVector<std::array<Value, 4>>, SmallVector<std::array<Value, 2>>>
  loadFragments(QuantizationEmitter &e, const StagedStep &step, Value k0,
                Value g, Value t, int64_t perWord) {
    SmallVector<std::array<Value, 4>> a(tilesM());
    SmallVector<std::array<Value, 2>> b(tilesN());
    for (int64_t i = 0; i < tilesM(); ++i)
      for (int64_t r = 0; r < 4; ++r) {
        Value row = e.addIndex(step.warpRow,
                               e.addIndex(g, e.cIndex(16 * i + 8 * (r & 1))));
        Value kk = e.addIndex(k0, e.addIndex(e.mulIndex(t, e.cIndex(perWord)),
                                             e.cIndex(4 * perWord * (r >> 1))));
        a[i][r] = lhsWord(e, step, row, kk);
      }
    for (int64_t j = 0; j < tilesN(); ++j)
      for (int64_t r = 0; r < 2; ++r) {
        Value col = e.addIndex(step.warpCol, e.addIndex(g, e.cIndex(8 * j)));
        Value kk = e.addIndex(k0, e.addIndex(e.mulIndex(t, e.cIndex(perWord)),
                                             e.cIndex(4 * perWord * r)));
        b[j][r] = rhsWord(e, step, col, kk);
      }
    return {a, b};
  }
  /// `acc` plus each of the chunk's sums (`partials`, one per result of
  /// the thread) times its row's and column's scales (their codes, i32).
  SmallVector<Value> addScaled(QuantizationEmitter &e, const StagedStep &step,
                               ArrayRef<Value> partials, ArrayRef<Value> acc,
                               ArrayRef<Value> rowCode,
                               ArrayRef<Value> colCode);
  /// The exact pass on mma.sync: `acc` (i32) plus each chunk's sum times
  /// 4 · 2^(code - ref) of its row and of its column — the pair's integer
  /// sum (numerics::exactInteger), exact (a fiber that does not sum
  /// exactly takes offset 0: results the plan does not store).
  SmallVector<Value> addExactly(QuantizationEmitter &e, const StagedStep &step,
                                ArrayRef<Value> partials, ArrayRef<Value> acc,
                                ArrayRef<Value> rowCode,
                                ArrayRef<Value> colCode);
  /// The first row and column of the thread's warp's results inside the
  /// block's tile: the warp's 32 x 32 (mma.sync), or its 16 rows of its
  /// warpgroup's 64 x groupN() (wgmma).
  std::pair<Value, Value> warpOrigin(QuantizationEmitter &e,
                                     const StagedStep &step) {
    if (!wgmma())
      return {step.warpRow, step.warpCol};
    auto [wgRow, wgCol] = warpgroupOrigin(e, step);
    Value warp = arith::RemUIOp::create(e.b, e.divIndex(step.thread, 32),
                                        e.cIndex(4));
    return {e.addIndex(wgRow, e.mulIndex(warp, e.cIndex(16))), wgCol};
  }
  /// The thread's warpgroup's 64 x groupN() inside the block's tile.
  std::pair<Value, Value> warpgroupOrigin(QuantizationEmitter &e,
                                          const StagedStep &step) {
    const int64_t across = tiling.blockN / groupN();
    Value group = e.divIndex(step.thread, 128);
    if (pingPong()) // each warpgroup the whole tile
      return {e.cIndex(0), e.cIndex(0)};
    return {e.mulIndex(e.divIndex(group, across), e.cIndex(64)),
            e.mulIndex(arith::RemUIOp::create(e.b, group, e.cIndex(across)),
                       e.cIndex(groupN()))};
  }
  /// The row (column) inside the block's tile of the thread's result `r`
  /// (0..3) of its tile (i, j).
  Value resultRow(QuantizationEmitter &e, const StagedStep &step, int64_t i,
                  int64_t r) {
    Value g = e.divIndex(step.lane, 4);
    return e.addIndex(warpOrigin(e, step).first,
                      e.addIndex(g, e.cIndex(16 * i + 8 * (r >> 1))));
  }
  Value resultCol(QuantizationEmitter &e, const StagedStep &step, int64_t j,
                  int64_t r) {
    Value t = arith::RemUIOp::create(e.b, step.lane, e.cIndex(4));
    return e.addIndex(warpOrigin(e, step).second,
                      e.addIndex(e.mulIndex(t, e.cIndex(2)),
                                 e.cIndex(8 * j + (r & 1))));
  }
};

/// The halves of an E8M0 scale 2^a (code `code`, i32): 2^floor(a/2) and
/// 2^ceil(a/2), each an exact E8M0 value; NaN for the NaN code 0xFF. For
/// two MX scales, (A1·B1) and (A2·B2) are exact fp32 powers of two
/// (exponents in [-128, 127]) whose product is 2^(a+b), so a chunk's exact
/// sum times them, in that order, is exact whenever the result is a normal
/// fp32 and no product of dequantized values overflows — which is when the
/// scaled_matmul contract's per-element products are exact too.
std::pair<Value, Value> scaleHalves(QuantizationEmitter &e, Value code) {
  Value a = e.sub(code, e.c32(127));
  Value lower = arith::ShRSIOp::create(e.b, a, e.c32(1));
  Value upper = e.sub(a, lower);
  Value nan = e.cmp(CmpIPredicate::eq, code, e.c32(0xFF));
  auto power = [&](Value exponent) {
    return e.select(nan, e.cF32Bits(0x7FC00000),
                    e.decodeE8M0(e.add(exponent, e.c32(127))));
  };
  return {power(lower), power(upper)};
}

/// Four E2M1 codes (one per byte of `word`) widened to their E4M3 bytes
/// (exact), all four at once: magnitude m (3 bits) gives 0 for m = 0, 0x30
/// (0.5) for m = 1 and 0x30 + 4m for m >= 2 (1, 1.5, 2, 3, 4, 6); the sign
/// moves from bit 3 to bit 7. No carry crosses a byte.
Value widenE2M1(QuantizationEmitter &e, Value word) {
  Value m = e.bitAnd(word, e.c32(0x07070707));
  Value sign = e.shl(e.bitAnd(word, e.c32(0x08080808)), e.c32(4));
  // 0xFF in each byte whose magnitude is >= 2 (>= 1).
  auto atLeast = [&](int64_t bound) {
    Value bit = e.bitAnd(e.shrui(e.add(m, e.c32(0x01010101 * (8 - bound))),
                                 e.c32(3)),
                         e.c32(0x01010101));
    return e.mul(bit, e.c32(0xFF));
  };
  Value two = atLeast(2), one = atLeast(1);
  Value large = e.bitAnd(e.add(e.shl(m, e.c32(2)), e.c32(0x30303030)), two);
  Value half = e.bitAnd(e.c32(0x30303030),
                        e.bitAnd(one, e.bitXor(two, e.c32(-1))));
  return e.bitOr(e.bitOr(large, half), sign);
}

Value NVVMGemmLowering::scratchCodes(QuantizationEmitter &e, Value word,
                                     const OperandPlan &operand) {
  return isE2M1(operand) ? widenE2M1(e, word) : word;
}

Value NVVMGemmLowering::foldCodes(QuantizationEmitter &e, Value vector,
                                        Value offset) {
  // A nonzero byte has bit 5 or 6 set: t holds 8 in each, and w + t·d adds
  // 8d to each (no byte carries or borrows: magnitudes stay in 0x08 ..
  // 0x7C, the sign bits untouched).
  SmallVector<Value> words;
  for (int64_t w = 0; w < 4; ++w) {
    Value word = vector::ExtractOp::create(e.b, vector, ArrayRef<int64_t>{w});
    Value nonzero = e.bitAnd(e.bitOr(e.shrui(word, e.c32(2)),
                                     e.shrui(word, e.c32(3))),
                             e.c32(0x08080808));
    words.push_back(e.add(word, e.mul(nonzero, offset)));
  }
  return vector::FromElementsOp::create(e.b, VectorType::get({4}, e.i32()),
                                        words);
}

Value NVVMGemmLowering::exactCodes(QuantizationEmitter &e, Value vector,
                                   Value offset) {
  // Four bytes at a time. A nonzero magnitude byte m (E2M1 as E4M3: 0x30,
  // 0x38, 0x3C, 0x40, 0x44, 0x48, 0x4C for 1/2 .. 6) has bit 5 or 6 set,
  // and (m >> 2) & 7 (4, 6, 7, 0, 1, 2, 3) picks 2 · value (1 .. 12) from
  // an eight-byte table by prmt. Shifted by the offset (at most 3: at most
  // 96, no byte carries into the next), then the negative bytes negated as
  // (v ^ 0xFF) + 1 (v >= 1: no carry either); zero stays 0, whatever its
  // sign. The integers of numerics::exactInteger.
  constexpr uint32_t kTableLow = 0x0C080604;  // 2·value for indices 0..3
  constexpr uint32_t kTableHigh = 0x03020001; // for 4..7 (5 is unused)
  SmallVector<Value> words;
  for (int64_t w = 0; w < 4; ++w) {
    Value word = vector::ExtractOp::create(e.b, vector, ArrayRef<int64_t>{w});
    Value nonzero = e.bitAnd(e.bitOr(e.shrui(word, e.c32(5)),
                                     e.shrui(word, e.c32(6))),
                             e.c32(0x01010101));
    Value indices = e.bitAnd(e.shrui(word, e.c32(2)), e.c32(0x07070707));
    Value nibbles = e.bitOr(indices, e.shrui(indices, e.c32(4)));
    Value selector =
        e.bitOr(e.bitAnd(nibbles, e.c32(0xFF)),
                e.bitAnd(e.shrui(nibbles, e.c32(8)), e.c32(0xFF00)));
    Value doubled = NVVM::PermuteOp::create(
        e.b, e.i32(), e.c32(kTableLow), e.c32(kTableHigh), selector,
        NVVM::PermuteMode::DEFAULT);
    Value magnitude = e.shl(e.bitAnd(doubled, e.mul(nonzero, e.c32(0xFF))),
                            offset);
    Value negative = e.bitAnd(e.shrui(word, e.c32(7)), nonzero);
    words.push_back(e.add(
        e.bitXor(magnitude, e.mul(negative, e.c32(0xFF))), negative));
  }
  return vector::FromElementsOp::create(e.b, VectorType::get({4}, e.i32()),
                                        words);
}

SmallVector<Value>
NVVMGemmLowering::accumulateStep(QuantizationEmitter &e,
                                 const StagedStep &step,
                                 ValueRange accumulators) {
  if (wgmma())
    return accumulateWgmma(e, step, accumulators);
  return lhs.kind == OperandKind::BF16
             ? accumulateBF16(e, step, accumulators)
             : accumulateBlockScaled(e, step, accumulators);
}

/// A finished wgmma fragment's `count` values, each through an empty asm
/// after the wait that finished it: nothing reads them before the wait.
static SmallVector<Value> pinnedValues(QuantizationEmitter &e, Value fragment,
                                       int64_t count, bool integers = false) {
  SmallVector<Value> values;
  for (int64_t r = 0; r < count; ++r)
    values.push_back(
        LLVM::InlineAsmOp::create(
            e.b, integers ? e.i32() : e.f32(),
            ValueRange{LLVM::ExtractValueOp::create(e.b, fragment, r)}, "",
            integers ? "=r,0" : "=f,0", /*has_side_effects=*/true,
            /*is_align_stack=*/false,
            LLVM::tailcallkind::TailCallKind::None,
            /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr)
            .getResult(0));
  return values;
}

/// The shared-memory matrix descriptor of a swizzled tile starting at
/// shared address `start` (i64): bits 0-13 start >> 4, 16-29 the leading
/// byte offset >> 4, 32-45 the stride byte offset >> 4, 62-63 the swizzle
/// (1: 128, 2: 64, 3: 32 bytes).
///   K-major, rows of `pitch` bytes (32, 64 or 128: the swizzle): the
///   leading offset unused (1), the stride eight rows. Each K slice of 32
///   bytes further along the rows is the same descriptor plus 2.
///   MN-major (GemmKernelPlan's mnMajor tiles: K-rows of 128 bytes in
///   chunks of 64 along M or N, `chunkBytes` apart): the leading offset
///   the next chunk along M or N, the stride the next eight K-rows; 128-byte
///   swizzle. Each K slice of 16 rows further is the descriptor plus 128.
static Value swizzledDescriptor(QuantizationEmitter &e, Value start,
                                int64_t pitch) {
  const uint64_t swizzle = pitch == 128 ? 1 : pitch == 64 ? 2 : 3;
  const uint64_t fixed =
      (uint64_t{1} << 16) | (uint64_t(8 * pitch >> 4) << 32) | (swizzle << 62);
  Value address = e.shrui(e.bitAnd(start, e.c64(0x3FFFF)), e.c64(4));
  return e.bitOr(address, e.c64(static_cast<int64_t>(fixed)));
}
static Value mnMajorDescriptor(QuantizationEmitter &e, Value start,
                               int64_t chunkBytes) {
  const uint64_t fixed = (uint64_t(chunkBytes >> 4) << 16) |
                         (uint64_t(1024 >> 4) << 32) | (uint64_t{1} << 62);
  Value address = e.shrui(e.bitAnd(start, e.c64(0x3FFFF)), e.c64(4));
  return e.bitOr(address, e.c64(static_cast<int64_t>(fixed)));
}

SmallVector<Value>
NVVMGemmLowering::accumulateWgmma(QuantizationEmitter &e,
                                  const StagedStep &step,
                                  ValueRange accumulators) {
  MLIRContext *context = kernel.getContext();
  const bool bf16 = lhs.kind == OperandKind::BF16;
  const int64_t sliceK = bf16 ? 16 : 32; // 32 bytes of K per wgmma
  Type fragment = fragmentType(step.exact);
  // E2M1 codes are staged widened to E4M3, or as exact integers.
  const NVVM::WGMMATypes type = bf16         ? NVVM::WGMMATypes::bf16
                                : step.exact ? NVVM::WGMMATypes::s8
                                             : NVVM::WGMMATypes::e4m3;
  // The warpgroup's A (its 64 rows of the lhs tile) and B (its groupN()
  // columns of the rhs tile), K slice 0.
  Value base = arith::IndexCastUIOp::create(
      e.b, e.i64(),
      memref::ExtractAlignedPointerAsIndexOp::create(e.b, step.bytes));
  auto [groupRow, groupCol] = warpgroupOrigin(e, step);
  // An MN-major side (mnMajor: its group's rows start a chunk of 64) is
  // read transposed: A column-major, B row-major.
  const bool mnMajor[2] = {lhs.mnMajor, rhs.mnMajor};
  const int64_t chunkBytes = tiling.stepK * 128;
  auto descriptor = [&](int side, Value rowInTile) {
    Value within = mnMajor[side]
                       ? e.mulIndex(e.divIndex(rowInTile, 64), e.cIndex(chunkBytes))
                       : e.mulIndex(rowInTile, e.cIndex(tiling.pitch[side]));
    Value at = e.addIndex(
        e.addIndex(step.stageAt,
                   e.cIndex(side == 0 ? lhsTileAt() : rhsTileAt())),
        within);
    Value start = e.add(base, arith::IndexCastUIOp::create(e.b, e.i64(), at));
    return mnMajor[side] ? mnMajorDescriptor(e, start, chunkBytes)
                         : swizzledDescriptor(e, start, tiling.pitch[side]);
  };
  // (Ping-pong: fragment f's A 64 rows below fragment f - 1's.)
  SmallVector<Value> a0s{descriptor(0, groupRow)};
  Value b0 = descriptor(1, groupCol);
  for (int64_t f = 1; f < fragments(); ++f)
    a0s.push_back(descriptor(0, e.addIndex(groupRow, e.cIndex(64 * f))));
  Value a0 = a0s.front();
  auto mma = [&](int64_t slice, Value d, NVVM::WGMMAScaleOut scaleD,
                 int64_t f = 0) {
    auto offset = [&](int side) {
      return e.c64((mnMajor[side] ? 128 : 2) * slice);
    };
    return NVVM::WgmmaMmaAsyncOp::create(
        e.b, fragment, d, e.add(f ? a0s[f] : a0, offset(0)),
        e.add(b0, offset(1)),
        NVVM::MMAShapeAttr::get(context, 64, groupN(), sliceK), type, type,
        step.exact ? NVVM::WGMMATypes::s32 : NVVM::WGMMATypes::f32, scaleD,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
        mnMajor[0] ? NVVM::MMALayout::col : NVVM::MMALayout::row,
        mnMajor[1] ? NVVM::MMALayout::row : NVVM::MMALayout::col,
        /*satfinite=*/nullptr);
  };
  auto unpack = [&](Value d) {
    return pinnedValues(e, d, static_cast<int64_t>(accumulators.size()));
  };
  const int64_t slices = tiling.stepK / sliceK;
  if (bf16 || step.exact) {
    // All of K in the tensor cores' accumulator (bf16: fp32, G = K; the
    // exact pass: s32, exact), the fragment carried from step to step:
    // this step's group is left in flight (the next step's wgmma on the
    // same fragment follows it in order), the previous step's waited for —
    // its staged buffer is reused two steps on — and the last by
    // storeAccumulators.
    // (In ping-pong, each slice's products of both fragments.)
    SmallVector<Value> d(accumulators);
    NVVM::WgmmaFenceAlignedOp::create(e.b);
    for (int64_t slice = 0; slice < slices; ++slice)
      for (int64_t f = 0; f < static_cast<int64_t>(d.size()); ++f)
        d[f] = mma(slice, d[f], NVVM::WGMMAScaleOut::one, f);
    NVVM::WgmmaGroupSyncAlignedOp::create(e.b);
    NVVM::WgmmaWaitGroupSyncOp::create(e.b, 1);
    return d;
  }
  // (The accumulator input of a wgmma that starts from zero is not read.)
  Value unread = LLVM::UndefOp::create(e.b, fragment);
  if (step.folded) {
    // Folded (foldsScales): each slice's sums from zero are the contract's
    // scaled sums over the tile's references, exact; one fp32 add each.
    // While the tensor cores sum slice s + 1, slice s is added (wait_group
    // 1), its results pinned after the wait that finished them.
    SmallVector<Value> acc(accumulators);
    Value pending[2];
    auto add = [&](Value d) {
      SmallVector<Value> sums = unpack(d);
      for (auto [sum, partial] : llvm::zip(acc, sums))
        sum = e.addf(sum, partial);
    };
    for (int64_t slice = 0; slice < slices; ++slice) {
      NVVM::WgmmaFenceAlignedOp::create(e.b);
      pending[slice % 2] = mma(slice, unread, NVVM::WGMMAScaleOut::zero);
      NVVM::WgmmaGroupSyncAlignedOp::create(e.b);
      if (slice > 0) {
        NVVM::WgmmaWaitGroupSyncOp::create(e.b, 1);
        add(pending[(slice - 1) % 2]);
      }
    }
    NVVM::WgmmaWaitGroupSyncOp::create(e.b, 0);
    add(pending[(slices - 1) % 2]);
    return acc;
  }
  // MX x MX: each 32 of K (one scale block) summed from zero by one wgmma
  // (every E2M1 product and their sum exact), then scaled in fp32
  // (addScaled). The next slice's wgmma waits for that: with a slice's
  // scale codes and their products live besides, two slices' results
  // would not fit the thread's 255 registers (the folded path above holds
  // two, with no scales, at 254); the block's other warpgroup keeps the
  // tensor cores busy meanwhile.
  SmallVector<Value> acc(accumulators);
  for (int64_t slice = 0; slice < slices; ++slice) {
    NVVM::WgmmaFenceAlignedOp::create(e.b);
    Value d = mma(slice, unread, NVVM::WGMMAScaleOut::zero);
    NVVM::WgmmaGroupSyncAlignedOp::create(e.b);
    auto [rowCode, colCode] =
        scaleCodes(e, step, e.cIndex(slice), e.cIndex(slice));
    NVVM::WgmmaWaitGroupSyncOp::create(e.b, 0);
    acc = addScaled(e, step, unpack(d), acc, rowCode, colCode);
  }
  return acc;
}

SmallVector<Value>
NVVMGemmLowering::accumulateBlockScaled(QuantizationEmitter &e,
                                        const StagedStep &step,
                                        ValueRange accumulators) {
  const std::string intrinsic = "llvm.nvvm.mma.m16n8k32.row.col.f32." +
                                mmaType(lhs) + "." + mmaType(rhs) + ".f32";
  Value g = e.divIndex(step.lane, 4);
  Value t = arith::RemUIOp::create(e.b, step.lane, e.cIndex(4));
  Value zeroF = e.cF32(0.0f), zeroWord = e.c32(0);
  const int64_t halves = tiling.chunk == 16 ? 2 : 1;

  SmallVector<Value> acc(accumulators);
  for (int64_t q = 0; q < tiling.stepK / 32; ++q) {
    auto fragments = loadFragments(e, step, e.cIndex(q * 32), g, t, 4);
    auto &a = fragments.first;
    auto &bw = fragments.second;
    for (int64_t h = 0; h < halves; ++h) {
      // With 16-element chunks, half h of K: the other half's registers 0.
      auto keep = [&](Value word, int64_t half) {
        return halves == 1 || half == h ? word : zeroWord;
      };
      // The scale codes of the thread's rows and columns for this chunk.
      auto blockOf = [&](const OperandPlan &operand) {
        return e.cIndex(operand.block() == 16 ? 2 * q + h : q);
      };
      auto [rowCode, colCode] =
          scaleCodes(e, step, blockOf(lhs), blockOf(rhs));
      // The chunk's sums, all eight MMAs first.
      SmallVector<Value> partials;
      for (int64_t i = 0; i < tilesM(); ++i)
        for (int64_t j = 0; j < tilesN(); ++j) {
          partials.append(mmaSync(
              e, intrinsic,
              {keep(a[i][0], 0), keep(a[i][1], 0), keep(a[i][2], 1),
               keep(a[i][3], 1)},
              {keep(bw[j][0], 0), keep(bw[j][1], 1)},
              {zeroF, zeroF, zeroF, zeroF}));
        }
      acc = step.exact ? addExactly(e, step, partials, acc, rowCode, colCode)
                       : addScaled(e, step, partials, acc, rowCode, colCode);
    }
  }
  return acc;
}

SmallVector<Value> NVVMGemmLowering::addExactly(QuantizationEmitter &e,
                                                const StagedStep &step,
                                                ArrayRef<Value> partials,
                                                ArrayRef<Value> acc,
                                                ArrayRef<Value> rowCode,
                                                ArrayRef<Value> colCode) {
  auto offsets = [&](ArrayRef<Value> codes, int side) {
    SmallVector<Value> offsets;
    for (auto [index, code] : llvm::enumerate(codes)) {
      const int64_t i = static_cast<int64_t>(index);
      Value at = side == 0 ? resultRow(e, step, i / 2, 2 * (i % 2))
                           : resultCol(e, step, i / 2, i % 2);
      offsets.push_back(exactOffset(e, step, side, at, code));
    }
    return offsets;
  };
  SmallVector<Value> rowOffset = offsets(rowCode, 0),
                     colOffset = offsets(colCode, 1);
  SmallVector<Value> next(acc.size());
  for (int64_t i = 0; i < tilesM(); ++i)
    for (int64_t j = 0; j < tilesN(); ++j)
      for (int64_t r = 0; r < 4; ++r) {
        const int64_t at = (i * tilesN() + j) * 4 + r;
        Value exponent = e.add(e.add(rowOffset[2 * i + (r >> 1)],
                                     colOffset[2 * j + (r & 1)]),
                               e.c32(127 + 2));
        Value factor = e.bitcast(e.shl(exponent, e.c32(23)), e.f32());
        next[at] = e.add(acc[at], arith::FPToSIOp::create(
                                      e.b, e.i32(), e.mulf(partials[at], factor)));
      }
  return next;
}

SmallVector<Value> NVVMGemmLowering::addScaled(QuantizationEmitter &e,
                                               const StagedStep &step,
                                               ArrayRef<Value> partials,
                                               ArrayRef<Value> acc,
                                               ArrayRef<Value> rowCode,
                                               ArrayRef<Value> colCode) {
  // Each result r of mma tile (i, j), with its row's and column's index
  // among the thread's rows and columns.
  auto each = [&](function_ref<Value(Value, Value, int64_t, int64_t)> add) {
    SmallVector<Value> next(acc.size());
    for (int64_t i = 0; i < tilesM(); ++i)
      for (int64_t j = 0; j < tilesN(); ++j)
        for (int64_t r = 0; r < 4; ++r) {
          int64_t at = (i * tilesN() + j) * 4 + r;
          next[at] = add(partials[at], acc[at], 2 * i + (r >> 1),
                         2 * j + (r & 1));
        }
    return next;
  };
  auto fma = [&](Value x, Value y, Value z) -> Value {
    return math::FmaOp::create(e.b, x, y, z);
  };
  if (lhs.kind != OperandKind::MX || rhs.kind != OperandKind::MX) {
    // An NVFP4 side: decodeE4M3(code) x tensor scale (MX: 2^e), rounded.
    const FormatConstants e4m3 = constantsOf(numerics::ElementFormat::E4M3);
    auto factor = [&](const OperandPlan &operand, Value code,
                      Value tensorScale) -> Value {
      if (operand.kind == OperandKind::MX)
        return e.decodeE8M0(code);
      return e.mulf(e.decode(code, e4m3), tensorScale);
    };
    SmallVector<Value> rowFactor, colFactor;
    for (Value code : rowCode)
      rowFactor.push_back(factor(lhs, code, step.lhsTensorScale));
    for (Value code : colCode)
      colFactor.push_back(factor(rhs, code, step.rhsTensorScale));
    return each([&](Value partial, Value sum, int64_t row, int64_t col) {
      return fma(e.mulf(partial, rowFactor[row]), colFactor[col], sum);
    });
  }
  // MX x MX, exactly. Where every scale code of the step is moderate
  // (StagedStep::moderateScales: each pair is 2^s with s in [-90, 90], none
  // NaN), 2^s is a normal fp32 built by one integer add ((ca << 23) +
  // ((cb - 127) << 23)), and every nonzero sum times it is a normal fp32
  // (E5M2 sums lie in [2^-32, 2^37)): one fma, exact product, the sum
  // rounded once. Elsewhere the scale's halves (scaleHalves), with the same
  // result wherever both are exact. The flag is the block's: the branch is
  // uniform.
  Value safe = step.moderateScales;
  SmallVector<Type> types(acc.size(), e.f32());
  auto branch = scf::IfOp::create(e.b, types, safe, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(e.b);
    e.b.setInsertionPointToStart(&branch.getThenRegion().front());
    SmallVector<Value> rowBits, colBits;
    for (Value code : rowCode)
      rowBits.push_back(e.shl(code, e.c32(23)));
    for (Value code : colCode)
      colBits.push_back(e.shl(e.sub(code, e.c32(127)), e.c32(23)));
    scf::YieldOp::create(
        e.b, each([&](Value partial, Value sum, int64_t row, int64_t col) {
          return fma(partial, e.bitcast(e.add(rowBits[row], colBits[col]), e.f32()),
                     sum);
        }));
    e.b.setInsertionPointToStart(&branch.getElseRegion().front());
    SmallVector<std::pair<Value, Value>> rowHalves, colHalves;
    for (Value code : rowCode)
      rowHalves.push_back(scaleHalves(e, code));
    for (Value code : colCode)
      colHalves.push_back(scaleHalves(e, code));
    scf::YieldOp::create(
        e.b, each([&](Value partial, Value sum, int64_t row, int64_t col) {
          auto [a1, a2] = rowHalves[row];
          auto [b1, b2] = colHalves[col];
          return fma(e.mulf(partial, e.mulf(a1, b1)), e.mulf(a2, b2), sum);
        }));
  }
  return SmallVector<Value>(branch.getResults());
}

SmallVector<Value> NVVMGemmLowering::accumulateBF16(QuantizationEmitter &e,
                                                    const StagedStep &step,
                                                    ValueRange accumulators) {
  Value g = e.divIndex(step.lane, 4);
  Value t = arith::RemUIOp::create(e.b, step.lane, e.cIndex(4));
  SmallVector<Value> acc(accumulators);
  for (int64_t q = 0; q < tiling.stepK / 16; ++q) {
    auto fragments = loadFragments(e, step, e.cIndex(q * 16), g, t, 2);
    auto &a = fragments.first;
    auto &bw = fragments.second;
    for (int64_t i = 0; i < tilesM(); ++i)
      for (int64_t j = 0; j < tilesN(); ++j) {
        Value *c = &acc[(i * tilesN() + j) * 4];
        SmallVector<Value> d =
            mmaSync(e, "llvm.nvvm.mma.m16n8k16.row.col.bf16",
                    {a[i][0], a[i][1], a[i][2], a[i][3]}, {bw[j][0], bw[j][1]},
                    {c[0], c[1], c[2], c[3]});
        std::copy(d.begin(), d.end(), c);
      }
  }
  return acc;
}

void NVVMGemmLowering::storeAccumulators(
    QuantizationEmitter &e, const StagedStep &step, ValueRange carried,
    function_ref<void(Value, Value, Value)> store) {
  SmallVector<Value> accumulators(carried);
  if (wgmma() && (chainsSteps() || step.exact)) {
    // The last step's group, then the fragment's values, pinned after it;
    // exact sums as the nearest fp32 (cvt.rn).
    NVVM::WgmmaWaitGroupSyncOp::create(e.b, 0);
    accumulators.clear();
    for (Value fragment : carried)
      llvm::append_range(
          accumulators,
          pinnedValues(e, fragment, tilesM() * tilesN() * 4, step.exact));
  }
  if (step.exact)
    for (Value &sum : accumulators)
      sum = arith::SIToFPOp::create(e.b, e.f32(), sum);
  // Fragment f (ping-pong) 64 rows below fragment f - 1.
  const int64_t perFragment = tilesM() * tilesN() * 4;
  for (int64_t f = 0;
       f * perFragment < static_cast<int64_t>(accumulators.size()); ++f)
    for (int64_t i = 0; i < tilesM(); ++i)
      for (int64_t j = 0; j < tilesN(); ++j)
        for (int64_t r = 0; r < 4; ++r)
          store(accumulators[f * perFragment + (i * tilesN() + j) * 4 + r],
                e.addIndex(resultRow(e, step, i, r), e.cIndex(64 * f)),
                resultCol(e, step, j, r));
}

class ConvertTetraToNVVM
    : public tetra::impl::ConvertTetraToNVVMBase<ConvertTetraToNVVM> {
public:
  using ConvertTetraToNVVMBase::ConvertTetraToNVVMBase;
  void runOnOperation() override;
};

void ConvertTetraToNVVM::runOnOperation() {
  ModuleOp module = getOperation();
  if (chip != "sm_90a") {
    module.emitError() << "convert-tetra-to-nvvm: chip '" << chip
                       << "' is not supported (sm_90a)";
    return signalPassFailure();
  }
  if (failed(lowerGemmKernels(module, [&](KernelOp kernel) {
        return NVVMGemmLowering(kernel, chip, blockTile).lower(module);
      })))
    return signalPassFailure();
}

} // namespace

//===----------------------------------------------------------------------===//
// Attention's matrix instruction (AttentionKernelPlan.h)
//===----------------------------------------------------------------------===//

namespace {

/// mma.sync.m16n8k8 with TF32 operands, lane 4g + t holding A's (g, t),
/// (g + 8, t), (g, t + 4), (g + 8, t + 4), B's (t, g), (t + 4, g) and the
/// accumulators (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). Each
/// fp32 operand x is split into hi = x rounded to TF32 and lo = x - hi
/// (exact), and a b is summed as lo·hi + hi·lo + hi·hi: the fp32 product
/// but for lo·lo (below 2^-21 of it) and lo's own TF32 rounding.
class NVVMAttentionTile final : public AttentionMatrixTile {
public:
  int64_t lanes() const override { return 32; }
  int64_t tileN() const override { return 8; }
  int64_t tileK() const override { return 8; }
  int64_t aValues() const override { return 4; }
  int64_t bValues() const override { return 2; }
  int64_t cValues() const override { return 4; }
  std::pair<Value, Value> aAt(QuantizationEmitter &e, Value lane,
                              int64_t r) const override {
    return {e.addIndex(group(e, lane), e.cIndex(8 * (r & 1))),
            e.addIndex(inGroup(e, lane), e.cIndex(4 * (r >> 1)))};
  }
  std::pair<Value, Value> bAt(QuantizationEmitter &e, Value lane,
                              int64_t r) const override {
    return {e.addIndex(inGroup(e, lane), e.cIndex(4 * r)), group(e, lane)};
  }
  std::pair<Value, Value> cAt(QuantizationEmitter &e, Value lane,
                              int64_t r) const override {
    return {e.addIndex(group(e, lane), e.cIndex(8 * (r >> 1))),
            e.addIndex(e.mulIndex(inGroup(e, lane), e.cIndex(2)),
                       e.cIndex(r & 1))};
  }
  int64_t rowSlots() const override { return 2; }
  int64_t rowSlot(int64_t r) const override { return r >> 1; }
  SmallVector<int32_t> rowPartners() const override { return {1, 2}; }
  /// The static limit: larger tiles in dynamic shared memory (64 x 64,
  /// up to 105 KiB) were measured no faster (docs/benchmarks.md).
  int64_t sharedBytes() const override { return 48 * 1024; }
  /// Packed BF16 blocks of 128 rows: up to 96 KiB (two blocks a
  /// multiprocessor, as their registers allow), static — ptxas and the
  /// driver take static shared memory past 48 KB for sm_90a.
  int64_t packedSharedBytes() const override { return 96 * 1024; }
  /// .minnctapersm `blocks`: ptxas bounds the registers a thread to fit.
  void requestBlocksPerMultiprocessor(gpu::GPUFuncOp func,
                                      int64_t blocks) const override {
    func->setAttr("nvvm.minctasm",
                  IntegerAttr::get(IntegerType::get(func.getContext(), 32),
                                   blocks));
  }
  /// ex2.approx.f32 (the SFU's; -inf gives 0).
  Value exp2(QuantizationEmitter &e, Value x) const override {
    return LLVM::CallIntrinsicOp::create(
               e.b, e.f32(), e.b.getStringAttr("llvm.nvvm.ex2.approx.f32"),
               ValueRange{x})
        .getResult(0);
  }

  SmallVector<Value> multiply(QuantizationEmitter &e, ArrayRef<Value> a,
                              ArrayRef<Value> b,
                              ArrayRef<Value> c) const override {
    auto split = [&](ArrayRef<Value> x, SmallVector<Value> &hi,
                     SmallVector<Value> &lo) {
      for (Value value : x) {
        Value bits = e.bitcast(value, e.i32());
        // Round to nearest (ties away) at TF32's 10 fraction bits.
        // (Integer arithmetic: cvt.rna.tf32.f32 measured slower.)
        Value high = e.bitAnd(e.add(bits, e.c32(0x1000)),
                              e.c32(static_cast<int32_t>(0xFFFFE000u)));
        hi.push_back(high);
        lo.push_back(e.bitcast(e.subf(value, e.bitcast(high, e.f32())),
                               e.i32()));
      }
    };
    SmallVector<Value> aHi, aLo, bHi, bLo;
    split(a, aHi, aLo);
    split(b, bHi, bLo);
    SmallVector<Value> d(c);
    auto mma = [&](ArrayRef<Value> x, ArrayRef<Value> y) {
      d = mmaSync(e, "llvm.nvvm.mma.m16n8k8.row.col.tf32", x, y, d);
    };
    mma(aLo, bHi);
    mma(aHi, bLo);
    mma(aHi, bHi);
    return d;
  }

  /// The accumulators (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
  /// are A's (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) with k slot t
  /// holding column 2t and slot t + 4 column 2t + 1; B's (t, g), (t + 4, g)
  /// then read k = 2t and 2t + 1.
  SmallVector<int64_t> accumulatorAsA() const override { return {0, 2, 1, 3}; }
  std::pair<Value, Value> bAtAfterAccumulator(QuantizationEmitter &e,
                                              Value lane,
                                              int64_t r) const override {
    return {e.addIndex(e.mulIndex(inGroup(e, lane), e.cIndex(2)), e.cIndex(r)),
            group(e, lane)};
  }

  /// mma.sync.m16n8k16 BF16: lane 4g + t holds A's pairs at (g, 2t),
  /// (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8) and B's at (2t, g),
  /// (2t + 8, g); its accumulators are m16n8k8's. A k-slab of 16 is two
  /// accumulator tiles: word w takes tile w / 2's values (w % 2) * 2 and
  /// (w % 2) * 2 + 1 — FlashAttention-2's P in registers.
  bool packsBF16() const override { return true; }
  int64_t packedK() const override { return 16; }
  int64_t packedAWords() const override { return 4; }
  int64_t packedBWords() const override { return 2; }
  std::pair<Value, Value> packedAAt(QuantizationEmitter &e, Value lane,
                                    int64_t w) const override {
    return {e.addIndex(group(e, lane), e.cIndex(8 * (w & 1))),
            e.addIndex(e.mulIndex(inGroup(e, lane), e.cIndex(2)),
                       e.cIndex(8 * (w >> 1)))};
  }
  std::pair<Value, Value> packedBAt(QuantizationEmitter &e, Value lane,
                                    int64_t w) const override {
    return {e.addIndex(e.mulIndex(inGroup(e, lane), e.cIndex(2)),
                       e.cIndex(8 * w)),
            group(e, lane)};
  }
  std::array<int64_t, 3> packedAFromAccumulators(int64_t w) const override {
    return {w >> 1, 2 * (w & 1), 2 * (w & 1) + 1};
  }
  SmallVector<Value> multiplyPacked(QuantizationEmitter &e, ArrayRef<Value> a,
                                    ArrayRef<Value> b,
                                    ArrayRef<Value> c) const override {
    return mmaSync(e, "llvm.nvvm.mma.m16n8k16.row.col.bf16", a, b, c);
  }

  /// ldmatrix.x4: lane l gives the address of row l % 8 of 8 x 8 matrix
  /// l / 8 and receives word (l / 4, l % 4) of each: A's four matrices are
  /// rows 0-7 / 8-15 by k 0-7 / 8-15 (a0 .. a3), B2's n-tile 0 then 1, each
  /// k 0-7 then 8-15 (b0, b1 of each tile).
  bool loadsPackedMatrices() const override { return true; }
  SmallVector<Value> loadPackedA(QuantizationEmitter &e, Value memory,
                                 Value lane, Value row0, Value k0,
                                 int64_t stride) const override {
    return ldmatrix(e, memory, x4Address(e, lane, row0, k0, stride, false));
  }
  SmallVector<Value> loadPackedB2(QuantizationEmitter &e, Value memory,
                                  Value lane, Value n0, Value k0,
                                  int64_t stride) const override {
    return ldmatrix(e, memory, x4Address(e, lane, n0, k0, stride, true));
  }

  /// ldmatrix.x4.trans: lane l gives the address of row l % 8 of 8 x 8
  /// matrix l / 8 of the [k][n] tile — n-tile 0 then 1, each k 0-7 then
  /// 8-15 — and receives, transposed, the pair (k = 2 (l % 4), + 1) of
  /// column n = l / 4 of each: B's b0, b1 of each n-tile.
  bool loadsTransposedMatrices() const override { return true; }
  SmallVector<Value> loadPackedB2Transposed(QuantizationEmitter &e,
                                            Value memory, Value lane, Value n0,
                                            Value k0,
                                            int64_t stride) const override {
    return ldmatrix(e, memory, x4Address(e, lane, k0, n0, stride, false),
                    /*transposed=*/true);
  }

  /// The element lane `lane` addresses for ldmatrix.x4 in the 16 x 16
  /// block at (row0, column0) of a tile with rows `stride` elements apart:
  /// row lane % 8 of matrix m = lane / 8, the matrices at rows + 8 (m % 2)
  /// and columns + 8 (m / 2) — or, `columnsFirst`, at columns + 8 (m % 2)
  /// and rows + 8 (m / 2).
  static Value x4Address(QuantizationEmitter &e, Value lane, Value row0,
                         Value column0, int64_t stride, bool columnsFirst) {
    Value matrix = e.divIndex(lane, 8);
    auto offset = [&](bool second) { // 8 (m / 2), or 8 (m % 2)
      return e.mulIndex(second ? e.divIndex(matrix, 2)
                               : arith::RemUIOp::create(e.b, matrix,
                                                        e.cIndex(2))
                                     .getResult(),
                        e.cIndex(8));
    };
    Value row = e.addIndex(
        e.addIndex(row0, arith::RemUIOp::create(e.b, lane, e.cIndex(8))),
        offset(columnsFirst));
    Value column = e.addIndex(column0, offset(!columnsFirst));
    return e.addIndex(e.mulIndex(row, e.cIndex(stride)), column);
  }

  /// BF16 values are TF32 values: one mma.sync, exact products.
  SmallVector<Value> multiplyBF16Values(QuantizationEmitter &e,
                                        ArrayRef<Value> a, ArrayRef<Value> b,
                                        ArrayRef<Value> c) const override {
    auto bits = [&](ArrayRef<Value> x) {
      SmallVector<Value> result;
      for (Value value : x)
        result.push_back(e.bitcast(value, e.i32()));
      return result;
    };
    return mmaSync(e, "llvm.nvvm.mma.m16n8k8.row.col.tf32", bits(a), bits(b),
                   SmallVector<Value>(c));
  }

  /// wgmma.mma_async m64nNk16 BF16 with A from registers (the RS form,
  /// which MLIR's op does not have: inline PTX), B by its descriptor: the
  /// K-major tile's (n rows of 128 bytes) or the MN-major one's (k rows of
  /// 64 columns), the k-slab s at 32 s bytes along the rows or at row 16 s.
  bool multipliesByWarpgroup() const override { return true; }
  void fenceSharedForProducts(QuantizationEmitter &e) const override {
    NVVM::FenceProxyOp::create(
        e.b, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(e.b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  }
  void warpgroupProducts(QuantizationEmitter &e, ArrayRef<SmallVector<Value>> a,
                         Value b, int64_t n, bool nMajor,
                         MutableArrayRef<SmallVector<Value>> c) const override {
    Value base = arith::IndexCastUIOp::create(
        e.b, e.i64(), memref::ExtractAlignedPointerAsIndexOp::create(e.b, b));
    // (An MN-major tile here is one chunk of 64 columns: its leading
    // offset, to the next chunk, is never used.)
    Value descriptor = nMajor ? swizzledDescriptor(e, base, 128)
                              : mnMajorDescriptor(e, base, 1024);
    const int64_t count = n / 2; // accumulators a lane
    SmallVector<Type> types(count, e.f32());
    Type fragment = LLVM::LLVMStructType::getLiteral(e.b.getContext(), types);
    std::string registers;
    for (int64_t r = 0; r < count; ++r)
      registers += (r ? ", $" : "$") + std::to_string(r);
    // Operands after the tied accumulators: A's four words, B's
    // descriptor, then whether to add to the accumulators (scale-d).
    const int64_t aOperand = 2 * count;
    const std::string asmString = fmt::format(
        "{{\n.reg .pred p;\nsetp.ne.b32 p, ${6}, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n{0}k16.f32.bf16.bf16 {{{1}}}, "
        "{{${2}, ${3}, ${4}, ${5}}}, ${7}, p, 1, 1, {8};\n}}",
        n, registers, aOperand, aOperand + 1, aOperand + 2, aOperand + 3,
        aOperand + 5, aOperand + 4, nMajor ? 0 : 1);
    std::string constraints;
    for (int64_t r = 0; r < count; ++r)
      constraints += "=f,";
    for (int64_t r = 0; r < count; ++r)
      constraints += std::to_string(r) + ",";
    constraints += "r,r,r,r,l,r";
    // Accumulators that are all the constant 0 are not read: the first
    // k-slab's product is not added to them (scale-d false), so that no
    // register is zeroed between the products in flight.
    auto zero = [](Value x) { return matchPattern(x, m_AnyZeroFloat()); };
    SmallVector<Value> fragments(c.size());
    NVVM::WgmmaFenceAlignedOp::create(e.b);
    for (auto [m, words] : llvm::enumerate(a)) {
      SmallVector<Value> d(c[m]);
      const bool fromZero = llvm::all_of(d, zero);
      if (fromZero)
        d.assign(count, LLVM::UndefOp::create(e.b, e.f32()));
      for (int64_t slab = 0; slab < static_cast<int64_t>(words.size()) / 4;
           ++slab) {
        SmallVector<Value> operands(d);
        operands.append(words.begin() + 4 * slab, words.begin() + 4 * slab + 4);
        operands.push_back(e.add(descriptor, e.c64((nMajor ? 2 : 128) * slab)));
        operands.push_back(e.c32(fromZero && slab == 0 ? 0 : 1));
        fragments[m] = LLVM::InlineAsmOp::create(
                           e.b, fragment, operands, asmString, constraints,
                           /*has_side_effects=*/true, /*is_align_stack=*/false,
                           LLVM::tailcallkind::TailCallKind::None,
                           /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr)
                           .getResult(0);
        for (int64_t r = 0; r < count; ++r)
          d[r] = LLVM::ExtractValueOp::create(e.b, fragments[m], r);
      }
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(e.b);
    NVVM::WgmmaWaitGroupSyncOp::create(e.b, 0);
    for (auto [m, fragment] : llvm::enumerate(fragments))
      c[m] = pinnedValues(e, fragment, count);
  }

private:
  /// ldmatrix.sync.aligned.m8n8.x4(.trans).b16 of the 16 bytes at element
  /// `at` of a BF16 (i16) workgroup memref.
  static SmallVector<Value> ldmatrix(QuantizationEmitter &e, Value memory,
                                     Value at, bool transposed = false) {
    Value address = pointerInto(e, memory, e.mulIndex(at, e.cIndex(2)), 3);
    Type i32 = e.i32();
    Type words = LLVM::LLVMStructType::getLiteral(e.b.getContext(),
                                                  {i32, i32, i32, i32});
    Value loaded =
        LLVM::CallIntrinsicOp::create(
            e.b, words,
            e.b.getStringAttr(
                transposed ? "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16"
                           : "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16"),
            ValueRange{address})
            .getResult(0);
    SmallVector<Value> result;
    for (int64_t r = 0; r < 4; ++r)
      result.push_back(LLVM::ExtractValueOp::create(e.b, loaded, r));
    return result;
  }
  static Value group(QuantizationEmitter &e, Value lane) {
    return e.divIndex(lane, 4);
  }
  static Value inGroup(QuantizationEmitter &e, Value lane) {
    return arith::RemUIOp::create(e.b, lane, e.cIndex(4));
  }
};

} // namespace

std::unique_ptr<AttentionMatrixTile>
tetra::conversion::createNVVMAttentionTile() {
  return std::make_unique<NVVMAttentionTile>();
}
