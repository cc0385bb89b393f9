//===- AttentionKernelPlan.h - Attention on the matrix units -*- C++ -*-===//
//
// Causal grouped-query attention (runtime/kernels/Attention.h: the contract,
// the CPU kernel and its fp64 reference) as tiled GPU kernels on the matrix
// units, one plan for every chip — FlashAttention-2's loop structure, with
// no T x T matrix in memory and no atomics:
//
//   forward    a block per (rows-tile of queries, batch x head); its warps
//              (waves) own 16 query rows each (32 on packed BF16
//              tiles up to head_dim 64, as dQ's). Over the causal key tiles:
//              S = Q K^T on the matrix units, scaled, masked; the running
//              row maximum and exponential sum (online softmax, the row
//              statistics combined across the lanes that hold a row by xor
//              shuffles); P = exp(S - max) through shared memory into
//              O += P V. Writes out = O / sum and lse = max + log(sum).
//   backward   two launches: dQ (a block per query tile: first its rows'
//              delta_i = dout_i . out_i, a thread a row, the CPU's dot
//              product, written for dK and dV too; then over its key tiles:
//              S and dP = dO V^T recomputed, dS = P (dP - delta), dQ += dS
//              K); dK and dV (a block per key tile of a
//              KV head, over the group's query heads and the query tiles
//              at or after it: P^T, dP^T, dV += P^T dO, dK += dS^T Q). Each
//              output is written by one block: deterministic.
//
// Every operand read from memory is staged in shared memory (rows padded by
// 4 floats), fetched as 16-byte pieces one tile ahead; accumulators stay in
// registers, and on a chip whose accumulator layout can be its A operand's
// (sm_90a) so do P and dS, straight into the next product. Masks compare a
// tile column with one limit per row, on the tiles the causal diagonal or
// the sequence's end crosses only (a branch the whole block takes the same
// way); exp(s scale - m) is one fused
// multiply-add into exp2. The scale 1/sqrt(head_dim) is the CPU's fp32 value
// and lse's log the fp64 series of the other kernels; exp is the chip's exp2
// instruction on x log2(e). Results differ from the CPU's by the summation
// order, that exp (about 2^-22 relative) and the matrix units' products
// (sm_90a: fp32 products as three TF32 products, hi·hi + hi·lo + lo·hi,
// about fp32's precision; gfx950: fp32 MFMAs, exact fp32 products).
//
// BF16 operands (bf16_operands, runtime/kernels/Attention.h): Q, K, V and
// dO are rounded as they are staged, P and dS as they are stashed; the
// forward takes two sweeps over the key tiles — lse first (the online
// maximum and sum, each lane's over its own columns, the row's lanes
// combined at the end), then O += round(exp(S - lse)) V — so that its P is
// the backward's, whatever the tiling. Every product then has BF16 operands:
// on a chip with a packed BF16 instruction (sm_90a: mma.sync.m16n8k16) the
// tiles are staged as BF16 pairs along k — an operand read along its
// columns (V in P V, K in dS K, Q and dO in dK and dV) transposed, loaded
// by the chip's matrix load where it has one (ldmatrix) — and P and dS
// packed from the accumulators; elsewhere the fp32 path multiplies the
// rounded values (exact products).
//
// By warpgroups (a chip whose 4 warps multiply 64 rows as one instruction,
// sm_90a's wgmma; head_dim 64): the same passes and loops, each product
// over a warpgroup's 64 rows — A from registers (Q, dO, K, V loaded by the
// chip's matrix load; P and dS packed from the accumulators), B read by the
// tensor cores from a tile staged swizzled in shared memory, read over its
// rows or its columns (one staging of K in dQ, of Q and dO in dK and dV,
// serving both) — so that no warp loads the other side's fragments.
//
// A chip adds only its matrix instruction (AttentionMatrixTile): which
// (row, k), (k, n) and (row, n) elements of the 16 x tileK, tileK x tileN
// and 16 x tileN slabs each lane holds, which lanes share an accumulator
// row, the multiply-add, its exp2 and its shared-memory limit.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_ATTENTIONKERNELPLAN_H
#define TETRA_LOWERING_CONVERSION_ATTENTIONKERNELPLAN_H

