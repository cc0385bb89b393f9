// --tetra-materialize-quantization: each quantized tetra.matmul becomes
// rotate -> quantize on each operand along its reduction dimension and a
// tetra.scaled_matmul; tensor ids are FNV-1a 32 of "NAME|ROLE|OPERAND", and
// each quantizer names its operand for the reader (NAME.x, .w or .dy).
// RUN: tetra-opt %s --split-input-file --tetra-materialize-quantization --verify-diagnostics | FileCheck %s

#fix = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate hadamard<32>>

// The three GEMMs of a linear, X: 64 tokens x 128 in, W: 96 out x 128 in,
// named as the training step names them.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<64x128xf32>, %[[W:.*]]: tensor<96x128xf32>, %[[DY:.*]]: tensor<64x96xf32>)
func.func @linear(%x: tensor<64x128xf32>, %w: tensor<96x128xf32>, %dy: tensor<64x96xf32>)
    -> (tensor<64x96xf32>, tensor<64x128xf32>, tensor<96x128xf32>) {
  // Fprop, Y = X·Wᵀ: K = in, dimension 1 of both X and W.
  // CHECK: %[[XC:.*]], %[[XS:.*]] = tetra.quantize %[[X]] as #tetra.quant<mxfp4> along 1 {operand = "layers.0.attn.wq.fprop.x", tensor_id = 3496022787 : i64} : tensor<64x128xf32> -> tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>
  // CHECK: %[[WC:.*]], %[[WS:.*]] = tetra.quantize %[[W]] as #tetra.quant<mxfp4> along 1 {operand = "layers.0.attn.wq.fprop.w", tensor_id = 715201629 : i64} : tensor<96x128xf32> -> tensor<96x128xf4E2M1FN>, tensor<96x4xf8E8M0FNU>
  // CHECK: %[[Y:.*]] = tetra.scaled_matmul (%[[XC]] scales %[[XS]] as #tetra.quant<mxfp4>), (%[[WC]] scales %[[WS]] as #tetra.quant<mxfp4>) transpose_rhs role fprop
  // CHECK-SAME: -> tensor<64x96xf32>
  %y = tetra.matmul %x, %w transpose_rhs policy #fix role fprop : tensor<64x128xf32>, tensor<96x128xf32> -> tensor<64x96xf32> loc("layers.0.attn.wq.fprop"("model.tetra":3:7))

  // Dgrad, dX = dY·W: K = out, dimension 1 of dY and dimension 0 of W.
  // CHECK: %[[GC:.*]], %[[GS:.*]] = tetra.quantize %[[DY]] as #tetra.quant<mxfp4> along 1 {operand = "layers.0.attn.wq.dgrad.dy", tensor_id = 337505635 : i64} : tensor<64x96xf32> -> tensor<64x96xf4E2M1FN>, tensor<64x3xf8E8M0FNU>
  // CHECK: %[[VC:.*]], %[[VS:.*]] = tetra.quantize %[[W]] as #tetra.quant<mxfp4> along 0 {operand = "layers.0.attn.wq.dgrad.w", tensor_id = 1851651773 : i64} : tensor<96x128xf32> -> tensor<96x128xf4E2M1FN>, tensor<3x128xf8E8M0FNU>
  // CHECK: %[[DX:.*]] = tetra.scaled_matmul (%[[GC]] scales %[[GS]] as #tetra.quant<mxfp4>), (%[[VC]] scales %[[VS]] as #tetra.quant<mxfp4>) role dgrad
  %dx = tetra.matmul %dy, %w policy #fix role dgrad : tensor<64x96xf32>, tensor<96x128xf32> -> tensor<64x128xf32> loc("layers.0.attn.wq.dgrad"("model.tetra":3:7))

  // Wgrad, dW = dYᵀ·X: K = the 64 tokens, dimension 0 of BOTH dY and X,
  // rotated there too. Quantized along the features (dimension 1) the
  // scales would be 64x3 and 64x4.
  // CHECK: %[[RDY:.*]] = tetra.rotate %[[DY]] by #tetra.rotation<hadamard<32>> along 0 : tensor<64x96xf32>
  // CHECK: %[[DC:.*]], %[[DS:.*]] = tetra.quantize %[[RDY]] as #tetra.quant<mxfp4> along 0 {operand = "layers.0.attn.wq.wgrad.dy", tensor_id = 3026155967 : i64} : tensor<64x96xf32> -> tensor<64x96xf4E2M1FN>, tensor<2x96xf8E8M0FNU>
  // CHECK: %[[RX:.*]] = tetra.rotate %[[X]] by #tetra.rotation<hadamard<32>> along 0 : tensor<64x128xf32>
  // CHECK: %[[AC:.*]], %[[AS:.*]] = tetra.quantize %[[RX]] as #tetra.quant<mxfp4> along 0 {operand = "layers.0.attn.wq.wgrad.x", tensor_id = 4196161873 : i64} : tensor<64x128xf32> -> tensor<64x128xf4E2M1FN>, tensor<2x128xf8E8M0FNU>
  // CHECK: %[[DW:.*]] = tetra.scaled_matmul (%[[DC]] scales %[[DS]] as #tetra.quant<mxfp4>), (%[[AC]] scales %[[AS]] as #tetra.quant<mxfp4>) transpose_lhs role wgrad
  // CHECK-SAME: (tensor<64x96xf4E2M1FN>, tensor<2x96xf8E8M0FNU>, tensor<64x128xf4E2M1FN>, tensor<2x128xf8E8M0FNU>) -> tensor<96x128xf32>
  %dw = tetra.matmul %dy, %x transpose_lhs policy #fix role wgrad : tensor<64x96xf32>, tensor<64x128xf32> -> tensor<96x128xf32> loc("layers.0.attn.wq.wgrad"("model.tetra":3:7))
  // CHECK-NOT: tetra.matmul
  // CHECK: return %[[Y]], %[[DX]], %[[DW]]
  return %y, %dx, %dw : tensor<64x96xf32>, tensor<64x128xf32>, tensor<96x128xf32>
}

