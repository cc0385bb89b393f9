// --convert-tetra-to-cpu: each tetra.kernel becomes a function over memrefs
// (the kernel ABI) computing what runtime/numerics computes, in scf, arith,
// math and memref ops; the host side is dropped. Then --tetra-to-llvm takes
// the kernels to the LLVM dialect. The bit-exactness itself is tested by the
// GoogleTest units (test/unit/lowering).
// RUN: tetra-opt %s --split-input-file --convert-tetra-to-cpu --canonicalize --cse --verify-diagnostics | FileCheck %s
// RUN: tetra-opt %s --split-input-file --tetra-to-llvm --verify-diagnostics | FileCheck %s --check-prefix=LLVM

// MXFP4, the `even` rule, stochastic rounding. The ABI: inputs, then one
// memref per result; codes and scales are bytes; i64 scalars by value.
// CHECK-NOT: func.func @host
// CHECK-LABEL: func.func @quantize_mxfp4(
// CHECK-SAME: %[[X:.*]]: memref<8x64xf32>, %[[SEED:.*]]: i64, %[[STEP:.*]]: i64, %[[CODES:.*]]: memref<8x64xi8>, %[[SCALES:.*]]: memref<8x2xi8>) attributes {llvm.emit_c_interface}
// CHECK-DAG: %[[NEAR_EVEN:.*]] = arith.constant 14680064 : i32
// CHECK-DAG: %[[MUL0:.*]] = arith.constant 3528531795 : i64
// CHECK-DAG: %[[MUL1:.*]] = arith.constant 3449720151 : i64
// CHECK-DAG: %[[BUMP0:.*]] = arith.constant -1640531527 : i32
// CHECK-DAG: %[[BUMP1:.*]] = arith.constant -1150833019 : i32
// CHECK-DAG: %[[INF_BITS:.*]] = arith.constant 2139095040 : i32
// CHECK-DAG: %[[FLAT_X:.*]] = memref.collapse_shape %[[X]] {{\[}}[0, 1]] : memref<8x64xf32> into memref<512xf32>
// CHECK-DAG: %[[FLAT_S:.*]] = memref.collapse_shape %[[SCALES]] {{\[}}[0, 1]] : memref<8x2xi8> into memref<16xi8>
// The step keys Philox with its low 32 bits.
// CHECK: %[[STEP32:.*]] = arith.trunci %[[STEP]] : i64 to i32
// CHECK: scf.for
// CHECK: scf.for
// Pass 1 over the block: amax of the finite elements' magnitude bits, and
// whether a NaN or Inf is there.
// CHECK: %[[AMAX:.*]]:2 = scf.for {{.*}} iter_args({{.*}}) -> (i32, i1) {
// CHECK: arith.cmpi ult, %{{.*}}, %[[INF_BITS]] : i32
// CHECK: arith.maxui
// CHECK: scf.yield
// The shared exponent from amax's fields: ctlz normalizes subnormals, the
// rule's carry, the clamp to [-127, 127], the NaN scale 0xFF.
// CHECK: math.ctlz
// CHECK: arith.cmpi uge, %{{.*}}, %[[NEAR_EVEN]] : i32
// CHECK: arith.maxsi %{{.*}}, %c-127_i32
// CHECK: arith.minsi %{{.*}}, %c127_i32
// CHECK: arith.select %[[AMAX]]#1, %c255_i32
// CHECK: memref.store %{{.*}}, %[[FLAT_S]][%{{.*}}] : memref<16xi8>
// Pass 2: Philox4x32-10 on i64 products for each element's random bits...
// CHECK: scf.for
// CHECK: arith.trunci %[[SEED]] : i64 to i32
// CHECK: arith.muli %{{.*}}, %[[MUL0]] : i64
// CHECK: arith.muli %{{.*}}, %[[MUL1]] : i64
// CHECK: arith.addi %{{.*}}, %[[BUMP0]] : i32
// CHECK: arith.addi %{{.*}}, %[[BUMP1]] : i32
// ... then the code from the fp32 bits: stochastic rounding compares the
// random bits with the discarded fraction, unsigned.
// CHECK: math.ctlz
// CHECK: arith.cmpi ult
// CHECK: arith.trunci %{{.*}} : i32 to i8
// CHECK: memref.store
// CHECK: return

