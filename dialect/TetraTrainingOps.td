//===- TetraTrainingOps.td - Gradients and the optimizer ----*- tablegen -*-===//
//
// The ops the training-step pass (lowering/TrainingStep.cpp) creates: the
// backward of each model op, the global gradient norm, clipping and AdamW.
// Included from TetraOps.td.
//
// Each description states its formula exactly: these formulas are the
// contract the runtime's library kernels implement, and the gradient checks
// test. All arithmetic is in f32 unless a description says otherwise;
// reductions may be evaluated in any order.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_TRAINING_OPS_TD
#define TETRA_TRAINING_OPS_TD

// The loss, its gradient and the gradient norm: `tensor<f32>`, which the
// assembly formats leave implicit.
def Tetra_ScalarTensor : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// The backward of the model ops
//===----------------------------------------------------------------------===//

def Tetra_EmbeddingGradOp : Tetra_Op<"embedding_grad", [Pure]> {
  let summary = "Gradient of an embedding table: the scatter-add of dY by id";
  let description = [{
    The backward of `tetra.embedding`: `tokens` are the forward's ids (any
    shape, `i32`), `grad` is dY, the gradient of the embedding's result
    (`tokens`' shape followed by `dim`); the result is the gradient of the
    `[vocab, dim]` table:

    ```
    dtable[v, d] = Σ over positions p with tokens[p] = v of dY[p, d]
    ```

    Rows of ids that do not occur are zero. Ids are in `[0, vocab)`, as the
    forward requires.

    ```mlir
    %dtable = tetra.embedding_grad %tokens, %dy
        : tensor<2x64xi32>, tensor<2x64x64xf32> -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32]>:$tokens,
                       Tetra_FloatTensor:$grad);
  let results = (outs Tetra_FloatMatrix:$table_grad);
  let assemblyFormat = [{
    $tokens `,` $grad attr-dict `:` type($tokens) `,` type($grad) `->`
    type($table_grad)
  }];
  let hasVerifier = 1;
}

def Tetra_RMSNormGradOp : Tetra_Op<"rmsnorm_grad", [Pure,
    AllTypesMatch<["input", "grad", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "Gradients of RMS normalization with respect to x and weight";
  let description = [{
    The backward of `tetra.rmsnorm` (`y = x / sqrt(mean(x²) + eps) * w` over
    the last dimension, of size `d`). `input` is the forward's x, `weight`
    its w, `grad` is dY. Per row (every index of the leading dimensions):

    ```
    r      = 1 / sqrt(mean_j(x_j²) + eps)          (mean over the d features)
    x̂_j    = x_j · r
    g_j    = dY_j · w_j
    dx_j   = r · (g_j − x̂_j · mean_k(g_k · x̂_k))
    dw_j   = Σ over all rows of dY_j · x̂_j
    ```

    ```mlir
    %dx, %dw = tetra.rmsnorm_grad %x, %w, %dy eps 1.0e-05
        : tensor<2x64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$input, Tetra_FloatTensor:$weight,
                       Tetra_FloatTensor:$grad, F64Attr:$eps);
  let results = (outs Tetra_FloatTensor:$input_grad,
                      Tetra_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad `eps` $eps attr-dict `:` type($input) `,`
    type($weight)
  }];
  let hasVerifier = 1;
}

