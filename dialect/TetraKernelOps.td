//===- TetraKernelOps.td - Scaled matmuls and kernel regions -*- tablegen -*-===//
//
// The ops quantization materialization and kernel formation create: the
// matrix product over codes and scales, and the kernel region every target
// generates code for. Included from TetraOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_KERNEL_OPS_TD
#define TETRA_KERNEL_OPS_TD

// A GEMM operand: block-quantized codes, or plain f32 values (an operand the
// policy leaves in f32, or rounds to bf16 and back).
def Tetra_GemmOperand : 2DTensorOf<[F4E2M1FN, F8E4M3FN, F8E5M2, F32]>;
def Tetra_ScaleMatrix : 2DTensorOf<[F8E8M0FNU, F8E4M3FN]>;

def Tetra_ScaledMatmulOp : Tetra_Op<"scaled_matmul",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "A matrix product over block-quantized codes and scales";
  let description = [{
    `result = op(lhs) · op(rhs)` where each operand is given as its codes,
    its block scales along the reduction dimension K (and NVFP4's fp32
    per-tensor scale), and the `#tetra.quant` that produced them;
    `transpose_lhs` / `transpose_rhs` transpose an operand as in
    `tetra.matmul`. An operand whose quantization is `f32` or `bf16` is a
    plain `f32` matrix (a `bf16` operand holds values already rounded to
    bf16) and has no scales. The quantizations must not rotate: rotations
    are `tetra.rotate` ops in front of the quantizers.

    ```mlir
    // Fprop, Y = X · Wᵀ, both operands MXFP4 along K = 128.
    %y = tetra.scaled_matmul (%xc scales %xs as #tetra.quant<mxfp4>),
                             (%wc scales %ws as #tetra.quant<mxfp4>)
           transpose_rhs role fprop
         : (tensor<64x128xf4E2M1FN>, tensor<64x4xf8E8M0FNU>,
            tensor<32x128xf4E2M1FN>, tensor<32x4xf8E8M0FNU>)
           -> tensor<64x32xf32>
    // NVFP4 operands carry their per-tensor scale; a plain operand has
    // no scales.
    %z = tetra.scaled_matmul
           (%ac scales %as tensor_scale %at as #tetra.quant<nvfp4>),
           (%b as #tetra.quant<f32>) : ...
    ```

    **Arithmetic, exactly** (the contract every target is checked against):

    1. Each operand is dequantized to fp32 exactly as `tetra.dequantize`
       (and `numerics::dequantize`) does: `decode(code) · 2^e` for E8M0
       scales (exact unless it reaches 2^128); `(decode(code) ·
       decodeE4M3(scale)) · tensorScale` for NVFP4, two fp32 products in
       that order, each rounded to nearest even. Plain operands are used
       as they are.
    2. K is cut into chunks of G elements, G = the smaller block size of
       the block-scaled operands (K itself when neither is block-scaled).
       G divides both block sizes, so each chunk lies inside one scale
       block of each operand.
    3. For each (m, n):

       ```
       acc = +0.0f
       for chunk c = 0, 1, ..., K/G - 1:
         partial = +0.0f
         for k = c·G, ..., c·G + G - 1:          (ascending)
           partial = partial + a[m][k] · b[k][n]  (fp32 multiply, rounded;
                                                   then fp32 add, rounded)
         acc = acc + partial                       (fp32, rounded)
       result[m][n] = acc
       ```

       No fused multiply-add; every operation rounds to nearest even.
       A chunk is what a block-scaled matrix instruction reduces at once
       (one scale pair per chunk), so a target that computes each chunk's
       dot product exactly and accumulates the chunks in order in fp32
       reproduces the result bit for bit; for MXFP4 × MXFP4 every chunk's
       partial sum is exact in fp32 (unless it underflows), whatever the
       order inside the chunk.
    4. **Exact sums** (MXFP4 × MXFP4 only, K ≤ 131072): a fiber along K —
       row m of op(lhs), column n of op(rhs) — *sums exactly* when its
       E8M0 scale codes lie within 3 binades (largest − smallest ≤ 3),
       none is NaN, and ref = largest − 3 is within 2^±45 of 1
       (`numerics::fiberSumsExactly`). Where row m and column n both do,
       `result[m][n]` is instead the exact Σₖ a[m][k] · b[k][n] rounded
       once to fp32 (nearest even): every value of such a fiber is an
       integer (2 · E2M1 · 2^(code − ref), at most 96) times 2^(ref − 128),
       so integer tensor cores sum the pair exactly (sm_90a: s8 `wgmma`
       into s32), with no fp32 add per chunk. Every other result is step
       3's. `numerics::contractSum` is this definition in C++.

    The error against the exact product of the dequantized values is at
    most γ(G + K/G + 2) · Σₖ |a[m][k]| · |b[k][n]|, γ(n) = n·u / (1 − n·u),
    u = 2^-24 (the +2 covers the two roundings of NVFP4's dequantization and
    the product's); an exact sum's is at most u · |Σₖ a[m][k] · b[k][n]|.
  }];
  let arguments = (ins
    Tetra_GemmOperand:$lhs,
    Optional<Tetra_ScaleMatrix>:$lhs_scales,
    Optional<Tetra_TensorScale>:$lhs_tensor_scale,
    Tetra_GemmOperand:$rhs,
    Optional<Tetra_ScaleMatrix>:$rhs_scales,
    Optional<Tetra_TensorScale>:$rhs_tensor_scale,
    Tetra_OperandQuantAttr:$lhs_quant,
    Tetra_OperandQuantAttr:$rhs_quant,
    UnitAttr:$transpose_lhs,
    UnitAttr:$transpose_rhs,
    OptionalAttr<Tetra_RoleAttr>:$role);
  let results = (outs 2DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    ` ` `(` $lhs (`scales` $lhs_scales^)? (`tensor_scale` $lhs_tensor_scale^)?
    `as` qualified($lhs_quant) `)` `,`
    `(` $rhs (`scales` $rhs_scales^)? (`tensor_scale` $rhs_tensor_scale^)?
    `as` qualified($rhs_quant) `)`
    (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`role` $role^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The dimension of lhs / rhs that is reduced over.
    unsigned getLhsReductionDim() { return getTransposeLhs() ? 0 : 1; }
    unsigned getRhsReductionDim() { return getTransposeRhs() ? 1 : 0; }
    /// G, the accumulation chunk along K (see the description): the
    /// smaller block size of the block-scaled operands, or
    /// ShapedType::kDynamic when neither is block-scaled (one chunk of K).
    int64_t getAccumulationChunk();
  }];
}