// LLVM-LABEL: llvm.func @quantize_mxfp4(
// LLVM: llvm.intr.ctlz
// LLVM: llvm.func @_mlir_ciface_quantize_mxfp4(
// LLVM-NOT: scf.
// LLVM-NOT: memref.
func.func @host(%x: tensor<8x64xf32>, %seed: i64, %step: i64) -> (tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) {
  %c:2 = tetra.kernel "quantize_mxfp4" (%a = %x, %sd = %seed, %st = %step)
      : (tensor<8x64xf32>, i64, i64) -> (tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) {
    %codes, %scales = tetra.quantize %a as #tetra.quant<mxfp4 rule even round stochastic> along 1 random(%sd, %st) {tensor_id = 7 : i64}
        : tensor<8x64xf32> -> tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
    tetra.yield %codes, %scales : tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
  }
  return %c#0, %c#1 : tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>
}

// -----

// A GEMM kernel with dynamic tokens: Hadamard rotation, NVFP4 quantization,
// and the scaled matmul against a plain f32 operand. Intermediates are
// allocated with the sizes read from the descriptors, and freed. The
// kernel yields its scaled matmul alone, so it computes one part of the
// result rows per call: part and parts come last.
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME: %[[X:.*]]: memref<?x32xf32>, %[[W:.*]]: memref<16x32xf32>, %[[Y:.*]]: memref<?x16xf32>, %[[PART:.*]]: i64, %[[PARTS:.*]]: i64)
// CHECK-DAG: %[[C:.*]] = arith.constant 0.176776692 : f32
// CHECK-DAG: %[[SIX:.*]] = arith.constant 6.000000e+00 : f32
// CHECK-DAG: %[[TS_DIVISOR:.*]] = arith.constant 2.688000e+03 : f32
// CHECK: %[[T:.*]] = memref.dim %[[X]], %c0 : memref<?x32xf32>
// Rotation: a block of 32 on the stack, log2(32) = 5 butterfly stages,
// then the multiply by 1/sqrt(32).
// CHECK: %[[ROTATED:.*]] = memref.alloc(%[[T]]) : memref<?x32xf32>
// CHECK: %[[WORK:.*]] = memref.alloca() : memref<32xf32>
// CHECK-COUNT-5: arith.subf
// CHECK: arith.mulf %{{.*}}, %[[C]] : f32
// NVFP4: the tensor amax over all elements, /2688, the per-tensor scale in
// a rank-0 buffer; per block amax / (tensorScale * 6), product first.
// CHECK: %[[CODES:.*]] = memref.alloc(%[[T]]) : memref<?x32xi8>
// CHECK: %[[SCALES:.*]] = memref.alloc(%[[T]]) : memref<?x2xi8>
// CHECK: scf.for {{.*}} -> (i32)
// CHECK: %[[TS:.*]] = arith.divf %{{.*}}, %[[TS_DIVISOR]] : f32
// CHECK: %[[TENSOR_SCALE:.*]] = memref.alloc() : memref<f32>
// CHECK: memref.store %{{.*}}, %[[TENSOR_SCALE]][] : memref<f32>
// CHECK: %[[PRODUCT:.*]] = arith.mulf %{{.*}}, %[[SIX]] : f32
// CHECK: arith.divf %{{.*}}, %[[PRODUCT]] : f32
// The scaled matmul: dequantize (code x E4M3 scale, then x tensor scale);
// the transposed right operand copied to [K, N]; then rows in groups of 4
// and columns in tiles of 256 (one tile here), 8 columns at a time as vector
// ops (the scalar tail is empty here and folds away); one partial row per
// row and per chunk of 16 (the NVFP4 block): each partial summed from 0
// along the chunk, then added to the result in order.
// CHECK: %[[VALUES:.*]] = memref.alloc(%[[T]]) : memref<?x32xf32>
// CHECK: memref.load %[[TENSOR_SCALE]][] : memref<f32>
// CHECK: %[[RESULT:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<?x16xf32> into memref<?xf32>
// CHECK: %[[RHS_KN:.*]] = memref.alloc() : memref<32x16xf32>
// CHECK: %[[PARTIALS:.*]] = memref.alloc() : memref<4x256xf32>
// CHECK: %[[PARTIAL:.*]] = memref.collapse_shape %[[PARTIALS]]
// This call's row groups: [part * G / parts, (part + 1) * G / parts).
// CHECK: %[[GROUPS:.*]] = arith.divui %[[T]], %c4 : index
// CHECK: %[[SCALED:.*]] = arith.muli %[[P:.*]], %[[GROUPS]] : index
// CHECK: %[[BEGIN:.*]] = arith.divui %[[SCALED]], %[[N:.*]] : index
// CHECK: %[[NEXT_PART:.*]] = arith.addi %[[P]], %c1 : index
// CHECK: %[[SCALED_END:.*]] = arith.muli %[[NEXT_PART]], %[[GROUPS]] : index
// CHECK: %[[END:.*]] = arith.divui %[[SCALED_END]], %[[N]] : index
// CHECK: scf.for %{{.*}} = %[[BEGIN]] to %[[END]] step %c1 {
// CHECK-COUNT-4: memref.store %{{.*}}, %[[RESULT]]
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK-COUNT-4: memref.store %{{.*}}, %[[PARTIAL]]
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1 {
// CHECK-COUNT-4: vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c8 {
// CHECK: %[[B:.*]] = vector.load %[[RHS_KN_FLAT:.*]][%{{.*}}] : memref<512xf32>, vector<8xf32>
// CHECK: %[[P:.*]] = vector.load %[[PARTIAL]][%{{.*}}] : memref<1024xf32>, vector<8xf32>
// CHECK: %[[AB:.*]] = arith.mulf %{{.*}}, %[[B]] : vector<8xf32>
// CHECK: %[[NEXT:.*]] = arith.addf %[[P]], %[[AB]] : vector<8xf32>
// CHECK: vector.store %[[NEXT]], %[[PARTIAL]]
// CHECK: %[[SUM:.*]] = memref.load %[[RESULT]]
// CHECK: %[[ADD:.*]] = memref.load %[[PARTIAL]]
// CHECK: %[[TOTAL:.*]] = arith.addf %[[SUM]], %[[ADD]] : f32
// CHECK: memref.store %[[TOTAL]], %[[RESULT]]
// CHECK-DAG: memref.dealloc %[[ROTATED]]
// CHECK-DAG: memref.dealloc %[[CODES]]
// CHECK-DAG: memref.dealloc %[[SCALES]]
// CHECK-DAG: memref.dealloc %[[TENSOR_SCALE]]
// CHECK-DAG: memref.dealloc %[[VALUES]]
// CHECK-DAG: memref.dealloc %[[RHS_KN]]
// CHECK-DAG: memref.dealloc %[[PARTIALS]]
// CHECK: return

// LLVM-LABEL: llvm.func @gemm(
// LLVM: llvm.call @malloc
// LLVM: llvm.fdiv
// LLVM: llvm.call @free
// LLVM: llvm.func @_mlir_ciface_gemm(
func.func @host(%x: tensor<?x32xf32>, %w: tensor<16x32xf32>) -> tensor<?x16xf32> {
  %y = tetra.kernel "gemm" (%a = %x, %b = %w) : (tensor<?x32xf32>, tensor<16x32xf32>) -> tensor<?x16xf32> {
    %r = tetra.rotate %a by #tetra.rotation<hadamard<32>> along 1 : tensor<?x32xf32>
    %ac, %as, %at = tetra.quantize %r as #tetra.quant<nvfp4> along 1
        : tensor<?x32xf32> -> tensor<?x32xf4E2M1FN>, tensor<?x2xf8E4M3FN>, tensor<f32>
    %p = tetra.scaled_matmul (%ac scales %as tensor_scale %at as #tetra.quant<nvfp4>), (%b as #tetra.quant<f32>) transpose_rhs
        : (tensor<?x32xf4E2M1FN>, tensor<?x2xf8E4M3FN>, tensor<f32>, tensor<16x32xf32>) -> tensor<?x16xf32>
    tetra.yield %p : tensor<?x16xf32>
  }
  return %y : tensor<?x16xf32>
}

// -----

// Random Hadamard signs: drawn once, into a stack buffer, from Philox with
// the rotation's seed and tensor id 0x48414431; per-step signs use the step.
// bf16 values are stored as their 16 bits and rounded by the BF16 encoder.
// CHECK-LABEL: func.func @rotate_bf16(
// CHECK-SAME: %{{.*}}: memref<4x64xf32>, %[[STEP:.*]]: i64, %{{.*}}: memref<4x64xi16>)
// CHECK-DAG: %[[SIGNS_ID:.*]] = arith.constant 1212236849 : i32
// CHECK: %[[SIGNS:.*]] = memref.alloca() : memref<64xf32>
// CHECK: arith.trunci %[[STEP]] : i64 to i32
// CHECK: scf.for
// CHECK: arith.xori %{{.*}}, %[[SIGNS_ID]] : i32
// CHECK: memref.store %{{.*}}, %[[SIGNS]]
// CHECK: memref.alloca() : memref<64xf32>
// CHECK: arith.trunci %{{.*}} : i32 to i16
func.func @host(%x: tensor<4x64xf32>, %step: i64) -> tensor<4x64xbf16> {
  %y = tetra.kernel "rotate_bf16" (%a = %x, %s = %step) : (tensor<4x64xf32>, i64) -> tensor<4x64xbf16> {
    %r = tetra.rotate %a by #tetra.rotation<random_hadamard<64, per_step, 5>> along 1 step(%s) : tensor<4x64xf32>
    %t = arith.truncf %r : tensor<4x64xf32> to tensor<4x64xbf16>
    tetra.yield %t : tensor<4x64xbf16>
  }
  return %y : tensor<4x64xbf16>
}

// -----

// Elementwise kernels, and a kernel result that is one of its inputs
// (copied into the output).
// CHECK-LABEL: func.func @elementwise_0(
// CHECK-SAME: %[[X:.*]]: memref<8xf32>, %[[Y:.*]]: memref<8xf32>, %[[SILU:.*]]: memref<8xf32>, %[[COPY:.*]]: memref<8xf32>)
// CHECK: %[[TMP:.*]] = memref.alloc() : memref<8xf32>
// CHECK: scf.for %[[I:.*]] = %c0 to %c8
// CHECK: %[[A:.*]] = memref.load %[[X]][%[[I]]]
// CHECK: %[[B:.*]] = memref.load %[[Y]][%[[I]]]
// CHECK: %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK: memref.store %[[S]], %[[TMP]][%[[I]]]
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[SILU]]
// CHECK: memref.load %[[X]]
// CHECK: memref.store %{{.*}}, %[[COPY]]
// CHECK: memref.dealloc %[[TMP]]
func.func @host(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %r:2 = tetra.kernel "elementwise_0" (%a = %x, %b = %y) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %s = tetra.add %a, %b : tensor<8xf32>
    %t = tetra.silu %s : tensor<8xf32>
    tetra.yield %t, %a : tensor<8xf32>, tensor<8xf32>
  }
  return %r#0, %r#1 : tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @host(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = tetra.kernel "unsupported" (%a = %x) : (tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{'tensor.empty' op cannot be compiled for the CPU: kernels may hold tetra.rotate, tetra.quantize, tetra.dequantize, tetra.scaled_matmul, bf16 casts and elementwise ops}}
    %e = tensor.empty() : tensor<8xf32>
    tetra.yield %e : tensor<8xf32>
  }
  return %y : tensor<8xf32>
}

// -----

func.func @host(%x: tensor<8xf16>) -> tensor<8xf16> {
  // expected-error @+1 {{'tetra.kernel' op an input of type 'tensor<8xf16>' cannot be stored by the CPU target (f32, bf16, FP4/FP8 codes and scales only)}}
  %y = tetra.kernel "f16" (%a = %x) : (tensor<8xf16>) -> tensor<8xf16> {
    tetra.yield %a : tensor<8xf16>
  }
  return %y : tensor<8xf16>
}

// -----

func.func @host(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %y = tetra.kernel "twice" (%a = %x) : (tensor<8xf32>) -> tensor<8xf32> {
    tetra.yield %a : tensor<8xf32>
  }
  // expected-error @+1 {{'tetra.kernel' op has the name 'twice' of another kernel in the module}}
  %z = tetra.kernel "twice" (%a = %x) : (tensor<8xf32>) -> tensor<8xf32> {
    tetra.yield %a : tensor<8xf32>
  }
  return %y, %z : tensor<8xf32>, tensor<8xf32>
}
