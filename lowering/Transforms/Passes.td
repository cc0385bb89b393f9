//===- Passes.td - Tetra's target-independent transforms ----*- tablegen -*-===//
//
// The passes every target shares, in pipeline order: the training step
// (autodiff), the materialization of each matmul's policy into rotations,
// quantizers and a scaled matmul, and the grouping into kernels. Their
// reference, docs/passes/Transforms.md, is generated from this file.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_TRANSFORMS_PASSES_TD
#define TETRA_LOWERING_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrainingStep : Pass<"tetra-training-step", "mlir::ModuleOp"> {
  let summary = "Derive @train_step from @loss: reverse mode, clipping, AdamW";
  let description = [{
    Adds `func.func @train_step` beside `@forward` and `@loss`: one
    optimizer step of the model, from the parameters and AdamW moments to
    their new values.

    ```
    func.func @train_step(
        %params...  {tetra.param = NAME},  %m... {tetra.adam_m = NAME},
        %v...       {tetra.adam_v = NAME}, %inputs... {tetra.input = NAME},
        %step: i64  {tetra.step},   // 1-based
        %lr: f32    {tetra.lr},     // this step's rate (the runtime's schedule)
        %seed: i64  {tetra.seed})
      -> (tensor<f32> {tetra.output = "loss"},
          tensor<f32> {tetra.output = "grad_norm"},   // before clipping
          new params... {tetra.param = NAME}, new m... {tetra.adam_m = NAME},
          new v... {tetra.adam_v = NAME})
    ```

    The body recomputes the forward pass of `@loss`, then runs reverse mode
    over it: the loss's gradient is 1, ops are visited in reverse, and the
    gradients of a value used several times are summed (`tetra.add`).

    - Each `tetra.linear` (x `[..., in]`, w `[out, in]`) becomes its three
      GEMMs as `tetra.matmul` over 2-D views (`tensor.collapse_shape` of the
      leading dimensions into the tokens N, `tensor.expand_shape` back), each
      carrying the linear's `#tetra.policy` and its role: Fprop
      `Y = X·Wᵀ` (`transpose_rhs`, `[N, in] x [out, in] -> [N, out]`), Dgrad
      `dX = dY·W` (`[N, out] x [out, in] -> [N, in]`) and Wgrad
      `dW = dYᵀ·X` (`transpose_lhs`, `[N, out] x [N, in] -> [out, in]`,
      reducing over the N tokens). The forward uses the Fprop matmul. Each
      matmul's location is a `NameLoc` "LINEAR.ROLE" (e.g.
      "layers.0.attn.wq.wgrad") around the linear's source location. A
      matmul whose role's policy rounds stochastically or redraws Hadamard
      signs per step takes `random(%seed, %step)`.
    - Every other op differentiates through
      `tetra::DifferentiableOpInterface` (the backward ops of
      TetraTrainingOps.td); an op without it is an error.
    - A parameter that does not influence the loss gets a zero gradient.

    Then `tetra.global_norm` over all gradients (returned as `grad_norm`),
    `tetra.clip_by_norm` of each gradient when `clip` > 0, and one
    `tetra.adamw` per parameter. Weight decay applies to parameters of rank
    2 or more (the linear weights and the embedding table), not to 1-D
    parameters (norm weights), which get `weight_decay = 0`. The
    hyper-parameters are also recorded on @train_step as
    `tetra.optimizer = {beta1, beta2, eps, weight_decay, clip}`.

    Parameters are the arguments of @loss with a `tetra.param` attribute (a
    tensor of static shape); all other arguments are inputs, passed through.
  }];
  let dependentDialects = [
    "::tetra::TetraDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::tensor::TensorDialect",
  ];
  let options = [
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "AdamW's first-moment decay, in [0, 1)">,
    Option<"beta2", "beta2", "double", /*default=*/"0.95",
           "AdamW's second-moment decay, in [0, 1)">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "AdamW's denominator epsilon, positive">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.1",
           "decoupled weight decay of parameters of rank 2 or more "
           "(1-D parameters are not decayed)">,
    Option<"clip", "clip", "double", /*default=*/"1.0",
           "bound on the global gradient norm; 0 disables clipping">,
  ];
}

