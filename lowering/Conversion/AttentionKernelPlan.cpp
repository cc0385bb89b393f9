//===- AttentionKernelPlan.cpp - Attention on every chip's matrix units ---===//

#include "lowering/Conversion/AttentionKernelPlan.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace tetra;
using namespace tetra::conversion;

std::unique_ptr<AttentionMatrixTile>
tetra::conversion::attentionTileFor(llvm::StringRef chip) {
  if (chip.starts_with("sm_"))
    return createNVVMAttentionTile();
  if (chip.starts_with("gfx"))
    return createAMDGPUAttentionTile();
  return nullptr;
}

namespace {

/// Shared-memory rows are padded by this many floats (bank conflicts).
constexpr int64_t kPad = 4;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Whether the chip's accumulator tiles feed its next product from
/// registers: P and dS then never pass through shared memory.
bool inRegisters(const AttentionMatrixTile &tile) {
  return !tile.accumulatorAsA().empty() && tile.tileN() == tile.tileK();
}

/// Whether the kernels stage BF16 pairs and multiply them with the chip's
/// packed instruction: BF16 operands on a chip that has one.
bool packed(const AttentionMatrixTile &tile, const AttentionGeometry &shape) {
  return shape.bf16Operands && tile.packsBF16() && inRegisters(tile);
}

/// BF16 elements a packed row is padded by (16 bytes: rows stay aligned
/// and lanes of a warp reading one column of pairs hit distinct banks).
constexpr int64_t kPackedPad = 8;

/// Bytes of shared memory a pass's block stages with packed BF16 tiles: an
/// operand read as A, or as B with n over its rows, is [rows][columns]
/// (`rows`); as B with n over its columns, [columns][rows] (`columns`) —
/// or, on a chip whose matrix load transposes, its rows again.
int64_t packedBytes(const AttentionMatrixTile &tile,
                    const AttentionGeometry &shape, AttentionPass pass,
                    const AttentionTiling &t) {
  const int64_t hd = shape.headDim;
  auto rows = [&](int64_t r) { return 2 * r * (hd + kPackedPad); };
  auto columns = [&](int64_t r) { return 2 * hd * (r + kPackedPad); };
  // A tile read both ways: its columns, unless read from its rows.
  const bool transposes = tile.loadsTransposedMatrices();
  auto otherWay = [&](int64_t r) { return transposes ? 0 : columns(r); };
  switch (pass) {
  case AttentionPass::Forward: // Q; K; V transposed
    return rows(t.rows) + rows(t.inner) +
           (transposes ? rows(t.inner) : columns(t.inner));
  case AttentionPass::QueryGradients: // Q, dO; K both ways; V
    return 2 * rows(t.rows) + 2 * rows(t.inner) + otherWay(t.inner);
  case AttentionPass::KeyValueGradients: // K, V; Q, dO both ways; lse, delta
    return 2 * rows(t.rows) + 2 * rows(t.inner) + 2 * otherWay(t.inner) +
           2 * 4 * t.inner;
  }
  return 0;
}

/// Floats of shared memory a pass's block stages.
int64_t sharedFloats(const AttentionMatrixTile &tile,
                     const AttentionGeometry &shape, AttentionPass pass,
                     const AttentionTiling &t) {
  const int64_t row = shape.headDim + kPad;
  const int64_t scoreTile = inRegisters(tile) ? 0 : t.rows * (t.inner + kPad);
  switch (pass) {
  case AttentionPass::Forward: // Q; K, V; P
    return t.rows * row + 2 * t.inner * row + scoreTile;
  case AttentionPass::QueryGradients: // Q, dO; K, V; dS
    return 2 * t.rows * row + 2 * t.inner * row + scoreTile;
  case AttentionPass::KeyValueGradients: // K, V; Q, dO; P, dS; lse, delta
    return 2 * t.rows * row + 2 * t.inner * row + 2 * scoreTile + 2 * t.inner;
  }
  return 0;
}

} // namespace

std::optional<AttentionTiling>
tetra::conversion::tileAttention(const AttentionMatrixTile &tile,
                                 const AttentionGeometry &shape,
                                 AttentionPass pass) {
  if (shape.headDim % 16 != 0 || shape.headDim > 128 ||
      shape.headDim % tile.tileN() != 0 || shape.headDim % tile.tileK() != 0)
    return std::nullopt;
  const bool packs = packed(tile, shape);
  if (packs && shape.headDim % tile.packedK() != 0)
    return std::nullopt;
  auto fits = [&](AttentionTiling tiling, int64_t limit) {
    const int64_t bytes = packs ? packedBytes(tile, shape, pass, tiling)
                                : 4 * sharedFloats(tile, shape, pass, tiling);
    return tiling.inner % tile.tileN() == 0 &&
           tiling.inner % tile.tileK() == 0 &&
           (!packs || tiling.inner % tile.packedK() == 0) && bytes <= limit;
  };
  // Packed BF16: 128 rows a block — the other side's tiles are then read
  // once per 128 rows instead of 64 — with the inner step each pass was
  // fastest with on the H200 at llama_125m's shape (head_dim 64;
  // docs/benchmarks.md): the forward 64 (36 KB; 1.18 -> 0.98 ms a launch
  // against 64 rows), dQ 32 (51 KB; 0.97 -> 0.83 ms), dK and dV 64 (74 KB;
  // 1.57 -> 1.19 ms), within the chip's limit for packed tiles.
  //
  // At head_dim 64 the forward and dQ warps own 32 rows each (two tiles
  // of the instruction: each fragment of the other side loaded once for
  // both) in blocks of 4 warps, two a multiprocessor, the forward's inner
  // step 32: on an H100 the forward 9.69 -> 8.63 ms and dQ 7.41 -> 5.93 ms
  // a step of 12 launches against 16 rows a warp (8 warps, two blocks,
  // ptxas fitting 128 registers a thread; one call), then the forward's
  // inner step 64 -> 32 8.66 -> 8.33 ms (another; docs/benchmarks.md).
  // ptxas takes 236 and 246 registers, no spills.
  // Measured slower: 256 rows of 8 such warps (one block: 9.02 and 6.73
  // ms); three blocks a multiprocessor (ptxas's 168 registers: the forward
  // 8.58 ms, spilling 32 bytes; dQ 6.98 with an inner step of 16); dQ with
  // an inner step of 16 in two blocks, 7.39 (64 spills 324 bytes). dK and
  // dV keep 16 rows a warp: two 32 x head_dim accumulators a warp would
  // spill. At a larger head_dim every pass keeps 16 rows a warp (its
  // accumulators twice the registers).
  //
  // By warpgroups (multipliesByWarpgroup, head_dim 64), the same blocks,
  // dK and dV with an inner step of 32: on an H100 (2026-12-07) the
  // forward 8.20 -> 6.85 ms a step and dQ 6.06 -> 5.40 (one call), dK and
  // dV 9.44 -> 7.21 (another; ptxas: 223, 242 and 200 registers, no
  // spills). dK and dV measured otherwise: by warpgroups with an inner
  // step of 64, 7.34 ms but wrong (--check-kernels: dK and dV off by up to
  // 0.65, twice; the same kernel in one warpgroup of 32 rows a warp, and
  // two warpgroups with the inner step 32, were right in the calls that
  // checked it — not understood, so not used); mma.sync with 32 rows a warp,
  // inner steps 32 and 16: 8.63 and 8.02 ms.
  if (packs) {
    const bool small = shape.headDim <= 64;
    const bool queryRows = pass != AttentionPass::KeyValueGradients;
    const bool warpgroups = tile.multipliesByWarpgroup() && shape.headDim == 64;
    const int64_t inner = pass == AttentionPass::QueryGradients ||
                                  (pass == AttentionPass::Forward && small) ||
                                  warpgroups
                              ? 32
                              : 64;
    AttentionTiling tiling{128, inner, small && queryRows ? 2 : 0,
                           small && queryRows ? 32 : 16, warpgroups};
    if (fits(tiling, tile.packedSharedBytes()))
      return tiling;
  }
  for (auto [rows, inner] : {std::pair<int64_t, int64_t>{64, 64}, {64, 32},
                             {32, 64}, {32, 32}, {32, 16}, {16, 32}, {16, 16}})
    if (fits({rows, inner}, tile.sharedBytes()))
      return AttentionTiling{rows, inner};
  return std::nullopt;
}

std::array<int64_t, 3>
tetra::conversion::attentionGrid(const AttentionGeometry &shape,
                                 AttentionPass pass,
                                 const AttentionTiling &tiling) {
  const int64_t heads =
      pass == AttentionPass::KeyValueGradients ? shape.kvHeads : shape.heads;
  return {ceilDiv(shape.seq, tiling.rows), shape.batch * heads, 1};
}

