// --convert-tetra-to-nvvm{chip=sm_90a}: each GEMM tetra.kernel becomes a
// gpu.module of the plan's launches — each operand rotated and quantized
// (or rounded to bf16) by one thread per segment along K into K-major
// scratch buffers, then the GEMM: block tiles staged in two swizzled
// shared-memory buffers, read by wgmma (one warpgroup per 64 x 64 or
// 64 x 128 of a tile: E2M1 x E2M1 and bf16 x bf16) or mma.sync (one warp
// per 32 x 32: FP8, NVFP4, tiles of 32) — with what it computes and its
// plan (tetra.gemm) and each launch's contract (tetra.launch) recorded for
// the bundle's manifest. A GEMM the target cannot run is an error naming
// it and the target.
// RUN: tetra-opt %s --split-input-file --convert-tetra-to-nvvm --verify-diagnostics | FileCheck %s

// Fprop Y = X·Wᵀ, MXFP8 E4M3 with the rceil rule: no rotation, each row's
// K = 64 in segments of 32, one per thread. The GEMM: the whole 64 x 32
// result is one block tile (grid 1 x 1) of two warps with mma.sync (FP8
// codes: Hopper's FP8 wgmma sums them too coarsely); K = 64 is one staged
// step of 64-byte swizzled rows ((64 + 32) x 64 tile bytes and 2 x 96
// scale bytes, rounded up to 1024: two buffers of 7168 bytes), 16 bytes
// per load and per store. The step's barrier ANDs whether every scale code
// is moderate (2^±45), for a uniform fast path. The host function is gone:
// the output holds the GPU modules alone.
// CHECK-LABEL: gpu.module @wq_fprop
// CHECK-SAME: gemm = "layers.0.attn.wq.fprop"
// CHECK-SAME: lhs = {axis = 1 : i64, block = 32 : i64, format = "e4m3", input = 0 : i64, kind = "mx", rotation = {kind = "none"}, rounding = "nearest_even", rule = "rceil", scale = "e8m0", scratch_encoding = "code", scratch_layout = "k_major"
// CHECK-SAME: m = 64 : i64, n = 32 : i64
// CHECK-SAME: plan = {block_tile = array<i64: 64, 32>, chunk = 32 : i64, folds_scales = false, group_tile = array<i64: 32, 32>, instruction = "mma.sync.m16n8k32.e4m3.e4m3", pitch = array<i64: 64, 64>, split_k = 1 : i64, staged_buffers = 2 : i64, staged_bytes = 14336 : i64, staging = "registers", step_k = 64 : i64, sums_exactly = false, threads = 64 : i64}
// CHECK-SAME: transpose_lhs = false, transpose_rhs = true
// The quantize launch unrolls every loop: a thread's 32 elements (K is
// contiguous) are loaded once, 16 bytes a load, and held in registers for
// the amax and the encoding — no loop, no second load. Its codes go out as
// i32 words, sixteen codes (16 bytes) a store.
// CHECK: gpu.func @wq_fprop__lhs(%{{.*}}: memref<4096xf32> {llvm.align = 16 : i64}, %{{.*}}: memref<1024xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<128xi8> {llvm.align = 16 : i64}, %{{.*}}: i64, %{{.*}}: i64) kernel
// CHECK-SAME: tetra.launch = {arguments = ["input:0", "scratch:lhs.codes", "scratch:lhs.scales", "scalar:seed", "scalar:step"], block = array<i64: 128, 1, 1>, grid = array<i64: 1, 1, 1>}
// CHECK-COUNT-8: vector.load %{{.*}} {alignment = 16 : i64} : memref<4096xf32>, vector<4xf32>
// CHECK-NOT: scf.for
// CHECK-NOT: memref.load
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<1024xi32>, vector<4xi32>
// CHECK-NOT: scf.for
// CHECK: gpu.func @wq_fprop__rhs
// CHECK-SAME: arguments = ["input:1", "scratch:rhs.codes", "scratch:rhs.scales", "scalar:seed", "scalar:step"]
// CHECK: gpu.func @wq_fprop__gemm(%{{.*}}: memref<1024xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<128xi8> {llvm.align = 16 : i64}, %{{.*}}: memref<512xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<64xi8> {llvm.align = 16 : i64}, %{{.*}}: memref<2048xf32> {llvm.align = 16 : i64}) workgroup(%{{.*}} : memref<14336xi8, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64})
// CHECK-SAME: arguments = ["scratch:lhs.codes", "scratch:lhs.scales", "scratch:rhs.codes", "scratch:rhs.scales", "result:0"], block = array<i64: 64, 1, 1>, grid = array<i64: 1, 1, 1>
// Step 0 is staged before the loop (its barrier's flag carried in); each
// iteration stores step s + 1 into the other buffer, starts the loads of
// step s + 2, then per chunk of 32 eight MMAs from zero (2 x 4 tiles of
// 16 x 8), each result scaled and added in one fma, and one barrier.
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<1024xi32>, vector<4xi32>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<3584xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: nvvm.barrier #nvvm.reduction<and> %{{.*}} -> i32
// CHECK: scf.for
// CHECK: vector.store
// CHECK: vector.load
// CHECK-COUNT-8: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %cst{{.*}}, %cst{{.*}}, %cst{{.*}}, %cst{{.*}})
// CHECK: math.fma
// CHECK: nvvm.barrier #nvvm.reduction<and>
// CHECK-NOT: func.func
#q8 = #tetra.quant<mxfp8_e4m3 rule rceil>
func.func @fprop(%x: tensor<64x64xf32>, %w: tensor<32x64xf32>) -> tensor<64x32xf32> {
  %y = tetra.kernel "wq_fprop" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32> {
    %ac, %as = tetra.quantize %a as #q8 along 1 : tensor<64x64xf32> -> tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
    %bc, %bs = tetra.quantize %b as #q8 along 1 : tensor<32x64xf32> -> tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #q8), (%bc scales %bs as #q8) transpose_rhs role fprop : (tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  } loc("layers.0.attn.wq.fprop"("model.tetra":3:5))
  return %y : tensor<64x32xf32>
}

// -----

// Wgrad dW = dYᵀ·X reduces over the 128 tokens (axis 0 of both operands),
// MXFP4 with stochastic rounding under a random Hadamard of 64 with
// per-step signs: each thread rotates a segment of 64 tokens in a local
// buffer (the signs from the step), then quantizes its two blocks of 32,
// drawing its rounding bits from the seed and step arguments. Both
// operands are token-major (K is their slow dimension), yet their scratch
// codes are K-major — [32][128] and [64][128] — and hold each E2M1 code as
// the E4M3 byte of its value (sm_90a's FP8 instructions read them as they
// are; no E2M1 conversion instruction exists on sm_90a and none is
// emitted). The 32-row tile is mma.sync's.
// CHECK-LABEL: gpu.module @wq_wgrad
// CHECK-SAME: lhs = {axis = 0 : i64, block = 32 : i64, format = "e2m1", input = 0 : i64, kind = "mx", rotation = {block = 64 : i64, kind = "random_hadamard", schedule = "per_step", seed = 5 : i64}, rounding = "stochastic", rule = "floor", scale = "e8m0", scratch_encoding = "e4m3", scratch_layout = "k_major"
// CHECK-SAME: transpose_lhs = true, transpose_rhs = false
// Its 64 tokens are strided (a warp's threads read neighbouring columns):
// 64 scalar loads, each once; the local buffers are indexed by constants
// only (every loop unrolled), which LLVM keeps in registers.
// CHECK: gpu.func @wq_wgrad__lhs
// CHECK-SAME: grid = array<i64: 1, 1, 1>
// CHECK: memref.alloca() : memref<64xf32, #gpu.address_space<private>>
// CHECK-NOT: scf.for
// CHECK-COUNT-64: memref.load %arg0
// CHECK-NOT: scf.for
// CHECK: gpu.func @wq_wgrad__lhs_fold_refs(
// CHECK: gpu.func @wq_wgrad__gemm
// CHECK-SAME: grid = array<i64: 1, 1, 1>
// CHECK: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"
// CHECK-NOT: e2m1
#q4 = #tetra.quant<mxfp4 round stochastic>
#rot = #tetra.rotation<random_hadamard<64, per_step, 5>>
func.func @wgrad(%dy: tensor<128x32xf32>, %x: tensor<128x64xf32>, %seed: i64, %step: i64) -> tensor<32x64xf32> {
  %dw = tetra.kernel "wq_wgrad" (%a = %dy, %s = %seed, %t = %step, %b = %x) : (tensor<128x32xf32>, i64, i64, tensor<128x64xf32>) -> tensor<32x64xf32> {
    %ar = tetra.rotate %a by #rot along 0 step(%t) : tensor<128x32xf32>
    %ac, %as = tetra.quantize %ar as #q4 along 0 random(%s, %t) {tensor_id = 7 : i64} : tensor<128x32xf32> -> tensor<128x32xf4E2M1FN>, tensor<4x32xf8E8M0FNU>
    %br = tetra.rotate %b by #rot along 0 step(%t) : tensor<128x64xf32>
    %bc, %bs = tetra.quantize %br as #q4 along 0 random(%s, %t) {tensor_id = 8 : i64} : tensor<128x64xf32> -> tensor<128x64xf4E2M1FN>, tensor<4x64xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #q4), (%bc scales %bs as #q4) transpose_lhs role wgrad : (tensor<128x32xf4E2M1FN>, tensor<4x32xf8E8M0FNU>, tensor<128x64xf4E2M1FN>, tensor<4x64xf8E8M0FNU>) -> tensor<32x64xf32>
    tetra.yield %c : tensor<32x64xf32>
  }
  return %dw : tensor<32x64xf32>
}

// -----

// Dgrad with E5M2 operands: the E5M2 intrinsic.
// CHECK-LABEL: gpu.module @wq_dgrad
// CHECK: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e5m2.e5m2.f32"
#q5 = #tetra.quant<mxfp8_e5m2>
func.func @dgrad(%dy: tensor<64x32xf32>, %w: tensor<32x64xf32>) -> tensor<64x64xf32> {
  %dx = tetra.kernel "wq_dgrad" (%a = %dy, %b = %w) : (tensor<64x32xf32>, tensor<32x64xf32>) -> tensor<64x64xf32> {
    %ac, %as = tetra.quantize %a as #q5 along 1 : tensor<64x32xf32> -> tensor<64x32xf8E5M2>, tensor<64x1xf8E8M0FNU>
    %bc, %bs = tetra.quantize %b as #q5 along 0 : tensor<32x64xf32> -> tensor<32x64xf8E5M2>, tensor<1x64xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #q5), (%bc scales %bs as #q5) role dgrad : (tensor<64x32xf8E5M2>, tensor<64x1xf8E8M0FNU>, tensor<32x64xf8E5M2>, tensor<1x64xf8E8M0FNU>) -> tensor<64x64xf32>
    tetra.yield %c : tensor<64x64xf32>
  }
  return %dx : tensor<64x64xf32>
}

// -----

// NVFP4 (E4M3 scales on blocks of 16 under an fp32 tensor scale): each
// operand's prologue clears its amax, takes it over the tensor with an
// atomic maximum, then quantizes (writing the tensor scale); the GEMM reads
// both tensor scales, and its chunk is 16: each m16n8k32 sees one half of
// the 32 staged codes, the other half's registers zero.
// CHECK-LABEL: gpu.module @wq_fprop
// CHECK-SAME: chunk = 16 : i64
// CHECK-SAME: scratch = {lhs.amax = 4 : i64, lhs.codes = 4096 : i64, lhs.scales = 256 : i64, lhs.tensor_scale = 4 : i64
// CHECK: gpu.func @wq_fprop__lhs_amax_clear
// CHECK-SAME: arguments = ["scratch:lhs.amax"], block = array<i64: 1, 1, 1>, grid = array<i64: 1, 1, 1>
// CHECK: gpu.func @wq_fprop__lhs_amax
// CHECK-SAME: arguments = ["input:0", "scratch:lhs.amax", "scalar:seed", "scalar:step"]
// CHECK: memref.atomic_rmw maxu
// CHECK: gpu.func @wq_fprop__lhs(
// CHECK-SAME: arguments = ["input:0", "scratch:lhs.amax", "scratch:lhs.codes", "scratch:lhs.scales", "scratch:lhs.tensor_scale", "scalar:seed", "scalar:step"]
// CHECK: arith.divf %{{.*}}, %cst{{.*}} : f32
// CHECK: gpu.func @wq_fprop__rhs_amax_clear
// CHECK: gpu.func @wq_fprop__gemm
// CHECK-SAME: arguments = ["scratch:lhs.codes", "scratch:lhs.scales", "scratch:lhs.tensor_scale", "scratch:rhs.codes", "scratch:rhs.scales", "scratch:rhs.tensor_scale", "result:0"]
// CHECK: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"(%{{.*}}, %{{.*}}, %c0_i32{{.*}}, %c0_i32{{.*}}, %{{.*}}, %c0_i32{{.*}}, %cst
// CHECK: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"(%c0_i32{{.*}}, %c0_i32{{.*}}, %{{.*}}, %{{.*}}, %c0_i32{{.*}}, %{{.*}}, %cst
#nv = #tetra.quant<nvfp4>
func.func @nvfp4(%x: tensor<64x64xf32>, %w: tensor<32x64xf32>) -> tensor<64x32xf32> {
  %y = tetra.kernel "wq_fprop" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32> {
    %ac, %as, %at = tetra.quantize %a as #nv along 1 : tensor<64x64xf32> -> tensor<64x64xf4E2M1FN>, tensor<64x4xf8E4M3FN>, tensor<f32>
    %bc, %bs, %bt = tetra.quantize %b as #nv along 1 : tensor<32x64xf32> -> tensor<32x64xf4E2M1FN>, tensor<32x4xf8E4M3FN>, tensor<f32>
    %c = tetra.scaled_matmul (%ac scales %as tensor_scale %at as #nv), (%bc scales %bs tensor_scale %bt as #nv) transpose_rhs role fprop : (tensor<64x64xf4E2M1FN>, tensor<64x4xf8E4M3FN>, tensor<f32>, tensor<32x64xf4E2M1FN>, tensor<32x4xf8E4M3FN>, tensor<f32>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  }
  return %y : tensor<64x32xf32>
}

// -----

// BF16 (lm_head under the study's policies): each operand rounded to bf16
// (nearest even) into 2-byte scratch codes, no scales; the GEMM stages
// 2-byte elements and, on a 32-wide tile, accumulates all of K in
// mma.sync.m16n8k16.bf16 (the contract's G = K: one chunk).
// CHECK-LABEL: gpu.module @lm_head_fprop
// CHECK-SAME: chunk = 64 : i64, folds_scales = false, group_tile = array<i64: 32, 32>, instruction = "mma.sync.m16n8k16.bf16"
// CHECK-SAME: scratch = {lhs.codes = 8192 : i64, rhs.codes = 4096 : i64}
// CHECK: gpu.func @lm_head_fprop__lhs(%{{.*}}: memref<4096xf32> {llvm.align = 16 : i64}, %{{.*}}: memref<2048xi32> {llvm.align = 16 : i64}, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<2048xi32>, vector<4xi32>
// CHECK: gpu.func @lm_head_fprop__gemm
// CHECK-SAME: arguments = ["scratch:lhs.codes", "scratch:rhs.codes", "result:0"]
// CHECK: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"
// CHECK-NOT: math.fma
// No cross-entropy reads the result: no loss parts.
// CHECK-NOT: __and_loss_parts
#bf = #tetra.quant<bf16>
func.func @bf16(%x: tensor<64x64xf32>, %w: tensor<32x64xf32>) -> tensor<64x32xf32> {
  %y = tetra.kernel "lm_head_fprop" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32> {
    %at = arith.truncf %a : tensor<64x64xf32> to tensor<64x64xbf16>
    %ae = arith.extf %at : tensor<64x64xbf16> to tensor<64x64xf32>
    %bt = arith.truncf %b : tensor<32x64xf32> to tensor<32x64xbf16>
    %be = arith.extf %bt : tensor<32x64xbf16> to tensor<32x64xf32>
    %c = tetra.scaled_matmul (%ae as #bf), (%be as #bf) transpose_rhs role fprop : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  }
  return %y : tensor<64x32xf32>
}

// -----

// The logits of a cross-entropy (through a reshape): beside the GEMM, its
// kLossPartsSuffix variant (launched only in its place: `variant`) writes
// the logits and, per row and slab of 64 columns (a warpgroup's, lane
// quads holding its rows: [width, slabs] = [64, 1]), the slab's largest
// logit and the sum of its exponentials. Each thread's row sums go to the
// other lanes of its quad by two xor shuffles (masks 1 and 2), the fp64 sum
// as two i32 halves, and one lane of each quad stores the pair (m, sum) as
// one 16-byte store.
// CHECK-LABEL: gpu.module @lm_head_fprop
// CHECK: gpu.func @lm_head_fprop__gemm(
// CHECK-SAME: arguments = ["scratch:lhs.codes", "scratch:rhs.codes", "result:0"]
// CHECK: gpu.func @lm_head_fprop__gemm__and_loss_parts(%{{.*}}: memref<2048xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<2048xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<4096xf32> {llvm.align = 16 : i64}, %{{.*}}: memref<128xf64> {llvm.align = 16 : i64})
// CHECK-SAME: arguments = ["scratch:lhs.codes", "scratch:rhs.codes", "result:0", "loss_parts"]
// CHECK-SAME: variant = true
// CHECK-SAME: tetra.loss_parts = [64, 1]
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : f32
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<128xf64>, vector<2xf64>
#bfl = #tetra.quant<bf16>
func.func @logits(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %t: tensor<1x64xi32>) -> tensor<f32> {
  %y = tetra.kernel "lm_head_fprop" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
    %at = arith.truncf %a : tensor<64x64xf32> to tensor<64x64xbf16>
    %ae = arith.extf %at : tensor<64x64xbf16> to tensor<64x64xf32>
    %bt = arith.truncf %b : tensor<64x64xf32> to tensor<64x64xbf16>
    %be = arith.extf %bt : tensor<64x64xbf16> to tensor<64x64xf32>
    %c = tetra.scaled_matmul (%ae as #bfl), (%be as #bfl) transpose_rhs role fprop : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    tetra.yield %c : tensor<64x64xf32>
  }
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 64, 64] : tensor<64x64xf32> into tensor<1x64x64xf32>
  %loss = tetra.cross_entropy %l, %t : tensor<1x64x64xf32>, tensor<1x64xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Ping-pong: a BF16 Fprop of 32768 tokens by a 640 x 640 weight has 1280
// tiles of 128 x 128, at least two a block (132 blocks), so the
// specialized launch's two consumer warpgroups take whole tiles one after
// the other: each holds two m64n128 fragments (rows 0..63 and 64..127, two
// wgmmas a K slice: 8 a staged step of 64), each buffer's `empty` barrier
// counts one warpgroup (128), and the warpgroup's index comes from lane 0
// (uniform to ptxas). Before a tile's K loop a warpgroup waits at named
// barrier 1 or 2 for the other's K loop of the tile before (which arrives
// there after its loop, if a tile follows), so that one's epilogue runs
// while the other's products do. setmaxnreg gives the producers 128
// registers and the consumers 184.
// CHECK-LABEL: gpu.module @wq_fprop
// CHECK: gpu.func @wq_fprop__gemm(
// CHECK-SAME: block = array<i64: 384, 1, 1>, grid = array<i64: 132, 1, 1>
// CHECK-COUNT-8: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK: gpu.shuffle  idx %{{.*}}, %c0_i32{{.*}}, %c32_i32 : i32
// CHECK: nvvm.setmaxregister  increase 184
// CHECK: nvvm.barrier id = %c2_i32 number_of_threads = %c256_i32
// CHECK: nvvm.barrier id = %c1_i32 number_of_threads = %c256_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.barrier.arrive id = %c1_i32 number_of_threads = %c256_i32
// CHECK: nvvm.barrier.arrive id = %c2_i32 number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.setmaxregister  decrease 128
#bfp = #tetra.quant<bf16>
func.func @bf16_pingpong(%x: tensor<32768x640xf32>, %w: tensor<640x640xf32>) -> tensor<32768x640xf32> {
  %y = tetra.kernel "wq_fprop" (%a = %x, %b = %w) : (tensor<32768x640xf32>, tensor<640x640xf32>) -> tensor<32768x640xf32> {
    %at = arith.truncf %a : tensor<32768x640xf32> to tensor<32768x640xbf16>
    %ae = arith.extf %at : tensor<32768x640xbf16> to tensor<32768x640xf32>
    %bt = arith.truncf %b : tensor<640x640xf32> to tensor<640x640xbf16>
    %be = arith.extf %bt : tensor<640x640xbf16> to tensor<640x640xf32>
    %c = tetra.scaled_matmul (%ae as #bfp), (%be as #bfp) transpose_rhs role fprop : (tensor<32768x640xf32>, tensor<640x640xf32>) -> tensor<32768x640xf32>
    tetra.yield %c : tensor<32768x640xf32>
  }
  return %y : tensor<32768x640xf32>
}

// -----

// A BF16 Wgrad of a 640 x 640 weight over 8192 tokens (K long): its
// largest tiles (128 x 128) are 25, far from the H200's 132
// multiprocessors, each summing all of K, so the plan splits K across 4
// blocks a tile (100 blocks of two warpgroups on wgmma.m64n128k16 and a
// producer warpgroup), each writing its partial tile (tetra-to-amdgpu.mlir
// checks the launch adding them).
// Both operands are reduced along their rows (K = tokens), and wgmma reads
// BF16 tiles MN-major: their scratch keeps the inputs' own layout
// (mn_major), so each prologue only rounds, eight elements a thread (8192
// x 640 / 8 / 128 = 5120 blocks), the same code as a K-major operand's —
// no transposing prologue. The wgmma descriptors of MN-major tiles: the
// leading byte offset the next 64 columns (step_k 64 x 128 bytes = 8192,
// >> 4 = 512 at bit 16), the stride the next eight K-rows (1024 >> 4 = 64
// at bit 32), the 128-byte swizzle (1 at bit 62): 4611686293338849280;
// A read column-major, B row-major (imm-trans-a, imm-trans-b = 1).
// CHECK-LABEL: gpu.module @wo_wgrad
// CHECK-SAME: lhs = {axis = 0 : i64, block = 0 : i64, format = "bf16", input = 0 : i64, kind = "bf16", rotation = {kind = "none"}, rounding = "nearest_even", rule = "none", scale = "none", scratch_encoding = "code", scratch_layout = "mn_major"
// CHECK-SAME: plan = {block_tile = array<i64: 128, 128>, chunk = 8192 : i64, folds_scales = false, group_tile = array<i64: 64, 128>, instruction = "wgmma.m64n128k16.f32.bf16.bf16"
// CHECK-SAME: split_k = 4 : i64
// CHECK-SAME: threads = 384 : i64
// CHECK-SAME: rhs = {axis = 0 : i64, block = 0 : i64, format = "bf16", input = 1 : i64, kind = "bf16", rotation = {kind = "none"}, rounding = "nearest_even", rule = "none", scale = "none", scratch_encoding = "code", scratch_layout = "mn_major"
// CHECK: gpu.func @wo_wgrad__lhs(%{{.*}}: memref<5242880xf32> {llvm.align = 16 : i64}, %{{.*}}: memref<2621440xi32> {llvm.align = 16 : i64}
// CHECK-SAME: grid = array<i64: 5120, 1, 1>
// CHECK-COUNT-2: vector.load %{{.*}} : memref<5242880xf32>, vector<4xf32>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<2621440xi32>, vector<4xi32>
// CHECK: gpu.func @wo_wgrad__rhs
// CHECK-SAME: grid = array<i64: 5120, 1, 1>
// CHECK: gpu.func @wo_wgrad__gemm
// CHECK-SAME: block = array<i64: 384, 1, 1>, grid = array<i64: 100, 1, 1>
// CHECK: arith.constant 4611686293338849280 : i64
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK: gpu.func @wo_wgrad__sum
#bf = #tetra.quant<bf16>
func.func @bf16_wgrad(%dy: tensor<8192x640xf32>, %x: tensor<8192x640xf32>) -> tensor<640x640xf32> {
  %dw = tetra.kernel "wo_wgrad" (%a = %dy, %b = %x) : (tensor<8192x640xf32>, tensor<8192x640xf32>) -> tensor<640x640xf32> {
    %at = arith.truncf %a : tensor<8192x640xf32> to tensor<8192x640xbf16>
    %ae = arith.extf %at : tensor<8192x640xbf16> to tensor<8192x640xf32>
    %bt = arith.truncf %b : tensor<8192x640xf32> to tensor<8192x640xbf16>
    %be = arith.extf %bt : tensor<8192x640xbf16> to tensor<8192x640xf32>
    %c = tetra.scaled_matmul (%ae as #bf), (%be as #bf) transpose_lhs role wgrad : (tensor<8192x640xf32>, tensor<8192x640xf32>) -> tensor<640x640xf32>
    tetra.yield %c : tensor<640x640xf32>
  }
  return %dw : tensor<640x640xf32>
}

// -----

// A BF16 Dgrad: the output gradient is reduced along its columns (K-major,
// as it lies), the weight along its rows — MN-major, read transposed as B
// (imm-trans-b = 1) — and both prologues only round.
// CHECK-LABEL: gpu.module @wo_dgrad
// CHECK-SAME: lhs = {axis = 1 : i64, block = 0 : i64, format = "bf16", input = 0 : i64, kind = "bf16", rotation = {kind = "none"}, rounding = "nearest_even", rule = "none", scale = "none", scratch_encoding = "code", scratch_layout = "k_major"
// CHECK-SAME: rhs = {axis = 0 : i64, block = 0 : i64, format = "bf16", input = 1 : i64, kind = "bf16", rotation = {kind = "none"}, rounding = "nearest_even", rule = "none", scale = "none", scratch_encoding = "code", scratch_layout = "mn_major"
// CHECK: gpu.func @wo_dgrad__lhs
// CHECK-SAME: grid = array<i64: 5120, 1, 1>
// CHECK: gpu.func @wo_dgrad__rhs
// CHECK-SAME: grid = array<i64: 400, 1, 1>
// CHECK: gpu.func @wo_dgrad__gemm
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
#bfd = #tetra.quant<bf16>
func.func @bf16_dgrad(%dy: tensor<8192x640xf32>, %w: tensor<640x640xf32>) -> tensor<8192x640xf32> {
  %dx = tetra.kernel "wo_dgrad" (%a = %dy, %b = %w) : (tensor<8192x640xf32>, tensor<640x640xf32>) -> tensor<8192x640xf32> {
    %at = arith.truncf %a : tensor<8192x640xf32> to tensor<8192x640xbf16>
    %ae = arith.extf %at : tensor<8192x640xbf16> to tensor<8192x640xf32>
    %bt = arith.truncf %b : tensor<640x640xf32> to tensor<640x640xbf16>
    %be = arith.extf %bt : tensor<640x640xbf16> to tensor<640x640xf32>
    %c = tetra.scaled_matmul (%ae as #bfd), (%be as #bfd) role dgrad : (tensor<8192x640xf32>, tensor<640x640xf32>) -> tensor<8192x640xf32>
    tetra.yield %c : tensor<8192x640xf32>
  }
  return %dx : tensor<8192x640xf32>
}

// -----

// MXFP4 Fprop on a 128 x 128 tile: two warpgroups, each 64 x 128 with
// wgmma.m64n128k32 (E2M1 codes as E4M3 bytes: every product and every sum
// of 32 exact) reading A and B through shared-memory descriptors of the
// staged buffers (128-byte swizzle: steps of 128, four buffers of 33792
// bytes, then the tile's 256 fold and 256 exact reference codes: 137216
// bytes within the 227 KB of an H200 block's shared memory).
//
// After each operand's quantization, two fold launches: a thread per fiber
// (row of the K-major scratch) takes its reference code — its largest E8M0
// code minus 6 where its codes span at most 11 binades, none is NaN and
// the reference is within 2^±45; else -1 — and its exact reference (the
// contract's exact sums: largest minus 3, a span of at most 3), and a
// thread per scale block adds 8·(code - ref) to each nonzero byte of its
// 32 codes (one multiply per word; an offset of 0 where the fiber does not
// fold) into the folded copy, and writes them as the int8 integers
// 2 · value · 2^(code - exact ref) into the exact copy.
//
// The GEMM loads its rows' and columns' references into shared memory and
// reduces four flags over the block. Unless the whole tile sums exactly it
// runs the chunked pass, storing the results whose pair does not sum
// exactly; where some pair does, the exact pass follows. Folded, its
// steps are cp.async copies of the folded codes, 16 bytes each: three steps
// in flight before the loop, then a step waits for its own copies (2 groups
// left in flight), fences them for the tensor cores' async proxy, passes
// one barrier and copies step s + 3 (if any) into step s - 1's buffer (its
// wgmmas all waited for by the end of their step); each
// slice's wgmma from zero is one fp32 add per result: slice s + 1's wgmma
// is issued before slice s's results are added (wait_group 1), each pinned
// after its wait. The last store multiplies by 2^(ref(row) + ref(col)) where
// the tile folded. Otherwise the codes and scales go through registers two
// steps ahead and each K slice of 32 is one wgmma from zero, waited for, its
// 64 results per thread pinned after the wait and scaled in fp32 — on the
// uniform flag's fast path one integer add and one fma each.
// CHECK-LABEL: gpu.module @up_fprop
// CHECK-SAME: plan = {block_tile = array<i64: 128, 128>, chunk = 32 : i64, exact_instruction = "wgmma.m64n128k32.s32.s8.s8", folds_scales = true, group_tile = array<i64: 64, 128>, instruction = "wgmma.m64n128k32.f32.e4m3.e4m3", pitch = array<i64: 128, 128>, split_k = 1 : i64, staged_buffers = 4 : i64, staged_bytes = 135168 : i64, staging = "async_copy", step_k = 128 : i64, sums_exactly = true, threads = 256 : i64}
// CHECK-SAME: scratch = {lhs.codes = 16384 : i64, lhs.exact = 16384 : i64, lhs.exact_refs = 512 : i64, lhs.fold_refs = 512 : i64, lhs.folded = 16384 : i64, lhs.scales = 512 : i64
// Every buffer argument 16-byte aligned.
// CHECK: gpu.func @up_fprop__lhs(%{{.*}}: memref<16384xf32> {llvm.align = 16 : i64}, %{{.*}}: memref<4096xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<512xi8> {llvm.align = 16 : i64}, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: gpu.func @up_fprop__lhs_fold_refs(
// CHECK-SAME: arguments = ["scratch:lhs.scales", "scratch:lhs.fold_refs", "scratch:lhs.exact_refs"], block = array<i64: 128, 1, 1>, grid = array<i64: 1, 1, 1>
// CHECK: scf.for {{.*}} -> (i32, i32)
// CHECK: arith.maxui
// CHECK: arith.minui
// CHECK: %[[REF:.*]] = arith.subi %{{.*}}#0, %c6_i32
// CHECK: arith.cmpi sle, %{{.*}}, %c11_i32
// CHECK: arith.cmpi ne, %{{.*}}#0, %c255_i32
// CHECK: arith.cmpi sge, %{{.*}}, %c-45_i32
// CHECK: arith.cmpi sle, %{{.*}}, %c45_i32
// CHECK: %[[OR:.*]] = arith.select %{{.*}}, %[[REF]], %c-1_i32
// CHECK: memref.store %[[OR]]
// The exact reference (numerics::fiberSumsExactly): max - 3, a spread of
// at most 3, the same NaN and moderation checks.
// CHECK: %[[EXACT:.*]] = arith.subi %{{.*}}#0, %c3_i32
// CHECK: arith.cmpi sle, %{{.*}}, %c3_i32
// CHECK: %[[EOR:.*]] = arith.select %{{.*}}, %[[EXACT]], %c-1_i32
// CHECK: memref.store %[[EOR]]
// CHECK: gpu.func @up_fprop__lhs_fold(
// CHECK-SAME: arguments = ["scratch:lhs.codes", "scratch:lhs.scales", "scratch:lhs.fold_refs", "scratch:lhs.folded", "scratch:lhs.exact_refs", "scratch:lhs.exact"], block = array<i64: 128, 1, 1>, grid = array<i64: 4, 1, 1>
// CHECK: arith.cmpi sge, %{{.*}}, %c0_i32
// CHECK: arith.select
// CHECK-COUNT-2: vector.load
// CHECK: arith.shrui %{{.*}}, %c2_i32
// CHECK: arith.shrui %{{.*}}, %c3_i32
// CHECK: arith.andi %{{.*}}, %c134744072_i32
// CHECK: arith.muli
// CHECK: vector.store
// Then the same codes as exact integers, four to a word (exactCodes):
// each byte's (m >> 2) & 7 picks 2 · value from an eight-byte table
// (0x0C080604, 0x03020001) by prmt, shifted by the offset, negative bytes
// negated as (v ^ 0xFF) + 1.
// CHECK: arith.andi %{{.*}}, %c117901063_i32
// CHECK: nvvm.prmt <default> %{{.*}}, %c201852420_i32{{.*}}, %c50462721_i32
// CHECK: arith.shli
// CHECK: arith.xori
// CHECK: vector.store
// CHECK: gpu.func @up_fprop__rhs(
// CHECK: gpu.func @up_fprop__rhs_fold_refs(
// CHECK: gpu.func @up_fprop__rhs_fold(
// CHECK: gpu.func @up_fprop__gemm
// CHECK-SAME: workgroup(%{{.*}} : memref<137216xi8, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64})
// CHECK-SAME: arguments = ["scratch:lhs.codes", "scratch:lhs.scales", "scratch:lhs.folded", "scratch:lhs.fold_refs", "scratch:lhs.exact", "scratch:lhs.exact_refs", "scratch:rhs.codes", "scratch:rhs.scales", "scratch:rhs.folded", "scratch:rhs.fold_refs", "scratch:rhs.exact", "scratch:rhs.exact_refs", "result:0"], block = array<i64: 256, 1, 1>, grid = array<i64: 1, 1, 1>
// The fold and exact references, into shared memory after the four staged
// buffers, and four flags over the block (each a reducing barrier): the
// tile folds, it sums exactly throughout, no row sums exactly, no column.
// CHECK: memref.load %{{.*}} : memref<128xi32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<34304xi32, #gpu.address_space<workgroup>>
// CHECK: arith.cmpi sge
// CHECK: %[[FOLDS:.*]] = nvvm.barrier #nvvm.reduction<and>
// CHECK: %[[FOLD:.*]] = arith.cmpi ne, %[[FOLDS]]
// CHECK: %[[ALLS:.*]] = nvvm.barrier #nvvm.reduction<and>
// CHECK: %[[ALL:.*]] = arith.cmpi ne, %[[ALLS]]
// CHECK: nvvm.barrier #nvvm.reduction<and>
// CHECK: nvvm.barrier #nvvm.reduction<and>
// CHECK: %[[SOME:.*]] = arith.andi
// The chunked pass unless every pair sums exactly.
// CHECK: %[[CHUNKED:.*]] = arith.xori %[[ALL]], %true
// CHECK: scf.if %[[CHUNKED]] {
// CHECK: %[[SUMS:.*]]:64 = scf.if %[[FOLD]]
// Folded: steps 0 .. 2 copied before the loop (this tile has one step).
// CHECK-COUNT-8: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg : !llvm.ptr<3>, !llvm.ptr<1>
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier #nvvm.reduction<and>
// CHECK: scf.if
// CHECK-COUNT-8: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK-NOT: vector.store
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %{{.*}}, <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-COUNT-64: llvm.inline_asm has_side_effects "", "=f,0"
// CHECK-COUNT-64: arith.addf
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-64: llvm.inline_asm has_side_effects "", "=f,0"
// CHECK-COUNT-64: arith.addf
// CHECK-NOT: math.fma
// Not folded: the step-by-step path, through registers.
// CHECK: } else {
// CHECK: vector.load
// CHECK: vector.store
// CHECK: nvvm.fence.proxy
// CHECK: nvvm.barrier #nvvm.reduction<and>
// CHECK: scf.for
// CHECK: nvvm.wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-64: llvm.inline_asm has_side_effects "", "=f,0"
// CHECK: scf.if
// CHECK-COUNT-64: math.fma
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.barrier #nvvm.reduction<and>
// The store: folded sums times 2^(ref(row) + ref(col) - 254), exact,
// where the pair does not sum exactly; then one barrier before the exact
// pass reuses the staged buffers.
// CHECK: arith.shli %{{.*}}, %c23_i32
// CHECK: arith.mulf %[[SUMS]]#0
// CHECK: arith.select %[[FOLD]]
// CHECK: scf.if
// CHECK: memref.store
// CHECK: nvvm.barrier #nvvm.reduction<and>
// The exact pass where some pair sums exactly: the exact integers copied
// by cp.async, two steps ahead; the s32 fragment carried from step to step
// (s8 wgmma, each step's group left in flight: wait_group 1), the last
// waited for, each sum pinned, rounded once to fp32 (sitofp: cvt.rn) and
// multiplied by 2^(ref(row) + ref(col) - 256), exact, where the pair sums
// exactly.
// CHECK: scf.if %[[SOME]] {
// CHECK: nvvm.cp.async.shared.global
// CHECK: scf.for {{.*}} -> (!llvm.struct<(i32,
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>, D[<s32>, <one>], A[<s8>, <one>, <row>], B[<s8>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-64: llvm.inline_asm has_side_effects "", "=r,0"
// CHECK: arith.sitofp %{{.*}} : i32 to f32
// CHECK: arith.subi %{{.*}}, %c129_i32
// CHECK: arith.shli %{{.*}}, %c23_i32
// CHECK: arith.mulf
// CHECK: scf.if
// CHECK: memref.store
#q4w = #tetra.quant<mxfp4>
func.func @wgmma(%x: tensor<128x128xf32>, %w: tensor<128x128xf32>) -> tensor<128x128xf32> {
  %y = tetra.kernel "up_fprop" (%a = %x, %b = %w) : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> {
    %ac, %as = tetra.quantize %a as #q4w along 1 : tensor<128x128xf32> -> tensor<128x128xf4E2M1FN>, tensor<128x4xf8E8M0FNU>
    %bc, %bs = tetra.quantize %b as #q4w along 1 : tensor<128x128xf32> -> tensor<128x128xf4E2M1FN>, tensor<128x4xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #q4w), (%bc scales %bs as #q4w) transpose_rhs role fprop : (tensor<128x128xf4E2M1FN>, tensor<128x4xf8E8M0FNU>, tensor<128x128xf4E2M1FN>, tensor<128x4xf8E8M0FNU>) -> tensor<128x128xf32>
    tetra.yield %c : tensor<128x128xf32>
  }
  return %y : tensor<128x128xf32>
}

// -----

// Which BF16 GEMMs take the warp-specialized launch: tiles up to 128 wide.
// A 1792-wide result takes 128 x 256 tiles (one warpgroup per 64 x 256, a
// block a tile, one barrier a step: measured faster than the specialized
// 128 x 128 on the H200) where those tiles fill the chip without a split
// of K — an Fprop over 8192 tokens: 64 x 7 = 448 tiles. A Wgrad of the
// same weight over 8192 tokens would be 35 such tiles for 132
// multiprocessors: it takes 128 x 128 instead (70 tiles), split 4 ways,
// specialized — its 280 (tile, split) pairs walked by 132 blocks.
// CHECK-LABEL: gpu.module @down_wgrad
// CHECK-SAME: plan = {block_tile = array<i64: 128, 128>
// CHECK-SAME: split_k = 4 : i64
// CHECK-SAME: staging = "warp_specialized"
// CHECK: gpu.func @down_wgrad__gemm
// CHECK-SAME: block = array<i64: 384, 1, 1>, grid = array<i64: 132, 1, 1>
// CHECK-LABEL: gpu.module @gate_fprop
// CHECK-SAME: plan = {block_tile = array<i64: 128, 256>
// CHECK-SAME: instruction = "wgmma.m64n256k16.f32.bf16.bf16"
// CHECK-SAME: staging = "async_copy"
// CHECK: gpu.func @gate_fprop__gemm
// CHECK-SAME: block = array<i64: 256, 1, 1>, grid = array<i64: 7, 64, 1>
// CHECK-NOT: nvvm.mbarrier
#bfs = #tetra.quant<bf16>
func.func @down_wgrad(%dy: tensor<8192x640xf32>, %h: tensor<8192x1792xf32>) -> tensor<640x1792xf32> {
  %dw = tetra.kernel "down_wgrad" (%a = %dy, %b = %h) : (tensor<8192x640xf32>, tensor<8192x1792xf32>) -> tensor<640x1792xf32> {
    %at = arith.truncf %a : tensor<8192x640xf32> to tensor<8192x640xbf16>
    %ae = arith.extf %at : tensor<8192x640xbf16> to tensor<8192x640xf32>
    %bt = arith.truncf %b : tensor<8192x1792xf32> to tensor<8192x1792xbf16>
    %be = arith.extf %bt : tensor<8192x1792xbf16> to tensor<8192x1792xf32>
    %c = tetra.scaled_matmul (%ae as #bfs), (%be as #bfs) transpose_lhs role wgrad : (tensor<8192x640xf32>, tensor<8192x1792xf32>) -> tensor<640x1792xf32>
    tetra.yield %c : tensor<640x1792xf32>
  }
  return %dw : tensor<640x1792xf32>
}

#bft = #tetra.quant<bf16>
func.func @gate_fprop(%x: tensor<8192x640xf32>, %w: tensor<1792x640xf32>) -> tensor<8192x1792xf32> {
  %y = tetra.kernel "gate_fprop" (%a = %x, %b = %w) : (tensor<8192x640xf32>, tensor<1792x640xf32>) -> tensor<8192x1792xf32> {
    %at = arith.truncf %a : tensor<8192x640xf32> to tensor<8192x640xbf16>
    %ae = arith.extf %at : tensor<8192x640xbf16> to tensor<8192x640xf32>
    %bt = arith.truncf %b : tensor<1792x640xf32> to tensor<1792x640xbf16>
    %be = arith.extf %bt : tensor<1792x640xbf16> to tensor<1792x640xf32>
    %c = tetra.scaled_matmul (%ae as #bft), (%be as #bft) transpose_rhs role fprop : (tensor<8192x640xf32>, tensor<1792x640xf32>) -> tensor<8192x1792xf32>
    tetra.yield %c : tensor<8192x1792xf32>
  }
  return %y : tensor<8192x1792xf32>
}

// -----

// BF16 on a 64 x 64 tile: one warpgroup, wgmma.m64n64k16 accumulating all
// of K (the contract's G = K) in the tensor cores' fp32, in a persistent,
// warp-specialized launch (staging = "warp_specialized"): the warpgroup
// (threads 0-127) computes, the last warpgroup copies; one block for the
// one tile (grid 1, 128 + 128 threads). Shared memory: four staged buffers
// of 16384 bytes, then eight barriers (65,600 bytes in all).
// Thread 0 initializes each buffer's `full` barrier for the 128 producers
// and its `empty` one for the 128 consumers, then one block barrier.
// CHECK-LABEL: gpu.module @head_fprop
// CHECK-SAME: group_tile = array<i64: 64, 64>, instruction = "wgmma.m64n64k16.f32.bf16.bf16"
// CHECK-SAME: staged_buffers = 4 : i64, staged_bytes = 65536 : i64, staging = "warp_specialized"
// CHECK-SAME: threads = 256 : i64
// CHECK: gpu.func @head_fprop__gemm
// CHECK-SAME: workgroup(%{{.*}} : memref<65600xi8, #gpu.address_space<workgroup>>
// CHECK-SAME: block = array<i64: 256, 1, 1>, grid = array<i64: 1, 1, 1>
// CHECK-COUNT-8: nvvm.mbarrier.init %{{.*}}, %c128_i32{{.*}} : !llvm.ptr<3>, i32
// CHECK: nvvm.barrier #nvvm.reduction<and>
// The consumers (thread < 128): per tile, per step, the wait for the
// step's `full` phase, the proxy fence (cp.async's stores before wgmma's
// reads), the four K slices of 16 chained on one fragment, one commit,
// the wait for the previous step's group only — then that step's buffer
// released (its `empty` barrier), except at the block's first step.
// CHECK: scf.for
// CHECK: scf.for {{.*}} -> (!llvm.struct<(f32,
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: scf.if
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// The tile's results: the last group waited for, each of the thread's 32
// results pinned after it, then stored from the accumulators, two adjacent
// ones a store (16 of 8 bytes): no shared memory, no barrier between the
// consumers, no bulk copy.
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-32: llvm.inline_asm has_side_effects "", "=f,0"
// CHECK-COUNT-16: vector.store %{{.*}} : memref<{{.*}}xf32>, vector<2xf32>
// CHECK-NOT: nvvm.barrier
// CHECK-NOT: nvvm.cp.async.bulk
// The producers: for each step, the wait for its buffer's `empty` phase
// (the opposite parity: a fresh barrier's first wait passes), its copies
// (2 x 64 rows of 128 bytes = 1024 copies of 16 bytes, 8 a thread), and
// one arrival on its `full` barrier once they have landed (noinc: each
// producer counts once).
// CHECK: } else {
// CHECK: scf.for
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-8: nvvm.cp.async.shared.global
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true} : !llvm.ptr<3>
// CHECK-NOT: math.fma
#bfw = #tetra.quant<bf16>
func.func @bf16_wgmma(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %y = tetra.kernel "head_fprop" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
    %at = arith.truncf %a : tensor<64x64xf32> to tensor<64x64xbf16>
    %ae = arith.extf %at : tensor<64x64xbf16> to tensor<64x64xf32>
    %bt = arith.truncf %b : tensor<64x64xf32> to tensor<64x64xbf16>
    %be = arith.extf %bt : tensor<64x64xbf16> to tensor<64x64xf32>
    %c = tetra.scaled_matmul (%ae as #bfw), (%be as #bfw) transpose_rhs role fprop : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    tetra.yield %c : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}

// -----

// A bf16 operand against a block-scaled one: refused (a GPU GEMM runs both
// block-scaled or both bf16).
#bfm = #tetra.quant<bf16>
#q4m = #tetra.quant<mxfp4>
func.func @mixed(%x: tensor<64x64xf32>, %w: tensor<32x64xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{GEMM 'mixed' cannot be compiled for sm_90a: it multiplies a bf16 operand with a block-scaled one; GPU targets run both operands block-scaled or both bf16}}
  %y = tetra.kernel "mixed" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32> {
    %at = arith.truncf %a : tensor<64x64xf32> to tensor<64x64xbf16>
    %ae = arith.extf %at : tensor<64x64xbf16> to tensor<64x64xf32>
    %bc, %bs = tetra.quantize %b as #q4m along 1 : tensor<32x64xf32> -> tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ae as #bfm), (%bc scales %bs as #q4m) transpose_rhs role fprop : (tensor<64x64xf32>, tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  }
  return %y : tensor<64x32xf32>
}

// -----

// f32 operands: the tensor cores do not multiply them exactly; refused.
#f = #tetra.quant<f32>
func.func @f32(%x: tensor<64x64xf32>, %w: tensor<32x64xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{GEMM 'plain' cannot be compiled for sm_90a: the left operand is f32, which this target's tensor cores do not multiply exactly; use bf16 or a block format}}
  %y = tetra.kernel "plain" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32> {
    %c = tetra.scaled_matmul (%a as #f), (%b as #f) transpose_rhs role fprop : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  }
  return %y : tensor<64x32xf32>
}

// -----

// A shape the 32 x 32 warp tile does not divide.
#q4n = #tetra.quant<mxfp4>
func.func @shape(%x: tensor<40x64xf32>, %w: tensor<32x64xf32>) -> tensor<40x32xf32> {
  // expected-error @+1 {{GEMM 'odd' cannot be compiled for sm_90a: its shape 40 x 32 x 64 is not a multiple of the 32 x 32 x 32 warp tile}}
  %y = tetra.kernel "odd" (%a = %x, %b = %w) : (tensor<40x64xf32>, tensor<32x64xf32>) -> tensor<40x32xf32> {
    %ac, %as = tetra.quantize %a as #q4n along 1 : tensor<40x64xf32> -> tensor<40x64xf4E2M1FN>, tensor<40x2xf8E8M0FNU>
    %bc, %bs = tetra.quantize %b as #q4n along 1 : tensor<32x64xf32> -> tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #q4n), (%bc scales %bs as #q4n) transpose_rhs role fprop : (tensor<40x64xf4E2M1FN>, tensor<40x2xf8E8M0FNU>, tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>) -> tensor<40x32xf32>
    tetra.yield %c : tensor<40x32xf32>
  }
  return %y : tensor<40x32xf32>
}