// -----

// Stochastic rounding takes the matmul's random(%seed, %step), and only the
// operand that rounds stochastically; per-step random signs take %step on
// both rotations (the same signs: the product is unchanged).
#sr = #tetra.policy<fprop = mxfp4, dgrad = mxfp4,
                    wgrad = {lhs = mxfp4 round stochastic rotate random_hadamard<64, per_step, 9>,
                             rhs = mxfp4 rotate random_hadamard<64, per_step, 9>}>

// CHECK-LABEL: func.func @stochastic
// CHECK-SAME: %[[SEED:[^:]*]]: i64, %[[STEP:[^:]*]]: i64
func.func @stochastic(%dy: tensor<64x96xf32>, %x: tensor<64x128xf32>, %seed: i64, %step: i64) -> tensor<96x128xf32> {
  // CHECK: %[[R0:.*]] = tetra.rotate %{{.*}} by #tetra.rotation<random_hadamard<64, per_step, 9>> along 0 step(%[[STEP]]) : tensor<64x96xf32>
  // CHECK: tetra.quantize %[[R0]] as #tetra.quant<mxfp4 round stochastic> along 0 random(%[[SEED]], %[[STEP]]) {operand = "{{[^"]*}}", tensor_id = 3026155967 : i64}
  // CHECK: %[[R1:.*]] = tetra.rotate %{{.*}} by #tetra.rotation<random_hadamard<64, per_step, 9>> along 0 step(%[[STEP]]) : tensor<64x128xf32>
  // CHECK: tetra.quantize %[[R1]] as #tetra.quant<mxfp4> along 0 {operand = "{{[^"]*}}", tensor_id = 4196161873 : i64}
  // CHECK: tetra.scaled_matmul ({{.*}} as #tetra.quant<mxfp4 round stochastic>), ({{.*}} as #tetra.quant<mxfp4>) transpose_lhs role wgrad
  %dw = tetra.matmul %dy, %x transpose_lhs random(%seed, %step) policy #sr role wgrad : tensor<64x96xf32>, tensor<64x128xf32> -> tensor<96x128xf32> loc("layers.0.attn.wq.wgrad"("model.tetra":3:7))
  return %dw : tensor<96x128xf32>
}

// -----

// NVFP4 operands carry their per-tensor scale to the product.
#nv = #tetra.policy<fprop = nvfp4, dgrad = nvfp4, wgrad = nvfp4>

// CHECK-LABEL: func.func @nvfp4
func.func @nvfp4(%x: tensor<64x128xf32>, %w: tensor<96x128xf32>) -> tensor<64x96xf32> {
  // CHECK: %[[AC:.*]], %[[AS:.*]], %[[AT:.*]] = tetra.quantize %{{.*}} as #tetra.quant<nvfp4> along 1 {operand = "{{[^"]*}}", tensor_id = 854165306 : i64} : tensor<64x128xf32> -> tensor<64x128xf4E2M1FN>, tensor<64x8xf8E4M3FN>, tensor<f32>
  // CHECK: %[[BC:.*]], %[[BS:.*]], %[[BT:.*]] = tetra.quantize %{{.*}} as #tetra.quant<nvfp4> along 1 {operand = "{{[^"]*}}", tensor_id = 2821367104 : i64} : tensor<96x128xf32> -> tensor<96x128xf4E2M1FN>, tensor<96x8xf8E4M3FN>, tensor<f32>
  // CHECK: tetra.scaled_matmul (%[[AC]] scales %[[AS]] tensor_scale %[[AT]] as #tetra.quant<nvfp4>), (%[[BC]] scales %[[BS]] tensor_scale %[[BT]] as #tetra.quant<nvfp4>) transpose_rhs role fprop
  %y = tetra.matmul %x, %w transpose_rhs policy #nv role fprop : tensor<64x128xf32>, tensor<96x128xf32> -> tensor<64x96xf32> loc("nvfp4.fprop")
  return %y : tensor<64x96xf32>
}

// -----