namespace {

/// An operand staged in shared memory: element (row, column) at
/// row * stride + column.
struct Staged {
  Value memory;
  int64_t stride;
};

/// A tile read from memory (rows x columns, columns along head_dim),
/// staged in the layouts its products read: fp32 rows, or BF16 (i16
/// elements, pairs along k adjacent) as `rows` [rows][columns] — A, or B
/// with n over the rows — and/or `columns` [columns][rows] — B with n over
/// the columns.
struct Operand {
  Staged f32, rows, columns;
  /// BF16 rows of 128 bytes (head_dim 64) as a warpgroup's products read
  /// them (multipliesByWarpgroup): the 16-byte piece c of row r at
  /// c ^ (r % 8), on a 1024-byte boundary.
  Value swizzled;
};
/// The layouts an operand is staged in (packed mode).
enum Layout : unsigned { AsRows = 1, AsColumns = 2, Swizzled = 4 };

/// Accumulator tiles of a warp's 16 rows: [tile along n][value].
using Tiles = SmallVector<SmallVector<Value>>;

/// One pass's kernel under construction.
class TiledAttention {
public:
  TiledAttention(Body &body, const AttentionMatrixTile &tile,
                 const AttentionGeometry &shape, const AttentionTiling &tiling)
      : body(body), e(body.e), tile(tile), shape(shape), tiling(tiling),
        hd(shape.headDim), group(shape.heads / shape.kvHeads),
        packs(packed(tile, shape)),
        qStride(shape.heads * shape.headDim),
        kvStride(shape.kvHeads * shape.headDim),
        scale(1.0f / std::sqrt(static_cast<float>(shape.headDim))) {
    e.unrollsLoops = true; // constant index arithmetic folds
    Value tid = body.thread();
    lane = arith::RemUIOp::create(body.b, tid, e.cIndex(tile.lanes()));
    Value warp = e.divIndex(tid, tile.lanes());
    warpRow = e.mulIndex(warp, e.cIndex(tiling.rowsPerWarp));
    for (int64_t m = 0; m < tiling.rowsPerWarp / 16; ++m)
      tileRows.push_back(
          tiling.warpgroups
              ? e.addIndex(e.mulIndex(warp, e.cIndex(16)), e.cIndex(64 * m))
              : e.addIndex(warpRow, e.cIndex(16 * m)));
    for (int64_t r = 0; r < tile.aValues(); ++r)
      aAt.push_back(tile.aAt(e, lane, r));
    for (int64_t r = 0; r < tile.bValues(); ++r)
      bAt.push_back(tile.bAt(e, lane, r));
    for (int64_t r = 0; r < tile.cValues(); ++r)
      cAt.push_back(tile.cAt(e, lane, r));
    if (inRegisters(tile))
      for (int64_t r = 0; r < tile.bValues(); ++r)
        bAfterC.push_back(tile.bAtAfterAccumulator(e, lane, r));
    if (packs) {
      for (int64_t w = 0; w < tile.packedAWords(); ++w)
        aPacked.push_back(tile.packedAAt(e, lane, w));
      for (int64_t w = 0; w < tile.packedBWords(); ++w)
        bPacked.push_back(tile.packedBAt(e, lane, w));
    }
  }

  void forward();
  void forwardRoundedProbabilities();
  void queryGradients();
  void keyValueGradients();

private:
  Body &body;
  QuantizationEmitter &e;
  const AttentionMatrixTile &tile;
  const AttentionGeometry &shape;
  const AttentionTiling &tiling;
  const int64_t hd, group;
  const bool packs; ///< BF16 pairs staged, the chip's packed instruction.
  const int64_t qStride, kvStride;
  const float scale;
  /// The warp's first row, and that of each of its 16-row tiles.
  Value lane, warpRow;
  SmallVector<Value> tileRows;
  SmallVector<std::pair<Value, Value>> aAt, bAt, cAt, bAfterC, aPacked,
      bPacked;

  Value threads() { return e.cIndex(tiling.warps() * tile.lanes()); }
  /// e^x as 2^(x log2 e) by the chip's instruction (its error, about
  /// 2^-22 of the result, is below the products'; the CPU's polynomial
  /// fastExp took 15 % more of the kernels' time on the H200).
  Value exp(Value x) {
    return tile.exp2(e, e.mulf(x, e.cF32(kLog2e)));
  }
  Value minIndex(Value x, Value y) {
    return arith::MinUIOp::create(body.b, x, y);
  }
  /// What a product sees of x: itself, or x rounded to BF16.
  Value operand(Value x) {
    return shape.bf16Operands ? e.roundToBF16(x) : x;
  }

  Staged stage(int64_t rows, int64_t columns) {
    return {body.sharedArray(rows * (columns + kPad), e.f32()),
            columns + kPad};
  }
  /// An operand tile of rows x head_dim, in `layouts` where packed (a
  /// chip whose matrix load transposes reads AsColumns from its rows).
  Operand operand(int64_t rows, unsigned layouts = AsRows) {
    Operand o;
    if (!packs) {
      o.f32 = stage(rows, hd);
      return o;
    }
    if (layouts & Swizzled) {
      o.swizzled = body.sharedArray(rows * 64, e.b.getI16Type(), 1024);
      return o;
    }
    if (tile.loadsTransposedMatrices() && (layouts & AsColumns))
      layouts = AsRows;
    // On 16-byte boundaries: the chip's matrix loads read 16-byte rows.
    if (layouts & AsRows)
      o.rows = {
          body.sharedArray(rows * (hd + kPackedPad), e.b.getI16Type(), 16),
          hd + kPackedPad};
    if (layouts & AsColumns)
      o.columns = {
          body.sharedArray(hd * (rows + kPackedPad), e.b.getI16Type(), 16),
          rows + kPackedPad};
    return o;
  }
  /// The staging of a rows x inner tile of P or dS, where the chip takes
  /// them through shared memory (none where it keeps them in registers).
  Staged scoreStage() {
    return inRegisters(tile) ? Staged{} : stage(tiling.rows, tiling.inner);
  }

  /// exp(x * scale - shift) as the chip's 2^(x (scale log2 e) - shift
  /// log2 e), one fused multiply-add: `shift2` is shift log2 e (shifted()).
  Value expScaled(Value x, Value shift2) {
    return tile.exp2(e, e.fma(x, e.cF32(scale * kLog2e), e.negf(shift2)));
  }
  Value shifted(Value shift) { return e.mulf(shift, e.cF32(kLog2e)); }
  static constexpr float kLog2e = 1.44269504088896341f;

  /// Per row slot, the last visible key of the tile starting at keyFirst,
  /// as a column of it (signed; below 0: none): min(position, seq - 1) -
  /// keyFirst. Column c of the tile is visible iff c <= limit.
  SmallVector<Value> visibleLimits(ArrayRef<Value> position, Value keyFirst) {
    SmallVector<Value> limits;
    for (Value p : position)
      limits.push_back(arith::SubIOp::create(
          body.b, minIndex(p, e.cIndex(shape.seq - 1)), keyFirst));
    return limits;
  }
  /// The tile column of accumulator r of n-tile n.
  Value columnOf(int64_t n, int64_t r) {
    return e.addIndex(cAt[r].second, e.cIndex(n * tile.tileN()));
  }
  Value sle(Value x, Value y) {
    return arith::CmpIOp::create(body.b, CmpIPredicate::sle, x, y);
  }

  /// acc += A B with A the warp's tiles of P or dS (tiles along k, as the
  /// previous product left them): from registers where the chip can, else
  /// stashed into `staging` (rounded in both cases in BF16 mode) after a
  /// barrier-free store and a barrier.
  void productOfTiles(Tiles &acc, const Tiles &a, Staged staging,
                      const Operand &b, bool nMajor) {
    if (!inRegisters(tile)) {
      stash(a, staging);
      body.barrier();
      product(acc, Operand{staging, {}, {}, {}}, tiling.inner, b, nMajor);
      return;
    }
    if (packs)
      return productOfTilesRows(acc, a, staging, b, nMajor);
    SmallVector<int64_t> fromC = tile.accumulatorAsA();
    for (auto [j, slab] : llvm::enumerate(a)) {
      const int64_t k0 = static_cast<int64_t>(j) * tile.tileK();
      SmallVector<Value> av;
      for (int64_t c : fromC)
        av.push_back(operand(slab[c]));
      for (auto [n, accumulators] : llvm::enumerate(acc)) {
        SmallVector<Value> bv;
        for (auto [kk, nn] : bAfterC)
          bv.push_back(bValue(b.f32, nMajor, e.addIndex(kk, e.cIndex(k0)),
                              e.addIndex(nn, e.cIndex(n * tile.tileN()))));
        accumulators = multiplyValues(av, bv, accumulators);
      }
    }
  }
  /// productOfTiles() for each of a warp's row tiles (acc[m] += a[m] B;
  /// one without packed BF16 pairs): on packed pairs B's fragments loaded
  /// once for all of them — FlashAttention-2's: two accumulator tiles a
  /// k-slab; by warpgroups, B's swizzled tile read by the tensor cores.
  void productOfTilesRows(MutableArrayRef<Tiles> acc, ArrayRef<Tiles> a,
                          Staged staging, const Operand &b, bool nMajor) {
    if (tiling.warpgroups) {
      SmallVector<SmallVector<Value>> flat;
      for (const Tiles &t : acc)
        flat.push_back(flatten(t));
      const int64_t n = static_cast<int64_t>(acc.front().size()) * tile.tileN();
      tile.warpgroupProducts(e, accumulatorWords(a), b.swizzled, n, nMajor,
                             flat);
      for (auto [t, values] : llvm::zip(acc, flat))
        t = unflatten(values, n);
      return;
    }
    if (!packs) {
      assert(acc.size() == 1 && "row tiles need packed BF16 pairs");
      return productOfTiles(acc.front(), a.front(), staging, b, nMajor);
    }
    Staged bm = packedBStaging(b, nMajor);
    const int64_t tilesPerSlab = tile.packedK() / tile.tileN();
    for (int64_t slab = 0;
         slab < static_cast<int64_t>(a.front().size()) / tilesPerSlab; ++slab) {
      SmallVector<SmallVector<Value>> av(a.size());
      for (auto [m, tiles] : llvm::enumerate(a))
        for (int64_t w = 0; w < tile.packedAWords(); ++w) {
          auto [t, low, high] = tile.packedAFromAccumulators(w);
          const SmallVector<Value> &from = tiles[slab * tilesPerSlab + t];
          av[m].push_back(pack(from[low], from[high]));
        }
      multiplyPackedTilesRows(acc, av, bm, slab * tile.packedK(),
                              transposedRead(nMajor));
    }
  }
  SmallVector<Value> multiplyValues(ArrayRef<Value> a, ArrayRef<Value> b,
                                    ArrayRef<Value> c) {
    return shape.bf16Operands ? tile.multiplyBF16Values(e, a, b, c)
                              : tile.multiply(e, a, b, c);
  }

