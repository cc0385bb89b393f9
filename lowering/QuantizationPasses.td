//===- QuantizationPasses.td - Quantization and CPU codegen -*- tablegen -*-===//
//
// The passes between the training step and the targets: materialize each
// matmul's policy into rotations, quantizers and a scaled matmul; group them
// into kernels; generate CPU code for the kernels.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_QUANTIZATIONPASSES_TD
#define TETRA_LOWERING_QUANTIZATIONPASSES_TD

include "mlir/Pass/PassBase.td"

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
      `tetra.silu`, `tetra.scale`), where every op but the last has a
      single use, the next op of the chain, becomes one kernel.

    Kernels are named after what they compute: a GEMM kernel after its
    matmul's `NameLoc` ("layers.0.attn.wq.fprop" gives
    `layers_0_attn_wq_fprop`; characters other than letters, digits and
    `_` become `_`), an elementwise kernel `elementwise_N`; a name already
    taken in the module gets a suffix `_2`, `_3`, ... Ops already inside a
    kernel are left alone, so the pass is idempotent.
  }];
  let dependentDialects = ["::tetra::TetraDialect"];
}

def ConvertTetraToCPU : Pass<"convert-tetra-to-cpu", "mlir::ModuleOp"> {
  let summary = "Generate CPU code for every tetra.kernel";
  let description = [{
    Turns every `tetra.kernel` of the module into a function over memrefs,
    in loops of `scf`, `arith`, `math` and `memref` ops that compute exactly
    what `runtime/numerics` computes, bit for bit:

    - `tetra.quantize`: block amax over the finite elements, the E8M0
      shared exponent from amax's integer fields (floor, ceil, even, rceil,
      clamped to [-127, 127]; amax 0 gives -127; a block with a NaN or an
      Inf gets the NaN scale and zero codes), NVFP4's fixed sequence of
      fp32 operations, and each element encoded from its fp32 bits (round
      to nearest even, ties away, or stochastic with Philox4x32-10 written
      in `arith`: each 32x32->64-bit product an `i64` multiply);
    - `tetra.rotate`: the fast Walsh-Hadamard butterflies in the defined
      order (stride 1, 2, ..., B/2), the fp32 constant 1/sqrt(B), random
      signs from Philox (tensor id 0x48414431);
    - `tetra.dequantize`, and `tetra.scaled_matmul` in its defined
      summation order (dequantize, then chunked fp32 accumulation);
    - `arith.truncf` / `arith.extf` between f32 and bf16 (numerics' BF16
      encoder: nearest even, canonical NaN 0x7FC0), and the elementwise
      `tetra.add`, `tetra.sub`, `tetra.mul`, `tetra.scale`, `tetra.silu` on
      f32.

    **The kernel ABI.** Kernel "NAME" becomes
    `func.func @NAME(inputs..., outputs...)` with `llvm.emit_c_interface`,
    so the entry point is `_mlir_ciface_NAME`. Each tensor input, then each
    result, is passed as a pointer to a memref descriptor
    `{T *allocated, T *aligned, int64_t offset, int64_t sizes[R],
    int64_t strides[R]}` of a contiguous row-major buffer; the caller
    allocates the results (destination passing). T is `float` for f32,
    `uint16_t` (the bits) for bf16, and `uint8_t` for codes (one per byte,
    in the low bits) and scales (E8M0 or E4M3 bits); an NVFP4 tensor scale
    is a rank-0 `float` memref. Integer inputs (`%seed`, `%step`) are
    passed by value as `int64_t`. Shapes may be dynamic: the kernel reads
    every size from its descriptors, and the caller guarantees what the
    verifiers check for static shapes (extents along quantization and
    rotation axes are multiples of the block sizes).

    The module's other functions (the host side, which the runtime's
    schedule executes) are removed: what remains is the kernel module.
    Ops a kernel may not contain are reported with their location.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // TETRA_LOWERING_QUANTIZATIONPASSES_TD
