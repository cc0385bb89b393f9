// --tetra-training-step: @train_step from a hand-written @loss, and every
// error the pass reports.
// RUN: tetra-opt %s --tetra-training-step --split-input-file --verify-diagnostics | FileCheck %s
// RUN: tetra-opt %s --tetra-training-step="clip=0 weight-decay=0.05 beta1=0.75 beta2=0.875 eps=1e-6" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=OPTIONS
// RUN: tetra-opt %s --tetra-training-step --split-input-file --verify-diagnostics --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s --check-prefix=LOC
// RUN: not tetra-opt %s --tetra-training-step=beta1=1 --split-input-file 2>&1 | FileCheck %s --check-prefix=BADOPTION
// BADOPTION: error: tetra-training-step: beta1 and beta2 must be in [0, 1)

// An embedding, a norm, a residual (x used twice) and one linear whose Dgrad
// rounds its dY stochastically; "unused" does not reach the loss.
#policy = #tetra.policy<fprop = mxfp4, dgrad = {lhs = mxfp4 round stochastic, rhs = mxfp4}, wgrad = mxfp4 rotate hadamard<32>>
#proj = loc("proj"("tiny.tetra":12:7))

module @tiny {
  func.func @forward() {
    return
  }
  func.func @loss(%embed: tensor<64x32xf32> {tetra.param = "embed"}, %norm: tensor<32xf32> {tetra.param = "norm"},
                  %w: tensor<64x32xf32> {tetra.param = "proj"}, %unused: tensor<32xf32> {tetra.param = "unused"},
                  %tokens: tensor<2x16xi32> {tetra.input = "tokens"}, %targets: tensor<2x16xi32> {tetra.input = "targets"}) -> tensor<f32> {
    %x = tetra.embedding %embed, %tokens : tensor<64x32xf32>, tensor<2x16xi32> -> tensor<2x16x32xf32>
    %h = tetra.rmsnorm %x, %norm eps 1.0e-05 : tensor<2x16x32xf32>, tensor<32xf32>
    %r = tetra.add %x, %h : tensor<2x16x32xf32>
    %logits = tetra.linear %r, %w policy #policy name "proj" : tensor<2x16x32xf32>, tensor<64x32xf32> -> tensor<2x16x64xf32> loc(#proj)
    %loss = tetra.cross_entropy %logits, %targets : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// @forward and @loss stay; @train_step comes after @loss.
// CHECK-LABEL: module @tiny
// CHECK: func.func @forward()
// CHECK: func.func @loss(
// CHECK: tetra.linear

// The signature: parameters, first moments, second moments, inputs, step,
// learning rate, seed; loss, gradient norm, then the new state.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[EMBED:[^:]*]]: tensor<64x32xf32> {tetra.param = "embed"}, %[[NORM:[^:]*]]: tensor<32xf32> {tetra.param = "norm"}, %[[W:[^:]*]]: tensor<64x32xf32> {tetra.param = "proj"}, %[[UNUSED:[^:]*]]: tensor<32xf32> {tetra.param = "unused"},
// CHECK-SAME: %[[M_EMBED:[^:]*]]: tensor<64x32xf32> {tetra.adam_m = "embed"}, %[[M_NORM:[^:]*]]: tensor<32xf32> {tetra.adam_m = "norm"}, %[[M_W:[^:]*]]: tensor<64x32xf32> {tetra.adam_m = "proj"}, %[[M_UNUSED:[^:]*]]: tensor<32xf32> {tetra.adam_m = "unused"},
// CHECK-SAME: %[[V_EMBED:[^:]*]]: tensor<64x32xf32> {tetra.adam_v = "embed"}, %[[V_NORM:[^:]*]]: tensor<32xf32> {tetra.adam_v = "norm"}, %[[V_W:[^:]*]]: tensor<64x32xf32> {tetra.adam_v = "proj"}, %[[V_UNUSED:[^:]*]]: tensor<32xf32> {tetra.adam_v = "unused"},
// CHECK-SAME: %[[TOKENS:[^:]*]]: tensor<2x16xi32> {tetra.input = "tokens"}, %[[TARGETS:[^:]*]]: tensor<2x16xi32> {tetra.input = "targets"},
// CHECK-SAME: %[[STEP:[^:]*]]: i64 {tetra.step}, %[[LR:[^:]*]]: f32 {tetra.lr}, %[[SEED:[^:]*]]: i64 {tetra.seed})
// CHECK-SAME: -> (tensor<f32> {tetra.output = "loss"}, tensor<f32> {tetra.output = "grad_norm"},
// CHECK-SAME: tensor<64x32xf32> {tetra.param = "embed"}, tensor<32xf32> {tetra.param = "norm"}, tensor<64x32xf32> {tetra.param = "proj"}, tensor<32xf32> {tetra.param = "unused"},
// CHECK-SAME: tensor<64x32xf32> {tetra.adam_m = "embed"}, {{.*}}, tensor<32xf32> {tetra.adam_v = "unused"})
// CHECK-SAME: attributes {tetra.optimizer = {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, clip = 1.000000e+00 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}}

// The forward pass, recomputed, the linear as its Fprop matmul over the
// 2 x 16 = 32 tokens: [32, in] x [out, in]ᵀ.
// CHECK: %[[X:.*]] = tetra.embedding %[[EMBED]], %[[TOKENS]]
// CHECK: %[[H:.*]] = tetra.rmsnorm %[[X]], %[[NORM]] eps 1.000000e-05
// CHECK: %[[R:.*]] = tetra.add %[[X]], %[[H]]
// CHECK: %[[R2:.*]] = tensor.collapse_shape %[[R]] {{\[\[}}0, 1], [2]] : tensor<2x16x32xf32> into tensor<32x32xf32>
// CHECK: %[[Y2:.*]] = tetra.matmul %[[R2]], %[[W]] transpose_rhs policy #policy role fprop : tensor<32x32xf32>, tensor<64x32xf32> -> tensor<32x64xf32>
// CHECK: %[[LOGITS:.*]] = tensor.expand_shape %[[Y2]] {{\[\[}}0, 1], [2]] output_shape [2, 16, 64] : tensor<32x64xf32> into tensor<2x16x64xf32>
// CHECK: %[[LOSS:.*]] = tetra.cross_entropy %[[LOGITS]], %[[TARGETS]]

// The backward pass, from dloss = 1.
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = tetra.cross_entropy_grad %[[LOGITS]], %[[TARGETS]], %[[ONE]] : tensor<2x16x64xf32>, tensor<2x16xi32>
// CHECK: %[[DY:.*]] = tensor.collapse_shape %[[DLOGITS]] {{\[\[}}0, 1], [2]] : tensor<2x16x64xf32> into tensor<32x64xf32>
// Dgrad dX = dY·W: [32, out] x [out, in]; its dY is rounded stochastically,
// so it draws from (seed, step).
// CHECK: %[[DR2:.*]] = tetra.matmul %[[DY]], %[[W]] random(%[[SEED]], %[[STEP]]) policy #policy role dgrad : tensor<32x64xf32>, tensor<64x32xf32> -> tensor<32x32xf32>
// CHECK: %[[DR:.*]] = tensor.expand_shape %[[DR2]] {{\[\[}}0, 1], [2]] output_shape [2, 16, 32] : tensor<32x32xf32> into tensor<2x16x32xf32>
// Wgrad dW = dYᵀ·X: [32, out]ᵀ x [32, in], reducing over the 32 tokens; a
// deterministic Hadamard rotation needs no random source.
// CHECK: %[[DW:.*]] = tetra.matmul %[[DY]], %[[R2]] transpose_lhs policy #policy role wgrad : tensor<32x64xf32>, tensor<32x32xf32> -> tensor<64x32xf32>
// The residual's gradient reaches x twice, directly and through the norm:
// the two are summed.
// CHECK: %[[DX_NORM:.*]], %[[DNORM:.*]] = tetra.rmsnorm_grad %[[X]], %[[NORM]], %[[DR]] eps 1.000000e-05 : tensor<2x16x32xf32>, tensor<32xf32>
// CHECK: %[[DX:.*]] = tetra.add %[[DR]], %[[DX_NORM]] : tensor<2x16x32xf32>
// CHECK: %[[DEMBED:.*]] = tetra.embedding_grad %[[TOKENS]], %[[DX]] : tensor<2x16xi32>, tensor<2x16x32xf32> -> tensor<64x32xf32>
// A parameter that does not reach the loss: a zero gradient.
// CHECK: %[[DUNUSED:.*]] = arith.constant dense<0.000000e+00> : tensor<32xf32>

// The optimizer: global norm, clipping, AdamW; weight decay on the matrices
// only.
// CHECK: %[[GNORM:.*]] = tetra.global_norm %[[DEMBED]], %[[DNORM]], %[[DW]], %[[DUNUSED]] : tensor<64x32xf32>, tensor<32xf32>, tensor<64x32xf32>, tensor<32xf32>
// CHECK: %[[CEMBED:.*]] = tetra.clip_by_norm %[[DEMBED]], %[[GNORM]] max_norm 1.000000e+00 : tensor<64x32xf32>
// CHECK: %[[CNORM:.*]] = tetra.clip_by_norm %[[DNORM]], %[[GNORM]] max_norm 1.000000e+00 : tensor<32xf32>
// CHECK: %[[CW:.*]] = tetra.clip_by_norm %[[DW]], %[[GNORM]] max_norm 1.000000e+00 : tensor<64x32xf32>
// CHECK: %[[CUNUSED:.*]] = tetra.clip_by_norm %[[DUNUSED]], %[[GNORM]] max_norm 1.000000e+00 : tensor<32xf32>
// CHECK: %[[P_EMBED:.*]], %[[NM_EMBED:.*]], %[[NV_EMBED:.*]] = tetra.adamw %[[EMBED]], %[[CEMBED]], %[[M_EMBED]], %[[V_EMBED]], %[[STEP]], %[[LR]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 1.000000e-01 : tensor<64x32xf32>
// CHECK: %[[P_NORM:.*]], %[[NM_NORM:.*]], %[[NV_NORM:.*]] = tetra.adamw %[[NORM]], %[[CNORM]], %[[M_NORM]], %[[V_NORM]], %[[STEP]], %[[LR]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 0.000000e+00 : tensor<32xf32>
// CHECK: %[[P_W:.*]], %[[NM_W:.*]], %[[NV_W:.*]] = tetra.adamw %[[W]], %[[CW]], %[[M_W]], %[[V_W]], %[[STEP]], %[[LR]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 1.000000e-01 : tensor<64x32xf32>
// CHECK: %[[P_UNUSED:.*]], %[[NM_UNUSED:.*]], %[[NV_UNUSED:.*]] = tetra.adamw %[[UNUSED]], %[[CUNUSED]], %[[M_UNUSED]], %[[V_UNUSED]], %[[STEP]], %[[LR]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 0.000000e+00 : tensor<32xf32>
// CHECK: return %[[LOSS]], %[[GNORM]], %[[P_EMBED]], %[[P_NORM]], %[[P_W]], %[[P_UNUSED]], %[[NM_EMBED]], %[[NM_NORM]], %[[NM_W]], %[[NM_UNUSED]], %[[NV_EMBED]], %[[NV_NORM]], %[[NV_W]], %[[NV_UNUSED]] :

// Options: no clipping, and the given AdamW settings (decay still only on
// the matrices).
// OPTIONS-LABEL: func.func @train_step(
// OPTIONS-SAME: tetra.optimizer = {beta1 = 7.500000e-01 : f64, beta2 = 8.750000e-01 : f64, clip = 0.000000e+00 : f64, eps = 9.9999999999999995E-7 : f64, weight_decay = 5.000000e-02 : f64}
// OPTIONS: %[[GNORM:.*]] = tetra.global_norm
// OPTIONS-NOT: tetra.clip_by_norm
// OPTIONS: tetra.adamw {{.*}} beta1 7.500000e-01 beta2 8.750000e-01 eps 9.9999999999999995E-7 weight_decay 5.000000e-02 : tensor<64x32xf32>
// OPTIONS: tetra.adamw {{.*}} weight_decay 0.000000e+00 : tensor<32xf32>
// OPTIONS: tetra.adamw {{.*}} weight_decay 5.000000e-02 : tensor<64x32xf32>
// OPTIONS: tetra.adamw {{.*}} weight_decay 0.000000e+00 : tensor<32xf32>
// OPTIONS: return %{{.*}}, %[[GNORM]],

// Each GEMM is named after its linear and role, around the linear's source
// location; the optimizer ops after their parameter.
// LOC-LABEL: func.func @train_step(
// LOC: tetra.matmul {{.*}} role fprop {{.*}} loc("proj.fprop"("tiny.tetra":12:7))
// LOC: tetra.matmul {{.*}} role dgrad {{.*}} loc("proj.dgrad"("tiny.tetra":12:7))
// LOC: tetra.matmul {{.*}} role wgrad {{.*}} loc("proj.wgrad"("tiny.tetra":12:7))
// LOC: tetra.global_norm {{.*}} loc("grad_norm"(
// LOC: tetra.adamw {{.*}} loc("embed.adamw"(

// -----

// Every other gradient rule, over unbound (dynamic) batch and sequence:
// rope, grouped-query attention, silu, mul, sub, scale; x feeds three
// linears and the sub.
#f32 = #tetra.policy<fprop = f32, dgrad = f32, wgrad = f32>

func.func @loss(%embed: tensor<64x32xf32> {tetra.param = "embed"}, %wq: tensor<32x32xf32> {tetra.param = "wq"},
                %wk: tensor<16x32xf32> {tetra.param = "wk"}, %wv: tensor<16x32xf32> {tetra.param = "wv"},
                %head: tensor<64x32xf32> {tetra.param = "head"},
                %tokens: tensor<?x?xi32> {tetra.input = "tokens"}, %targets: tensor<?x?xi32> {tetra.input = "targets"}) -> tensor<f32> {
  %x = tetra.embedding %embed, %tokens : tensor<64x32xf32>, tensor<?x?xi32> -> tensor<?x?x32xf32>
  %q0 = tetra.linear %x, %wq policy #f32 name "wq" : tensor<?x?x32xf32>, tensor<32x32xf32> -> tensor<?x?x32xf32>
  %q = tetra.rope %q0 head_dim 8 theta 1.0e+04 : tensor<?x?x32xf32>
  %k0 = tetra.linear %x, %wk policy #f32 name "wk" : tensor<?x?x32xf32>, tensor<16x32xf32> -> tensor<?x?x16xf32>
  %k = tetra.rope %k0 head_dim 8 theta 1.0e+04 : tensor<?x?x16xf32>
  %v = tetra.linear %x, %wv policy #f32 name "wv" : tensor<?x?x32xf32>, tensor<16x32xf32> -> tensor<?x?x16xf32>
  %a = tetra.attention %q, %k, %v heads 4 kv_heads 2 : tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>
  %s = tetra.silu %a : tensor<?x?x32xf32>
  %m = tetra.mul %s, %a : tensor<?x?x32xf32>
  %d = tetra.sub %m, %x : tensor<?x?x32xf32>
  %c = tetra.scale %d by 5.000000e-01 : tensor<?x?x32xf32>
  %logits = tetra.linear %c, %head policy #f32 name "head" : tensor<?x?x32xf32>, tensor<64x32xf32> -> tensor<?x?x64xf32>
  %loss = tetra.cross_entropy %logits, %targets : tensor<?x?x64xf32>, tensor<?x?xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[EMBED:[^:]*]]: tensor<64x32xf32> {tetra.param = "embed"}, %[[WQ:[^:]*]]: tensor<32x32xf32> {tetra.param = "wq"}, %[[WK:[^:]*]]: tensor<16x32xf32> {tetra.param = "wk"}, %[[WV:[^:]*]]: tensor<16x32xf32> {tetra.param = "wv"}, %[[HEAD:[^:]*]]: tensor<64x32xf32> {tetra.param = "head"},
// CHECK: %[[X:.*]] = tetra.embedding
// X is collapsed once for its three readers; the results take the
// dynamic batch and sequence from X.
// CHECK: %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<?x?x32xf32> into tensor<?x32xf32>
// CHECK: %[[Q2:.*]] = tetra.matmul %[[X2]], %[[WQ]] transpose_rhs policy #policy role fprop : tensor<?x32xf32>, tensor<32x32xf32> -> tensor<?x32xf32>
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[B:.*]] = tensor.dim %[[X]], %[[C0]]
// CHECK-DAG: %[[T:.*]] = tensor.dim %[[X]], %[[C1]]
// CHECK: %[[Q0:.*]] = tensor.expand_shape %[[Q2]] {{\[\[}}0, 1], [2]] output_shape [%[[B]], %[[T]], 32] : tensor<?x32xf32> into tensor<?x?x32xf32>
// CHECK: %[[Q:.*]] = tetra.rope %[[Q0]]
// CHECK: tetra.matmul %[[X2]], %[[WK]] transpose_rhs policy #policy role fprop
// CHECK: %[[K:.*]] = tetra.rope
// CHECK: tetra.matmul %[[X2]], %[[WV]] transpose_rhs policy #policy role fprop
// CHECK: %[[V:.*]] = tensor.expand_shape %{{.*}} output_shape [%[[B]], %[[T]], 16]
// CHECK: %[[A:.*]] = tetra.attention %[[Q]], %[[K]], %[[V]] heads 4 kv_heads 2
// CHECK: %[[S:.*]] = tetra.silu %[[A]]
// CHECK: %[[M:.*]] = tetra.mul %[[S]], %[[A]]
// CHECK: %[[D:.*]] = tetra.sub %[[M]], %[[X]]
// CHECK: %[[C:.*]] = tetra.scale %[[D]] by 5.000000e-01
// CHECK: %[[DLOGITS:.*]] = tetra.cross_entropy_grad
// CHECK: %[[DC:.*]] = tensor.expand_shape
// CHECK: %[[DHEAD:.*]] = tetra.matmul {{.*}} transpose_lhs policy #policy role wgrad : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<64x32xf32>
// d(0.5 d) = 0.5 dc; d(m - x) = (dd, -dd); d(s a) = (dm a, dm s).
// CHECK: %[[DD:.*]] = tetra.scale %[[DC]] by 5.000000e-01
// CHECK: %[[DX_SUB:.*]] = tetra.scale %[[DD]] by -1.000000e+00
// CHECK: %[[DS:.*]] = tetra.mul %[[DD]], %[[A]]
// CHECK: %[[DA_MUL:.*]] = tetra.mul %[[DD]], %[[S]]
// CHECK: %[[DA_SILU:.*]] = tetra.silu_grad %[[A]], %[[DS]]
// CHECK: %[[DA:.*]] = tetra.add %[[DA_MUL]], %[[DA_SILU]]
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = tetra.attention_grad %[[Q]], %[[K]], %[[V]], %[[DA]] heads 4 kv_heads 2 : tensor<?x?x32xf32>, tensor<?x?x16xf32>
// CHECK: %[[DV2:.*]] = tensor.collapse_shape %[[DV]]
// CHECK: tetra.matmul %[[DV2]], %[[WV]] policy #policy role dgrad : tensor<?x16xf32>, tensor<16x32xf32> -> tensor<?x32xf32>
// CHECK: %[[DX_V:.*]] = tensor.expand_shape %{{.*}} output_shape [%[[B]], %[[T]], 32]
// CHECK: %[[DWV:.*]] = tetra.matmul %[[DV2]], %[[X2]] transpose_lhs policy #policy role wgrad : tensor<?x16xf32>, tensor<?x32xf32> -> tensor<16x32xf32>
// CHECK: %[[ACC1:.*]] = tetra.add %[[DX_SUB]], %[[DX_V]]
// CHECK: %[[DK0:.*]] = tetra.rope_grad %[[DK]] head_dim 8 theta 1.000000e+04 : tensor<?x?x16xf32>
// CHECK: tensor.collapse_shape %[[DK0]]
// CHECK: %[[DWK:.*]] = tetra.matmul {{.*}} role wgrad
// CHECK: %[[ACC2:.*]] = tetra.add %[[ACC1]],
// CHECK: %[[DQ0:.*]] = tetra.rope_grad %[[DQ]] head_dim 8 theta 1.000000e+04 : tensor<?x?x32xf32>
// CHECK: %[[DWQ:.*]] = tetra.matmul {{.*}} role wgrad
// CHECK: %[[ACC3:.*]] = tetra.add %[[ACC2]],
// CHECK: %[[DEMBED:.*]] = tetra.embedding_grad %{{.*}}, %[[ACC3]] : tensor<?x?xi32>, tensor<?x?x32xf32> -> tensor<64x32xf32>
// CHECK: tetra.global_norm %[[DEMBED]], %[[DWQ]], %[[DWK]], %[[DWV]], %[[DHEAD]] :

// -----

// A 2-D linear on an input: no reshapes, no Dgrad (the input takes no
// gradient); Fprop rounds stochastically and Wgrad redraws its Hadamard
// signs every step, so both draw from (seed, step).
#random = #tetra.policy<fprop = {lhs = mxfp4 round stochastic, rhs = mxfp4}, dgrad = bf16, wgrad = mxfp4 rotate random_hadamard<32, per_step, 3>>

func.func @loss(%w: tensor<8x32xf32> {tetra.param = "w"}, %features: tensor<32x32xf32> {tetra.input = "features"},
                %targets: tensor<32xi32> {tetra.input = "targets"}) -> tensor<f32> {
  %y = tetra.linear %features, %w policy #random name "w" : tensor<32x32xf32>, tensor<8x32xf32> -> tensor<32x8xf32>
  %loss = tetra.cross_entropy %y, %targets : tensor<32x8xf32>, tensor<32xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x32xf32> {tetra.param = "w"}, %{{.*}}: tensor<8x32xf32> {tetra.adam_m = "w"}, %{{.*}}: tensor<8x32xf32> {tetra.adam_v = "w"}, %[[FEATURES:[^:]*]]: tensor<32x32xf32> {tetra.input = "features"}, %{{.*}}: tensor<32xi32> {tetra.input = "targets"}, %[[STEP:[^:]*]]: i64 {tetra.step}, %{{.*}}: f32 {tetra.lr}, %[[SEED:[^:]*]]: i64 {tetra.seed})
// CHECK-NOT: tensor.collapse_shape
// CHECK: %[[Y:.*]] = tetra.matmul %[[FEATURES]], %[[W]] transpose_rhs random(%[[SEED]], %[[STEP]]) policy #policy role fprop : tensor<32x32xf32>, tensor<8x32xf32> -> tensor<32x8xf32>
// CHECK: %[[DY:.*]] = tetra.cross_entropy_grad %[[Y]]
// CHECK-NOT: role dgrad
// CHECK: tetra.matmul %[[DY]], %[[FEATURES]] transpose_lhs random(%[[SEED]], %[[STEP]]) policy #policy role wgrad : tensor<32x8xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
// CHECK-NOT: role dgrad
// CHECK: return

// -----

// expected-error @below {{no func.func @loss to differentiate: the training step is derived from the model's loss}}
module {
  func.func @forward() {
    return
  }
}

// -----

// expected-error @below {{'func.func' op @loss must return the loss as one tensor<f32>, got 'tensor<4xf32>'}}
func.func @loss(%w: tensor<4xf32> {tetra.param = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// expected-error @below {{'func.func' op @loss has no body to differentiate}}
func.func private @loss(%w: tensor<4xf32> {tetra.param = "w"}) -> tensor<f32>

// -----

// expected-error @below {{parameter 'w' must be an f32 tensor of static shape (its optimizer state has its shape), got 'tensor<?x32xf32>'}}
func.func @loss(%w: tensor<?x32xf32> {tetra.param = "w"}, %targets: tensor<4xi32> {tetra.input = "targets"}) -> tensor<f32> {
  %loss = tetra.cross_entropy %w, %targets : tensor<?x32xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @loss(%w: tensor<4x32xf32> {tetra.param = "w"}, %targets: tensor<4xi32> {tetra.input = "targets"}) -> tensor<f32> {
  // expected-error @below {{'arith.mulf' op has no gradient rule: the training step differentiates tetra.linear and ops that implement tetra::DifferentiableOpInterface}}
  %square = arith.mulf %w, %w : tensor<4x32xf32>
  %loss = tetra.cross_entropy %square, %targets : tensor<4x32xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @loss(%w: tensor<4x32xf32> {tetra.param = "w"}, %targets: tensor<4xi32> {tetra.input = "targets"}) -> tensor<f32> {
  %loss = tetra.cross_entropy %w, %targets : tensor<4x32xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @below {{the module already has a @train_step}}
func.func @train_step() {
  return
}
