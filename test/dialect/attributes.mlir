// Round trip of every tetra attribute: parse, print, parse the printed form
// again, and check the canonical spelling.
// (-mlir-print-local-scope prints policies in place instead of as aliases.)
// RUN: tetra-opt %s | tetra-opt -mlir-print-local-scope | FileCheck %s
// RUN: tetra-opt %s -mlir-print-op-generic | tetra-opt -mlir-print-local-scope | FileCheck %s
// RUN: tetra-opt %s | FileCheck %s --check-prefix=ALIAS

// Each distinct policy is printed once, as an alias.
// ALIAS: #policy = #tetra.policy<fprop = bf16, dgrad = bf16, wgrad = bf16>
// ALIAS: #policy1 = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate hadamard<32>>
// ALIAS: func.func @policies() attributes {bf16 = #policy, fp4_all_hadamard = #policy1

// CHECK-LABEL: func.func @enums
// CHECK-SAME: e2m1 = #tetra.format<e2m1>
// CHECK-SAME: e4m3 = #tetra.scale_format<e4m3>
// CHECK-SAME: f32 = #tetra.format<f32>
// CHECK-SAME: per_step = #tetra.sign_schedule<per_step>
// CHECK-SAME: rceil = #tetra.scale_rule<rceil>
// CHECK-SAME: sr = #tetra.rounding<stochastic>
func.func @enums() attributes {
  e2m1 = #tetra.format<e2m1>, f32 = #tetra.format<f32>,
  e4m3 = #tetra.scale_format<e4m3>, rceil = #tetra.scale_rule<rceil>,
  sr = #tetra.rounding<stochastic>, per_step = #tetra.sign_schedule<per_step>} {
  return
}

// CHECK-LABEL: func.func @block_scales
// CHECK-SAME: mx = #tetra.block_scale<32, e8m0, floor>
// CHECK-SAME: mx_ceil = #tetra.block_scale<64, e8m0, ceil>
// CHECK-SAME: mx_even = #tetra.block_scale<32, e8m0, even>
// CHECK-SAME: mx_rceil = #tetra.block_scale<16, e8m0, rceil>
// CHECK-SAME: nv = #tetra.block_scale<16, e4m3>
// CHECK-SAME: nv_nearest = #tetra.block_scale<16, e4m3>
// CHECK-SAME: nv_torchao = #tetra.block_scale<16, e4m3, torchao>
func.func @block_scales() attributes {
  nv_nearest = #tetra.block_scale<16, e4m3, nearest>,
  nv_torchao = #tetra.block_scale<16, e4m3, torchao>,
  mx = #tetra.block_scale<32, e8m0, floor>,
  mx_ceil = #tetra.block_scale<64, e8m0, ceil>,
  mx_even = #tetra.block_scale<32, e8m0, even>,
  mx_rceil = #tetra.block_scale<16, e8m0, rceil>,
  nv = #tetra.block_scale<16, e4m3>} {
  return
}

// CHECK-LABEL: func.func @rotations
// CHECK-SAME: h128 = #tetra.rotation<hadamard<128>>
// CHECK-SAME: h16 = #tetra.rotation<hadamard<16>>
// CHECK-SAME: h32 = #tetra.rotation<hadamard<32>>
// CHECK-SAME: h64 = #tetra.rotation<hadamard<64>>
// CHECK-SAME: none = #tetra.rotation<none>
// CHECK-SAME: random_fixed = #tetra.rotation<random_hadamard<32, fixed, 0>>
// CHECK-SAME: random_step = #tetra.rotation<random_hadamard<16, per_step, 18446744073709551615>>
func.func @rotations() attributes {
  none = #tetra.rotation<none>,
  h16 = #tetra.rotation<hadamard<16>>,
  h32 = #tetra.rotation<hadamard<32>>,
  h64 = #tetra.rotation<hadamard<64>>,
  h128 = #tetra.rotation<hadamard<128>>,
  random_fixed = #tetra.rotation<random_hadamard<32, fixed, 0>>,
  random_step = #tetra.rotation<random_hadamard<16, per_step, 18446744073709551615>>} {
  return
}

