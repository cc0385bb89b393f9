//===- Passes.td - One conversion per target ----------------*- tablegen -*-===//
//
// Each target's last conversion, from formed `tetra.kernel`s to its code:
// the CPU (loops down to the LLVM dialect). Every conversion emits the
// quantization arithmetic through one shared emitter
// (QuantizationEmitter.h), so the targets cannot drift apart. Their
// reference, docs/passes/Conversion.md, is generated from this file.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_CONVERSION_PASSES_TD
#define TETRA_LOWERING_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // TETRA_LOWERING_CONVERSION_PASSES_TD