  /// A thread's 16-byte pieces of a rows x head_dim tile: piece k is
  /// quad thread + k * threads of the tile's row-major quads.
  int64_t quads(int64_t rows) const { return rows * hd / 4; }
  int64_t piecesPerThread(int64_t rows) const {
    return ceilDiv(quads(rows), tiling.warps() * tile.lanes());
  }
  /// (row, column) of the thread's piece k (clamped into the tile).
  std::pair<Value, Value> piece(int64_t rows, int64_t k) {
    const int64_t threads = tiling.warps() * tile.lanes();
    Value i = minIndex(e.addIndex(body.thread(), e.cIndex(k * threads)),
                       e.cIndex(quads(rows) - 1));
    return {e.divIndex(i, hd / 4),
            e.mulIndex(arith::RemUIOp::create(body.b, i, e.cIndex(hd / 4)),
                       e.cIndex(4))};
  }

  /// The thread's pieces of the rows x head_dim tile of x [batch, seq,
  /// count * head_dim] from sequence position `first` of head `head`
  /// (rows past the sequence read as 0), all loads issued at once: a tile
  /// is fetched into registers while the one before it is computed on.
  /// Where the sequence is a multiple of `rows`, a tile (`first` a
  /// multiple of `rows`) lies wholly inside it or wholly past its end —
  /// the fetch ahead of the last step, never used: its rows are read
  /// clamped and not zeroed (a select a value, 48 a step of the forward's
  /// two sweeps at head_dim 64).
  SmallVector<Value> fetch(Value x, Value b, Value head, Value first,
                           int64_t rows, int64_t stride) {
    auto quad = VectorType::get({4}, e.f32());
    Value zero = arith::ConstantOp::create(
        body.b, DenseElementsAttr::get(quad, body.b.getF32FloatAttr(0.0f)));
    SmallVector<Value> pieces;
    for (int64_t k = 0; k < piecesPerThread(rows); ++k) {
      auto [row, column] = piece(rows, k);
      Value position = e.addIndex(first, row);
      Value at = e.addIndex(
          rowAt(b, minIndex(position, e.cIndex(shape.seq - 1)), head, stride),
          column);
      Value values = vector::LoadOp::create(body.b, quad, x, ValueRange{at},
                                            /*nontemporal=*/false,
                                            llvm::MaybeAlign(16));
      pieces.push_back(shape.seq % rows == 0
                           ? values
                           : e.select(body.ult(position, e.cIndex(shape.seq)),
                                      values, zero));
    }
    return pieces;
  }

  /// Stores fetched pieces into the staged tile, in each of its layouts.
  void put(const Operand &to, ArrayRef<Value> pieces, int64_t rows) {
    const int64_t threads = tiling.warps() * tile.lanes();
    for (auto [k, values] : llvm::enumerate(pieces)) {
      const std::pair<Value, Value> at = piece(rows, static_cast<int64_t>(k));
      Value row = at.first, column = at.second, quad = values;
      auto store = [&] {
        if (to.f32.memory) {
          Value at =
              e.addIndex(e.mulIndex(row, e.cIndex(to.f32.stride)), column);
          for (int64_t c = 0; c < 4; ++c)
            body.store(operand(vector::ExtractOp::create(body.b, quad, c)),
                       to.f32.memory, e.addIndex(at, e.cIndex(c)));
          return;
        }
        // BF16, nearest even (cvt.rn.bf16x2 on sm_90a), as i16 bits.
        Value halves = vector::BitCastOp::create(
            body.b, VectorType::get({4}, e.b.getI16Type()),
            arith::TruncFOp::create(
                body.b, VectorType::get({4}, e.b.getBF16Type()), quad)
                .getResult());
        if (to.swizzled) { // 8 bytes within piece column / 8 of the row
          Value piece =
              e.bitXor(e.divIndex(column, 8),
                       arith::RemUIOp::create(body.b, row, e.cIndex(8)));
          vector::StoreOp::create(
              body.b, halves, to.swizzled,
              ValueRange{e.addIndex(
                  e.addIndex(e.mulIndex(row, e.cIndex(64)),
                             e.mulIndex(piece, e.cIndex(8))),
                  arith::RemUIOp::create(body.b, column, e.cIndex(8)))},
              /*nontemporal=*/false, llvm::MaybeAlign(8));
        }
        if (to.rows.memory)
          vector::StoreOp::create(
              body.b, halves, to.rows.memory,
              ValueRange{e.addIndex(e.mulIndex(row, e.cIndex(to.rows.stride)),
                                    column)},
              /*nontemporal=*/false, llvm::MaybeAlign(8));
        if (to.columns.memory)
          for (int64_t c = 0; c < 4; ++c)
            body.store(vector::ExtractOp::create(body.b, halves, c),
                       to.columns.memory,
                       e.addIndex(e.mulIndex(e.addIndex(column, e.cIndex(c)),
                                             e.cIndex(to.columns.stride)),
                                  row));
      };
      const int64_t next = static_cast<int64_t>(k + 1) * threads;
      if (next <= quads(rows))
        store();
      else // the last piece of a tile not a multiple of the block
        body.ifThen(body.ult(e.addIndex(body.thread(),
                                        e.cIndex(next - threads)),
                             e.cIndex(quads(rows))),
                    store);
    }
  }

  void load(const Operand &to, Value x, Value b, Value head, Value first,
            int64_t rows, int64_t stride) {
    put(to, fetch(x, b, head, first, rows, stride), rows);
  }

  Value statisticAt(Value b, Value head, Value position) {
    return e.addIndex(
        e.mulIndex(e.addIndex(e.mulIndex(b, e.cIndex(shape.heads)), head),
                   e.cIndex(shape.seq)),
        position);
  }
  Value rowAt(Value b, Value position, Value head, int64_t stride) {
    return e.addIndex(
        e.mulIndex(e.addIndex(e.mulIndex(b, e.cIndex(shape.seq)), position),
                   e.cIndex(stride)),
        e.mulIndex(head, e.cIndex(hd)));
  }

  Tiles zeros(int64_t columns) {
    return Tiles(columns / tile.tileN(),
                 SmallVector<Value>(tile.cValues(), e.cF32(0.0f)));
  }

  /// acc (the warp's 16 rows x n columns) += A[warp's rows][0..k) B, B's
  /// element (kk, nn) that of b at (nn, kk) (nMajor) or (kk, nn).
  void product(Tiles &acc, const Operand &a, int64_t k, const Operand &b,
               bool nMajor) {
    if (packs)
      return productPacked(acc, a.rows, k, packedBStaging(b, nMajor),
                           transposedRead(nMajor));
    for (int64_t k0 = 0; k0 < k; k0 += tile.tileK()) {
      SmallVector<Value> av;
      for (auto [row, kk] : aAt)
        av.push_back(body.load(
            a.f32.memory,
            e.addIndex(
                e.mulIndex(e.addIndex(warpRow, row), e.cIndex(a.f32.stride)),
                e.addIndex(kk, e.cIndex(k0)))));
      for (auto [n, accumulators] : llvm::enumerate(acc)) {
        SmallVector<Value> bv;
        for (auto [kk, nn] : bAt)
          bv.push_back(bValue(b.f32, nMajor, e.addIndex(kk, e.cIndex(k0)),
                              e.addIndex(nn, e.cIndex(n * tile.tileN()))));
        accumulators = multiplyValues(av, bv, accumulators);
      }
    }
  }
  /// B's fp32 element (k = along, n = across) of `bm`.
  Value bValue(Staged bm, bool nMajor, Value along, Value across) {
    return body.load(bm.memory,
                     nMajor
                         ? e.addIndex(e.mulIndex(across, e.cIndex(bm.stride)),
                                      along)
                         : e.addIndex(e.mulIndex(along, e.cIndex(bm.stride)),
                                      across));
  }

