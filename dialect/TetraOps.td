//===- TetraOps.td - tetra dialect operations ---------------*- tablegen -*-===//
//
// Matrix products with a policy, and the quantization and rotation ops a
// policy materializes into.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_OPS_TD
#define TETRA_OPS_TD

include "dialect/TetraAttributes.td"
include "mlir/IR/OpBase.td"
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
    (`tetra.rotate`): `quant` must not rotate.
  }];
  let arguments = (ins
    Tetra_FloatTensor:$input,
    I64Attr:$axis,
    Tetra_OperandQuantAttr:$quant,
    Optional<I64>:$seed,
    Optional<I64>:$step,
    DefaultValuedAttr<I64Attr, "0">:$tensor_id);
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

#endif // TETRA_OPS_TD
