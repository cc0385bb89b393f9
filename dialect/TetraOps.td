//===- TetraOps.td - tetra dialect operations ---------------*- tablegen -*-===//
//
// Matrix products with a policy, and the quantization and rotation ops a
// policy materializes into.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_OPS_TD
#define TETRA_OPS_TD

include "dialect/TetraAttributes.td"
include "dialect/TetraDifferentiableOpInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Tetra_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tetra_Dialect, mnemonic, traits>;

def Tetra_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def Tetra_FloatMatrix : 2DTensorOf<[F32, BF16, F16]>;
def Tetra_CodeTensor : RankedTensorOf<[F4E2M1FN, F8E4M3FN, F8E5M2]>;
def Tetra_ScaleTensor : RankedTensorOf<[F8E8M0FNU, F8E4M3FN]>;
def Tetra_TensorScale : 0DTensorOf<[F32]>;

def Tetra_MatmulOp : Tetra_Op<"matmul", [Pure, AttrSizedOperandSegments]> {
  let summary = "A matrix product quantized as its role's policy says";
  let description = [{
    `result = op(lhs) · op(rhs)`, where `op` transposes an operand marked
    `transpose_lhs` / `transpose_rhs`. The reduction dimension K is the
    columns of op(lhs) and the rows of op(rhs); each operand is rotated and
    quantized along K as `policy[role]` says, and the products accumulate in
    the policy's accumulator type.

    ```mlir
    // Fprop of a linear layer: Y = X · Wᵀ
    %y = tetra.matmul %x, %w transpose_rhs
           policy #tetra.policy<fprop = mxfp4, dgrad = mxfp4,
                                wgrad = mxfp4 rotate hadamard<32>> role fprop
           : tensor<128x256xf32>, tensor<512x256xf32> -> tensor<128x512xf32>
    ```

    A policy with stochastic rounding or per-step random signs for this role
    needs a random source, `random(%seed, %step)` (both `i64`).
  }];
  let arguments = (ins
    Tetra_FloatMatrix:$lhs,
    Tetra_FloatMatrix:$rhs,
    Tetra_RoleAttr:$role,
    Tetra_PolicyAttr:$policy,
    UnitAttr:$transpose_lhs,
    UnitAttr:$transpose_rhs,
    Optional<I64>:$seed,
    Optional<I64>:$step);
  let results = (outs Tetra_FloatMatrix:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? (`random` `(` $seed^ `,` $step `)`)?
    `policy` qualified($policy) `role` $role
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The policy of this product's role.
    GemmPolicyAttr getGemmPolicy() { return getPolicy().getForRole(getRole()); }
    /// The dimension of lhs / rhs that is reduced over.
    unsigned getLhsReductionDim() { return getTransposeLhs() ? 0 : 1; }
    unsigned getRhsReductionDim() { return getTransposeRhs() ? 1 : 0; }
  }];
}

