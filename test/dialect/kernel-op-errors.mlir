// Every verifier error of tetra.scaled_matmul and tetra.kernel.
// RUN: tetra-opt %s --split-input-file --verify-diagnostics

func.func @f(%xc: tensor<64x128xf4E2M1FN>, %xs: tensor<64x4xf8E8M0FNU>, %wc: tensor<32x128xf4E2M1FN>, %ws: tensor<32x4xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op lhs quantization must not rotate: rotate with tetra.rotate before quantizing}}
  %y = tetra.scaled_matmul (%xc scales %xs as #tetra.quant<mxfp4 rotate hadamard<32>>), (%wc scales %ws as #tetra.quant<mxfp4>) transpose_rhs
      : (tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>, tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%xc: tensor<64x128xf8E4M3FN>, %xs: tensor<64x4xf8E8M0FNU>, %wc: tensor<32x128xf4E2M1FN>, %ws: tensor<32x4xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op lhs codes must be 'f4E2M1FN' for #tetra.quant<mxfp4>, got 'f8E4M3FN'}}
  %y = tetra.scaled_matmul (%xc scales %xs as #tetra.quant<mxfp4>), (%wc scales %ws as #tetra.quant<mxfp4>) transpose_rhs
      : (tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU>, tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%xc: tensor<64x128xf4E2M1FN>, %wc: tensor<32x128xf4E2M1FN>, %ws: tensor<32x4xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op lhs is block-quantized (#tetra.quant<mxfp4>) and needs its scales}}
  %y = tetra.scaled_matmul (%xc as #tetra.quant<mxfp4>), (%wc scales %ws as #tetra.quant<mxfp4>) transpose_rhs
      : (tensor<64x128xf4E2M1FN>, tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
  return
}

// -----

// Wgrad's scales are per block of tokens (dimension 0), not per row.
func.func @f(%dyc: tensor<64x32xf4E2M1FN>, %dys: tensor<64x1xf8E8M0FNU>, %xc: tensor<64x128xf4E2M1FN>, %xs: tensor<2x128xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op lhs scales must be 2x32 (one per block of 32 along dimension 0), got 64x1}}
  %dw = tetra.scaled_matmul (%dyc scales %dys as #tetra.quant<mxfp4>), (%xc scales %xs as #tetra.quant<mxfp4>) transpose_lhs
      : (tensor<64x32xf4E2M1FN>, tensor<64x1xf8E8M0FNU>, tensor<64x128xf4E2M1FN>, tensor<2x128xf8E8M0FNU>) -> tensor<32x128xf32>
  return
}

// -----

func.func @f(%xc: tensor<64x128xf4E2M1FN>, %xs: tensor<64x8xf8E8M0FNU>, %wc: tensor<32x128xf4E2M1FN>, %ws: tensor<32x8xf8E4M3FN>, %wt: tensor<f32>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op lhs scales must be 'f8E4M3FN', got 'f8E8M0FNU'}}
  %y = tetra.scaled_matmul (%xc scales %xs as #tetra.quant<nvfp4>), (%wc scales %ws tensor_scale %wt as #tetra.quant<nvfp4>) transpose_rhs
      : (tensor<64x128xf4E2M1FN>, tensor<64x8xf8E8M0FNU>, tensor<32x128xf4E2M1FN>, tensor<32x8xf8E4M3FN>, tensor<f32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%xc: tensor<64x128xf4E2M1FN>, %xs: tensor<64x8xf8E4M3FN>, %wc: tensor<32x128xf4E2M1FN>, %ws: tensor<32x8xf8E4M3FN>, %wt: tensor<f32>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op lhs is NVFP4 (e4m3 block scales) and needs its per-tensor fp32 scale}}
  %y = tetra.scaled_matmul (%xc scales %xs as #tetra.quant<nvfp4>), (%wc scales %ws tensor_scale %wt as #tetra.quant<nvfp4>) transpose_rhs
      : (tensor<64x128xf4E2M1FN>, tensor<64x8xf8E4M3FN>, tensor<32x128xf4E2M1FN>, tensor<32x8xf8E4M3FN>, tensor<f32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%xc: tensor<64x128xf4E2M1FN>, %xs: tensor<64x4xf8E8M0FNU>, %xt: tensor<f32>, %w: tensor<32x128xf32>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op lhs has a per-tensor scale, which only NVFP4 has}}
  %y = tetra.scaled_matmul (%xc scales %xs tensor_scale %xt as #tetra.quant<mxfp4>), (%w as #tetra.quant<f32>) transpose_rhs
      : (tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>, tensor<f32>, tensor<32x128xf32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x128xf32>, %wc: tensor<32x128xf4E2M1FN>, %ws: tensor<32x4xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op rhs is not block-quantized (#tetra.quant<bf16>) and must hold f32 values, got 'f4E2M1FN'}}
  %y = tetra.scaled_matmul (%x as #tetra.quant<f32>), (%wc scales %ws as #tetra.quant<bf16>) transpose_rhs
      : (tensor<64x128xf32>, tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x128xf32>, %w: tensor<32x128xf32>, %ws: tensor<32x4xf8E8M0FNU>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op rhs is not block-quantized (#tetra.quant<f32>) and takes no scales}}
  %y = tetra.scaled_matmul (%x as #tetra.quant<f32>), (%w scales %ws as #tetra.quant<f32>) transpose_rhs
      : (tensor<64x128xf32>, tensor<32x128xf32>, tensor<32x4xf8E8M0FNU>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%xc: tensor<64x48xf4E2M1FN>, %xs: tensor<64x1xf8E8M0FNU>, %w: tensor<32x48xf32>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op reduction size 48 of lhs is not divisible by its block size 32}}
  %y = tetra.scaled_matmul (%xc scales %xs as #tetra.quant<mxfp4>), (%w as #tetra.quant<f32>) transpose_rhs
      : (tensor<64x48xf4E2M1FN>, tensor<64x1xf8E8M0FNU>, tensor<32x48xf32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x128xf32>, %w: tensor<64x32xf32>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op shapes do not multiply: op(lhs) is 64x128 and op(rhs) is 32x64 (transposes applied)}}
  %y = tetra.scaled_matmul (%x as #tetra.quant<f32>), (%w as #tetra.quant<f32>) transpose_rhs
      : (tensor<64x128xf32>, tensor<64x32xf32>) -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%x: tensor<64x128xf32>, %w: tensor<128x32xf32>) {
  // expected-error @+1 {{'tetra.scaled_matmul' op result is 64x64 but op(lhs) · op(rhs) is 64x32}}
  %y = tetra.scaled_matmul (%x as #tetra.quant<f32>), (%w as #tetra.quant<f32>)
      : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tetra.kernel' op needs a non-empty kernel name}}
  %y = tetra.kernel "" (%a = %x) : (tensor<4xf32>) -> tensor<4xf32> {
    tetra.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  %y = tetra.kernel "k" (%a = %x) : (tensor<4xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{'tetra.yield' op yields 1 values whose types differ from the kernel's results}}
    tetra.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %y = tetra.kernel "k" () : () -> tensor<4xf32> {
    // expected-error @+1 {{'tetra.yield' op using value defined outside the region}}
    tetra.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{kernel has 2 inputs but its type lists 1}}
  %y = tetra.kernel "k" (%a = %x, %b = %x) : (tensor<4xf32>) -> tensor<4xf32> {
    tetra.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tetra.yield' op expects parent op 'tetra.kernel'}}
  tetra.yield %x : tensor<4xf32>
}