  /// The 32-bit word of BF16 pairs at element `at` (even) of an i16 tile.
  Value word(Value memory, Value at) {
    Value pair = vector::LoadOp::create(
        body.b, VectorType::get({2}, e.b.getI16Type()), memory, ValueRange{at},
        /*nontemporal=*/false, llvm::MaybeAlign(4));
    return vector::ExtractOp::create(
        body.b,
        vector::BitCastOp::create(body.b, VectorType::get({1}, e.i32()), pair),
        0);
  }
  /// Two fp32 values as one word of BF16 (nearest even), x in the low half.
  Value pack(Value x, Value y) {
    Value pair = vector::FromElementsOp::create(
        body.b, VectorType::get({2}, e.f32()), ValueRange{x, y});
    Value halves = arith::TruncFOp::create(
        body.b, VectorType::get({2}, e.b.getBF16Type()), pair);
    return vector::ExtractOp::create(
        body.b,
        vector::BitCastOp::create(body.b, VectorType::get({1}, e.i32()),
                                  halves),
        0);
  }
  /// B's words of k-slab k0 and n-tile n from `bm` ([n][k] BF16).
  SmallVector<Value> packedB(Staged bm, int64_t k0, int64_t n) {
    SmallVector<Value> bv;
    for (auto [kk, nn] : bPacked)
      bv.push_back(word(
          bm.memory,
          e.addIndex(e.mulIndex(e.addIndex(nn, e.cIndex(n * tile.tileN())),
                                e.cIndex(bm.stride)),
                     e.addIndex(kk, e.cIndex(k0)))));
    return bv;
  }
  /// Whether B (n over its columns unless nMajor) is read transposed from
  /// its rows by the chip's matrix load.
  bool transposedRead(bool nMajor) const {
    return !nMajor && tile.loadsTransposedMatrices();
  }
  /// The staging a packed product reads B from: its rows ([n][k], nMajor;
  /// or [k][n], read transposed) or its columns ([n][k]).
  Staged packedBStaging(const Operand &b, bool nMajor) const {
    return nMajor || transposedRead(nMajor) ? b.rows : b.columns;
  }
  /// product() on BF16 pairs: A [rows][k], B [n][k] (or, `transposed`,
  /// [k][n]).
  void productPacked(Tiles &acc, Staged a, int64_t k, Staged bm,
                     bool transposed) {
    productPackedRows(acc, warpRow, a, k, bm, transposed);
  }
  /// product() for each of the warp's row tiles (acc[m] gets A's rows of
  /// tile m; one without packed BF16 pairs).
  void productRows(MutableArrayRef<Tiles> acc, const Operand &a, int64_t k,
                   const Operand &b, bool nMajor) {
    if (!packs) {
      assert(acc.size() == 1 && "row tiles need packed BF16 pairs");
      return product(acc.front(), a, k, b, nMajor);
    }
    productPackedRows(acc, tileRows, a.rows, k, packedBStaging(b, nMajor),
                      transposedRead(nMajor));
  }
  /// productPacked() for each of a warp's row tiles (acc[m] gets A's rows
  /// from rows[m]), B's fragments loaded once for all of them.
  void productPackedRows(MutableArrayRef<Tiles> acc, ArrayRef<Value> rows,
                         Staged a, int64_t k, Staged bm, bool transposed) {
    for (int64_t k0 = 0; k0 < k; k0 += tile.packedK()) {
      SmallVector<SmallVector<Value>> av(rows.size());
      for (auto [m, first] : llvm::enumerate(rows))
        av[m] = packedAWords(a, first, k0);
      multiplyPackedTilesRows(acc, av, bm, k0, transposed);
    }
  }
  /// Each of the warp's row tiles' A words over all of head_dim, from a
  /// staged [rows][head_dim] operand (warpgroupProducts' a).
  SmallVector<SmallVector<Value>> rowWords(const Operand &a) {
    SmallVector<SmallVector<Value>> words(tileRows.size());
    for (auto [m, from] : llvm::enumerate(tileRows))
      for (int64_t k0 = 0; k0 < hd; k0 += tile.packedK())
        words[m].append(packedAWords(a.rows, from, k0));
    return words;
  }
  /// By warpgroups: each row tile's a[m] B from zero, B the n rows of the
  /// swizzled tile `b` ([n][k]) — the scores and dP.
  SmallVector<Tiles> warpgroupScores(ArrayRef<SmallVector<Value>> a, Value b,
                                     int64_t n) {
    SmallVector<SmallVector<Value>> acc(a.size(), flatten(zeros(n)));
    tile.warpgroupProducts(e, a, b, n, /*nMajor=*/true, acc);
    SmallVector<Tiles> result;
    for (const SmallVector<Value> &values : acc)
      result.push_back(unflatten(values, n));
    return result;
  }
  /// Each row tile's accumulators (P or dS, along k) as A's words, rounded
  /// to BF16 pairs (warpgroupProducts' a).
  SmallVector<SmallVector<Value>>
  accumulatorWords(ArrayRef<Tiles> accumulators) {
    const int64_t tilesPerSlab = tile.packedK() / tile.tileN();
    SmallVector<SmallVector<Value>> words(accumulators.size());
    for (auto [m, rowTiles] : llvm::enumerate(accumulators))
      for (int64_t slab = 0;
           slab < static_cast<int64_t>(rowTiles.size()) / tilesPerSlab; ++slab)
        for (int64_t w = 0; w < tile.packedAWords(); ++w) {
          auto [t, low, high] = tile.packedAFromAccumulators(w);
          const SmallVector<Value> &from = rowTiles[slab * tilesPerSlab + t];
          words[m].push_back(pack(from[low], from[high]));
        }
    return words;
  }
  /// A's words of the k-slab at k0 for the 16 rows from `first` of `a`
  /// ([rows][k] BF16).
  SmallVector<Value> packedAWords(Staged a, Value first, int64_t k0) {
    if (tile.loadsPackedMatrices())
      return tile.loadPackedA(e, a.memory, lane, first, e.cIndex(k0), a.stride);
    SmallVector<Value> words;
    for (auto [row, kk] : aPacked)
      words.push_back(word(
          a.memory,
          e.addIndex(e.mulIndex(e.addIndex(first, row), e.cIndex(a.stride)),
                     e.addIndex(kk, e.cIndex(k0)))));
    return words;
  }
  /// acc[m][n] += av[m] B[n-tile n] for each of a warp's row tiles m, B's
  /// k-slab at k0 of `bm` ([n][k] BF16, or `transposed` [k][n]), each of
  /// its fragments loaded once for all of them: two n-tiles a matrix load
  /// where the chip has one (a transposing one: always; head_dim is a
  /// multiple of 16).
  void multiplyPackedTilesRows(MutableArrayRef<Tiles> acc,
                               ArrayRef<SmallVector<Value>> av, Staged bm,
                               int64_t k0, bool transposed) {
    const int64_t tiles = static_cast<int64_t>(acc.front().size());
    const int64_t words = tile.packedBWords();
    assert((!transposed || tiles % 2 == 0) &&
           "a transposed B is read two n-tiles at a time");
    for (int64_t n = 0; n < tiles;) {
      if ((transposed || tile.loadsPackedMatrices()) && n + 1 < tiles) {
        SmallVector<Value> b2 =
            transposed ? tile.loadPackedB2Transposed(
                             e, bm.memory, lane, e.cIndex(n * tile.tileN()),
                             e.cIndex(k0), bm.stride)
                       : tile.loadPackedB2(e, bm.memory, lane,
                                           e.cIndex(n * tile.tileN()),
                                           e.cIndex(k0), bm.stride);
        for (auto [m, rows] : llvm::enumerate(acc)) {
          rows[n] = tile.multiplyPacked(
              e, av[m], ArrayRef(b2).take_front(words), rows[n]);
          rows[n + 1] = tile.multiplyPacked(
              e, av[m], ArrayRef(b2).drop_front(words), rows[n + 1]);
        }
        n += 2;
        continue;
      }
      SmallVector<Value> bv = packedB(bm, k0, n);
      for (auto [m, rows] : llvm::enumerate(acc))
        rows[n] = tile.multiplyPacked(e, av[m], bv, rows[n]);
      ++n;
    }
  }

  /// Each row slot's combination of the lane's values of it (from the
  /// first: `combine` needs no identity), then across the lanes holding
  /// the row.
  SmallVector<Value> rowCombine(const Tiles &values,
                                function_ref<Value(Value, Value)> combine,
                                bool acrossLanes = true) {
    SmallVector<Value> slots(tile.rowSlots());
    for (const SmallVector<Value> &t : values)
      for (int64_t r = 0; r < tile.cValues(); ++r) {
        Value &slot = slots[tile.rowSlot(r)];
        slot = slot ? combine(slot, t[r]) : t[r];
      }
    if (!acrossLanes)
      return slots;
    for (Value &slot : slots)
      for (int32_t mask : tile.rowPartners())
        slot = combine(slot, body.shuffleXor(slot, mask,
                                             static_cast<int32_t>(tile.lanes())));
    return slots;
  }