// bf16 operands round-trip through bf16; f32 operands are untouched; an
// operand stored in bf16 is first extended to f32; a bf16 result is
// rounded from the f32 accumulator. Without a NameLoc the name is FUNC#I.
#mixed = #tetra.policy<fprop = f32, dgrad = {lhs = bf16, rhs = mxfp8_e5m2 rule even},
                       wgrad = {lhs = mxfp4, rhs = f32}>

// CHECK-LABEL: func.func @unnamed
// CHECK-SAME: (%[[G:.*]]: tensor<64x96xbf16>, %[[W:.*]]: tensor<96x128xf32>, %[[X:.*]]: tensor<64x128xf32>)
func.func @unnamed(%dy: tensor<64x96xbf16>, %w: tensor<96x128xf32>, %x: tensor<64x128xf32>)
    -> (tensor<64x128xbf16>, tensor<96x128xf32>) {
  // CHECK: %[[G32:.*]] = arith.extf %[[G]] : tensor<64x96xbf16> to tensor<64x96xf32>
  // CHECK: %[[T:.*]] = arith.truncf %[[G32]] : tensor<64x96xf32> to tensor<64x96xbf16>
  // CHECK: %[[E:.*]] = arith.extf %[[T]] : tensor<64x96xbf16> to tensor<64x96xf32>
  // CHECK: %[[WC:.*]], %[[WS:.*]] = tetra.quantize %[[W]] as #tetra.quant<mxfp8_e5m2 rule even> along 0 {operand = "{{[^"]*}}", tensor_id = 3555789795 : i64}
  // CHECK: %[[P:.*]] = tetra.scaled_matmul (%[[E]] as #tetra.quant<bf16>), (%[[WC]] scales %[[WS]] as #tetra.quant<mxfp8_e5m2 rule even>) role dgrad : (tensor<64x96xf32>, tensor<96x128xf8E5M2>, tensor<3x128xf8E8M0FNU>) -> tensor<64x128xf32>
  // CHECK: %[[DX:.*]] = arith.truncf %[[P]] : tensor<64x128xf32> to tensor<64x128xbf16>
  %dx = tetra.matmul %dy, %w policy #mixed role dgrad : tensor<64x96xbf16>, tensor<96x128xf32> -> tensor<64x128xbf16>

  // CHECK: %[[G2:.*]] = arith.extf %[[G]]
  // CHECK: %[[DC:.*]], %[[DS:.*]] = tetra.quantize %[[G2]] as #tetra.quant<mxfp4> along 0 {operand = "{{[^"]*}}", tensor_id = 810315807 : i64}
  // CHECK: tetra.scaled_matmul (%[[DC]] scales %[[DS]] as #tetra.quant<mxfp4>), (%[[X]] as #tetra.quant<f32>) transpose_lhs role wgrad
  %dw = tetra.matmul %dy, %x transpose_lhs policy #mixed role wgrad : tensor<64x96xbf16>, tensor<64x128xf32> -> tensor<96x128xf32>
  // CHECK: return %[[DX]]
  return %dx, %dw : tensor<64x128xbf16>, tensor<96x128xf32>
}

// -----

// A plain f32 product stays a tetra.matmul.
#plain = #tetra.policy<fprop = f32, dgrad = f32, wgrad = f32>

// CHECK-LABEL: func.func @plain
func.func @plain(%x: tensor<64x128xf32>, %w: tensor<96x128xf32>) -> tensor<64x96xf32> {
  // CHECK-NEXT: tetra.matmul %{{.*}}, %{{.*}} transpose_rhs policy
  // CHECK-NOT: tetra.quantize
  %y = tetra.matmul %x, %w transpose_rhs policy #plain role fprop : tensor<64x128xf32>, tensor<96x128xf32> -> tensor<64x96xf32>
  return %y : tensor<64x96xf32>
}

// -----

#acc = #tetra.policy<fprop = mxfp4 acc bf16, dgrad = mxfp4, wgrad = mxfp4>

func.func @accumulator(%x: tensor<64x128xf32>, %w: tensor<96x128xf32>) -> tensor<64x96xf32> {
  // expected-error @+1 {{'tetra.matmul' op accumulates in 'bf16', but quantized products accumulate in f32}}
  %y = tetra.matmul %x, %w transpose_rhs policy #acc role fprop : tensor<64x128xf32>, tensor<96x128xf32> -> tensor<64x96xf32>
  return %y : tensor<64x96xf32>
}

// -----

#bf16_sr = #tetra.policy<fprop = {lhs = bf16 round stochastic, rhs = mxfp4}, dgrad = mxfp4, wgrad = mxfp4>

func.func @bf16_stochastic(%x: tensor<64x128xf32>, %w: tensor<96x128xf32>, %seed: i64, %step: i64) -> tensor<64x96xf32> {
  // expected-error @+1 {{'tetra.matmul' op rounds an operand to bf16 stochastically: no kernel implements that yet}}
  %y = tetra.matmul %x, %w transpose_rhs random(%seed, %step) policy #bf16_sr role fprop : tensor<64x128xf32>, tensor<96x128xf32> -> tensor<64x96xf32>
  return %y : tensor<64x96xf32>
}
