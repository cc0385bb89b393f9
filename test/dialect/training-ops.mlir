// Round trip of every op the training step creates (TetraTrainingOps.td),
// in custom and generic form.
// RUN: tetra-opt %s | tetra-opt | FileCheck %s
// RUN: tetra-opt %s -mlir-print-op-generic | tetra-opt | FileCheck %s

// CHECK-LABEL: func.func @model_op_gradients
func.func @model_op_gradients(%tokens: tensor<2x64xi32>, %x: tensor<2x64x64xf32>, %w: tensor<64xf32>,
                              %q: tensor<2x64x64xf32>, %k: tensor<2x64x32xf32>, %v: tensor<2x64x32xf32>,
                              %h: tensor<2x64x128xf32>, %logits: tensor<2x64x256xf32>,
                              %targets: tensor<2x64xi32>, %dloss: tensor<f32>) {
  // CHECK: tetra.embedding_grad %{{.*}}, %{{.*}} : tensor<2x64xi32>, tensor<2x64x64xf32> -> tensor<256x64xf32>
  %dtable = tetra.embedding_grad %tokens, %x : tensor<2x64xi32>, tensor<2x64x64xf32> -> tensor<256x64xf32>
  // CHECK: %{{.*}}, %{{.*}} = tetra.rmsnorm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x64x64xf32>, tensor<64xf32>
  %dx, %dw = tetra.rmsnorm_grad %x, %w, %x eps 1.0e-05 : tensor<2x64x64xf32>, tensor<64xf32>
  // CHECK: tetra.rope_grad %{{.*}} head_dim 16 theta 1.000000e+04 : tensor<2x64x32xf32>
  %dk_rope = tetra.rope_grad %k head_dim 16 theta 1.0e+04 : tensor<2x64x32xf32>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = tetra.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads 4 kv_heads 2 : tensor<2x64x64xf32>, tensor<2x64x32xf32>
  %dq, %dk, %dv = tetra.attention_grad %q, %k, %v, %q heads 4 kv_heads 2 : tensor<2x64x64xf32>, tensor<2x64x32xf32>
  // CHECK: tetra.silu_grad %{{.*}}, %{{.*}} : tensor<2x64x128xf32>
  %dh = tetra.silu_grad %h, %h : tensor<2x64x128xf32>
  // CHECK: tetra.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x64x256xf32>, tensor<2x64xi32>
  %dlogits = tetra.cross_entropy_grad %logits, %targets, %dloss : tensor<2x64x256xf32>, tensor<2x64xi32>
  return
}

// Unbound batch and sequence stay dynamic.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%tokens: tensor<?x?xi32>, %dy: tensor<?x?x64xf32>, %q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>) {
  // CHECK: tetra.embedding_grad %{{.*}}, %{{.*}} : tensor<?x?xi32>, tensor<?x?x64xf32> -> tensor<256x64xf32>
  %dtable = tetra.embedding_grad %tokens, %dy : tensor<?x?xi32>, tensor<?x?x64xf32> -> tensor<256x64xf32>
  // CHECK: tetra.attention_grad {{.*}} heads 4 kv_heads 2 : tensor<?x?x64xf32>, tensor<?x?x32xf32>
  %dq, %dk, %dv = tetra.attention_grad %q, %k, %k, %dy heads 4 kv_heads 2 : tensor<?x?x64xf32>, tensor<?x?x32xf32>
  return
}

// CHECK-LABEL: func.func @optimizer
func.func @optimizer(%p: tensor<64x64xf32>, %g: tensor<64x64xf32>, %m: tensor<64x64xf32>, %v: tensor<64x64xf32>,
                     %n: tensor<64xf32>, %step: i64, %lr: f32) {
  // CHECK: %[[NORM:.*]] = tetra.global_norm %{{.*}}, %{{.*}} : tensor<64x64xf32>, tensor<64xf32>
  %norm = tetra.global_norm %g, %n : tensor<64x64xf32>, tensor<64xf32>
  // CHECK: %[[CLIPPED:.*]] = tetra.clip_by_norm %{{.*}}, %[[NORM]] max_norm 1.000000e+00 : tensor<64x64xf32>
  %clipped = tetra.clip_by_norm %g, %norm max_norm 1.0 : tensor<64x64xf32>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = tetra.adamw %{{.*}}, %[[CLIPPED]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 1.000000e-01 : tensor<64x64xf32>
  %p1, %m1, %v1 = tetra.adamw %p, %clipped, %m, %v, %step, %lr beta1 0.9 beta2 0.95 eps 1.0e-08 weight_decay 0.1 : tensor<64x64xf32>
  return
}