  /// Stores the warp's tiles (a product's operand) into its rows of `to`.
  void stash(const Tiles &values, Staged to) {
    for (auto [n, t] : llvm::enumerate(values))
      for (int64_t r = 0; r < tile.cValues(); ++r) {
        auto [row, column] = cAt[r];
        body.store(operand(t[r]), to.memory,
                   e.addIndex(e.mulIndex(e.addIndex(warpRow, row),
                                         e.cIndex(to.stride)),
                              e.addIndex(column, e.cIndex(n * tile.tileN()))));
      }
  }

  /// Stores tiles of head_dim columns (times `factor`) into the rows of x
  /// [batch, seq, ... * head_dim] at positions first + warp row (those
  /// inside the sequence).
  void storeRows(const Tiles &values, Value x, Value b, Value head,
                 Value first, int64_t stride, ArrayRef<Value> factor) {
    storeRows(values, x, b, head, first, stride, factor, warpRow);
  }
  /// The same for the 16 rows from `rows` of the block.
  void storeRows(const Tiles &values, Value x, Value b, Value head, Value first,
                 int64_t stride, ArrayRef<Value> factor, Value rows) {
    for (int64_t n = 0; n < static_cast<int64_t>(values.size()); ++n)
      for (int64_t r = 0; r < tile.cValues(); ++r) {
        const SmallVector<Value> &t = values[n];
        Value row = cAt[r].first, column = cAt[r].second;
        Value position = e.addIndex(first, e.addIndex(rows, row));
        body.ifThen(body.ult(position, e.cIndex(shape.seq)), [&] {
          body.store(
              e.mulf(t[r], factor[tile.rowSlot(r)]), x,
              e.addIndex(rowAt(b, position, head, stride),
                         e.addIndex(column, e.cIndex(n * tile.tileN()))));
        });
      }
  }

  /// A query-side block's place: its first query position, batch, query
  /// head and KV head.
  struct QueryBlock {
    Value first, b, h, g;
  };
  QueryBlock queryBlock() {
    Value bh = body.block(gpu::Dimension::y);
    Value h = arith::RemUIOp::create(body.b, bh, e.cIndex(shape.heads));
    return {e.mulIndex(body.block(), e.cIndex(tiling.rows)),
            e.divIndex(bh, shape.heads), h, e.divIndex(h, group)};
  }
  /// The sequence position of each row slot of this lane.
  SmallVector<Value> rowPositions(Value first) {
    return rowPositions(first, warpRow);
  }
  /// The same for the 16 rows from `rows` of the block.
  SmallVector<Value> rowPositions(Value first, Value rows) {
    SmallVector<Value> position(tile.rowSlots());
    for (int64_t r = 0; r < tile.cValues(); ++r)
      position[tile.rowSlot(r)] =
          e.addIndex(first, e.addIndex(rows, cAt[r].first));
    return position;
  }
  /// Key tiles up to the block's last query (or the sequence's end).
  Value causalKeyTiles(Value first) {
    Value keyEnd = minIndex(e.addIndex(first, e.cIndex(tiling.rows)),
                            e.cIndex(shape.seq));
    return e.divIndex(e.addIndex(keyEnd, e.cIndex(tiling.inner - 1)),
                      tiling.inner);
  }
  /// The thread's pieces of a key tile's K, then its V.
  SmallVector<Value> fetchKeysValues(const QueryBlock &q, Value keyFirst) {
    SmallVector<Value> next =
        fetch(body.arg(1), q.b, q.g, keyFirst, tiling.inner, kvStride);
    next.append(fetch(body.arg(2), q.b, q.g, keyFirst, tiling.inner, kvStride));
    return next;
  }

  /// `tiles` after `mask` where `needed` (block-uniform), as they are
  /// elsewhere: only the tiles on the causal diagonal or at the sequence's
  /// end pay for their masks.
  Tiles maskedWhere(Value needed, const Tiles &tiles,
                    function_ref<void(Tiles &)> mask) {
    SmallVector<Value> values = body.ifElse(
        needed,
        [&] {
          Tiles masked = tiles;
          mask(masked);
          return flatten(masked);
        },
        flatten(tiles));
    return unflatten(values, static_cast<int64_t>(tiles.size()) * tile.tileN());
  }

  /// The tile's scores S = Q K^T (unscaled) for the query block starting
  /// at `blockFirst`, -inf where masked: keys past a row's position or the
  /// sequence.
  Tiles maskedScores(const Operand &queries, const Operand &keys,
                     Value keyFirst, ArrayRef<Value> position,
                     Value blockFirst) {
    Tiles scores = zeros(tiling.inner);
    product(scores, queries, hd, keys, /*nMajor=*/true);
    return masked(std::move(scores), keyFirst, position, blockFirst);
  }
  /// maskedScores() for each of a warp's row tiles (packed BF16: K's
  /// fragments loaded once for all of them); position[m] is tile m's.
  SmallVector<Tiles> maskedScoresRows(const Operand &queries,
                                      const Operand &keys, Value keyFirst,
                                      ArrayRef<SmallVector<Value>> position,
                                      Value blockFirst) {
    SmallVector<Tiles> scores(tileRows.size(), zeros(tiling.inner));
    productRows(scores, queries, hd, keys, /*nMajor=*/true);
    for (auto [m, tiles] : llvm::enumerate(scores))
      tiles = masked(std::move(tiles), keyFirst, position[m], blockFirst);
    return scores;
  }
  /// Scores -inf where masked.
  Tiles masked(Tiles scores, Value keyFirst, ArrayRef<Value> position,
               Value blockFirst) {
    // Every key of the tile is visible to every row of the block where
    // its last key is at most the block's first row and inside the
    // sequence.
    Value needed = body.ult(
        minIndex(e.addIndex(blockFirst, e.cIndex(1)), e.cIndex(shape.seq)),
        e.addIndex(keyFirst, e.cIndex(tiling.inner)));
    return maskedWhere(needed, scores, [&](Tiles &masked) {
      SmallVector<Value> limit = visibleLimits(position, keyFirst);
      for (auto [n, t] : llvm::enumerate(masked))
        for (int64_t r = 0; r < tile.cValues(); ++r)
          t[r] = e.select(sle(columnOf(n, r), limit[tile.rowSlot(r)]), t[r],
                          e.cF32(-INFINITY));
    });
  }

  /// One key tile of the online softmax: from the running (scaled) maximum
  /// and sum of each row slot, their values after `scores` (masked,
  /// unscaled), the factor the earlier sum and outputs take, and scores
  /// replaced by exp(s scale - maximum). `acrossLanes` false: each lane's
  /// statistics of its own columns (combined once, at the end, by
  /// combineLanes).
  struct Online {
    SmallVector<Value> maximum, sum, rescale;
  };
  Value larger(Value x, Value y) {
    // One max instruction (a compare and a select took two on the
    // integer pipe, the forward's busiest); the same value but for NaN.
    // llvm.maxnum directly: both chips' backends have it (max.f32,
    // v_max_f32), where arith.maxnumf would become a device-library call.
    return LLVM::CallIntrinsicOp::create(
               body.b, e.f32(), body.b.getStringAttr("llvm.maxnum.f32"),
               ValueRange{x, y})
        .getResult(0);
  }
  /// Row statistics kept lane by lane: the row's (scaled) maximum over the
  /// lanes holding it, and the sum of each lane's sum times exp(its
  /// maximum - the row's).
  std::pair<SmallVector<Value>, SmallVector<Value>>
  combineLanes(ArrayRef<Value> maximum, ArrayRef<Value> sum) {
    SmallVector<Value> rowMaximum, rowSum;
    const int32_t width = static_cast<int32_t>(tile.lanes());
    for (auto [m, l] : llvm::zip(maximum, sum)) {
      Value top = m;
      for (int32_t mask : tile.rowPartners())
        top = larger(top, body.shuffleXor(top, mask, width));
      // A lane that saw only masked scores (-inf) adds nothing.
      Value total = e.select(e.cmpf(CmpFPredicate::OEQ, l, e.cF32(0.0f)), l,
                             e.mulf(l, exp(e.subf(m, top))));
      for (int32_t mask : tile.rowPartners())
        total = e.addf(total, body.shuffleXor(total, mask, width));
      rowMaximum.push_back(top);
      rowSum.push_back(total);
    }
    return {rowMaximum, rowSum};
  }
  Online online(Tiles &scores, ArrayRef<Value> maximum, ArrayRef<Value> sum,
                bool acrossLanes = true) {
    // max(s) scale = max(s scale): rounding is monotonic and scale > 0.
    SmallVector<Value> tileMaximum = rowCombine(
        scores, [&](Value x, Value y) { return larger(x, y); }, acrossLanes);
    const int64_t slots = tile.rowSlots();
    Online next{SmallVector<Value>(slots), SmallVector<Value>(slots),
                SmallVector<Value>(slots)};
    SmallVector<Value> shift(slots);
    for (int64_t s = 0; s < slots; ++s) {
      next.maximum[s] =
          larger(maximum[s], e.mulf(tileMaximum[s], e.cF32(scale)));
      // A lane may not have seen a visible score yet (its maximum -inf):
      // it shifts by 0, so its sum and scores stay 0, not NaN.
      Value by = acrossLanes
                     ? next.maximum[s]
                     : e.select(e.cmpf(CmpFPredicate::OEQ, next.maximum[s],
                                       e.cF32(-INFINITY)),
                                e.cF32(0.0f), next.maximum[s]);
      next.rescale[s] = exp(e.subf(maximum[s], by));
      shift[s] = shifted(by);
    }
    for (SmallVector<Value> &t : scores)
      for (int64_t r = 0; r < tile.cValues(); ++r)
        t[r] = expScaled(t[r], shift[tile.rowSlot(r)]);
    SmallVector<Value> tileSum = rowCombine(
        scores, [&](Value x, Value y) { return e.addf(x, y); }, acrossLanes);
    for (int64_t s = 0; s < slots; ++s)
      next.sum[s] = e.addf(e.mulf(sum[s], next.rescale[s]), tileSum[s]);
    return next;
  }

