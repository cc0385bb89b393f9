// Round trip of tetra.scaled_matmul, tetra.kernel and tetra.yield, in custom
// and generic form.
// RUN: tetra-opt %s | tetra-opt | FileCheck %s
// RUN: tetra-opt %s -mlir-print-op-generic | tetra-opt | FileCheck %s

// Fprop of a linear, Y = X·Wᵀ, both operands MXFP4 along K = 128.
// CHECK-LABEL: func.func @mxfp4
func.func @mxfp4(%xc: tensor<64x128xf4E2M1FN>, %xs: tensor<64x4xf8E8M0FNU>,
                 %wc: tensor<32x128xf4E2M1FN>, %ws: tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32> {
  // CHECK: tetra.scaled_matmul (%{{.*}} scales %{{.*}} as #tetra.quant<mxfp4>), (%{{.*}} scales %{{.*}} as #tetra.quant<mxfp4>) transpose_rhs role fprop : (tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>, tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
  %y = tetra.scaled_matmul (%xc scales %xs as #tetra.quant<mxfp4>), (%wc scales %ws as #tetra.quant<mxfp4>) transpose_rhs role fprop
      : (tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>, tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}

// Wgrad, dW = dYᵀ·X: both operands quantized along the 64 tokens (dim 0),
// FP8 against NVFP4 with its tensor scale.
// CHECK-LABEL: func.func @wgrad_mixed
func.func @wgrad_mixed(%dyc: tensor<64x32xf8E4M3FN>, %dys: tensor<2x32xf8E8M0FNU>,
                       %xc: tensor<64x128xf4E2M1FN>, %xs: tensor<4x128xf8E4M3FN>, %xt: tensor<f32>) -> tensor<32x128xf32> {
  // CHECK: tetra.scaled_matmul (%{{.*}} scales %{{.*}} as #tetra.quant<mxfp8_e4m3 rule rceil round stochastic>), (%{{.*}} scales %{{.*}} tensor_scale %{{.*}} as #tetra.quant<nvfp4>) transpose_lhs role wgrad : (tensor<64x32xf8E4M3FN>, tensor<2x32xf8E8M0FNU>, tensor<64x128xf4E2M1FN>, tensor<4x128xf8E4M3FN>, tensor<f32>) -> tensor<32x128xf32>
  %dw = tetra.scaled_matmul (%dyc scales %dys as #tetra.quant<mxfp8_e4m3 rule rceil round stochastic>), (%xc scales %xs tensor_scale %xt as #tetra.quant<nvfp4>) transpose_lhs role wgrad
      : (tensor<64x32xf8E4M3FN>, tensor<2x32xf8E8M0FNU>, tensor<64x128xf4E2M1FN>, tensor<4x128xf8E4M3FN>, tensor<f32>) -> tensor<32x128xf32>
  return %dw : tensor<32x128xf32>
}

// Plain operands (f32, or f32 holding bf16 values) have no scales; sizes
// may be dynamic; the role is optional.
// CHECK-LABEL: func.func @plain
func.func @plain(%a: tensor<?x64xf32>, %bc: tensor<64x?xf8E5M2>, %bs: tensor<2x?xf8E8M0FNU>) -> tensor<?x?xf32> {
  // CHECK: tetra.scaled_matmul (%{{.*}} as #tetra.quant<bf16>), (%{{.*}} scales %{{.*}} as #tetra.quant<mxfp8_e5m2>) : (tensor<?x64xf32>, tensor<64x?xf8E5M2>, tensor<2x?xf8E8M0FNU>) -> tensor<?x?xf32>
  %c = tetra.scaled_matmul (%a as #tetra.quant<bf16>), (%bc scales %bs as #tetra.quant<mxfp8_e5m2>)
      : (tensor<?x64xf32>, tensor<64x?xf8E5M2>, tensor<2x?xf8E8M0FNU>) -> tensor<?x?xf32>
  return %c : tensor<?x?xf32>
}

// A kernel: its inputs bound to the body's arguments, its results yielded.
// CHECK-LABEL: func.func @kernel
func.func @kernel(%x: tensor<64x128xf32>, %w: tensor<32x128xf32>, %seed: i64, %step: i64) -> tensor<64x32xf32> {
  // CHECK: %[[Y:.*]] = tetra.kernel "layers_0_attn_wq_fprop" (%[[A:.*]] = %{{.*}}, %[[B:.*]] = %{{.*}}, %[[SEED:.*]] = %{{.*}}, %[[STEP:.*]] = %{{.*}}) : (tensor<64x128xf32>, tensor<32x128xf32>, i64, i64) -> tensor<64x32xf32> {
  // CHECK-NEXT: %[[R:.*]] = tetra.rotate %[[A]] by #tetra.rotation<random_hadamard<32, per_step, 7>> along 1 step(%[[STEP]])
  // CHECK-NEXT: tetra.quantize %[[R]] as #tetra.quant<mxfp4 round stochastic> along 1 random(%[[SEED]], %[[STEP]]) {tensor_id = 17 : i64}
  // CHECK: tetra.scaled_matmul
  // CHECK-NEXT: tetra.yield %{{.*}} : tensor<64x32xf32>
  // CHECK-NEXT: }
  %y = tetra.kernel "layers_0_attn_wq_fprop" (%a = %x, %b = %w, %sd = %seed, %st = %step)
      : (tensor<64x128xf32>, tensor<32x128xf32>, i64, i64) -> tensor<64x32xf32> {
    %ra = tetra.rotate %a by #tetra.rotation<random_hadamard<32, per_step, 7>> along 1 step(%st) : tensor<64x128xf32>
    %ac, %as = tetra.quantize %ra as #tetra.quant<mxfp4 round stochastic> along 1 random(%sd, %st) {tensor_id = 17 : i64}
        : tensor<64x128xf32> -> tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>
    %rb = tetra.rotate %b by #tetra.rotation<random_hadamard<32, per_step, 7>> along 1 step(%st) : tensor<32x128xf32>
    %bc, %bs = tetra.quantize %rb as #tetra.quant<mxfp4> along 1 {tensor_id = 18 : i64}
        : tensor<32x128xf32> -> tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>
    %c = tetra.scaled_matmul (%ac scales %as as #tetra.quant<mxfp4 round stochastic>), (%bc scales %bs as #tetra.quant<mxfp4>) transpose_rhs
        : (tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>, tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
    tetra.yield %c : tensor<64x32xf32>
  }
  // CHECK: return %[[Y]]
  return %y : tensor<64x32xf32>
}

// Several results, attributes, and a kernel with no inputs.
// CHECK-LABEL: func.func @results
func.func @results(%x: tensor<8x32xf32>) -> (tensor<8x32xf4E2M1FN>, tensor<8x1xf8E8M0FNU>, tensor<4xf32>) {
  // CHECK: %{{.*}}:2 = tetra.kernel "quantize_x" (%{{.*}} = %{{.*}}) : (tensor<8x32xf32>) -> (tensor<8x32xf4E2M1FN>, tensor<8x1xf8E8M0FNU>) attributes {note = "kept"} {
  %c:2 = tetra.kernel "quantize_x" (%a = %x) : (tensor<8x32xf32>) -> (tensor<8x32xf4E2M1FN>, tensor<8x1xf8E8M0FNU>) attributes {note = "kept"} {
    %codes, %scales = tetra.quantize %a as #tetra.quant<mxfp4> along 1 : tensor<8x32xf32> -> tensor<8x32xf4E2M1FN>, tensor<8x1xf8E8M0FNU>
    tetra.yield %codes, %scales : tensor<8x32xf4E2M1FN>, tensor<8x1xf8E8M0FNU>
  }
  // CHECK: tetra.kernel "zeros" () : () -> tensor<4xf32>
  %z = tetra.kernel "zeros" () : () -> tensor<4xf32> {
    %e = tensor.empty() : tensor<4xf32>
    tetra.yield %e : tensor<4xf32>
  }
  return %c#0, %c#1, %z : tensor<8x32xf4E2M1FN>, tensor<8x1xf8E8M0FNU>, tensor<4xf32>
}
