// Round trip of every tetra op, in custom and generic form.
// RUN: tetra-opt %s | tetra-opt | FileCheck %s
// RUN: tetra-opt %s -mlir-print-op-generic | tetra-opt | FileCheck %s

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate hadamard<32>>
#sr = #tetra.policy<fprop = mxfp4, dgrad = mxfp4 round stochastic, wgrad = mxfp4 round stochastic rotate random_hadamard<32, per_step, 9>>

// The three GEMMs of a linear layer Y = X·Wᵀ, X: 64 tokens x 128 in,
// W: 32 out x 128 in.
// CHECK-LABEL: func.func @linear_layer
func.func @linear_layer(%x: tensor<64x128xf32>, %w: tensor<32x128xf32>, %dy: tensor<64x32xf32>)
    -> (tensor<64x32xf32>, tensor<64x128xf32>, tensor<32x128xf32>) {
  // CHECK: tetra.matmul %{{.*}}, %{{.*}} transpose_rhs policy #policy role fprop : tensor<64x128xf32>, tensor<32x128xf32> -> tensor<64x32xf32>
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<64x128xf32>, tensor<32x128xf32> -> tensor<64x32xf32>
  // CHECK: tetra.matmul %{{.*}}, %{{.*}} policy #policy role dgrad : tensor<64x32xf32>, tensor<32x128xf32> -> tensor<64x128xf32>
  %dx = tetra.matmul %dy, %w policy #policy role dgrad : tensor<64x32xf32>, tensor<32x128xf32> -> tensor<64x128xf32>
  // CHECK: tetra.matmul %{{.*}}, %{{.*}} transpose_lhs policy #policy role wgrad : tensor<64x32xf32>, tensor<64x128xf32> -> tensor<32x128xf32>
  %dw = tetra.matmul %dy, %x transpose_lhs policy #policy role wgrad : tensor<64x32xf32>, tensor<64x128xf32> -> tensor<32x128xf32>
  return %y, %dx, %dw : tensor<64x32xf32>, tensor<64x128xf32>, tensor<32x128xf32>
}

// CHECK-LABEL: func.func @random_source
func.func @random_source(%dy: tensor<64x32xf32>, %x: tensor<64x128xf32>, %seed: i64, %step: i64) -> tensor<32x128xf32> {
  // CHECK: tetra.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs random(%{{.*}}, %{{.*}}) policy #policy{{[0-9]*}} role wgrad : tensor<64x32xf32>, tensor<128x64xf32> -> tensor<32x128xf32>
  %xt = tensor.empty() : tensor<128x64xf32>
  %dw = tetra.matmul %dy, %xt transpose_lhs transpose_rhs random(%seed, %step) policy #sr role wgrad : tensor<64x32xf32>, tensor<128x64xf32> -> tensor<32x128xf32>
  return %dw : tensor<32x128xf32>
}

// Dynamic sizes are checked where they are known.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%a: tensor<?x64xbf16>, %b: tensor<64x?xbf16>) -> tensor<?x?xf32> {
  // CHECK: tetra.matmul %{{.*}}, %{{.*}} policy #policy{{[0-9]*}} role dgrad : tensor<?x64xbf16>, tensor<64x?xbf16> -> tensor<?x?xf32>
  %c = tetra.matmul %a, %b policy #policy role dgrad : tensor<?x64xbf16>, tensor<64x?xbf16> -> tensor<?x?xf32>
  return %c : tensor<?x?xf32>
}

