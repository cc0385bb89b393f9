//===- TetraDialect.td - The tetra dialect ------------------*- tablegen -*-===//
//
// The dialect in which a precision policy is a first-class attribute on every
// matrix product.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DIALECT_TD
#define TETRA_DIALECT_TD

include "mlir/IR/DialectBase.td"

def Tetra_Dialect : Dialect {
  let name = "tetra";
  let cppNamespace = "::tetra";
  let summary = "Quantized LLM training: policies, quantization, rotations";
  let description = [{
    The `tetra` dialect describes the arithmetic of a quantized training
    step. Its attributes say exactly how each operand of each matrix product
    is rounded: the element format (`e2m1`, `e4m3`, `e5m2`, `bf16`, `f32`),
    the block scaling (block size, `e8m0` or `e4m3` scale, scale rule), the
    rounding (`nearest_even`, `nearest_away`, `stochastic`) and the rotation
    (`none`, deterministic `hadamard<B>`, `random_hadamard<B, fixed|per_step,
    seed>`). A `#tetra.policy` gives one GEMM policy per role of a linear
    layer: `fprop` (Y = X·Wᵀ), `dgrad` (dX = dY·W) and `wgrad` (dW = dYᵀ·X).

    Quantized tensors are a pair of plain tensors — codes in the element
    format's builtin type (`f4E2M1FN`, `f8E4M3FN`, `f8E5M2`) and scales
    (`f8E8M0FNU` or, for NVFP4, `f8E4M3FN` plus a `tensor<f32>` per-tensor
    scale) — so that every later pass and target sees ordinary tensors.

    The numerics (what each format, rule, rounding and rotation computes, bit
    for bit) are defined once, in `runtime/numerics`, and documented in
    `docs/numerics.md`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Defined beside the attribute storage classes (TetraAttributes.cpp).
    void registerAttributes();
  }];
}

#endif // TETRA_DIALECT_TD
