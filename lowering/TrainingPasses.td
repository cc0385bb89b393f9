//===- TrainingPasses.td - The training-step pass -----------*- tablegen -*-===//
//
// The autodiff pass: from a model's @loss to the compiled training step.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_TRAININGPASSES_TD
#define TETRA_LOWERING_TRAININGPASSES_TD

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

#endif // TETRA_LOWERING_TRAININGPASSES_TD