def Tetra_QuantizeOp : Tetra_Op<"quantize",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "Block-quantize a tensor along one axis into codes and scales";
  let description = [{
    Quantizes `input` in blocks along `axis` as `quant` says and returns the
    codes (same shape, in the element format's builtin type) and one scale
    per block (the input's shape with the axis divided by the block size).
    NVFP4 also returns its fp32 per-tensor scale.

    ```mlir
    %codes, %scales = tetra.quantize %x as #tetra.quant<mxfp4> along 1
        : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU>
    ```

    Stochastic rounding draws its bits from `random(%seed, %step)` and the
    `tensor_id` attribute (docs/numerics.md). Rotations are separate
    (`tetra.rotate`): `quant` must not rotate. `operand` says, for a reader
    of the IR, which GEMM operand of which linear it quantizes
    (`"layers.0.attn.wq.fprop.x"`: the GEMM's name and `x`, `w` or `dy`; set
    by --tetra-materialize-quantization);
    nothing depends on it.
  }];
  let arguments = (ins
    Tetra_FloatTensor:$input,
    I64Attr:$axis,
    Tetra_OperandQuantAttr:$quant,
    Optional<I64>:$seed,
    Optional<I64>:$step,
    DefaultValuedAttr<I64Attr, "0">:$tensor_id,
    OptionalAttr<StrAttr>:$operand);
  let results = (outs
    Tetra_CodeTensor:$codes,
    Tetra_ScaleTensor:$scales,
    Optional<Tetra_TensorScale>:$tensor_scale);
  let assemblyFormat = [{
    $input `as` qualified($quant) `along` $axis
    (`random` `(` $seed^ `,` $step `)`)? attr-dict `:` type($input) `->`
    type($codes) `,` type($scales) (`,` type($tensor_scale)^)?
  }];
  let hasVerifier = 1;
}

def Tetra_DequantizeOp : Tetra_Op<"dequantize", [Pure]> {
  let summary = "The values that block-quantized codes and scales stand for";
  let description = [{
    The inverse of `tetra.quantize`: code × scale (× the per-tensor scale for
    NVFP4), exactly, in the result's float type.

    ```mlir
    %x = tetra.dequantize %codes, %scales as #tetra.quant<mxfp4> along 1
        : tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU> -> tensor<4x64xf32>
    ```
  }];
  let arguments = (ins
    Tetra_CodeTensor:$codes,
    Tetra_ScaleTensor:$scales,
    Optional<Tetra_TensorScale>:$tensor_scale,
    I64Attr:$axis,
    Tetra_OperandQuantAttr:$quant);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $codes `,` $scales (`,` $tensor_scale^)? `as` qualified($quant)
    `along` $axis attr-dict `:` type($codes) `,` type($scales)
    (`,` type($tensor_scale)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tetra_RotateOp : Tetra_Op<"rotate",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Block Hadamard rotation along one axis";
  let description = [{
    Multiplies every block of `B` consecutive elements along `axis` by the
    normalized Hadamard matrix H_B (times random signs for
    `random_hadamard`); `inverse` applies the transpose and undoes it.

    ```mlir
    %r = tetra.rotate %x by #tetra.rotation<hadamard<32>> along 1
        : tensor<4x64xf32>
    %s = tetra.rotate %g by #tetra.rotation<random_hadamard<16, per_step, 7>>
        along 0 step(%step) : tensor<64x8xf32>
    ```

    Per-step random signs need the step.
  }];
  let arguments = (ins
    Tetra_FloatTensor:$input,
    I64Attr:$axis,
    Tetra_RotationAttr:$rotation,
    UnitAttr:$inverse,
    Optional<I64>:$step);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $input `by` qualified($rotation) `along` $axis (`inverse` $inverse^)?
    (`step` `(` $step^ `)`)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Model ops: what the frontend emits for a model's forward computation.
// Tensors are [batch, seq, features] (any leading dimensions); attention
// and rope see the features as heads x head_dim.
// Every model op but linear states its gradient through
// Tetra_DifferentiableOpInterface (TetraDifferentiableOpInterface.cpp); the
// training step turns each linear into its three role matmuls.
//===----------------------------------------------------------------------===//

def Tetra_LinearOp : Tetra_Op<"linear", [Pure]> {
  let summary = "A linear layer y = x·wᵀ whose three GEMMs follow a policy";
  let description = [{
    `x` is `[..., in]`, `w` is `[out, in]`, the result `[..., out]`. The
    policy says how each of the layer's three products is quantized: Fprop
    (this op), and Dgrad and Wgrad, which the training-step pass derives from
    it. `name` is the weight's dotted name, the one policies match.

    ```mlir
    %q = tetra.linear %x, %wq policy #policy name "layers.0.attn.wq"
        : tensor<?x?x4096xf32>, tensor<4096x4096xf32> -> tensor<?x?x4096xf32>
    ```

    The verifier checks each role's reduction size against its blocks and
    rotations: Fprop reduces over `in`, Dgrad over `out`, Wgrad over the
    tokens (the product of the leading dimensions, when known).
  }];
  let arguments = (ins Tetra_FloatTensor:$input, Tetra_FloatMatrix:$weight,
                       StrAttr:$name, Tetra_PolicyAttr:$policy);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `policy` qualified($policy) `name` $name attr-dict
    `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tetra_EmbeddingOp : Tetra_Op<"embedding", [Pure, Tetra_Differentiable]> {
  let summary = "Rows of a table selected by token ids";
  let description = [{
    `table` is `[vocab, dim]`, `tokens` any shape of `i32`; the result is
    `tokens`' shape followed by `dim`.
  }];
  let arguments = (ins Tetra_FloatMatrix:$table, RankedTensorOf<[I32]>:$tokens);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $tokens attr-dict `:` type($table) `,` type($tokens) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Tetra_RMSNormOp : Tetra_Op<"rmsnorm",
    [Pure, AllTypesMatch<["input", "result"]>, Tetra_Differentiable]> {
  let summary = "Root-mean-square normalization over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x²) + eps) * weight`, over the last dimension of `x`
    (`weight` is `[dim]`).
  }];
  let arguments = (ins Tetra_FloatTensor:$input, Tetra_FloatTensor:$weight,
                       F64Attr:$eps);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` $eps attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Tetra_RopeOp : Tetra_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>,
    Tetra_Differentiable]> {
  let summary = "Rotary position embedding, per head";
  let description = [{
    `x` is `[batch, seq, heads · head_dim]`; each head's pairs
    (x[2i], x[2i+1]) at position p are rotated by p · theta^(-2i/head_dim).
  }];
  let arguments = (ins Tetra_FloatTensor:$input, I64Attr:$head_dim,
                       F64Attr:$theta);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $input `head_dim` $head_dim `theta` $theta attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Tetra_AttentionOp : Tetra_Op<"attention",
    [Pure, AllTypesMatch<["query", "result"]>, Tetra_Differentiable]> {
  let summary = "Causal grouped-query scaled dot-product attention";
  let description = [{
    `query` is `[batch, seq, heads · head_dim]`, `key` and `value`
    `[batch, seq, kv_heads · head_dim]`; every `heads / kv_heads` query heads
    share one key/value head. Causal: position p attends to 0..p. Scores are
    scaled by 1/sqrt(head_dim).

    `bf16_operands` (the policy's `attention = bf16`, as PyTorch's BF16
    flash attention computes): every operand of the attention's products —
    query, key, value, the probabilities P = exp(S − lse) and, in the
    gradient, dO and dS — is rounded to BF16 (nearest even) and the exact
    products accumulate in fp32; without it they are the fp32 values. The
    definition, the same on every target: runtime/kernels/Attention.h.

    ```mlir
    %o = tetra.attention %q, %k, %v heads 4 kv_heads 2 bf16_operands
        : tensor<2x64x64xf32>, tensor<2x64x32xf32>, tensor<2x64x32xf32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$query, Tetra_FloatTensor:$key,
                       Tetra_FloatTensor:$value, I64Attr:$heads,
                       I64Attr:$kv_heads, UnitAttr:$bf16_operands);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `heads` $heads `kv_heads` $kv_heads
    (`bf16_operands` $bf16_operands^)? attr-dict
    `:` type($query) `,` type($key) `,` type($value)
  }];
  let hasVerifier = 1;
}