// CHECK-LABEL: func.func @quantize_dequantize
func.func @quantize_dequantize(%x: tensor<8x64xf32>, %t: tensor<64x8xf32>, %g: tensor<4x64x16xbf16>, %seed: i64, %step: i64) {
  // CHECK: %[[C:.*]], %[[S:.*]] = tetra.quantize %{{.*}} as #tetra.quant<mxfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
  // CHECK: tetra.dequantize %[[C]], %[[S]] as #tetra.quant<mxfp4> along 1 : tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU> -> tensor<8x64xf32>
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
  %d = tetra.dequantize %c, %s as #tetra.quant<mxfp4> along 1 : tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU> -> tensor<8x64xf32>
  // Along the token dimension (axis 0), as Wgrad quantizes.
  // CHECK: tetra.quantize %{{.*}} as #tetra.quant<mxfp8_e4m3 rule rceil> along 0 : tensor<64x8xf32> -> tensor<64x8xf8E4M3FN>, tensor<2x8xf8E8M0FNU>
  %c8, %s8 = tetra.quantize %t as #tetra.quant<mxfp8 rule rceil> along 0 : tensor<64x8xf32> -> tensor<64x8xf8E4M3FN>, tensor<2x8xf8E8M0FNU>
  // CHECK: tetra.quantize %{{.*}} as #tetra.quant<mxfp8_e5m2> along 1 : tensor<8x64xf32> -> tensor<8x64xf8E5M2>, tensor<8x2xf8E8M0FNU>
  %c5, %s5 = tetra.quantize %x as #tetra.quant<mxfp8_e5m2> along 1 : tensor<8x64xf32> -> tensor<8x64xf8E5M2>, tensor<8x2xf8E8M0FNU>
  // NVFP4 carries its per-tensor scale.
  // CHECK: %[[NC:.*]], %[[NS:.*]], %[[NT:.*]] = tetra.quantize %{{.*}} as #tetra.quant<nvfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>, tensor<f32>
  // CHECK: tetra.dequantize %[[NC]], %[[NS]], %[[NT]] as #tetra.quant<nvfp4> along 1 : tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>, tensor<f32> -> tensor<8x64xbf16>
  %nc, %ns, %nt = tetra.quantize %x as #tetra.quant<nvfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>, tensor<f32>
  %nd = tetra.dequantize %nc, %ns, %nt as #tetra.quant<nvfp4> along 1 : tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>, tensor<f32> -> tensor<8x64xbf16>
  // A middle axis of a 3-D tensor, stochastic rounding with its random source.
  // CHECK: tetra.quantize %{{.*}} as #tetra.quant<mxfp4 round stochastic> along 1 random(%{{.*}}, %{{.*}}) {tensor_id = 7 : i64} : tensor<4x64x16xbf16> -> tensor<4x64x16xf4E2M1FN>, tensor<4x2x16xf8E8M0FNU>
  %gc, %gs = tetra.quantize %g as #tetra.quant<mxfp4 round stochastic> along 1 random(%seed, %step) {tensor_id = 7 : i64} : tensor<4x64x16xbf16> -> tensor<4x64x16xf4E2M1FN>, tensor<4x2x16xf8E8M0FNU>
  return
}

// CHECK-LABEL: func.func @rotate
func.func @rotate(%x: tensor<8x64xf32>, %step: i64) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  // CHECK: tetra.rotate %{{.*}} by #tetra.rotation<hadamard<64>> along 1 : tensor<8x64xf32>
  %r = tetra.rotate %x by #tetra.rotation<hadamard<64>> along 1 : tensor<8x64xf32>
  // CHECK: tetra.rotate %{{.*}} by #tetra.rotation<hadamard<64>> along 1 inverse : tensor<8x64xf32>
  %i = tetra.rotate %r by #tetra.rotation<hadamard<64>> along 1 inverse : tensor<8x64xf32>
  // CHECK: tetra.rotate %{{.*}} by #tetra.rotation<random_hadamard<16, per_step, 5>> along 1 step(%{{.*}}) : tensor<8x64xf32>
  %p = tetra.rotate %x by #tetra.rotation<random_hadamard<16, per_step, 5>> along 1 step(%step) : tensor<8x64xf32>
  return %r, %i, %p : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}

