// --convert-tetra-to-amdgpu{chip=gfx950}: the same plan as sm_90a (the
// prologue launches, the block tiles, the staging in shared memory / LDS
// and the description are shared; this file's first RUN checks them under
// the PLAN prefix for both conversions), and gfx950's own instructions: a
// wave of 64 lanes per 32 x 32 of a block's tile, the scaled MFMA taking
// each lane's 32 codes of one MX block and its E8M0 scale. There is no
// MI355X here: the ISA is checked by test/tools/compile.test.
// RUN: tetra-opt %s --split-input-file --convert-tetra-to-amdgpu --verify-diagnostics | FileCheck %s --check-prefixes=PLAN,AMD
// RUN: tetra-opt %s --split-input-file --convert-tetra-to-nvvm --verify-diagnostics | FileCheck %s --check-prefixes=PLAN,NV

// Wgrad under the study's fix: MXFP4, a Hadamard of 32 along the tokens.
// Both targets: the same description and plan (one 64 x 32 block tile, K =
// 128 in one staged step, chunks of 32), the same prologue launches (one
// thread per 32-token segment: 4 x 64 = 256 threads for dY, 4 x 32 for X;
// rotated in private memory allocated at the entry, then quantized), in
// the same order, and the same GEMM arguments; both write K-major scratch.
// The code encodings and staged formats are the chip's: sm_90a writes each
// E2M1 code as the E4M3 byte of its value and stages 128-byte swizzled
// rows for its FP8 instructions; gfx950 keeps the codes and stages them
// packed two per byte, as its MFMA reads them (64 + 16 bytes a row). Both
// stage two buffers, then the tile's exact references (the contract's exact
// sums: MXFP4 x MXFP4), given by one more launch per operand.
// PLAN-LABEL: gpu.module @wo_wgrad
// PLAN-SAME: tetra.gemm = {gemm = "wo_wgrad", k = 128 : i64, lhs = {axis = 0 : i64, block = 32 : i64, format = "e2m1", input = 0 : i64, kind = "mx", rotation = {block = 32 : i64, kind = "hadamard", schedule = "fixed", seed = 0 : i64}, rounding = "nearest_even", rule = "floor", scale = "e8m0",
// AMD-SAME: scratch_encoding = "code", scratch_layout = "k_major"
// NV-SAME: scratch_encoding = "e4m3", scratch_layout = "k_major"
// PLAN-SAME: shape = array<i64: 128, 64>, tensor_id = 0 : i64}, m = 64 : i64, n = 32 : i64
// AMD-SAME: plan = {block_tile = array<i64: 64, 32>, chunk = 32 : i64, exact_instruction = "v_mfma_scale_f32_16x16x128_f8f6f4", folds_scales = false, group_tile = array<i64: 32, 32>, instruction = "v_mfma_scale_f32_16x16x128_f8f6f4", pitch = array<i64: 80, 80>, split_k = 1 : i64, staged_buffers = 2 : i64, staged_bytes = 16384 : i64, staging = "registers", step_k = 128 : i64, sums_exactly = true, threads = 128 : i64}
// NV-SAME: plan = {block_tile = array<i64: 64, 32>, chunk = 32 : i64, exact_instruction = "mma.sync.m16n8k32.e4m3.e4m3", folds_scales = false, group_tile = array<i64: 32, 32>, instruction = "mma.sync.m16n8k32.e4m3.e4m3", pitch = array<i64: 128, 128>, split_k = 1 : i64, staged_buffers = 2 : i64, staged_bytes = 26624 : i64, staging = "registers", step_k = 128 : i64, sums_exactly = true, threads = 64 : i64}
// PLAN-SAME: scratch = {lhs.codes = 8192 : i64, lhs.exact_refs = 256 : i64, lhs.scales = 256 : i64, rhs.codes = 4096 : i64, rhs.exact_refs = 128 : i64, rhs.scales = 128 : i64}
// PLAN: gpu.func @wo_wgrad__lhs({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>, tetra.launch = {arguments = ["input:0", "scratch:lhs.codes", "scratch:lhs.scales", "scalar:seed", "scalar:step"], block = array<i64: 128, 1, 1>, grid = array<i64: 2, 1, 1>}}
// PLAN: memref.alloca() : memref<32xf32, #gpu.address_space<private>>
// PLAN: memref.alloca() : memref<32xf32, #gpu.address_space<private>>
// PLAN-NEXT: scf.if
// PLAN: gpu.func @wo_wgrad__lhs_fold_refs({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>, tetra.launch = {arguments = ["scratch:lhs.scales", "scratch:lhs.exact_refs"], block = array<i64: 128, 1, 1>, grid = array<i64: 1, 1, 1>}}
// PLAN: gpu.func @wo_wgrad__rhs({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>, tetra.launch = {arguments = ["input:1", "scratch:rhs.codes", "scratch:rhs.scales", "scalar:seed", "scalar:step"], block = array<i64: 128, 1, 1>, grid = array<i64: 1, 1, 1>}}
// PLAN: gpu.func @wo_wgrad__rhs_fold_refs(
// PLAN: gpu.func @wo_wgrad__gemm(%{{.*}}: memref<2048xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<256xi8> {llvm.align = 16 : i64}, %{{.*}}: memref<64xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<1024xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<128xi8> {llvm.align = 16 : i64}, %{{.*}}: memref<32xi32> {llvm.align = 16 : i64}, %{{.*}}: memref<2048xf32> {llvm.align = 16 : i64}) workgroup(%{{.*}} : memref<{{16768|27008}}xi8, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64})
// The block: two waves of 64 lanes (gfx950) or two warps of 32 (sm_90a).
// AMD-SAME: block = array<i64: 128, 1, 1>, grid = array<i64: 1, 1, 1>
// NV-SAME: block = array<i64: 64, 1, 1>, grid = array<i64: 1, 1, 1>
// Step 0 staged before the loop, then in the loop the next step's stores
// into the other buffer, and each target's instruction on the staged step,
// one barrier a step (sm_90a's ANDs the moderate-scales flag): gfx950 four scaled
// MFMAs 16x16x128 per wave (2 x 2 tiles, each lane one MX block of K, its
// 32 packed codes in one 16-byte LDS read); sm_90a four chunks of 32, each
// eight m16n8k32 started from zero.
// AMD: gpu.barrier
// NV: nvvm.barrier #nvvm.reduction<and>
// PLAN: scf.for
// AMD: vector.store %{{.*}} {alignment = 8 : i64} : memref<4192xi32, #gpu.address_space<workgroup>>, vector<2xi32>
// NV: vector.store %{{.*}} {alignment = 16 : i64} : memref<6752xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// AMD: vector.load %{{.*}}[%{{.*}}] {alignment = 16 : i64} : memref<4192xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// AMD-COUNT-4: amdgpu.scaled_mfma 16x16x128 ({{.*}}[0] * {{.*}}) * ({{.*}}[0] * {{.*}}) + {{.*}} : f8E8M0FNU, vector<32xf4E2M1FN>, f8E8M0FNU, vector<32xf4E2M1FN>, vector<4xf32>
// AMD-NOT: amdgpu.scaled_mfma
// NV-COUNT-32: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"
// NV-NOT: llvm.call_intrinsic
// AMD: gpu.barrier
// NV: nvvm.barrier #nvvm.reduction<and>
// The exact pass, through the same registers and staged tiles: each chunk
// sum (gfx950: each MFMA's from zero, under the scales 2^(code - ref))
// converted to an integer and added in i32, exact; the sums rounded once
// to fp32 at the store.
// PLAN: scf.for
// AMD: amdgpu.scaled_mfma 16x16x128 {{.*}} + %cst{{.*}} : f8E8M0FNU, vector<32xf4E2M1FN>, f8E8M0FNU, vector<32xf4E2M1FN>, vector<4xf32>
// AMD: arith.fptosi %{{.*}} : vector<4xf32> to vector<4xi32>
// NV: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"
// NV: arith.fptosi %{{.*}} : f32 to i32
// AMD: arith.sitofp %{{.*}} : vector<4xi32> to vector<4xf32>
// NV: arith.sitofp %{{.*}} : i32 to f32
#q4 = #tetra.quant<mxfp4>
#had = #tetra.rotation<hadamard<32>>
func.func @wgrad(%dy: tensor<128x64xf32>, %x: tensor<128x32xf32>) -> tensor<64x32xf32> {
  %dw = tetra.kernel "wo_wgrad" (%a = %dy, %b = %x) : (tensor<128x64xf32>, tensor<128x32xf32>) -> tensor<64x32xf32> {
    %ar = tetra.rotate %a by #had along 0 : tensor<128x64xf32>
    %ac, %as = tetra.quantize %ar as #q4 along 0 : tensor<128x64xf32> -> tensor<128x64xf4E2M1FN>, tensor<4x64xf8E8M0FNU>
    %br = tetra.rotate %b by #had along 0 : tensor<128x32xf32>
    %bc, %bs = tetra.quantize %br as #q4 along 0 : tensor<128x32xf32> -> tensor<128x32xf4E2M1FN>, tensor<4x32xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #q4), (%bc scales %bs as #q4) transpose_lhs role wgrad : (tensor<128x64xf4E2M1FN>, tensor<4x64xf8E8M0FNU>, tensor<128x32xf4E2M1FN>, tensor<4x32xf8E8M0FNU>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  }
  return %dw : tensor<64x32xf32>
}

// -----

// A BF16 Wgrad with a long K (8192 tokens) and few tiles (640 x 640 is 25
// tiles of 128 x 128): both chips keep the tiles and split K across blocks,
// each for its own multiprocessors — 132 on an H200: 4 splits (100 blocks,
// one wave); 256 compute units on an MI355X: 8 (200 blocks) — each block
// writing its partial tile, a second launch adding them in split order
// (a thread per four results: 640 x 640 / 4 / 128 = 800 blocks). sm_90a's
// launch is persistent (warp-specialized): its 100 blocks walk the 100
// (tile, split) pairs, so its grid is one-dimensional.
// PLAN-LABEL: gpu.module @wo_wgrad
// PLAN-SAME: block_tile = array<i64: 128, 128>
// AMD-SAME: split_k = 8 : i64
// NV-SAME: split_k = 4 : i64
// AMD-SAME: scratch = {lhs.codes = 10485760 : i64, partials = 13107200 : i64
// NV-SAME: scratch = {lhs.codes = 10485760 : i64, partials = 6553600 : i64
// PLAN: gpu.func @wo_wgrad__gemm
// PLAN-SAME: "scratch:partials"]
// AMD-SAME: grid = array<i64: 5, 5, 8>
// NV-SAME: grid = array<i64: 100, 1, 1>
// PLAN: gpu.func @wo_wgrad__sum
// PLAN-SAME: arguments = ["scratch:partials", "result:0"], block = array<i64: 128, 1, 1>, grid = array<i64: 800, 1, 1>
// AMD-COUNT-7: arith.addf {{.*}} : vector<4xf32>
// NV-COUNT-3: arith.addf {{.*}} : vector<4xf32>
// PLAN-NOT: arith.addf
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

// MXFP8: E4M3 codes go to the MFMA as E4M3 (format 0), E5M2 as E5M2. K =
// 64 is one step of 64: one scaled MFMA 32x32x64 per wave.
// PLAN-LABEL: gpu.module @mixed_fprop
// AMD-SAME: plan = {block_tile = array<i64: 64, 32>, chunk = 32 : i64, folds_scales = false, group_tile = array<i64: 32, 32>, instruction = "v_mfma_scale_f32_32x32x64_f8f6f4", pitch = array<i64: 80, 80>, split_k = 1 : i64, staged_buffers = 2 : i64, staged_bytes = 16384 : i64, staging = "registers", step_k = 64 : i64, sums_exactly = false, threads = 128 : i64}
// NV-SAME: plan = {block_tile = array<i64: 64, 32>, chunk = 32 : i64, folds_scales = false, group_tile = array<i64: 32, 32>, instruction = "mma.sync.m16n8k32.e4m3.e5m2", pitch = array<i64: 64, 64>, split_k = 1 : i64, staged_buffers = 2 : i64, staged_bytes = 14336 : i64, staging = "registers", step_k = 64 : i64, sums_exactly = false, threads = 64 : i64}
// AMD: amdgpu.scaled_mfma 32x32x64 {{.*}} : f8E8M0FNU, vector<32xf8E4M3FN>, f8E8M0FNU, vector<32xf8E5M2>, vector<16xf32>
// NV: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e5m2.f32"
#e4 = #tetra.quant<mxfp8_e4m3>
#e5 = #tetra.quant<mxfp8_e5m2>
func.func @fprop(%x: tensor<64x64xf32>, %w: tensor<32x64xf32>) -> tensor<64x32xf32> {
  %y = tetra.kernel "mixed_fprop" (%a = %x, %b = %w) : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<64x32xf32> {
    %ac, %as = tetra.quantize %a as #e4 along 1 : tensor<64x64xf32> -> tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
    %bc, %bs = tetra.quantize %b as #e5 along 1 : tensor<32x64xf32> -> tensor<32x64xf8E5M2>, tensor<32x2xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #e4), (%bc scales %bs as #e5) transpose_rhs role fprop : (tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<32x64xf8E5M2>, tensor<32x2xf8E8M0FNU>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  }
  return %y : tensor<64x32xf32>
}

// -----

// BF16 x BF16: the same prologue (rounding to bf16, 2-byte codes) and the
// same steps (64, one chunk of all K) on both; gfx950 accumulates in
// v_mfma_f32_32x32x16_bf16 (four waves of 32 x 32) on steps staged through
// registers, sm_90a in wgmma.m64n64k16 (one warpgroup) on steps copied by
// cp.async through four staged buffers by a second warpgroup
// (warp-specialized: tetra-to-nvvm.mlir checks its structure).
// PLAN-LABEL: gpu.module @lm_head_dgrad
// AMD-SAME: plan = {block_tile = array<i64: 64, 64>, chunk = 128 : i64, folds_scales = false, group_tile = array<i64: 32, 32>, instruction = "v_mfma_f32_32x32x16_bf16", pitch = array<i64: 144, 144>, split_k = 1 : i64, staged_buffers = 2 : i64, staged_bytes = 36864 : i64, staging = "registers", step_k = 64 : i64, sums_exactly = false, threads = 256 : i64}
// NV-SAME: plan = {block_tile = array<i64: 64, 64>, chunk = 128 : i64, folds_scales = false, group_tile = array<i64: 64, 64>, instruction = "wgmma.m64n64k16.f32.bf16.bf16", pitch = array<i64: 128, 128>, split_k = 1 : i64, staged_buffers = 4 : i64, staged_bytes = 65536 : i64, staging = "warp_specialized", step_k = 64 : i64, sums_exactly = false, threads = 256 : i64}
// PLAN: gpu.func @lm_head_dgrad__lhs(%{{.*}}: memref<8192xf32> {llvm.align = 16 : i64}, %{{.*}}: memref<4096xi32>
// PLAN: gpu.func @lm_head_dgrad__rhs(%{{.*}}: memref<8192xf32> {llvm.align = 16 : i64}, %{{.*}}: memref<4096xi32>
// PLAN: gpu.func @lm_head_dgrad__gemm
// AMD-COUNT-4: amdgpu.mfma 32x32x16 {{.*}} : vector<8xbf16>, vector<8xbf16>, vector<16xf32>
// NV: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
#bf = #tetra.quant<bf16>
func.func @dgrad(%dy: tensor<64x128xf32>, %w: tensor<128x64xf32>) -> tensor<64x64xf32> {
  %dx = tetra.kernel "lm_head_dgrad" (%a = %dy, %b = %w) : (tensor<64x128xf32>, tensor<128x64xf32>) -> tensor<64x64xf32> {
    %at = arith.truncf %a : tensor<64x128xf32> to tensor<64x128xbf16>
    %ae = arith.extf %at : tensor<64x128xbf16> to tensor<64x128xf32>
    %bt = arith.truncf %b : tensor<128x64xf32> to tensor<128x64xbf16>
    %be = arith.extf %bt : tensor<128x64xbf16> to tensor<128x64xf32>
    %c = tetra.scaled_matmul (%ae as #bf), (%be as #bf) role dgrad : (tensor<64x128xf32>, tensor<128x64xf32>) -> tensor<64x64xf32>
    tetra.yield %c : tensor<64x64xf32>
  }
  return %dx : tensor<64x64xf32>
}


// The chip is the pass option; one a conversion does not know is an error.
// RUN: not tetra-opt %s --split-input-file --convert-tetra-to-amdgpu=chip=gfx942 2>&1 | FileCheck %s --check-prefix=AMDCHIP
// AMDCHIP: error: convert-tetra-to-amdgpu: chip 'gfx942' is not supported (gfx950)
// RUN: not tetra-opt %s --split-input-file --convert-tetra-to-nvvm=chip=sm_80 2>&1 | FileCheck %s --check-prefix=NVCHIP
// NVCHIP: error: convert-tetra-to-nvvm: chip 'sm_80' is not supported (sm_90a)
