// Every op verifier error, with its message and location.
// RUN: tetra-opt %s --split-input-file --verify-diagnostics

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate hadamard<32>>

func.func @f(%x: tensor<64x128xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'tetra.matmul' op shapes do not multiply: op(lhs) is 64x128 and op(rhs) is 64x32 (transposes applied)}}
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<64x128xf32>, tensor<32x64xf32> -> tensor<64x32xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<64x128xf32>, %w: tensor<32x128xf32>) {
  // expected-error @+1 {{'tetra.matmul' op result is 64x64 but op(lhs) · op(rhs) is 64x32}}
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<64x128xf32>, tensor<32x128xf32> -> tensor<64x64xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<64x48xf32>, %w: tensor<32x48xf32>) {
  // expected-error @+1 {{'tetra.matmul' op reduction (fprop lhs) size 48 is not divisible by the block size 32}}
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<64x48xf32>, tensor<32x48xf32> -> tensor<64x32xf32>
  return
}

// -----

// Wgrad reduces over tokens: 40 tokens do not fill blocks of 32, although the
// feature sizes would.
#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%dy: tensor<40x32xf32>, %x: tensor<40x64xf32>) {
  // expected-error @+1 {{'tetra.matmul' op reduction (wgrad lhs) size 40 is not divisible by the block size 32}}
  %dw = tetra.matmul %dy, %x transpose_lhs policy #policy role wgrad : tensor<40x32xf32>, tensor<40x64xf32> -> tensor<32x64xf32>
  return
}

// -----

// Only the rhs is block-quantized: its block is what fails.
#policy = #tetra.policy<fprop = {lhs = bf16, rhs = nvfp4}, dgrad = bf16, wgrad = bf16>