  static SmallVector<Value> flatten(const Tiles &tiles) {
    SmallVector<Value> values;
    for (const SmallVector<Value> &t : tiles)
      values.append(t.begin(), t.end());
    return values;
  }
  /// The row tiles' values, one after the other.
  static SmallVector<Value> flatten(ArrayRef<Tiles> rowTiles) {
    SmallVector<Value> values;
    for (const Tiles &tiles : rowTiles)
      values.append(flatten(tiles));
    return values;
  }
  Tiles unflatten(ValueRange values, int64_t columns) {
    Tiles tiles = zeros(columns);
    int64_t i = 0;
    for (SmallVector<Value> &t : tiles)
      for (Value &value : t)
        value = values[i++];
    return tiles;
  }
};

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

void TiledAttention::forward() {
  if (shape.bf16Operands)
    return forwardRoundedProbabilities();
  const int64_t rows = tiling.rows, inner = tiling.inner;
  const QueryBlock q = queryBlock();
  Value first = q.first, b = q.b, h = q.h;
  Operand queries = operand(rows), keys = operand(inner),
          values = operand(inner, AsColumns);
  Staged probabilities = scoreStage();
  load(queries, body.arg(0), b, h, first, rows, qStride);
  SmallVector<Value> position = rowPositions(first);
  Value keyTiles = causalKeyTiles(first);
  const int64_t slots = tile.rowSlots();
  const size_t outValues = hd / tile.tileN() * tile.cValues();
  const int64_t pieces = piecesPerThread(inner);
  // Carried: O, the running maximum and sum, the next K and V pieces.
  SmallVector<Value> init = flatten(zeros(hd));
  init.append(slots, e.cF32(-INFINITY));
  init.append(slots, e.cF32(0.0f));
  init.append(fetchKeysValues(q, e.cIndex(0)));
  SmallVector<Value> result = body.strided(
      e.cIndex(0), keyTiles, 1, init, [&](Value kt, ValueRange carried) {
        Tiles out = unflatten(carried.take_front(outValues), hd);
        SmallVector<Value> maximum(carried.begin() + outValues,
                                   carried.begin() + outValues + slots);
        SmallVector<Value> sum(carried.begin() + outValues + slots,
                               carried.begin() + outValues + 2 * slots);
        ValueRange fetched = carried.drop_front(outValues + 2 * slots);
        Value keyFirst = e.mulIndex(kt, e.cIndex(inner));
        body.barrier(); // the last step's reads of K, V and P are done
        put(keys, SmallVector<Value>(fetched.take_front(pieces)), inner);
        put(values, SmallVector<Value>(fetched.drop_front(pieces)), inner);
        body.barrier();
        SmallVector<Value> prefetched =
            fetchKeysValues(q, e.addIndex(keyFirst, e.cIndex(inner)));

        Tiles scores = maskedScores(queries, keys, keyFirst, position, first);
        Online next = online(scores, maximum, sum);
        for (SmallVector<Value> &t : out)
          for (int64_t r = 0; r < tile.cValues(); ++r)
            t[r] = e.mulf(t[r], next.rescale[tile.rowSlot(r)]);
        productOfTiles(out, scores, probabilities, values, /*nMajor=*/false);
        SmallVector<Value> yielded = flatten(out);
        yielded.append(next.maximum.begin(), next.maximum.end());
        yielded.append(next.sum.begin(), next.sum.end());
        yielded.append(prefetched);
        return yielded;
      });

  const size_t base = outValues;
  Tiles out = unflatten(ValueRange(result).take_front(base), hd);
  SmallVector<Value> inverse(slots);
  for (int64_t s = 0; s < slots; ++s)
    inverse[s] = body.toF32(e.divf(body.cF64(1.0), body.toF64(result[base + slots + s])));
  storeRows(out, body.arg(3), b, h, first, qStride, inverse);
  // lse: by the lane holding the row's first column.
  Value leads = arith::CmpIOp::create(body.b, CmpIPredicate::eq, cAt[0].second,
                                      e.cIndex(0));
  for (int64_t s = 0; s < slots; ++s) {
    Value inside = e.bitAnd(leads, body.ult(position[s], e.cIndex(shape.seq)));
    body.ifThen(inside, [&] {
      Value lse = e.addf(body.toF64(result[base + s]),
                         body.logF64(body.toF64(result[base + slots + s])));
      body.store(body.toF32(lse), body.arg(4), statisticAt(b, h, position[s]));
    });
  }
}

/// BF16 operands: lse by the online maximum and sum over the key tiles (K
/// alone staged), then O = sum_j round(exp(s_ij - lse_i)) v_j — the P of
/// the backward, which reads the same lse.
void TiledAttention::forwardRoundedProbabilities() {
  const int64_t rows = tiling.rows, inner = tiling.inner;
  const QueryBlock q = queryBlock();
  Value first = q.first, b = q.b, h = q.h;
  // By warpgroups, K and V are staged swizzled for the tensor cores and
  // Q's fragments are loaded into registers once.
  const bool byGroups = tiling.warpgroups;
  Operand queries = operand(rows),
          keys = operand(inner, byGroups ? Swizzled : AsRows),
          values = operand(inner, byGroups ? Swizzled : AsColumns);
  Staged probabilities = scoreStage();
  load(queries, body.arg(0), b, h, first, rows, qStride);
  SmallVector<SmallVector<Value>> queryWords;
  if (byGroups) {
    body.barrier();
    queryWords = rowWords(queries);
  }
  // Each of the warp's row tiles: its rows' positions, statistics and
  // outputs (K's and V's fragments loaded once for all of them).
  const int64_t tiles = static_cast<int64_t>(tileRows.size());
  SmallVector<SmallVector<Value>> position;
  for (Value from : tileRows)
    position.push_back(rowPositions(first, from));
  // Each row tile's scores S = Q K^T of the staged key tile, masked.
  auto scoresRows = [&](Value keyFirst) {
    if (!byGroups)
      return maskedScoresRows(queries, keys, keyFirst, position, first);
    SmallVector<Tiles> scores =
        warpgroupScores(queryWords, keys.swizzled, inner);
    for (int64_t m = 0; m < tiles; ++m)
      scores[m] = masked(std::move(scores[m]), keyFirst, position[m], first);
    return scores;
  };
  auto staged = [&] {
    if (byGroups)
      tile.fenceSharedForProducts(e);
    body.barrier();
  };
  Value keyTiles = causalKeyTiles(first);
  const int64_t slots = tile.rowSlots();
  const int64_t pieces = piecesPerThread(inner);
  auto fetchKeys = [&](Value keyFirst) {
    return fetch(body.arg(1), q.b, q.g, keyFirst, inner, kvStride);
  };
  // Sweep 1: the running maximum and sum (each tile's slots, each lane's
  // own columns: no shuffles in the loop), carried with the next K pieces;
  // the row's lanes combined once after it.
  SmallVector<Value> init(tiles * slots, e.cF32(-INFINITY));
  init.append(tiles * slots, e.cF32(0.0f));
  init.append(fetchKeys(e.cIndex(0)));
  SmallVector<Value> statistics = body.strided(
      e.cIndex(0), keyTiles, 1, init, [&](Value kt, ValueRange carried) {
        Value keyFirst = e.mulIndex(kt, e.cIndex(inner));
        body.barrier(); // the last step's reads of K are done
        put(keys, SmallVector<Value>(carried.drop_front(2 * tiles * slots)),
            inner);
        staged();
        SmallVector<Value> prefetched =
            fetchKeys(e.addIndex(keyFirst, e.cIndex(inner)));
        SmallVector<Tiles> scores = scoresRows(keyFirst);
        SmallVector<Value> maximum, sum;
        for (int64_t m = 0; m < tiles; ++m) {
          Online next = online(
              scores[m], SmallVector<Value>(carried.slice(m * slots, slots)),
              SmallVector<Value>(carried.slice((tiles + m) * slots, slots)),
              /*acrossLanes=*/false);
          maximum.append(next.maximum);
          sum.append(next.sum);
        }
        SmallVector<Value> yielded = maximum;
        yielded.append(sum);
        yielded.append(prefetched);
        return yielded;
      });
  auto [rowMaximum, rowSum] =
      combineLanes(ArrayRef(statistics).take_front(tiles * slots),
                   ArrayRef(statistics).slice(tiles * slots, tiles * slots));
  SmallVector<Value> lse(tiles * slots), lseShift(tiles * slots);
  for (int64_t s = 0; s < tiles * slots; ++s) {
    lse[s] = body.toF32(
        e.addf(body.toF64(rowMaximum[s]), body.logF64(body.toF64(rowSum[s]))));
    lseShift[s] = shifted(lse[s]);
  }

  // Sweep 2: O += round(exp(s - lse)) V.
  const int64_t outValues = hd / tile.tileN() * tile.cValues();
  SmallVector<Value> start;
  for (int64_t m = 0; m < tiles; ++m)
    start.append(flatten(zeros(hd)));
  start.append(fetchKeysValues(q, e.cIndex(0)));
  SmallVector<Value> result = body.strided(
      e.cIndex(0), keyTiles, 1, start, [&](Value kt, ValueRange carried) {
        SmallVector<Tiles> out;
        for (int64_t m = 0; m < tiles; ++m)
          out.push_back(unflatten(carried.slice(m * outValues, outValues), hd));
        ValueRange fetched = carried.drop_front(tiles * outValues);
        Value keyFirst = e.mulIndex(kt, e.cIndex(inner));
        body.barrier(); // the last step's reads of K and V are done
        put(keys, SmallVector<Value>(fetched.take_front(pieces)), inner);
        put(values, SmallVector<Value>(fetched.drop_front(pieces)), inner);
        staged();
        SmallVector<Value> prefetched =
            fetchKeysValues(q, e.addIndex(keyFirst, e.cIndex(inner)));
        // P = exp(s scale - lse), 0 where masked (exp(-inf)); rounded as
        // the product's operand.
        SmallVector<Tiles> scores = scoresRows(keyFirst);
        for (auto [m, tiles] : llvm::enumerate(scores))
          for (SmallVector<Value> &t : tiles)
            for (int64_t r = 0; r < tile.cValues(); ++r)
              t[r] = expScaled(t[r], lseShift[m * slots + tile.rowSlot(r)]);
        productOfTilesRows(out, scores, probabilities, values,
                           /*nMajor=*/false);
        SmallVector<Value> yielded = flatten(out);
        yielded.append(prefetched);
        return yielded;
      });
  Value leads = arith::CmpIOp::create(body.b, CmpIPredicate::eq, cAt[0].second,
                                      e.cIndex(0));
  for (int64_t m = 0; m < tiles; ++m) {
    storeRows(unflatten(ValueRange(result).slice(m * outValues, outValues), hd),
              body.arg(3), b, h, first, qStride,
              SmallVector<Value>(slots, e.cF32(1.0f)), tileRows[m]);
    for (int64_t s = 0; s < slots; ++s) {
      Value inside =
          e.bitAnd(leads, body.ult(position[m][s], e.cIndex(shape.seq)));
      body.ifThen(inside, [&] {
        body.store(lse[m * slots + s], body.arg(4),
                   statisticAt(b, h, position[m][s]));
      });
    }
  }
}

//===----------------------------------------------------------------------===//
// Backward: dQ
//===----------------------------------------------------------------------===//

void TiledAttention::queryGradients() {
  const int64_t rows = tiling.rows, inner = tiling.inner;
  const QueryBlock q = queryBlock();
  Value first = q.first, b = q.b, h = q.h;
  // By warpgroups, K is staged once, swizzled, for both of its products
  // (B over its rows in S = Q K^T, over its columns in dS K).
  Operand queries = operand(rows), outGrads = operand(rows),
          keys =
              operand(inner, tiling.warpgroups ? Swizzled : AsRows | AsColumns),
          values = operand(inner, tiling.warpgroups ? Swizzled : AsRows);
  Staged scoreGrads = scoreStage();
  load(queries, body.arg(0), b, h, first, rows, qStride);
  load(outGrads, body.arg(5), b, h, first, rows, qStride);

  // delta_i = dout_i . out_i of the block's rows, a thread a row (the CPU's
  // dot product, dotInLanes), into memory for this block's lanes below and
  // for dK and dV's launch after it: the block barrier makes each store
  // visible to the block's threads.
  body.strided(body.thread(), e.cIndex(rows), tiling.warps() * tile.lanes(), {},
               [&](Value r, ValueRange) {
                 Value position = e.addIndex(first, r);
                 body.ifThen(body.ult(position, e.cIndex(shape.seq)), [&] {
                   Value at = rowAt(b, position, h, qStride);
                   SmallVector<Value> dout, out;
                   for (int64_t d = 0; d < hd; d += 4)
                     for (auto [from, to] : {std::pair{body.arg(5), &dout},
                                             std::pair{body.arg(3), &out}}) {
                       Value four = vector::LoadOp::create(
                           body.b, VectorType::get({4}, e.f32()), from,
                           ValueRange{e.addIndex(at, e.cIndex(d))},
                           /*nontemporal=*/false, body.b.getI64IntegerAttr(16));
                       for (int64_t l = 0; l < 4; ++l)
                         to->push_back(vector::ExtractOp::create(
                             body.b, four, ArrayRef<int64_t>{l}));
                     }
                   body.store(dotInLanes(e, dout, out), body.arg(9),
                              statisticAt(b, h, position));
                 });
                 return SmallVector<Value>{};
               });
  body.barrier();

  // Each of the warp's row tiles: its rows' positions, lse and delta.
  const int64_t tiles = static_cast<int64_t>(tileRows.size());
  const int64_t slots = tile.rowSlots();
  SmallVector<SmallVector<Value>> position;
  SmallVector<Value> lseShift, delta;
  for (Value from : tileRows) {
    position.push_back(rowPositions(first, from));
    for (int64_t s = 0; s < slots; ++s) {
      Value at = statisticAt(
          b, h, minIndex(position.back()[s], e.cIndex(shape.seq - 1)));
      lseShift.push_back(shifted(body.load(body.arg(4), at)));
      delta.push_back(body.load(body.arg(9), at));
    }
  }
  Value keyTiles = causalKeyTiles(first);
  const int64_t gradValues = hd / tile.tileN() * tile.cValues();
  const int64_t pieces = piecesPerThread(inner);
  SmallVector<Value> init;
  for (int64_t m = 0; m < tiles; ++m)
    init.append(flatten(zeros(hd)));
  init.append(fetchKeysValues(q, e.cIndex(0)));
  SmallVector<Value> result = body.strided(
      e.cIndex(0), keyTiles, 1, init, [&](Value kt, ValueRange carried) {
        SmallVector<Tiles> grads;
        for (int64_t m = 0; m < tiles; ++m)
          grads.push_back(
              unflatten(carried.slice(m * gradValues, gradValues), hd));
        ValueRange fetched = carried.drop_front(tiles * gradValues);
        Value keyFirst = e.mulIndex(kt, e.cIndex(inner));
        body.barrier();
        put(keys, SmallVector<Value>(fetched.take_front(pieces)), inner);
        put(values, SmallVector<Value>(fetched.drop_front(pieces)), inner);
        if (tiling.warpgroups)
          tile.fenceSharedForProducts(e);
        body.barrier();
        SmallVector<Value> prefetched =
            fetchKeysValues(q, e.addIndex(keyFirst, e.cIndex(inner)));
        // dS = P (dP - delta), P = exp(s scale - lse): 0 where masked
        // (exp(-inf); dP is finite, zero-filled past the sequence).
        SmallVector<Tiles> scores, dp;
        if (tiling.warpgroups) {
          scores = warpgroupScores(rowWords(queries), keys.swizzled, inner);
          dp = warpgroupScores(rowWords(outGrads), values.swizzled, inner);
          for (int64_t m = 0; m < tiles; ++m)
            scores[m] =
                masked(std::move(scores[m]), keyFirst, position[m], first);
        } else {
          scores = maskedScoresRows(queries, keys, keyFirst, position, first);
          dp.assign(tiles, zeros(inner));
          productRows(dp, outGrads, hd, values, /*nMajor=*/true);
        }
        for (int64_t m = 0; m < tiles; ++m)
          for (auto [n, t] : llvm::enumerate(scores[m]))
            for (int64_t r = 0; r < tile.cValues(); ++r) {
              const int64_t s = m * slots + tile.rowSlot(r);
              t[r] = e.mulf(expScaled(t[r], lseShift[s]),
                            e.subf(dp[m][n][r], delta[s]));
            }
        productOfTilesRows(grads, scores, scoreGrads, keys, /*nMajor=*/false);
        SmallVector<Value> next = flatten(grads);
        next.append(prefetched);
        return next;
      });
  SmallVector<Value> factor(slots, e.cF32(scale));
  for (int64_t m = 0; m < tiles; ++m)
    storeRows(
        unflatten(ValueRange(result).slice(m * gradValues, gradValues), hd),
        body.arg(6), b, h, first, qStride, factor, tileRows[m]);
}

//===----------------------------------------------------------------------===//
// Backward: dK and dV
//===----------------------------------------------------------------------===//

void TiledAttention::keyValueGradients() {
  const int64_t rows = tiling.rows, inner = tiling.inner;
  Value first = e.mulIndex(body.block(), e.cIndex(rows));
  Value bg = body.block(gpu::Dimension::y);
  Value b = e.divIndex(bg, shape.kvHeads);
  Value g = arith::RemUIOp::create(body.b, bg, e.cIndex(shape.kvHeads));
  // By warpgroups, Q and dO are staged once, swizzled, for both of their
  // products (B over its rows in S^T and dP^T, over its columns in dK and
  // dV), and K's and V's fragments are held in registers.
  const unsigned staging =
      tiling.warpgroups ? unsigned{Swizzled} : AsRows | AsColumns;
  Operand keys = operand(rows), values = operand(rows),
          queries = operand(inner, staging), outGrads = operand(inner, staging);
  Staged probabilities = scoreStage(), scoreGrads = scoreStage();
  Value lseShift = body.sharedArray(inner, e.f32()); // lse log2 e
  Value delta = body.sharedArray(inner, e.f32());
  load(keys, body.arg(1), b, g, first, rows, kvStride);
  load(values, body.arg(2), b, g, first, rows, kvStride);
  // A warp's K and V fragments held in registers where it has one row
  // tile (32 registers), else loaded at each step.
  const bool holdsWords = tiling.warpgroups && tileRows.size() == 1;
  SmallVector<SmallVector<Value>> keyWords, valueWords;
  if (holdsWords) {
    body.barrier();
    keyWords = rowWords(keys);
    valueWords = rowWords(values);
  }

  // Each of the warp's row tiles (of keys): its rows' positions.
  const int64_t tiles = static_cast<int64_t>(tileRows.size());
  SmallVector<SmallVector<Value>> position;
  for (Value from : tileRows)
    position.push_back(rowPositions(first, from));

  // Query tiles from the one holding the block's first key.
  Value firstTile = e.divIndex(first, inner);
  Value queryTiles = e.cIndex(ceilDiv(shape.seq, inner));
  const int64_t gradValues = hd / tile.tileN() * tile.cValues();
  const int64_t half = tiles * gradValues; // dK's row tiles, then dV's
  SmallVector<Value> init;
  for (int64_t m = 0; m < 2 * tiles; ++m)
    init.append(flatten(zeros(hd)));
  auto rowTiles = [&](ValueRange values) {
    SmallVector<Tiles> grads;
    for (int64_t m = 0; m < tiles; ++m)
      grads.push_back(unflatten(values.slice(m * gradValues, gradValues), hd));
    return grads;
  };
  // A query tile's Q and dO pieces, then the thread's lse and delta (of
  // query tid, clamped).
  const int64_t pieces = piecesPerThread(inner);
  auto fetchQueries = [&](Value h, Value queryFirst) {
    SmallVector<Value> next =
        fetch(body.arg(0), b, h, queryFirst, inner, qStride);
    next.append(fetch(body.arg(5), b, h, queryFirst, inner, qStride));
    Value at = statisticAt(
        b, h,
        minIndex(e.addIndex(queryFirst,
                            minIndex(body.thread(), e.cIndex(inner - 1))),
                 e.cIndex(shape.seq - 1)));
    next.push_back(body.load(body.arg(4), at));
    next.push_back(body.load(body.arg(9), at));
    return next;
  };
  SmallVector<Value> result = body.strided(
      e.cIndex(0), e.cIndex(group), 1, init,
      [&](Value member, ValueRange acrossHeads) {
        Value h = e.addIndex(e.mulIndex(g, e.cIndex(group)), member);
        SmallVector<Value> start(acrossHeads);
        start.append(fetchQueries(h, e.mulIndex(firstTile, e.cIndex(inner))));
        SmallVector<Value> sums = body.strided(
            firstTile, queryTiles, 1, start, [&](Value it, ValueRange carried) {
              SmallVector<Tiles> keyGrads = rowTiles(carried.take_front(half));
              SmallVector<Tiles> valueGrads =
                  rowTiles(carried.drop_front(half).take_front(half));
              ValueRange fetched = carried.drop_front(2 * half);
              Value queryFirst = e.mulIndex(it, e.cIndex(inner));
              body.barrier();
              put(queries, SmallVector<Value>(fetched.take_front(pieces)),
                  inner);
              put(outGrads,
                  SmallVector<Value>(
                      fetched.drop_front(pieces).take_front(pieces)),
                  inner);
              body.ifThen(body.ult(body.thread(), e.cIndex(inner)), [&] {
                body.store(shifted(fetched[2 * pieces]), lseShift,
                           body.thread());
                body.store(fetched[2 * pieces + 1], delta, body.thread());
              });
              if (tiling.warpgroups)
                tile.fenceSharedForProducts(e);
              body.barrier();
              SmallVector<Value> prefetched =
                  fetchQueries(h, e.addIndex(queryFirst, e.cIndex(inner)));
              // Transposed: the warp's key rows by the tile's queries.
              SmallVector<Tiles> scores(tiles, zeros(inner)),
                  dp(tiles, zeros(inner));
              if (tiling.warpgroups) {
                scores = warpgroupScores(holdsWords ? keyWords : rowWords(keys),
                                         queries.swizzled, inner);
                dp = warpgroupScores(holdsWords ? valueWords : rowWords(values),
                                     outGrads.swizzled, inner);
              } else {
                productRows(scores, keys, hd, queries, /*nMajor=*/true);
                productRows(dp, values, hd, outGrads, /*nMajor=*/true);
              }
              // Query column c is visible to key row slot s iff
              // position_s - queryFirst <= c < seq - queryFirst: to every
              // row where the block's last key is at most the tile's
              // first query and the tile is inside the sequence.
              Value needed = e.bitOr(
                  body.ult(queryFirst, e.addIndex(first, e.cIndex(rows - 1))),
                  body.ult(e.cIndex(shape.seq),
                           e.addIndex(queryFirst, e.cIndex(inner))));
              Value upper = arith::SubIOp::create(body.b, e.cIndex(shape.seq),
                                                  queryFirst);
              for (int64_t m = 0; m < tiles; ++m) {
                for (auto [n, t] : llvm::enumerate(scores[m]))
                  for (int64_t r = 0; r < tile.cValues(); ++r)
                    t[r] = expScaled(t[r], body.load(lseShift, columnOf(n, r)));
                scores[m] = maskedWhere(needed, scores[m], [&](Tiles &masked) {
                  SmallVector<Value> lower;
                  for (Value p : position[m])
                    lower.push_back(
                        arith::SubIOp::create(body.b, p, queryFirst));
                  for (auto [n, t] : llvm::enumerate(masked))
                    for (int64_t r = 0; r < tile.cValues(); ++r) {
                      Value column = columnOf(n, r);
                      Value visible = e.bitAnd(
                          sle(lower[tile.rowSlot(r)], column),
                          arith::CmpIOp::create(body.b, CmpIPredicate::slt,
                                                column, upper));
                      t[r] = e.select(visible, t[r], e.cF32(0.0f));
                    }
                });
                for (auto [n, t] : llvm::enumerate(scores[m]))
                  for (int64_t r = 0; r < tile.cValues(); ++r)
                    dp[m][n][r] =
                        e.mulf(t[r], e.subf(dp[m][n][r],
                                            body.load(delta, columnOf(n, r))));
              }
              if (!inRegisters(tile)) { // both stashed before one barrier
                assert(tiles == 1 && "row tiles need packed BF16 pairs");
                stash(scores.front(), probabilities);
                stash(dp.front(), scoreGrads);
                body.barrier();
                product(valueGrads.front(), Operand{probabilities, {}, {}, {}},
                        inner, outGrads, /*nMajor=*/false);
                product(keyGrads.front(), Operand{scoreGrads, {}, {}, {}},
                        inner, queries, /*nMajor=*/false);
              } else {
                productOfTilesRows(valueGrads, scores, {}, outGrads,
                                   /*nMajor=*/false);
                productOfTilesRows(keyGrads, dp, {}, queries,
                                   /*nMajor=*/false);
              }
              SmallVector<Value> next = flatten(keyGrads);
              next.append(flatten(valueGrads));
              next.append(prefetched);
              return next;
            });
        sums.resize(2 * half);
        return sums;
      });
  SmallVector<Value> factor(tile.rowSlots(), e.cF32(scale)),
      one(tile.rowSlots(), e.cF32(1.0f));
  for (int64_t m = 0; m < tiles; ++m) {
    storeRows(
        unflatten(ValueRange(result).slice(m * gradValues, gradValues), hd),
        body.arg(7), b, g, first, kvStride, factor, tileRows[m]);
    storeRows(
        unflatten(ValueRange(result).slice(half + m * gradValues, gradValues),
                  hd),
        body.arg(8), b, g, first, kvStride, one, tileRows[m]);
  }
}

} // namespace

void tetra::conversion::buildTiledAttention(Body &body,
                                            const AttentionMatrixTile &tile,
                                            const AttentionGeometry &shape,
                                            AttentionPass pass,
                                            const AttentionTiling &tiling) {
  if (tiling.blocksPerMultiprocessor > 0)
    tile.requestBlocksPerMultiprocessor(body.func,
                                        tiling.blocksPerMultiprocessor);
  TiledAttention kernel(body, tile, shape, tiling);
  switch (pass) {
  case AttentionPass::Forward:
    return kernel.forward();
  case AttentionPass::QueryGradients:
    return kernel.queryGradients();
  case AttentionPass::KeyValueGradients:
    return kernel.keyValueGradients();
  }
}