#include "lowering/Conversion/GpuKernelBody.h"

#include "llvm/ADT/StringRef.h"

#include <array>
#include <memory>
#include <optional>
#include <utility>

namespace tetra::conversion {

/// One chip's matrix instruction as the attention plan uses it: a warp
/// (wave) adds a 16 x tileK slab A times a tileK x tileN slab B into a
/// 16 x tileN tile of fp32 accumulators.
class AttentionMatrixTile {
public:
  virtual ~AttentionMatrixTile() = default;

  /// Threads of a warp (wave).
  virtual int64_t lanes() const = 0;
  virtual int64_t tileN() const = 0;
  virtual int64_t tileK() const = 0;
  /// A, B and accumulator values per lane.
  virtual int64_t aValues() const = 0;
  virtual int64_t bValues() const = 0;
  virtual int64_t cValues() const = 0;
  /// (row, k) of `lane`'s A value r, (k, n) of its B value r, (row, n) of
  /// its accumulator r.
  virtual std::pair<Value, Value> aAt(QuantizationEmitter &e, Value lane,
                                      int64_t r) const = 0;
  virtual std::pair<Value, Value> bAt(QuantizationEmitter &e, Value lane,
                                      int64_t r) const = 0;
  virtual std::pair<Value, Value> cAt(QuantizationEmitter &e, Value lane,
                                      int64_t r) const = 0;
  /// The distinct rows a lane's accumulators hold, and accumulator r's.
  virtual int64_t rowSlots() const = 0;
  virtual int64_t rowSlot(int64_t r) const = 0;
  /// The xor masks that reach every lane holding the same rows.
  virtual llvm::SmallVector<int32_t> rowPartners() const = 0;
  /// c + a b (fp32 values, a lane's share of each).
  virtual SmallVector<Value> multiply(QuantizationEmitter &e,
                                      llvm::ArrayRef<Value> a,
                                      llvm::ArrayRef<Value> b,
                                      llvm::ArrayRef<Value> c) const = 0;
  /// multiply() where every a and b value is a BF16 value: a chip whose
  /// fp32 products need several instructions may take one (exact for
  /// BF16 operands).
  virtual SmallVector<Value> multiplyBF16Values(QuantizationEmitter &e,
                                                llvm::ArrayRef<Value> a,
                                                llvm::ArrayRef<Value> b,
                                                llvm::ArrayRef<Value> c) const {
    return multiply(e, a, b, c);
  }
  /// Where an accumulator tile feeds the next product's A operand straight
  /// from registers (P V after S = Q K^T; needs tileN == tileK): for each A
  /// value, the index of the accumulator value it takes. The A values of
  /// a k-slab are then the accumulators of the n-tile of the same index,
  /// in an order of k the chip chooses, and B's values sit at
  /// bAtAfterAccumulator. Empty (the default): P and dS go through shared
  /// memory.
  virtual llvm::SmallVector<int64_t> accumulatorAsA() const { return {}; }
  virtual std::pair<Value, Value> bAtAfterAccumulator(QuantizationEmitter &e,
                                                      Value lane,
                                                      int64_t r) const {
    return bAt(e, lane, r);
  }
  /// The chip's instruction on packed BF16 pairs, where it has one the
  /// plan can feed (sm_90a: mma.sync.m16n8k16 BF16): a warp adds a 16 x
  /// packedK() A times a packedK() x tileN() B into the same accumulator
  /// tile as multiply() (cAt), each A and B register a 32-bit word holding
  /// the BF16 values of k and k + 1 (k's in the low half). With BF16
  /// operands the plan then stages its tiles as BF16 in shared memory:
  /// half the bytes, and half the loads per product.
  virtual bool packsBF16() const { return false; }
  virtual int64_t packedK() const { return 0; }
  virtual int64_t packedAWords() const { return 0; }
  virtual int64_t packedBWords() const { return 0; }
  /// (row, k) of A's word w, (k, n) of B's word w: the pair's first value.
  virtual std::pair<Value, Value> packedAAt(QuantizationEmitter &e, Value lane,
                                            int64_t w) const {
    return {};
  }
  virtual std::pair<Value, Value> packedBAt(QuantizationEmitter &e, Value lane,
                                            int64_t w) const {
    return {};
  }
  /// A's word w of a k-slab straight from the accumulators of the slab's
  /// packedK() / tileN() n-tiles: {n-tile within the slab, the accumulator
  /// value of the low half, that of the high half}.
  virtual std::array<int64_t, 3> packedAFromAccumulators(int64_t w) const {
    return {};
  }
  virtual SmallVector<Value> multiplyPacked(QuantizationEmitter &e,
                                            llvm::ArrayRef<Value> a,
                                            llvm::ArrayRef<Value> b,
                                            llvm::ArrayRef<Value> c) const {
    return {};
  }
  /// Whether the chip loads packed BF16 fragments from shared memory with
  /// one matrix-load instruction (sm_90a: ldmatrix.x4) instead of a word at
  /// a time: loadPackedA gives A's words of the k-slab at k0 for rows row0 ..
  /// row0 + 15 of a [rows][k] BF16 tile with rows `stride` elements apart,
  /// loadPackedB2 B's words of the same slab for the two n-tiles from n0 of
  /// a [n][k] tile (the first tile's words, then the second's). Element
  /// offsets are 16-byte aligned.
  virtual bool loadsPackedMatrices() const { return false; }
  virtual SmallVector<Value> loadPackedA(QuantizationEmitter &e, Value memory,
                                         Value lane, Value row0, Value k0,
                                         int64_t stride) const {
    return {};
  }
  virtual SmallVector<Value> loadPackedB2(QuantizationEmitter &e, Value memory,
                                          Value lane, Value n0, Value k0,
                                          int64_t stride) const {
    return {};
  }
  /// Whether the chip's matrix load can also transpose (sm_90a:
  /// ldmatrix.x4.trans): loadPackedB2Transposed gives what loadPackedB2
  /// gives, B's words of the k-slab at k0 for the two n-tiles from n0, from
  /// a [k][n] BF16 tile (rows `stride` elements apart) — an operand read
  /// along its columns is then staged as it is read from memory, in rows,
  /// rather than transposed on its way into shared memory (two-byte stores
  /// to scattered addresses: 5.9-way bank conflicts on the H200, Nsight).
  virtual bool loadsTransposedMatrices() const { return false; }
  virtual SmallVector<Value> loadPackedB2Transposed(QuantizationEmitter &e,
                                                    Value memory, Value lane,
                                                    Value n0, Value k0,
                                                    int64_t stride) const {
    return {};
  }
  /// Whether the chip multiplies a warpgroup's 64 rows as one instruction
  /// (sm_90a: wgmma.m64nNk16 BF16, A from registers, B read by the tensor
  /// cores from shared memory): warpgroupProducts then adds, for each of
  /// the warpgroup's row tiles m (warp w holding its rows 16 w .. 16 w +
  /// 15, the accumulators as cAt places them, n-tile after n-tile), A's
  /// words a[m] — packedAAt's, one k-slab of packedK() after another —
  /// times the n columns of a swizzled BF16 tile `b` (an i16 workgroup
  /// array on a 1024-byte boundary, rows of 128 bytes, the 16-byte piece c
  /// of row r at piece c ^ (r % 8)): its rows are n and its columns k
  /// (`nMajor`), or its rows k and its 64 columns n. Every product is
  /// issued, then waited for, once. The
  /// stores into such a tile are followed by fenceSharedForProducts() and
  /// a barrier before the products read it.
  virtual bool multipliesByWarpgroup() const { return false; }
  virtual void
  warpgroupProducts(QuantizationEmitter &e,
                    llvm::ArrayRef<SmallVector<Value>> a, Value b, int64_t n,
                    bool nMajor,
                    llvm::MutableArrayRef<SmallVector<Value>> c) const {}
  virtual void fenceSharedForProducts(QuantizationEmitter &e) const {}
  /// Static shared memory a block may use.
  virtual int64_t sharedBytes() const = 0;
  /// The same for a block of 128 rows staging packed BF16 tiles (its
  /// tiling measured on the chip: tileAttention).
  virtual int64_t packedSharedBytes() const { return sharedBytes(); }
  /// 2^x by the chip's own instruction (no device library).
  virtual Value exp2(QuantizationEmitter &e, Value x) const = 0;
  /// Asks the chip's register allocation to fit `blocks` blocks of `func`
  /// on a multiprocessor (sm_90a: .minnctapersm); a chip without such a
  /// hint ignores it.
  virtual void requestBlocksPerMultiprocessor(mlir::gpu::GPUFuncOp func,
                                              int64_t blocks) const {}
};

/// sm_90a: mma.sync.m16n8k8 TF32, each fp32 product as three (TetraToNVVM.cpp).
std::unique_ptr<AttentionMatrixTile> createNVVMAttentionTile();
/// gfx950: v_mfma_f32_16x16x4_f32 (TetraToAMDGPU.cpp).
std::unique_ptr<AttentionMatrixTile> createAMDGPUAttentionTile();
/// The tile of a chip ("sm_90a", "gfx950"), or null for another.
std::unique_ptr<AttentionMatrixTile> attentionTileFor(llvm::StringRef chip);

/// attention.forward/backward's scalars: the shape and the operands' mode.
struct AttentionGeometry {
  int64_t batch = 0, seq = 0, heads = 0, kvHeads = 0, headDim = 0;
  /// Every product's operands rounded to BF16 (runtime/kernels/Attention.h).
  bool bf16Operands = false;
};

/// The tiled launches.
enum class AttentionPass { Forward, QueryGradients, KeyValueGradients };

/// A pass's block: `rows` of its own (`rowsPerWarp` a warp) and `inner`
/// rows of the other side per step of its loop.
struct AttentionTiling {
  int64_t rows = 0, inner = 0;
  /// Blocks a multiprocessor should hold (requestBlocksPerMultiprocessor),
  /// or 0: as the registers the chip's compiler takes allow.
  int64_t blocksPerMultiprocessor = 0;
  /// A warp's rows: 16, one tile of the matrix instruction; or, for the
  /// forward and dQ on packed BF16 tiles (tileAttention), 32 — two tiles
  /// whose products load each of the other side's fragments once
  /// (FlashAttention-2's warp tile).
  int64_t rowsPerWarp = 16;
  /// Every product by warpgroups (multipliesByWarpgroup; BF16 operands,
  /// head_dim 64, blocks of 128 rows): the other side's tiles staged
  /// swizzled; warp w's row tiles at 16 w (+ 64 where it owns 32 rows:
  /// the forward's and dQ's one warpgroup, its two 64-row halves; dK and
  /// dV are two warpgroups of 16 rows a warp).
  bool warpgroups = false;
  int64_t warps() const { return rows / rowsPerWarp; }
};

/// The largest tiling of a pass whose shared memory fits the chip, or none
/// where the plan does not apply (head_dim not a multiple of 16 or above
/// 128): the library then runs a thread per row.
std::optional<AttentionTiling> tileAttention(const AttentionMatrixTile &tile,
                                             const AttentionGeometry &shape,
                                             AttentionPass pass);

/// The pass's grid.
std::array<int64_t, 3> attentionGrid(const AttentionGeometry &shape,
                                     AttentionPass pass,
                                     const AttentionTiling &tiling);

/// Builds the pass's kernel into `body`, whose function takes the registry's
/// arguments of attention.forward (pass Forward) or attention.backward (the
/// others; delta must be written before they run) and has
/// tiling.warps() x tile.lanes() threads.
void buildTiledAttention(Body &body, const AttentionMatrixTile &tile,
                         const AttentionGeometry &shape, AttentionPass pass,
                         const AttentionTiling &tiling);

} // namespace tetra::conversion

#endif // TETRA_LOWERING_CONVERSION_ATTENTIONKERNELPLAN_H
