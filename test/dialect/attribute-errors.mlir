// Every attribute parse and verify error, with its message and location.
// RUN: tetra-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{unknown quantization 'mxfp3'; expected a preset (mxfp4, mxfp8_e4m3, mxfp8, mxfp8_e5m2, nvfp4, bf16, f32) or an element format (e2m1, e4m3, e5m2, bf16, f32)}}
func.func @f() attributes {q = #tetra.quant<mxfp3>} { return }

// -----

// expected-error @+1 {{an e4m3 block scale (NVFP4) needs a block of 16, got 32}}
func.func @f() attributes {q = #tetra.quant<e2m1 block 32 scale e4m3>} { return }

// -----

// expected-error @+1 {{an e4m3 block scale (NVFP4) needs a block of 16, got 32}}
func.func @f() attributes {b = #tetra.block_scale<32, e4m3>} { return }

// -----

// expected-error @+1 {{scale rule 'ceil' is for e8m0 block scales, not e4m3}}
func.func @f() attributes {b = #tetra.block_scale<16, e4m3, ceil>} { return }

// -----

// expected-error @+1 {{scale rule 'torchao' is for e4m3 block scales, not e8m0}}
func.func @f() attributes {b = #tetra.block_scale<32, e8m0, torchao>} { return }

// -----

// expected-error @+1 {{scale rule 'torchao' is for e4m3 block scales, not e8m0}}
func.func @f() attributes {q = #tetra.quant<mxfp4 rule torchao>} { return }

// -----

// expected-error @+1 {{scale rule 'floor' is for e8m0 block scales, not e4m3}}
func.func @f() attributes {q = #tetra.quant<e2m1 block 16 scale e4m3 floor>} { return }

// -----

// expected-error @+1 {{scale rule 'ceil' is for e8m0 block scales, not e4m3}}
func.func @f() attributes {q = #tetra.quant<nvfp4 rule ceil>} { return }

// -----

// expected-error @+1 {{a scale rule applies only to block scales}}
func.func @f() attributes {q = #tetra.quant<bf16 rule floor>} { return }

// -----

// expected-error @+1 {{an e4m3 block scale (NVFP4) needs e2m1 elements, got e4m3}}
func.func @f() attributes {q = #tetra.quant<e4m3 block 16 scale e4m3>} { return }

// -----

// expected-error @+1 {{block size must be a power of two from 2 to 1024, got 24}}
func.func @f() attributes {q = #tetra.quant<e2m1 block 24 scale e8m0 floor>} { return }

// -----

// expected-error @+1 {{block size must be positive, got 0}}
func.func @f() attributes {b = #tetra.block_scale<0, e8m0>} { return }

// -----

// expected-error @+1 {{unknown scale format 'e5m2'; expected one of: e8m0, e4m3}}
func.func @f() attributes {b = #tetra.block_scale<32, e5m2>} { return }

// -----

// expected-error @+1 {{unknown scale rule 'round'; expected one of: floor, ceil, even, rceil, nearest, torchao}}
func.func @f() attributes {b = #tetra.block_scale<32, e8m0, round>} { return }

// -----

// expected-error @+1 {{element format e2m1 needs a block scale}}
func.func @f() attributes {q = #tetra.quant<e2m1>} { return }

// -----

// expected-error @+1 {{preset 'bf16' fixes its block scaling; write an element format (e2m1, e4m3, e5m2) to choose one}}
func.func @f() attributes {q = #tetra.quant<bf16 block 32 scale e8m0>} { return }

// -----

// expected-error @+1 {{preset 'mxfp4' fixes its block scaling; write an element format (e2m1, e4m3, e5m2) to choose one}}
func.func @f() attributes {q = #tetra.quant<mxfp4 block 64 scale e8m0>} { return }

// -----

// expected-error @+1 {{f32 operands are not rounded; rounding 'stochastic' does not apply}}
func.func @f() attributes {q = #tetra.quant<f32 round stochastic>} { return }

// -----

// expected-error @+1 {{unknown rounding 'nearest'; expected one of: nearest_even, stochastic, nearest_away}}
func.func @f() attributes {q = #tetra.quant<mxfp4 round nearest>} { return }

// -----

// expected-error @+1 {{Hadamard block must be 16, 32, 64 or 128, got 8}}
func.func @f() attributes {r = #tetra.rotation<hadamard<8>>} { return }

// -----

// expected-error @+1 {{Hadamard block must be 16, 32, 64 or 128, got 256}}
func.func @f() attributes {q = #tetra.quant<mxfp4 rotate random_hadamard<256, fixed, 1>>} { return }

// -----

// expected-error @+1 {{unknown rotation 'walsh'; expected one of: none, hadamard, random_hadamard}}
func.func @f() attributes {r = #tetra.rotation<walsh<32>>} { return }

// -----

// expected-error @+1 {{unknown sign schedule 'per_batch'; expected one of: fixed, per_step}}
func.func @f() attributes {r = #tetra.rotation<random_hadamard<32, per_batch, 1>>} { return }

// -----

// expected-error @+1 {{lhs and rhs must be rotated alike, got #tetra.rotation<hadamard<32>> and #tetra.rotation<none>: rotating one operand changes the product}}
func.func @f() attributes {g = #tetra.gemm<{lhs = mxfp4 rotate hadamard<32>, rhs = mxfp4}>} { return }

// -----

// expected-error @+1 {{accumulator must be f32, f16 or bf16, got 'i32'}}
func.func @f() attributes {g = #tetra.gemm<mxfp4 acc i32>} { return }

// -----

// expected-error @+1 {{policy has no 'wgrad' role; every role must be given}}
func.func @f() attributes {p = #tetra.policy<fprop = mxfp4, dgrad = mxfp4>} { return }

// -----

// expected-error @+1 {{role 'fprop' is given twice}}
func.func @f() attributes {p = #tetra.policy<fprop = mxfp4, fprop = bf16, dgrad = mxfp4, wgrad = bf16>} { return }

// -----

// expected-error @+1 {{unknown GEMM role 'backward'; expected one of: fprop, dgrad, wgrad}}
func.func @f() attributes {p = #tetra.policy<fprop = mxfp4, backward = mxfp4>} { return }

// -----

// expected-error @+2 {{expected one of [e2m1, e4m3, e5m2, bf16, f32] for element format, got: fp4}}
// expected-error @+1 {{failed to parse Tetra_ElementFormatAttr parameter 'value'}}
func.func @f() attributes {f = #tetra.format<fp4>} { return }