class Tetra_ElementwiseUnaryOp<string mnemonic, string summaryText>
    : Tetra_Op<mnemonic,
               [Pure, SameOperandsAndResultType, Tetra_Differentiable]> {
  let summary = summaryText;
  let arguments = (ins Tetra_FloatTensor:$input);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Tetra_ElementwiseBinaryOp<string mnemonic, string summaryText>
    : Tetra_Op<mnemonic,
               [Pure, SameOperandsAndResultType, Tetra_Differentiable]> {
  let summary = summaryText;
  let arguments = (ins Tetra_FloatTensor:$lhs, Tetra_FloatTensor:$rhs);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Tetra_SiluOp : Tetra_ElementwiseUnaryOp<"silu", "x · sigmoid(x)">;
def Tetra_AddOp : Tetra_ElementwiseBinaryOp<"add", "Elementwise sum">;
def Tetra_SubOp : Tetra_ElementwiseBinaryOp<"sub", "Elementwise difference">;
def Tetra_MulOp : Tetra_ElementwiseBinaryOp<"mul", "Elementwise product">;

def Tetra_ScaleOp : Tetra_Op<"scale", [Pure, SameOperandsAndResultType,
    Tetra_Differentiable]> {
  let summary = "Multiplication by a constant";
  let arguments = (ins Tetra_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
}

def Tetra_CrossEntropyOp : Tetra_Op<"cross_entropy",
                                     [Pure, Tetra_Differentiable]> {
  let summary = "Mean softmax cross-entropy of logits against target ids";
  let description = [{
    `logits` is `[..., vocab]`, `targets` the leading shape in `i32`; the
    result is the mean over all positions of
    `logsumexp(logits) - logits[target]`.
  }];
  let arguments = (ins Tetra_FloatTensor:$logits,
                       RankedTensorOf<[I32]>:$targets);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

include "dialect/TetraTrainingOps.td"
include "dialect/TetraKernelOps.td"

#endif // TETRA_OPS_TD