func.func @f(%x: tensor<8x40xf32>, %w: tensor<16x40xf32>) {
  // expected-error @+1 {{'tetra.matmul' op reduction (fprop rhs) size 40 is not divisible by the block size 16}}
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<8x40xf32>, tensor<16x40xf32> -> tensor<8x16xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = bf16 rotate hadamard<128>, dgrad = bf16, wgrad = bf16>

func.func @f(%x: tensor<8x64xf32>, %w: tensor<16x64xf32>) {
  // expected-error @+1 {{'tetra.matmul' op rotation block 128 is larger than the reduction (fprop lhs) size 64}}
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<8x64xf32>, tensor<16x64xf32> -> tensor<8x16xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = bf16 rotate hadamard<64>, dgrad = bf16, wgrad = bf16>

func.func @f(%x: tensor<8x96xf32>, %w: tensor<16x96xf32>) {
  // expected-error @+1 {{'tetra.matmul' op rotation block 64 does not divide the reduction (fprop lhs) size 96}}
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<8x96xf32>, tensor<16x96xf32> -> tensor<8x16xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 round stochastic>

func.func @f(%dy: tensor<64x32xf32>, %x: tensor<64x128xf32>) {
  // expected-error @+1 {{'tetra.matmul' op the wgrad policy rounds stochastically or redraws Hadamard signs per step and needs a random source: add random(%seed, %step)}}
  %dw = tetra.matmul %dy, %x transpose_lhs policy #policy role wgrad : tensor<64x32xf32>, tensor<64x128xf32> -> tensor<32x128xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 rotate random_hadamard<32, per_step, 1>>

func.func @f(%dy: tensor<64x32xf32>, %x: tensor<64x128xf32>) {
  // expected-error @+1 {{'tetra.matmul' op the wgrad policy rounds stochastically or redraws Hadamard signs per step and needs a random source: add random(%seed, %step)}}
  %dw = tetra.matmul %dy, %x transpose_lhs policy #policy role wgrad : tensor<64x32xf32>, tensor<64x128xf32> -> tensor<32x128xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4 round stochastic>

func.func @f(%dy: tensor<64x32xf32>, %x: tensor<64x128xf32>, %seed: i64) {
  // expected-error @+1 {{'tetra.matmul' op needs both a seed and a step, or neither}}
  %dw = "tetra.matmul"(%dy, %x, %seed) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>, policy = #policy, role = 2 : i32, transpose_lhs}> : (tensor<64x32xf32>, tensor<64x128xf32>, i64) -> tensor<32x128xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<64x128xf32>, %w: tensor<32x128xf32>) {
  // expected-error @+1 {{invalid properties}}
  %y = "tetra.matmul"(%x, %w) <{operandSegmentSizes = array<i32: 1, 1, 0, 0>, policy = #policy, role = 5 : i32, transpose_rhs}> : (tensor<64x128xf32>, tensor<32x128xf32>) -> tensor<64x32xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<2x64x128xf32>, %w: tensor<32x128xf32>) {
  // expected-error @+1 {{'tetra.matmul' op operand #0 must be 2D tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %y = tetra.matmul %x, %w transpose_rhs policy #policy role fprop : tensor<2x64x128xf32>, tensor<32x128xf32> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op needs a block-scaled format (e2m1, e4m3 or e5m2), got bf16}}
  %c, %s = tetra.quantize %x as #tetra.quant<bf16> along 1 : tensor<8x64xf32> -> tensor<8x64xf8E4M3FN>, tensor<8x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op quantization must not rotate: rotate with tetra.rotate first}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4 rotate hadamard<32>> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op axis 2 is out of range for a tensor of rank 2}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4> along 2 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<8x48xf32>) {
  // expected-error @+1 {{'tetra.quantize' op axis size 48 is not divisible by the block size 32}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4> along 1 : tensor<8x48xf32> -> tensor<8x48xf4E2M1FN>, tensor<8x1xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op codes are 8x32 but the values are 8x64}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4> along 1 : tensor<8x64xf32> -> tensor<8x32xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op codes must be 'f4E2M1FN' for #tetra.quant<mxfp4>, got 'f8E4M3FN'}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf8E4M3FN>, tensor<8x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op scales must be 8x2 (one per block of 32 along axis 1), got 1x64}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<1x64xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op scales must be 'f8E8M0FNU', got 'f8E4M3FN'}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E4M3FN>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op NVFP4 (e4m3 block scales) needs a per-tensor fp32 scale}}
  %c, %s = tetra.quantize %x as #tetra.quant<nvfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op only NVFP4 (e4m3 block scales) has a per-tensor scale}}
  %c, %s, %t = tetra.quantize %x as #tetra.quant<mxfp4> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>, tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.quantize' op rounds stochastically and needs a random source: add random(%seed, %step)}}
  %c, %s = tetra.quantize %x as #tetra.quant<mxfp4 round stochastic> along 1 : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%c: tensor<8x64xf4E2M1FN>, %s: tensor<8x2xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.dequantize' op codes are 8x64 but the values are 8x32}}
  %x = tetra.dequantize %c, %s as #tetra.quant<mxfp4> along 1 : tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU> -> tensor<8x32xf32>
  return
}

// -----

func.func @f(%c: tensor<8x64xf4E2M1FN>, %s: tensor<8x2xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.dequantize' op codes must be 'f8E5M2' for #tetra.quant<mxfp8_e5m2>, got 'f4E2M1FN'}}
  %x = tetra.dequantize %c, %s as #tetra.quant<mxfp8_e5m2> along 1 : tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU> -> tensor<8x64xf32>
  return
}

// -----

func.func @f(%c: tensor<8x64xf4E2M1FN>, %s: tensor<8x4xf8E4M3FN>) {
  // expected-error @+1 {{'tetra.dequantize' op NVFP4 (e4m3 block scales) needs a per-tensor fp32 scale}}
  %x = tetra.dequantize %c, %s as #tetra.quant<nvfp4> along 1 : tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN> -> tensor<8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.rotate' op axis -1 is out of range for a tensor of rank 2}}
  %r = tetra.rotate %x by #tetra.rotation<hadamard<32>> along -1 : tensor<8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.rotate' op rotation block 32 is larger than the axis size 8}}
  %r = tetra.rotate %x by #tetra.rotation<hadamard<32>> along 0 : tensor<8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<8x48xf32>) {
  // expected-error @+1 {{'tetra.rotate' op rotation block 32 does not divide the axis size 48}}
  %r = tetra.rotate %x by #tetra.rotation<hadamard<32>> along 1 : tensor<8x48xf32>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{'tetra.rotate' op redraws its signs every step and needs the step: add step(%step)}}
  %r = tetra.rotate %x by #tetra.rotation<random_hadamard<32, per_step, 3>> along 1 : tensor<8x64xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<2x64x128xf32>, %w: tensor<64x96xf32>) {
  // expected-error @+1 {{'tetra.linear' op input is 2x64x128 but weight is 64x96: the input's last dimension must equal the weight's second}}
  %y = tetra.linear %x, %w policy #policy name "w" : tensor<2x64x128xf32>, tensor<64x96xf32> -> tensor<2x64x64xf32>
  return
}

// -----

#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<2x64x128xf32>, %w: tensor<64x128xf32>) {
  // expected-error @+1 {{'tetra.linear' op result is 2x64x128 but x·wᵀ is 2x64x64}}
  %y = tetra.linear %x, %w policy #policy name "w" : tensor<2x64x128xf32>, tensor<64x128xf32> -> tensor<2x64x128xf32>
  return
}

// -----

// Dgrad reduces over the 48 output features.
#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<2x64x128xf32>, %w: tensor<48x128xf32>) {
  // expected-error @+1 {{'tetra.linear' op reduction (dgrad lhs) size 48 is not divisible by the block size 32}}
  %y = tetra.linear %x, %w policy #policy name "w" : tensor<2x64x128xf32>, tensor<48x128xf32> -> tensor<2x64x48xf32>
  return
}

// -----

// Wgrad reduces over the 3 x 8 = 24 tokens.
#policy = #tetra.policy<fprop = mxfp4, dgrad = mxfp4, wgrad = mxfp4>

func.func @f(%x: tensor<3x8x128xf32>, %w: tensor<64x128xf32>) {
  // expected-error @+1 {{'tetra.linear' op reduction (wgrad lhs) size 24 is not divisible by the block size 32}}
  %y = tetra.linear %x, %w policy #policy name "w" : tensor<3x8x128xf32>, tensor<64x128xf32> -> tensor<3x8x64xf32>
  return
}

// -----

func.func @f(%t: tensor<256x128xf32>, %tokens: tensor<2x64xi32>) {
  // expected-error @+1 {{'tetra.embedding' op result is 2x64x64 but the tokens' shape followed by the table's width is 2x64x128}}
  %h = tetra.embedding %t, %tokens : tensor<256x128xf32>, tensor<2x64xi32> -> tensor<2x64x64xf32>
  return
}

// -----

func.func @f(%t: tensor<256x128xf32>, %tokens: tensor<2x64xi32>) {
  // expected-error @+1 {{'tetra.embedding' op result and table must have the same element type}}
  %h = tetra.embedding %t, %tokens : tensor<256x128xf32>, tensor<2x64xi32> -> tensor<2x64x128xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x64x128xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tetra.rmsnorm' op weight is 64 but must be [d] for an input of 2x64x128, d its last dimension}}
  %y = tetra.rmsnorm %x, %w eps 1.0e-5 : tensor<2x64x128xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64x128xf32>, %w: tensor<128xf32>) {
  // expected-error @+1 {{'tetra.rmsnorm' op eps must be positive}}
  %y = tetra.rmsnorm %x, %w eps 0.0 : tensor<2x64x128xf32>, tensor<128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64x128xf32>) {
  // expected-error @+1 {{'tetra.rope' op head_dim must be positive and even, got 31}}
  %y = tetra.rope %x head_dim 31 theta 10000.0 : tensor<2x64x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64x128xf32>) {
  // expected-error @+1 {{'tetra.rope' op features 128 are not a whole number of heads of 48}}
  %y = tetra.rope %x head_dim 48 theta 10000.0 : tensor<2x64x128xf32>
  return
}

// -----

func.func @f(%x: tensor<64x128xf32>) {
  // expected-error @+1 {{'tetra.rope' op input must be [batch, seq, heads · head_dim]}}
  %y = tetra.rope %x head_dim 32 theta 10000.0 : tensor<64x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64x128xf32>) {
  // expected-error @+1 {{'tetra.rope' op theta must be positive}}
  %y = tetra.rope %x head_dim 32 theta -1.0 : tensor<2x64x128xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x128xf32>, %k: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'tetra.attention' op heads (4) must be a positive multiple of kv_heads (3)}}
  %a = tetra.attention %q, %k, %k heads 4 kv_heads 3 : tensor<2x64x128xf32>, tensor<2x64x64xf32>, tensor<2x64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x128xf32>, %k: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'tetra.attention' op key features 64 must be kv_heads (1) × head_dim (32)}}
  %a = tetra.attention %q, %k, %k heads 4 kv_heads 1 : tensor<2x64x128xf32>, tensor<2x64x64xf32>, tensor<2x64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x128xf32>, %k: tensor<2x32x64xf32>) {
  // expected-error @+1 {{'tetra.attention' op query is 2x64x128 but key is 2x32x64: batch and sequence must match}}
  %a = tetra.attention %q, %k, %k heads 4 kv_heads 2 : tensor<2x64x128xf32>, tensor<2x32x64xf32>, tensor<2x32x64xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x128xf32>, %k: tensor<2x64x64xf32>, %v: tensor<2x64x64xbf16>) {
  // expected-error @+1 {{'tetra.attention' op key and value must have the same type}}
  %a = tetra.attention %q, %k, %v heads 4 kv_heads 2 : tensor<2x64x128xf32>, tensor<2x64x64xf32>, tensor<2x64x64xbf16>
  return
}