def MaterializeQuantization
    : Pass<"tetra-materialize-quantization", "mlir::ModuleOp"> {
  let summary = "Turn each quantized tetra.matmul into rotate, quantize and "
                "scaled_matmul";
  let description = [{
    Every `tetra.matmul` whose role's `#tetra.gemm` policy is not plain f32
    (both operands `f32`) is replaced, operand by operand, by what its
    policy says, along that operand's reduction dimension K (dimension 1 of
    lhs and 0 of rhs, swapped by `transpose_lhs` / `transpose_rhs`):

    - block-scaled (`mxfp4`, `mxfp8_*`, `nvfp4`, `e2m1 block ...`, ...):
      `tetra.rotate` along K (when the policy rotates; per-step random
      signs take the matmul's `%step`), then `tetra.quantize` along K
      (stochastic rounding takes the matmul's `random(%seed, %step)`), and
      the codes, scales and NVFP4 tensor scale go to the scaled matmul;
    - `bf16`: `arith.truncf` to bf16 and `arith.extf` back to f32;
    - `f32`: untouched.

    Operands of another float type are first extended to f32 (every
    rotation and quantizer works on fp32 values, as `runtime/numerics`
    does). The product becomes a `tetra.scaled_matmul` with the matmul's
    transposes and role, at the matmul's location; a `bf16` or `f16` result
    is rounded from the f32 accumulator with `arith.truncf`.

    Wgrad, dW = dYᵀ·X with `transpose_lhs`, reduces over the tokens:
    both dY and X are rotated and quantized along dimension 0.

    **Tensor ids.** Every quantizer gets a `tensor_id`, the stream its
    stochastic rounding draws from (`docs/numerics.md` §3), so the runtime
    and the GPU targets must compute the same ids:

    ```
    key      = NAME "|" ROLE "|" OPERAND      // e.g. "layers.0.attn.wq.wgrad|wgrad|lhs"
    tensorId = FNV-1a 32-bit hash of key's bytes
               (offset basis 0x811C9DC5, prime 0x01000193)
    ```

    NAME is the name of the first `NameLoc` in the matmul's location (the
    training step names each matmul "LINEAR.ROLE"), or, without one,
    "FUNC#I" (the enclosing function and the matmul's index among that
    function's matmuls in program order). ROLE is `fprop`, `dgrad` or
    `wgrad` and OPERAND `lhs` or `rhs`. An id equal to the rotation signs'
    0x48414431 ("HAD1"), or to an id already given in this module (in
    program order), is replaced by the hash of key + "#1" (then "#2", ...).
    The step is the low 32 bits of the matmul's `%step`; the seed all
    64 bits of `%seed`.
  }];
  let dependentDialects = [
    "::tetra::TetraDialect",
    "::mlir::arith::ArithDialect",
  ];
}

def FormKernels : Pass<"tetra-form-kernels", "mlir::ModuleOp"> {
  let summary = "Group scaled matmuls and elementwise chains into "
                "tetra.kernel regions";
  let description = [{
    - Each `tetra.scaled_matmul` becomes one `tetra.kernel` together with
      the ops that prepare its operands: the `tetra.quantize` producing its
      codes and scales, the `tetra.rotate` in front of it, the bf16 round
      trip (`arith.truncf` / `arith.extf`) of a plain operand, and an
      `arith.truncf` of its result when that is the result's only use. The
      kernel's inputs are the unquantized operands and the random source
      (`%seed`, `%step`), in the order the kernel's ops first use them.
      An operand-preparing op whose results are also
      used outside stays where it is, and the kernel gets its own copy.
    - Each chain of elementwise ops (`tetra.add`, `tetra.sub`, `tetra.mul`,
      `tetra.silu`, `tetra.scale`, `tetra.silu_grad`), where every op but the last has a
      single use, the next op of the chain, becomes one kernel. Before
      chains form, a `tetra.silu` or `tetra.scale` whose uses are all
      elementwise ops of its block (two or more of them) is copied into
      each user and computed again there: its result is never stored and
      its users read its operand instead (as many bytes) — the silu of a
      SwiGLU gate fuses into the forward's product and into the backward's
      d(up).
    - Then elementwise kernels that read two or more of the same tensors
      merge, the later into the nearest earlier one whose place already
      sees all of the later one's inputs (and whose tensors have as many
      elements), until none do: the merged kernel reads each tensor once
      and yields the earlier kernel's results, then the later one's (the
      SwiGLU backward's d(up) and d(gate)). Kernels sharing one tensor (a
      residual connection's adds) stay apart.

    Kernels are named after what they compute: a GEMM kernel after its
    matmul's `NameLoc` ("layers.0.attn.wq.fprop" gives
    `layers_0_attn_wq_fprop`; characters other than letters, digits and
    `_` become `_`), an elementwise kernel `elementwise_N`; a name already
    taken in the module gets a suffix `_2`, `_3`, ... Ops already inside a
    kernel are left alone, so the pass is idempotent.
  }];
  let dependentDialects = ["::tetra::TetraDialect"];
}

#endif // TETRA_LOWERING_TRANSFORMS_PASSES_TD