// One Llama block, as the frontend emits it.
#mx = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate hadamard<32>>
// CHECK-LABEL: func.func @llama_block
func.func @llama_block(%tokens: tensor<2x64xi32>, %targets: tensor<2x64xi32>,
    %embed: tensor<256x128xf32>, %norm: tensor<128xf32>, %wq: tensor<128x128xf32>,
    %wk: tensor<64x128xf32>, %wv: tensor<64x128xf32>, %wo: tensor<128x128xf32>,
    %gate: tensor<256x128xf32>, %up: tensor<256x128xf32>, %down: tensor<128x256xf32>) -> tensor<f32> {
  // CHECK: %[[H:.*]] = tetra.embedding %{{.*}}, %{{.*}} : tensor<256x128xf32>, tensor<2x64xi32> -> tensor<2x64x128xf32>
  %h = tetra.embedding %embed, %tokens : tensor<256x128xf32>, tensor<2x64xi32> -> tensor<2x64x128xf32>
  // CHECK: tetra.rmsnorm %[[H]], %{{.*}} eps 1.000000e-05 : tensor<2x64x128xf32>, tensor<128xf32>
  %x = tetra.rmsnorm %h, %norm eps 1.0e-5 : tensor<2x64x128xf32>, tensor<128xf32>
  // CHECK: tetra.linear %{{.*}}, %{{.*}} policy #policy{{[0-9]*}} name "layers.0.attn.wq" : tensor<2x64x128xf32>, tensor<128x128xf32> -> tensor<2x64x128xf32>
  %q0 = tetra.linear %x, %wq policy #mx name "layers.0.attn.wq" : tensor<2x64x128xf32>, tensor<128x128xf32> -> tensor<2x64x128xf32>
  %k0 = tetra.linear %x, %wk policy #mx name "layers.0.attn.wk" : tensor<2x64x128xf32>, tensor<64x128xf32> -> tensor<2x64x64xf32>
  %v = tetra.linear %x, %wv policy #mx name "layers.0.attn.wv" : tensor<2x64x128xf32>, tensor<64x128xf32> -> tensor<2x64x64xf32>
  // CHECK: tetra.rope %{{.*}} head_dim 32 theta 5.000000e+05 : tensor<2x64x128xf32>
  %q = tetra.rope %q0 head_dim 32 theta 500000.0 : tensor<2x64x128xf32>
  %k = tetra.rope %k0 head_dim 32 theta 500000.0 : tensor<2x64x64xf32>
  // CHECK: tetra.attention %{{.*}}, %{{.*}}, %{{.*}} heads 4 kv_heads 2 : tensor<2x64x128xf32>, tensor<2x64x64xf32>, tensor<2x64x64xf32>
  %a = tetra.attention %q, %k, %v heads 4 kv_heads 2 : tensor<2x64x128xf32>, tensor<2x64x64xf32>, tensor<2x64x64xf32>
  %o = tetra.linear %a, %wo policy #mx name "layers.0.attn.wo" : tensor<2x64x128xf32>, tensor<128x128xf32> -> tensor<2x64x128xf32>
  // CHECK: tetra.add %{{.*}}, %{{.*}} : tensor<2x64x128xf32>
  %h1 = tetra.add %h, %o : tensor<2x64x128xf32>
  %g = tetra.linear %h1, %gate policy #mx name "layers.0.mlp.gate" : tensor<2x64x128xf32>, tensor<256x128xf32> -> tensor<2x64x256xf32>
  %u = tetra.linear %h1, %up policy #mx name "layers.0.mlp.up" : tensor<2x64x128xf32>, tensor<256x128xf32> -> tensor<2x64x256xf32>
  // CHECK: tetra.silu %{{.*}} : tensor<2x64x256xf32>
  %s = tetra.silu %g : tensor<2x64x256xf32>
  // CHECK: tetra.mul %{{.*}}, %{{.*}} : tensor<2x64x256xf32>
  %m = tetra.mul %s, %u : tensor<2x64x256xf32>
  %d = tetra.linear %m, %down policy #mx name "layers.0.mlp.down" : tensor<2x64x256xf32>, tensor<128x256xf32> -> tensor<2x64x128xf32>
  // CHECK: tetra.sub %{{.*}}, %{{.*}} : tensor<2x64x128xf32>
  %h2 = tetra.sub %h1, %d : tensor<2x64x128xf32>
  // CHECK: tetra.scale %{{.*}} by 5.000000e-01 : tensor<2x64x128xf32>
  %h3 = tetra.scale %h2 by 0.5 : tensor<2x64x128xf32>
  %logits = tetra.linear %h3, %embed policy #mx name "embed" : tensor<2x64x128xf32>, tensor<256x128xf32> -> tensor<2x64x256xf32>
  // CHECK: tetra.cross_entropy %{{.*}}, %{{.*}} : tensor<2x64x256xf32>, tensor<2x64xi32> -> tensor<f32>
  %loss = tetra.cross_entropy %logits, %targets : tensor<2x64x256xf32>, tensor<2x64xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
