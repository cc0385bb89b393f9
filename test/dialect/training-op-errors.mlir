// Every verifier error of the training ops (TetraTrainingOps.td), with its
// message and location.
// RUN: tetra-opt %s --split-input-file --verify-diagnostics

func.func @f(%tokens: tensor<2x64xi32>, %dy: tensor<2x32x64xf32>) {
  // expected-error @+1 {{'tetra.embedding_grad' op gradient is 2x32x64 but the tokens' shape followed by the table's width is 2x64x64}}
  %d = tetra.embedding_grad %tokens, %dy : tensor<2x64xi32>, tensor<2x32x64xf32> -> tensor<256x64xf32>
  return
}

// -----

func.func @f(%tokens: tensor<2x64xi32>, %dy: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'tetra.embedding_grad' op gradient is 2x64x64 but the tokens' shape followed by the table's width is 2x64x32}}
  %d = tetra.embedding_grad %tokens, %dy : tensor<2x64xi32>, tensor<2x64x64xf32> -> tensor<256x32xf32>
  return
}

// -----

func.func @f(%tokens: tensor<2x64xi32>, %dy: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'tetra.embedding_grad' op gradient and table gradient must have the same element type}}
  %d = tetra.embedding_grad %tokens, %dy : tensor<2x64xi32>, tensor<2x64x64xf32> -> tensor<256x64xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x64x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'tetra.rmsnorm_grad' op weight is 32 but must be [d] for an input of 2x64x64, d its last dimension}}
  %dx, %dw = tetra.rmsnorm_grad %x, %w, %x eps 1.0e-05 : tensor<2x64x64xf32>, tensor<32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tetra.rmsnorm_grad' op eps must be positive}}
  %dx, %dw = tetra.rmsnorm_grad %x, %w, %x eps 0.0 : tensor<2x64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64x64xf32>, %w: tensor<64xf32>, %dy: tensor<2x64x32xf32>) {
  // expected-error @+1 {{'tetra.rmsnorm_grad' op failed to verify that all of {input, grad, input_grad} have same type}}
  %dx, %dw = "tetra.rmsnorm_grad"(%x, %w, %dy) {eps = 1.0e-05 : f64} : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<2x64x32xf32>) -> (tensor<2x64x64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @f(%dy: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'tetra.rope_grad' op head_dim must be positive and even, got 15}}
  %dx = tetra.rope_grad %dy head_dim 15 theta 1.0e+04 : tensor<2x64x64xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x64x60xf32>) {
  // expected-error @+1 {{'tetra.rope_grad' op features 60 are not a whole number of heads of 16}}
  %dx = tetra.rope_grad %dy head_dim 16 theta 1.0e+04 : tensor<2x64x60xf32>
  return
}

// -----

func.func @f(%dy: tensor<128x64xf32>) {
  // expected-error @+1 {{'tetra.rope_grad' op gradient must be [batch, seq, heads · head_dim]}}
  %dx = tetra.rope_grad %dy head_dim 16 theta 1.0e+04 : tensor<128x64xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'tetra.rope_grad' op theta must be positive}}
  %dx = tetra.rope_grad %dy head_dim 16 theta -1.0 : tensor<2x64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x64xf32>, %k: tensor<2x32x32xf32>) {
  // expected-error @+1 {{'tetra.attention_grad' op query is 2x64x64 but key is 2x32x32: batch and sequence must match}}
  %dq, %dk, %dv = tetra.attention_grad %q, %k, %k, %q heads 4 kv_heads 2 : tensor<2x64x64xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x64xf32>, %k: tensor<2x64x48xf32>) {
  // expected-error @+1 {{'tetra.attention_grad' op heads (4) must be a positive multiple of kv_heads (3)}}
  %dq, %dk, %dv = tetra.attention_grad %q, %k, %k, %q heads 4 kv_heads 3 : tensor<2x64x64xf32>, tensor<2x64x48xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x64xf32>, %k: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'tetra.attention_grad' op key features 64 must be kv_heads (2) × head_dim (16)}}
  %dq, %dk, %dv = tetra.attention_grad %q, %k, %k, %q heads 4 kv_heads 2 : tensor<2x64x64xf32>, tensor<2x64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x66xf32>, %k: tensor<2x64x32xf32>) {
  // expected-error @+1 {{'tetra.attention_grad' op query features 66 are not divisible by heads 4}}
  %dq, %dk, %dv = tetra.attention_grad %q, %k, %k, %q heads 4 kv_heads 2 : tensor<2x64x66xf32>, tensor<2x64x32xf32>
  return
}

// -----

func.func @f(%logits: tensor<2x64x256xf32>, %targets: tensor<2x32xi32>, %dloss: tensor<f32>) {
  // expected-error @+1 {{'tetra.cross_entropy_grad' op targets are 2x32 but logits are 2x64x256: targets must be the logits' shape without the vocabulary}}
  %d = tetra.cross_entropy_grad %logits, %targets, %dloss : tensor<2x64x256xf32>, tensor<2x32xi32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'tetra.global_norm' op needs at least one tensor}}
  %norm = "tetra.global_norm"() : () -> tensor<f32>
  return
}

// -----

func.func @f(%g: tensor<64x64xf32>, %norm: tensor<f32>) {
  // expected-error @+1 {{'tetra.clip_by_norm' op max_norm must be positive}}
  %c = tetra.clip_by_norm %g, %norm max_norm 0.0 : tensor<64x64xf32>
  return
}

// -----

func.func @f(%p: tensor<64x64xf32>, %step: i64, %lr: f32) {
  // expected-error @+1 {{'tetra.adamw' op beta1 and beta2 must be in [0, 1)}}
  %p1, %m1, %v1 = tetra.adamw %p, %p, %p, %p, %step, %lr beta1 1.0 beta2 0.95 eps 1.0e-08 weight_decay 0.1 : tensor<64x64xf32>
  return
}

// -----

func.func @f(%p: tensor<64x64xf32>, %step: i64, %lr: f32) {
  // expected-error @+1 {{'tetra.adamw' op eps must be positive}}
  %p1, %m1, %v1 = tetra.adamw %p, %p, %p, %p, %step, %lr beta1 0.9 beta2 0.95 eps 0.0 weight_decay 0.1 : tensor<64x64xf32>
  return
}

// -----

func.func @f(%p: tensor<64x64xf32>, %step: i64, %lr: f32) {
  // expected-error @+1 {{'tetra.adamw' op weight_decay must not be negative}}
  %p1, %m1, %v1 = tetra.adamw %p, %p, %p, %p, %step, %lr beta1 0.9 beta2 0.95 eps 1.0e-08 weight_decay -0.1 : tensor<64x64xf32>
  return
}

// -----

func.func @f(%p: tensor<64x64xf32>, %m: tensor<64x32xf32>, %step: i64, %lr: f32) {
  // expected-error @+1 {{'tetra.adamw' op failed to verify that all of {param, grad, m, v, new_param, new_m, new_v} have same type}}
  %p1, %m1, %v1 = "tetra.adamw"(%p, %p, %m, %p, %step, %lr) {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x32xf32>, tensor<64x64xf32>, i64, f32) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
  return
}