def Tetra_RopeGradOp : Tetra_Op<"rope_grad",
    [Pure, AllTypesMatch<["grad", "input_grad"]>]> {
  let summary = "Gradient of a rotary position embedding: the inverse rotation";
  let description = [{
    The backward of `tetra.rope`. Rope rotates each head's pair
    (x[2i], x[2i+1]) at sequence position p (the index along dimension 1)
    by the angle `a = p · theta^(−2i / head_dim)`, i = 0 .. head_dim/2 − 1:

    ```
    y[2i]   = x[2i] · cos a − x[2i+1] · sin a
    y[2i+1] = x[2i] · sin a + x[2i+1] · cos a
    ```

    A rotation is orthogonal, so the gradient is the rotation by −a of dY
    (`grad`), with the same angles as the forward:

    ```
    dx[2i]   =  dY[2i] · cos a + dY[2i+1] · sin a
    dx[2i+1] = −dY[2i] · sin a + dY[2i+1] · cos a
    ```

    ```mlir
    %dx = tetra.rope_grad %dy head_dim 16 theta 1.000000e+04
        : tensor<2x64x64xf32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$grad, I64Attr:$head_dim,
                       F64Attr:$theta);
  let results = (outs Tetra_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $grad `head_dim` $head_dim `theta` $theta attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Tetra_AttentionGradOp : Tetra_Op<"attention_grad", [Pure,
    AllTypesMatch<["query", "grad", "query_grad"]>,
    AllTypesMatch<["key", "value", "key_grad", "value_grad"]>]> {
  let summary = "Gradients of causal grouped-query attention (recomputing P)";
  let description = [{
    The backward of `tetra.attention`, from the forward's `query`, `key`,
    `value` and dO (`grad`, the gradient of the attention's output); it
    recomputes the attention probabilities instead of storing them.

    The forward, per batch b and query head h (0 ≤ h < heads), with
    head_dim `hd = features / heads`, `s = 1/sqrt(hd)`, and key/value head
    `g = h / (heads / kv_heads)` (integer division: consecutive query heads
    share a key/value head); q_i, k_j, v_j, o_i are the hd-wide slices of
    head h (query, output) or g (key, value) at positions i, j:

    ```
    S_ij = s · (q_i · k_j)                          for j ≤ i (causal)
    P_ij = exp(S_ij − M_i) / Σ_{j'≤i} exp(S_ij' − M_i) for j ≤ i,
           M_i = max_{j'≤i} S_ij';  P_ij = 0 for j > i
    o_i  = Σ_j P_ij · v_j
    ```

    The gradients, with dO_i the slice of `grad`:

    ```
    dP_ij = dO_i · v_j
    D_i   = Σ_j P_ij · dP_ij                       (= dO_i · o_i)
    dS_ij = P_ij · (dP_ij − D_i)
    dq_i  = s · Σ_j dS_ij · k_j
    dk_j  = s · Σ over the query heads h of group g of Σ_i dS_ij · q_i
    dv_j  =     Σ over the query heads h of group g of Σ_i P_ij · dO_i
    ```

    With `bf16_operands` (copied from the forward op), q, k, v, dO, P (for
    o and dv) and dS (for dq and dk) are rounded to BF16 where they enter a
    product; D_i = dO_i · o_i from the unrounded dO
    (runtime/kernels/Attention.h).

    ```mlir
    %dq, %dk, %dv = tetra.attention_grad %q, %k, %v, %do heads 4 kv_heads 2
        : tensor<2x64x64xf32>, tensor<2x64x32xf32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$query, Tetra_FloatTensor:$key,
                       Tetra_FloatTensor:$value, Tetra_FloatTensor:$grad,
                       I64Attr:$heads, I64Attr:$kv_heads,
                       UnitAttr:$bf16_operands);
  let results = (outs Tetra_FloatTensor:$query_grad,
                      Tetra_FloatTensor:$key_grad,
                      Tetra_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad `heads` $heads `kv_heads` $kv_heads
    (`bf16_operands` $bf16_operands^)? attr-dict `:` type($query) `,`
    type($key)
  }];
  let hasVerifier = 1;
}

def Tetra_SiluGradOp : Tetra_Op<"silu_grad",
    [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of x · sigmoid(x)";
  let description = [{
    From the forward's x (`input`) and dY (`grad`), with σ the logistic
    sigmoid:

    ```
    dx = dY · σ(x) · (1 + x · (1 − σ(x)))
    ```

    ```mlir
    %dx = tetra.silu_grad %x, %dy : tensor<2x64x128xf32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$input, Tetra_FloatTensor:$grad);
  let results = (outs Tetra_FloatTensor:$input_grad);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($input)";
}

def Tetra_CrossEntropyGradOp : Tetra_Op<"cross_entropy_grad",
    [Pure, AllTypesMatch<["logits", "logits_grad"]>]> {
  let summary = "Gradient of the mean cross-entropy with respect to the logits";
  let description = [{
    The backward of `tetra.cross_entropy` (the mean over the N positions of
    `logsumexp(logits[p]) − logits[p, targets[p]]`, N the number of
    elements of `targets`). `grad` is the gradient of the loss (1 for the
    loss itself). For every position p and class c:

    ```
    softmax(l)_c       = exp(l_c − max(l)) / Σ_c' exp(l_c' − max(l))
    dlogits[p, c]      = grad / N · (softmax(logits[p])_c − [c = targets[p]])
    ```

    Targets are in `[0, vocab)`, as the forward requires.

    ```mlir
    %dlogits = tetra.cross_entropy_grad %logits, %targets, %one
        : tensor<2x64x256xf32>, tensor<2x64xi32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$logits,
                       RankedTensorOf<[I32]>:$targets,
                       Tetra_ScalarTensor:$grad);
  let results = (outs Tetra_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad attr-dict `:` type($logits) `,`
    type($targets)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The optimizer
//===----------------------------------------------------------------------===//

def Tetra_GlobalNormOp : Tetra_Op<"global_norm", [Pure]> {
  let summary = "The L2 norm of all gradients together";
  let description = [{
    The square root of the sum of the squares of every element of every
    operand, as one vector (the squares accumulate in f32 or wider):

    ```
    norm = sqrt(Σ_t Σ_e t[e]²)
    ```

    ```mlir
    %norm = tetra.global_norm %dw0, %dw1 : tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tetra_FloatTensor>:$inputs);
  let results = (outs Tetra_ScalarTensor:$norm);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def Tetra_ClipByNormOp : Tetra_Op<"clip_by_norm",
    [Pure, AllTypesMatch<["grad", "result"]>]> {
  let summary = "Scale a gradient so that the global norm is at most max_norm";
  let description = [{
    Gradient clipping by the global norm (`norm`, from `tetra.global_norm`
    over all gradients), as PyTorch's `clip_grad_norm_` computes it:

    ```
    factor = min(1, max_norm / (norm + 1e-6))
    result = grad · factor
    ```

    ```mlir
    %clipped = tetra.clip_by_norm %dw, %norm max_norm 1.000000e+00
        : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$grad, Tetra_ScalarTensor:$norm,
                       F64Attr:$max_norm);
  let results = (outs Tetra_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $norm `max_norm` $max_norm attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Tetra_AdamWOp : Tetra_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m",
                   "new_v"]>]> {
  let summary = "One AdamW update of a parameter and its moments";
  let description = [{
    Adam with bias correction and decoupled weight decay (Loshchilov &
    Hutter; PyTorch's `AdamW`), elementwise; `step` is the 1-based number of
    this update (≥ 1), `lr` this step's learning rate (the schedule is the
    runtime's):

    ```
    m'  = beta1 · m + (1 − beta1) · g
    v'  = beta2 · v + (1 − beta2) · g²
    m̂   = m' / (1 − beta1^step)
    v̂   = v' / (1 − beta2^step)
    p'  = p − lr · (m̂ / (sqrt(v̂) + eps) + weight_decay · p)
    ```

    The bias corrections `1 − beta^step` are scalars, computed in f64 and
    rounded to f32; everything else is f32. The decay term uses the old p
    (`p · (1 − lr · weight_decay)` first, then the Adam step: the same
    value). The training step gives 1-D parameters (norm weights)
    `weight_decay = 0`.

    ```mlir
    %p1, %m1, %v1 = tetra.adamw %p, %g, %m, %v, %step, %lr beta1 9.0e-01
        beta2 9.5e-01 eps 1.0e-08 weight_decay 1.0e-01 : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Tetra_FloatTensor:$param, Tetra_FloatTensor:$grad,
                       Tetra_FloatTensor:$m, Tetra_FloatTensor:$v,
                       I64:$step, F32:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Tetra_FloatTensor:$new_param, Tetra_FloatTensor:$new_m,
                      Tetra_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $step `,` $lr `beta1` $beta1 `beta2`
    $beta2 `eps` $eps `weight_decay` $weight_decay attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

#endif // TETRA_TRAINING_OPS_TD