// Presets print as presets; the full form prints as the preset it equals.
// CHECK-LABEL: func.func @operand_quantizations
// CHECK-SAME: bf16 = #tetra.quant<bf16>
// CHECK-SAME: bf16_sr = #tetra.quant<bf16 round stochastic>
// CHECK-SAME: e2m1_block64 = #tetra.quant<e2m1 block 64 scale e8m0 ceil>
// CHECK-SAME: f32 = #tetra.quant<f32>
// CHECK-SAME: full_mxfp4 = #tetra.quant<mxfp4>
// CHECK-SAME: full_nvfp4 = #tetra.quant<nvfp4>
// CHECK-SAME: full_nvfp4_torchao = #tetra.quant<nvfp4 rule torchao>
// CHECK-SAME: mxfp4 = #tetra.quant<mxfp4>
// CHECK-SAME: mxfp4_all = #tetra.quant<mxfp4 rule even round stochastic rotate random_hadamard<64, per_step, 3>>
// CHECK-SAME: mxfp4_away = #tetra.quant<mxfp4 round nearest_away>
// CHECK-SAME: mxfp4_rceil = #tetra.quant<mxfp4 rule rceil>
// CHECK-SAME: mxfp8 = #tetra.quant<mxfp8_e4m3>
// CHECK-SAME: mxfp8_e4m3 = #tetra.quant<mxfp8_e4m3>
// CHECK-SAME: mxfp8_e5m2 = #tetra.quant<mxfp8_e5m2>
// CHECK-SAME: nvfp4 = #tetra.quant<nvfp4>
// CHECK-SAME: nvfp4_nearest = #tetra.quant<nvfp4>
// CHECK-SAME: nvfp4_rht = #tetra.quant<nvfp4 round stochastic rotate random_hadamard<16, fixed, 7>>
// CHECK-SAME: nvfp4_torchao = #tetra.quant<nvfp4 rule torchao round stochastic>
func.func @operand_quantizations() attributes {
  mxfp4 = #tetra.quant<mxfp4>,
  mxfp8 = #tetra.quant<mxfp8>,
  mxfp8_e4m3 = #tetra.quant<mxfp8_e4m3>,
  mxfp8_e5m2 = #tetra.quant<mxfp8_e5m2>,
  nvfp4 = #tetra.quant<nvfp4>,
  bf16 = #tetra.quant<bf16>,
  bf16_sr = #tetra.quant<bf16 round stochastic>,
  f32 = #tetra.quant<f32>,
  full_mxfp4 = #tetra.quant<e2m1 block 32 scale e8m0 floor>,
  full_nvfp4 = #tetra.quant<e2m1 block 16 scale e4m3>,
  full_nvfp4_torchao = #tetra.quant<e2m1 block 16 scale e4m3 torchao>,
  nvfp4_nearest = #tetra.quant<nvfp4 rule nearest>,
  nvfp4_torchao = #tetra.quant<nvfp4 round stochastic rule torchao>,
  e2m1_block64 = #tetra.quant<e2m1 block 64 scale e8m0 ceil>,
  mxfp4_rceil = #tetra.quant<mxfp4 rule rceil>,
  mxfp4_away = #tetra.quant<mxfp4 round nearest_away>,
  mxfp4_all = #tetra.quant<mxfp4 rotate random_hadamard<64, per_step, 3> round stochastic rule even>,
  nvfp4_rht = #tetra.quant<nvfp4 round stochastic rotate random_hadamard<16, fixed, 7>>} {
  return
}

// CHECK-LABEL: func.func @gemm_policies
// CHECK-SAME: acc = #tetra.gemm<mxfp8_e4m3 acc bf16>
// CHECK-SAME: both = #tetra.gemm<mxfp4 rotate hadamard<32>>
// CHECK-SAME: same_split = #tetra.gemm<mxfp4>
// CHECK-SAME: split = #tetra.gemm<{lhs = mxfp4 round stochastic, rhs = mxfp4}>
// CHECK-SAME: split_acc = #tetra.gemm<{lhs = bf16, rhs = mxfp8_e5m2, acc = f16}>
func.func @gemm_policies() attributes {
  both = #tetra.gemm<mxfp4 rotate hadamard<32>>,
  acc = #tetra.gemm<mxfp8 acc bf16>,
  split = #tetra.gemm<{lhs = mxfp4 round stochastic, rhs = mxfp4}>,
  split_acc = #tetra.gemm<{lhs = bf16, rhs = mxfp8_e5m2, acc = f16}>,
  same_split = #tetra.gemm<{lhs = mxfp4, rhs = mxfp4, acc = f32}>} {
  return
}

// The paper's grid, and roles given in any order.
// CHECK-LABEL: func.func @policies
// CHECK-SAME: bf16 = #tetra.policy<fprop = bf16, dgrad = bf16, wgrad = bf16>
// CHECK-SAME: fp4_all_hadamard = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate hadamard<32>>
// CHECK-SAME: fp4_all_random_hadamard = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate random_hadamard<32, per_step, 42>>
// CHECK-SAME: fp4_all_sr = #tetra.policy<fprop = mxfp4, dgrad = {lhs = mxfp4 round stochastic, rhs = mxfp4}, wgrad = mxfp4 round stochastic>
// CHECK-SAME: fp4_fprop = #tetra.policy<fprop = mxfp4, dgrad = bf16, wgrad = bf16>
// CHECK-SAME: nvfp4 = #tetra.policy<fprop = nvfp4, dgrad = {lhs = nvfp4 round stochastic, rhs = nvfp4}, wgrad = nvfp4 round stochastic rotate random_hadamard<16, fixed, 0>>
func.func @policies() attributes {
  bf16 = #tetra.policy<fprop = bf16, dgrad = bf16, wgrad = bf16>,
  fp4_fprop = #tetra.policy<wgrad = bf16, fprop = mxfp4, dgrad = bf16>,
  fp4_all_sr = #tetra.policy<fprop = mxfp4, dgrad = {lhs = mxfp4 round stochastic, rhs = mxfp4}, wgrad = mxfp4 round stochastic>,
  fp4_all_random_hadamard = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate random_hadamard<32, per_step, 42>>,
  fp4_all_hadamard = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate hadamard<32>>,
  nvfp4 = #tetra.policy<fprop = nvfp4, dgrad = {lhs = nvfp4 round stochastic, rhs = nvfp4}, wgrad = nvfp4 round stochastic rotate random_hadamard<16, fixed, 0>>} {
  return
}
