// --convert-tetra-to-amdgpu{chip=gfx950}: the same plan as sm_90a (the
// operand launches and the description are shared; this file's first RUN
// checks them under the PLAN prefix for both conversions), and gfx950's
// own GEMM launch: one wave of 64 lanes per 32 x 32 tile, the scaled MFMA
// 32x32x64 taking each lane's 32 codes of one MX block and its E8M0 scale.
// There is no MI355X here: the ISA is checked by test/tools/compile.test.
// RUN: tetra-opt %s --split-input-file --convert-tetra-to-amdgpu --verify-diagnostics | FileCheck %s --check-prefixes=PLAN,AMD
// RUN: tetra-opt %s --split-input-file --convert-tetra-to-nvvm --verify-diagnostics | FileCheck %s --check-prefixes=PLAN,NV

// Wgrad under the study's fix: MXFP4, a Hadamard of 32 along the tokens.
// Both targets: the same description, the same operand launches (one
// thread per 32-token segment: 4 x 64 = 256 threads for dY, 4 x 32 for X;
// rotated in private memory allocated at the entry, then quantized), in
// the same order.
// PLAN-LABEL: gpu.module @wo_wgrad
// PLAN-SAME: tetra.gemm = {gemm = "wo_wgrad", k = 128 : i64, lhs = {axis = 0 : i64, block = 32 : i64, format = "e2m1", input = 0 : i64, rotation = {block = 32 : i64, kind = "hadamard", schedule = "fixed", seed = 0 : i64}, rounding = "nearest_even", rule = "floor", scale = "e8m0", shape = array<i64: 128, 64>, tensor_id = 0 : i64}, m = 64 : i64, n = 32 : i64
// PLAN: gpu.func @wo_wgrad__lhs({{.*}}) kernel attributes {tetra.launch = {arguments = ["input:0", "scratch:lhs.codes", "scratch:lhs.scales", "scalar:seed", "scalar:step"], block = array<i64: 128, 1, 1>, grid = array<i64: 2, 1, 1>}}
// PLAN: memref.alloca() : memref<32xf32, #gpu.address_space<private>>
// PLAN: memref.alloca() : memref<32xf32, #gpu.address_space<private>>
// PLAN-NEXT: scf.if
// PLAN: gpu.func @wo_wgrad__rhs({{.*}}) kernel attributes {tetra.launch = {arguments = ["input:1", "scratch:rhs.codes", "scratch:rhs.scales", "scalar:seed", "scalar:step"], block = array<i64: 128, 1, 1>, grid = array<i64: 1, 1, 1>}}
// Then each target's MMA launch: gfx950 one 64-lane wave per 32 x 32
// tile (a 2 x 1 grid for 64 x 32), two chunks of 32 per scaled MFMA;
// sm_90a one warp per 16 x 8 tile (4 x 4), one chunk per MMA.
// AMD: gpu.func @wo_wgrad__gemm
// AMD-SAME: block = array<i64: 64, 1, 1>, grid = array<i64: 1, 2, 1>
// AMD: amdgpu.scaled_mfma 32x32x64 ({{.*}}[0] * {{.*}}) * ({{.*}}[0] * {{.*}}) + {{.*}} : f8E8M0FNU, vector<32xf4E2M1FN>, f8E8M0FNU, vector<32xf4E2M1FN>, vector<16xf32>
// NV: gpu.func @wo_wgrad__gemm
// NV-SAME: block = array<i64: 32, 1, 1>, grid = array<i64: 4, 4, 1>
// NV: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"
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

// MXFP8: E4M3 codes go to the MFMA as E4M3 (format 0), E5M2 as E5M2.
// AMD-LABEL: gpu.module @mixed_fprop
// AMD: amdgpu.scaled_mfma 32x32x64 {{.*}} : f8E8M0FNU, vector<32xf8E4M3FN>, f8E8M0FNU, vector<32xf8E5M2>, vector<16xf32>
// NV-LABEL: gpu.module @mixed_fprop
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


// The chip is the pass option; one a conversion does not know is an error.
// RUN: not tetra-opt %s --split-input-file --convert-tetra-to-amdgpu=chip=gfx942 2>&1 | FileCheck %s --check-prefix=AMDCHIP
// AMDCHIP: error: convert-tetra-to-amdgpu: chip 'gfx942' is not supported (gfx950)
// RUN: not tetra-opt %s --split-input-file --convert-tetra-to-nvvm=chip=sm_80 2>&1 | FileCheck %s --check-prefix=NVCHIP
// NVCHIP: error: convert-tetra-to-nvvm: chip 'sm_80' is not supported (sm_90a)
