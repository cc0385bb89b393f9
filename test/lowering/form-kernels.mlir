// --tetra-form-kernels: each scaled matmul with the ops preparing its
// operands becomes one tetra.kernel; so does each elementwise chain. The pass
// is idempotent: a second run changes nothing.
// RUN: tetra-opt %s --split-input-file --tetra-form-kernels | FileCheck %s
// RUN: tetra-opt %s --split-input-file --tetra-form-kernels --tetra-form-kernels | FileCheck %s

// Wgrad with stochastic rounding and per-step random Hadamard: rotations,
// quantizers and the product in one kernel, whose inputs are the raw
// operands and the random source, in the order the ops first use them.
// CHECK-LABEL: func.func @wgrad
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<64x96xf32>, %[[X:[^:]*]]: tensor<64x128xf32>, %[[SEED:[^:]*]]: i64, %[[STEP:[^:]*]]: i64)
func.func @wgrad(%dy: tensor<64x96xf32>, %x: tensor<64x128xf32>, %seed: i64, %step: i64) -> tensor<96x128xf32> {
  // CHECK-NEXT: %[[K:.*]] = tetra.kernel "layers_0_attn_wq_wgrad" (%[[A:.*]] = %[[DY]], %[[ST:.*]] = %[[STEP]], %[[SD:.*]] = %[[SEED]], %[[B:.*]] = %[[X]]) : (tensor<64x96xf32>, i64, i64, tensor<64x128xf32>) -> tensor<96x128xf32> {
  // CHECK-NEXT: %[[RA:.*]] = tetra.rotate %[[A]] {{.*}} along 0 step(%[[ST]])
  // CHECK-NEXT: %[[AC:.*]], %[[AS:.*]] = tetra.quantize %[[RA]] {{.*}} along 0 random(%[[SD]], %[[ST]]) {tensor_id = 1 : i64}
  // CHECK-NEXT: %[[RB:.*]] = tetra.rotate %[[B]] {{.*}} along 0 step(%[[ST]])
  // CHECK-NEXT: %[[BC:.*]], %[[BS:.*]] = tetra.quantize %[[RB]] {{.*}} along 0 {tensor_id = 2 : i64}
  // CHECK-NEXT: %[[P:.*]] = tetra.scaled_matmul (%[[AC]] scales %[[AS]] {{.*}}), (%[[BC]] scales %[[BS]] {{.*}}) transpose_lhs role wgrad
  // CHECK-NEXT: tetra.yield %[[P]] : tensor<96x128xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[K]]
  %r0 = tetra.rotate %dy by #tetra.rotation<random_hadamard<64, per_step, 9>> along 0 step(%step) : tensor<64x96xf32>
  %c0, %s0 = tetra.quantize %r0 as #tetra.quant<mxfp4 round stochastic> along 0 random(%seed, %step) {tensor_id = 1 : i64}
      : tensor<64x96xf32> -> tensor<64x96xf4E2M1FN>, tensor<2x96xf8E8M0FNU>
  %r1 = tetra.rotate %x by #tetra.rotation<random_hadamard<64, per_step, 9>> along 0 step(%step) : tensor<64x128xf32>
  %c1, %s1 = tetra.quantize %r1 as #tetra.quant<mxfp4> along 0 {tensor_id = 2 : i64}
      : tensor<64x128xf32> -> tensor<64x128xf4E2M1FN>, tensor<2x128xf8E8M0FNU>
  %dw = tetra.scaled_matmul (%c0 scales %s0 as #tetra.quant<mxfp4 round stochastic>), (%c1 scales %s1 as #tetra.quant<mxfp4>) transpose_lhs role wgrad
      : (tensor<64x96xf4E2M1FN>, tensor<2x96xf8E8M0FNU>, tensor<64x128xf4E2M1FN>, tensor<2x128xf8E8M0FNU>) -> tensor<96x128xf32>
      loc("layers.0.attn.wq.wgrad"("model.tetra":3:7))
  return %dw : tensor<96x128xf32>
}

// -----

// A bf16 round trip of a plain operand and the rounding of a bf16 result
// move into the kernel. A quantizer whose codes are also used outside stays
// where it is, and the kernel gets its own copy. Without a NameLoc the
// kernel is named after its role; a second one gets a suffix.
// CHECK-LABEL: func.func @shared
func.func @shared(%a: tensor<64x96xf32>, %w: tensor<96x128xf32>)
    -> (tensor<64x128xbf16>, tensor<64x128xf32>, tensor<96x128xf8E5M2>) {
  // CHECK: %[[WC:.*]], %[[WS:.*]] = tetra.quantize %{{.*}} as #tetra.quant<mxfp8_e5m2> along 0
  // CHECK-NEXT: %[[K0:.*]] = tetra.kernel "gemm_dgrad" (%[[A0:.*]] = %{{.*}}, %[[W0:.*]] = %{{.*}}) : (tensor<64x96xf32>, tensor<96x128xf32>) -> tensor<64x128xbf16> {
  // CHECK-NEXT: arith.truncf %[[A0]] : tensor<64x96xf32> to tensor<64x96xbf16>
  // CHECK-NEXT: arith.extf
  // CHECK-NEXT: tetra.quantize %[[W0]]
  // CHECK-NEXT: tetra.scaled_matmul
  // CHECK-NEXT: %[[R:.*]] = arith.truncf %{{.*}} : tensor<64x128xf32> to tensor<64x128xbf16>
  // CHECK-NEXT: tetra.yield %[[R]] : tensor<64x128xbf16>
  // CHECK: tetra.kernel "gemm_dgrad_2"
  // CHECK: return %[[K0]], %{{.*}}, %[[WC]]
  %t = arith.truncf %a : tensor<64x96xf32> to tensor<64x96xbf16>
  %e = arith.extf %t : tensor<64x96xbf16> to tensor<64x96xf32>
  %wc, %ws = tetra.quantize %w as #tetra.quant<mxfp8_e5m2> along 0 {tensor_id = 3 : i64}
      : tensor<96x128xf32> -> tensor<96x128xf8E5M2>, tensor<3x128xf8E8M0FNU>
  %p = tetra.scaled_matmul (%e as #tetra.quant<bf16>), (%wc scales %ws as #tetra.quant<mxfp8_e5m2>) role dgrad
      : (tensor<64x96xf32>, tensor<96x128xf8E5M2>, tensor<3x128xf8E8M0FNU>) -> tensor<64x128xf32>
  %r = arith.truncf %p : tensor<64x128xf32> to tensor<64x128xbf16>
  %q = tetra.scaled_matmul (%a as #tetra.quant<f32>), (%wc scales %ws as #tetra.quant<mxfp8_e5m2>) role dgrad
      : (tensor<64x96xf32>, tensor<96x128xf8E5M2>, tensor<3x128xf8E8M0FNU>) -> tensor<64x128xf32>
  return %r, %q, %wc : tensor<64x128xbf16>, tensor<64x128xf32>, tensor<96x128xf8E5M2>
}

// -----

// Elementwise chains: each op but the last has one use, the next op. The
// silu's result is used twice, so the chain ends there and the mul starts
// another.
// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %[[K0:.*]] = tetra.kernel "elementwise_0" (%[[X:.*]] = %{{.*}}, %[[Y:.*]] = %{{.*}}) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[S:.*]] = tetra.add %[[X]], %[[Y]]
  // CHECK-NEXT: %[[T:.*]] = tetra.scale %[[S]] by
  // CHECK-NEXT: %[[U:.*]] = tetra.silu %[[T]]
  // CHECK-NEXT: tetra.yield %[[U]]
  // CHECK-NEXT: }
  // CHECK-NEXT: %[[K1:.*]] = tetra.kernel "elementwise_1" (%{{.*}} = %[[K0]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: tetra.mul
  // CHECK-NEXT: tetra.sub
  // CHECK-NEXT: tetra.yield
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[K1]], %[[K0]]
  %s = tetra.add %x, %y : tensor<8x16xf32>
  %t = tetra.scale %s by 5.000000e-01 : tensor<8x16xf32>
  %u = tetra.silu %t : tensor<8x16xf32>
  %v = tetra.mul %u, %y : tensor<8x16xf32>
  %w = tetra.sub %v, %x : tensor<8x16xf32>
  return %w, %u : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A silu or scale whose uses are all elementwise ops (of its block) is
// computed again in each user's chain instead of being stored: here the
// silu of a SwiGLU gate, which feeds the forward's product with up and the
// backward's d(up) = d(product) * silu(gate). Each chain reads the gate.
// CHECK-LABEL: func.func @recomputed
func.func @recomputed(%g: tensor<8x16xf32>, %u: tensor<8x16xf32>, %d: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %[[K0:.*]] = tetra.kernel "elementwise_0" (%[[G:.*]] = %arg0, %[[U:.*]] = %arg1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[S:.*]] = tetra.silu %[[G]]
  // CHECK-NEXT: %[[P:.*]] = tetra.mul %[[S]], %[[U]]
  // CHECK-NEXT: tetra.yield %[[P]]
  // CHECK-NEXT: }
  // CHECK-NEXT: %[[K1:.*]] = tetra.kernel "elementwise_1" (%[[G1:.*]] = %arg0, %[[D:.*]] = %arg2) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK-NEXT: %[[S1:.*]] = tetra.silu %[[G1]]
  // CHECK-NEXT: %[[DU:.*]] = tetra.mul %[[D]], %[[S1]]
  // CHECK-NEXT: tetra.yield %[[DU]]
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[K0]], %[[K1]]
  %s = tetra.silu %g : tensor<8x16xf32>
  %p = tetra.mul %s, %u : tensor<8x16xf32>
  %du = tetra.mul %d, %s : tensor<8x16xf32>
  return %p, %du : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Elementwise kernels that read two or more of the same tensors merge into
// the earlier one (its place and name), where the later one's inputs all
// exist there: the SwiGLU backward's d(up) = d * silu(g) and d(gate) =
// silu_grad(g, d * u) read d and g once. Results: the earlier kernel's,
// then the later one's, each computed by its own ops.
// CHECK-LABEL: func.func @siblings
func.func @siblings(%g: tensor<8x16xf32>, %u: tensor<8x16xf32>, %d: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %[[K:.*]]:2 = tetra.kernel "elementwise_0" (%[[G:.*]] = %arg0, %[[D:.*]] = %arg2, %[[U:.*]] = %arg1) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %[[S:.*]] = tetra.silu %[[G]]
  // CHECK-NEXT: %[[DU:.*]] = tetra.mul %[[D]], %[[S]]
  // CHECK-NEXT: %[[DP:.*]] = tetra.mul %[[D]], %[[U]]
  // CHECK-NEXT: %[[DG:.*]] = tetra.silu_grad %[[G]], %[[DP]]
  // CHECK-NEXT: tetra.yield %[[DU]], %[[DG]]
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[K]]#0, %[[K]]#1
  %s = tetra.silu %g : tensor<8x16xf32>
  %du = tetra.mul %d, %s : tensor<8x16xf32>
  %dp = tetra.mul %d, %u : tensor<8x16xf32>
  %dg = tetra.silu_grad %g, %dp : tensor<8x16xf32>
  return %du, %dg : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Kernels sharing one tensor stay apart (a residual connection's adds: a
// GEMM's epilogue may take one over), and so does a kernel that reads the
// earlier one's result, whatever else they share.
// CHECK-LABEL: func.func @siblings_apart
func.func @siblings_apart(%x: tensor<8x16xf32>, %a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NEXT: %[[K0:.*]] = tetra.kernel "elementwise_0" (%{{.*}} = %arg0, %{{.*}} = %arg1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: %[[K1:.*]] = tetra.kernel "elementwise_1" (%{{.*}} = %arg0, %{{.*}} = %arg2) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: %[[K2:.*]] = tetra.kernel "elementwise_2" (%{{.*}} = %[[K0]], %{{.*}} = %arg1, %{{.*}} = %arg0) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: return %[[K0]], %[[K1]], %[[K2]]
  %r0 = tetra.add %x, %a : tensor<8x16xf32>
  %r1 = tetra.add %x, %b : tensor<8x16xf32>
  %m = tetra.mul %r0, %a : tensor<8x16xf32>
  %r2 = tetra.sub %m, %x : tensor<8x16xf32>
  return %r0, %r1, %r2 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