// -----

func.func @f(%q: tensor<64x128xf32>) {
  // expected-error @+1 {{'tetra.attention' op query, key and value must be [batch, seq, features]}}
  %a = tetra.attention %q, %q, %q heads 4 kv_heads 2 : tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>
  return
}

// -----

func.func @f(%q: tensor<2x64x100xf32>, %k: tensor<2x64x50xf32>) {
  // expected-error @+1 {{'tetra.attention' op query features 100 are not divisible by heads 8}}
  %a = tetra.attention %q, %k, %k heads 8 kv_heads 4 : tensor<2x64x100xf32>, tensor<2x64x50xf32>, tensor<2x64x50xf32>
  return
}

// -----

func.func @f(%l: tensor<2x64x256xf32>, %t: tensor<2x32xi32>) {
  // expected-error @+1 {{'tetra.cross_entropy' op targets are 2x32 but logits are 2x64x256: targets must be the logits' shape without the vocabulary}}
  %loss = tetra.cross_entropy %l, %t : tensor<2x64x256xf32>, tensor<2x32xi32> -> tensor<f32>
  return
}

// -----

#policy = #tetra.policy<fprop = bf16, dgrad = bf16, wgrad = bf16>

func.func @f(%x: tensor<f32>, %w: tensor<64x128xf32>) {
  // expected-error @+1 {{'tetra.linear' op input must have at least one dimension}}
  %y = tetra.linear %x, %w policy #policy name "w" : tensor<f32>, tensor<64x128xf32> -> tensor<64xf32>
  return
}