def Tetra_KernelOp : Tetra_Op<"kernel",
    [IsolatedFromAbove, SingleBlock, RecursiveMemoryEffects]> {
  let summary = "A unit of code generation";
  let description = [{
    A region that every target compiles into one kernel (on the CPU, one
    function). The region sees only its inputs, bound to the entry block's
    arguments, and yields its results with `tetra.yield`. `kernel_name`
    names the generated entry point and is unique within the module.

    ```mlir
    %y = tetra.kernel "layers_0_attn_wq_fprop"
        (%a = %x, %b = %w) : (tensor<64x128xf32>, tensor<32x128xf32>)
        -> tensor<64x32xf32> {
      %ac, %as = tetra.quantize %a as #tetra.quant<mxfp4> along 1 : ...
      %bc, %bs = tetra.quantize %b as #tetra.quant<mxfp4> along 1 : ...
      %c = tetra.scaled_matmul (%ac scales %as as #tetra.quant<mxfp4>),
               (%bc scales %bs as #tetra.quant<mxfp4>) transpose_rhs : ...
      tetra.yield %c : tensor<64x32xf32>
    }
    ```

    Kernel formation (`--tetra-form-kernels`) builds them: one per scaled
    matmul with its operands' rotations and quantizations, and one per
    chain of elementwise ops.
  }];
  let arguments = (ins StrAttr:$kernel_name, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def Tetra_YieldOp : Tetra_Op<"yield",
    [Pure, Terminator, HasParent<"KernelOp">]> {
  let summary = "The results of a kernel";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // TETRA_KERNEL_OPS_TD
