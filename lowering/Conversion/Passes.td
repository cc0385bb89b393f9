//===- Passes.td - One conversion per target ----------------*- tablegen -*-===//
//
// Each target's last conversion, from formed `tetra.kernel`s to its code:
// the CPU (loops down to the LLVM dialect), sm_90a and gfx950 (gpu.modules
// from one plan, GemmKernelPlan.h). Every conversion emits the
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

def ConvertTetraToNVVM : Pass<"convert-tetra-to-nvvm", "mlir::ModuleOp"> {
  let summary = "Generate NVIDIA Hopper (sm_90a) code for every GEMM tetra.kernel";
  let description = [{
    Every GEMM `tetra.kernel` — two operands, each optionally rotated
    (deterministic or random block Hadamard, 16 to 128) and then MX (MXFP4,
    MXFP8 E4M3/E5M2: E8M0 scales on blocks of 32), NVFP4 (E2M1, E4M3 scales
    on blocks of 16 under an fp32 tensor scale) or BF16, quantized along K
    (nearest even, nearest away or stochastic), and their
    `tetra.scaled_matmul` in any role's layout — becomes a `gpu.module`
    named after the kernel, from the GPU kernel plan (`GemmKernelPlan.h`)
    that `--convert-tetra-to-amdgpu` shares:

    - the prologue, per operand: `NAME__lhs` (`input, codes, scales,
      seed, step`), one thread per segment of the operand along K (the
      larger of the quantization block and the rotation block), rotating
      it in a local buffer and quantizing its blocks through the shared
      quantization emitter — codes (one per byte) and scales bit for bit
      those of `runtime/numerics`, stochastic-rounding bits included,
      written K-major whatever the operand's layout (`scratch_layout =
      "k_major"`: [M or N][K] codes, [M or N][K / block] scales) — but for
      an unrotated BF16 operand reduced along its rows on sm_90a's wgmma
      tiles (`"mn_major"`: the input's own [K][M or N], read transposed by
      wgmma; its prologue, like any BF16 operand's whose scratch keeps the
      input's layout, only rounds, eight elements a thread), each
      E2M1 code as the E4M3 byte of its value (`scratch_encoding = "e4m3"`:
      every E2M1 value is exact in E4M3, and sm_90a's FP8 instructions read
      it as it is). NVFP4 first runs `NAME__lhs_amax_clear` and
      `NAME__lhs_amax` (the rotated tensor's finite amax by an atomic
      maximum) and writes its tensor scale; BF16 writes 2-byte bf16 codes
      and no scales;
    - `NAME__gemm`: one block per `block_tile` (128, 64 or 32 rows and
      columns, the largest that divides M and N) of the f32 result; K in
      steps of `step_k` (the longest of 128, 64, 32 — bf16 64, 32 — whose
      two staged buffers fit the 227 KB of an H100/H200 block's shared
      memory) staged in two shared-memory buffers of
      K-major rows with sm_90a's 32/64/128-byte swizzle (on a 1024-byte
      boundary): while the matrix instructions read step s from one, each
      thread stores step s + 1 (loaded during step s - 1, 16 bytes a load
      and a store) into the other and loads step s + 2; one barrier a step,
      which also ANDs whether every E8M0 scale code staged is moderate
      (2^±45: a flag the same in every thread).
      MXFP4 x MXFP4 and BF16 x BF16 on tiles of 64 x 64 multiples (BF16's
      up to 128 x 256): one warpgroup per 64 x 256, 64 x 128 or 64 x 64 of
      the tile with `wgmma.mma_async` reading both operands through
      shared-memory descriptors (staged stores fenced for the async proxy):
      MXFP4 one `m64nNk32` per scale block of 32 from zero, its results
      pinned after the wait by an empty asm; BF16 `m64nNk16` accumulating
      all of K in the tensor cores' fp32 — or, `split_k` > 1 (a long K on
      too few tiles), the block's share of K into its own partial tile,
      which `NAME__sum` adds to the others in split order.
      MXFP4 x MXFP4 folds the block scales into the staged codes where the
      tile allows (`folds_scales` in the plan): the block first takes a
      reference code ref = max - 6 of each row's (column's) E8M0 codes
      over all of K (stored after the staged buffers) and ANDs, in the
      barrier that publishes them, whether every code is within
      [ref - 5, ref + 6], none NaN, every ref within 2^±45 of 1. A folding
      tile stages no scale codes and adds 8·(code - ref) to each nonzero
      E4M3 byte it stages (the values times 2^(code - ref), exact), so each
      slice's sums are the contract's over 2^(ref(row) + ref(col)), exact:
      one fp32 add each, the next slice's wgmma in flight meanwhile
      (wait_group 1); the store multiplies by 2^(ref(row) + ref(col)),
      exact. Elsewhere each slice's results are waited for and scaled in
      fp32 as below.
      FP8 codes (MXFP8 E4M3/E5M2, MXFP4 against MXFP8), NVFP4 and tiles of
      32: one warp per 32 x 32 with `mma.sync.aligned.m16n8k32` (2 x 4
      tiles of 16 x 8) started from zero per chunk — Hopper's FP8 wgmma
      adds a slice's products with about 14 bits, which every E2M1 product
      and sum of 32 fits exactly but E4M3 products do not (measured on the
      H200: far outside the contract's bound), mma.sync's within bound.
      Block-scaled sums are never chained in the tensor core's accumulator:
      each chunk's sum is scaled in fp32 and added with one fma; MX x MX
      applies the two E8M0 scales exactly: on the moderate flag as one fp32
      2^(a+b) built by an integer add (every nonzero sum times it is then a
      normal fp32), elsewhere as `(sum · A1·B1) · A2·B2`, the scales'
      halves 2^⌊a/2⌋ and 2^⌈a/2⌉ (exact wherever the result is in range; a
      NaN scale gives NaN) — so MXFP4 × MXFP4 is `tetra.scaled_matmul`'s
      contract bit for bit. With an NVFP4 operand the chunk is 16: each
      m16n8k32 sees one half of K, the other half zeroed, and each side's
      factor is decodeE4M3(scale) · tensor scale (within the contract's
      bound). BF16 x BF16 on 32-wide tiles: `mma.sync.aligned.m16n8k16.bf16`
      accumulating over all of K.

    Each `gpu.func` records its launch in `tetra.launch = {grid, block,
    arguments}`, the arguments named `input:I` (the kernel's input I),
    `result:0`, `scratch:lhs.codes` (and `.scales`, `.amax`,
    `.tensor_scale`, `rhs.*`: buffers the launches share) and
    `scalar:seed` / `scalar:step` (the step's seed and step, as i64); the
    module's `tetra.gemm` holds what it computes and its `plan` (block
    tile, the tile one warp or warpgroup computes, threads, step, chunk,
    staged bytes, row pitch, instruction). The module's
    other operations (the host side, the elementwise kernels the CPU runs)
    are removed.

    A GEMM the target cannot implement — f32 operands, a bf16 operand
    against a block-scaled one, a shape that is not a multiple of 32 x 32 x
    32, an operand computed inside the kernel — is an error naming the GEMM
    (`layers.0.attn.wq.fprop`) and the target. Nothing here emits E2M1
    conversion instructions, which sm_90a does not have (LLVM aborts on
    them).
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "the NVIDIA chip (sm_90a)">,
    Option<"blockTile", "block-tile", "int64_t", /*default=*/"128",
           "the largest side of a block's result tile (32, 64 or 128; at "
           "128, bf16 x bf16 tiles are 256 wide; a GEMM whose tiles sum a "
           "K of 4096 or more and do not fill the chip's multiprocessors "
           "takes smaller ones, down to 64, or, bf16, splits K across "
           "blocks)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def ConvertTetraToAMDGPU : Pass<"convert-tetra-to-amdgpu", "mlir::ModuleOp"> {
  let summary = "Generate AMD MI355X (gfx950) code for every GEMM tetra.kernel";
  let description = [{
    The same GEMM kernels as `--convert-tetra-to-nvvm`, from the same plan
    (`GemmKernelPlan.h`): the same `tetra.gemm` description and plan, the
    same prologue launches (rotation and quantization through the shared
    quantization emitter into K-major scratch; the codes as they are), the
    same block tiles staged in two LDS buffers (rows padded by 16 bytes;
    steps whose two buffers fit 160 KB), and gfx950's own instructions, one
    wave of 64 lanes per 32 x 32 of a block's tile:

    - MX in steps of 128: four `amdgpu.scaled_mfma 16x16x128`
      (`v_mfma_scale_f32_16x16x128_f8f6f4`) per step, lane l giving row
      (column) l % 16 and the 32 codes of K chunk l / 16 — one MX block,
      with its E8M0 scale;
    - MX in steps of 64 (or 32, the upper lanes zero): `amdgpu.scaled_mfma
      32x32x64` (`v_mfma_scale_f32_32x32x64_f8f6f4`), lane l giving row
      (column) l % 32 and K chunk l / 32;
    - BF16: `amdgpu.mfma 32x32x16` (`v_mfma_f32_32x32x16_bf16`) per 16 of
      K, accumulating over all of K.

    The scaled MFMAs take E2M1 as format 4, E4M3 as 0, E5M2 as 1; they
    apply both scales and accumulate in fp32. E2M1 codes are staged packed
    two per byte, as the MFMA reads them, and each lane reads its operand
    from LDS in one 16-byte load. NVFP4 is refused by name:
    gfx950 has no MFMA with E4M3 scales on blocks of 16. Codes come from
    the shared emitter, not from `v_cvt_scalef32_pk_fp4_*`, whose ties,
    saturation and NaN could not be checked against the numerics library
    without an MI355X. Not executed anywhere (there is no MI355X here):
    checked by its ISA, its metadata and the plan it shares with the sm_90a
    code, which runs on an H200. Other refusals are sm_90a's, naming
    gfx950.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"gfx950\"",
           "the AMD chip (gfx950)">,
    Option<"blockTile", "block-tile", "int64_t", /*default=*/"128",
           "the largest side of a block's result tile (32, 64 or 128; a "
           "GEMM whose tiles sum a K of 4096 or more and do not fill the "
           "chip's compute units takes smaller ones, down to 64, or, bf16, "
           "splits K across blocks)">,
  ];
  let dependentDialects = [
    "::mlir::amdgpu::AMDGPUDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // TETRA_LOWERING_CONVERSION_PASSES_TD
