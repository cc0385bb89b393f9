//===- TetraAttributes.td - Formats, scales, rounding, policies -*- tablegen -*-===//
//
// Everything a precision policy can say, as attributes. The assembly formats
// are hand-written (TetraAttributes.cpp) so that the common cases read like the
// paper: `#tetra.policy<fprop = mxfp4, dgrad = mxfp4,
// wgrad = mxfp4 rotate hadamard<32>>`.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_ATTRIBUTES_TD
#define TETRA_ATTRIBUTES_TD

include "dialect/TetraDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Tetra_ElementFormat : I32Enum<"ElementFormat", "element format", [
    I32EnumCase<"E2M1", 0, "e2m1">,
    I32EnumCase<"E4M3", 1, "e4m3">,
    I32EnumCase<"E5M2", 2, "e5m2">,
    I32EnumCase<"BF16", 3, "bf16">,
    I32EnumCase<"F32", 4, "f32">]> {
  let cppNamespace = "::tetra";
  let description = [{
    The format an operand is rounded to: OCP FP4 (`e2m1`), OCP FP8 (`e4m3`,
    `e5m2`), `bf16`, or `f32` (no quantization).
  }];
}

def Tetra_ScaleFormat : I32Enum<"ScaleFormat", "block scale format", [
    I32EnumCase<"E8M0", 0, "e8m0">,
    I32EnumCase<"E4M3", 1, "e4m3">]> {
  let cppNamespace = "::tetra";
  let description = [{
    `e8m0`: an unsigned power of two per block (OCP MX). `e4m3`: an FP8 scale
    per 16 elements times an fp32 per-tensor scale (NVFP4).
  }];
}

def Tetra_ScaleRule : I32Enum<"ScaleRule", "block scale rule", [
    I32EnumCase<"Floor", 0, "floor">,
    I32EnumCase<"Ceil", 1, "ceil">,
    I32EnumCase<"Even", 2, "even">,
    I32EnumCase<"RCeil", 3, "rceil">,
    I32EnumCase<"Nearest", 4, "nearest">,
    I32EnumCase<"Torchao", 5, "torchao">]> {
  let cppNamespace = "::tetra";
  let description = [{
    How an E8M0 scale 2^e is chosen from the block's largest magnitude amax:
    `floor` is OCP MX v1.0 (e = floor(log2 amax) - emax, the default);
    `ceil` (e = ceil(log2 amax) - emax); `even` (amax first rounded to the
    element's precision); `rceil` (the smallest e with amax / 2^e <= the
    format's max). How an E4M3 (NVFP4) scale is: `nearest` (the default,
    amax / (tensor scale * 6) rounded to nearest E4M3, subnormal scales
    kept) or `torchao` (torchao's rule: (amax / 6) / tensor scale clamped to
    [2^-6, 448], then rounded). See docs/numerics.md.
  }];
}

def Tetra_Rounding : I32Enum<"Rounding", "rounding mode", [
    I32EnumCase<"NearestEven", 0, "nearest_even">,
    I32EnumCase<"Stochastic", 1, "stochastic">,
    I32EnumCase<"NearestAway", 2, "nearest_away">]> {
  let cppNamespace = "::tetra";
}

def Tetra_RotationKind : I32Enum<"RotationKind", "rotation kind", [
    I32EnumCase<"None", 0, "none">,
    I32EnumCase<"Hadamard", 1, "hadamard">,
    I32EnumCase<"RandomHadamard", 2, "random_hadamard">]> {
  let cppNamespace = "::tetra";
}

def Tetra_SignSchedule : I32Enum<"SignSchedule",
    "when random Hadamard signs are drawn", [
    I32EnumCase<"Fixed", 0, "fixed">,
    I32EnumCase<"PerStep", 1, "per_step">]> {
  let cppNamespace = "::tetra";
}

// An IntegerAttr-backed enum, so that an op's assembly prints it as a bare
// keyword (`role wgrad`).
def Tetra_RoleAttr : I32EnumAttr<"Role", "GEMM role in a linear layer", [
    I32EnumAttrCase<"Fprop", 0, "fprop">,
    I32EnumAttrCase<"Dgrad", 1, "dgrad">,
    I32EnumAttrCase<"Wgrad", 2, "wgrad">]> {
  let cppNamespace = "::tetra";
  let description = [{
    `fprop`: Y = X·Wᵀ (reduces over input features); `dgrad`: dX = dY·W
    (reduces over output features); `wgrad`: dW = dYᵀ·X (reduces over
    tokens).
  }];
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Tetra_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Tetra_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// Standalone spellings of the enums, for IR that names one field of a
// policy on its own: #tetra.format<e2m1>, #tetra.rounding<stochastic>, ...
class Tetra_EnumAttr<EnumInfo enumInfo, string name>
    : EnumAttr<Tetra_Dialect, enumInfo, name> {
  let assemblyFormat = "`<` $value `>`";
}
def Tetra_ElementFormatAttr : Tetra_EnumAttr<Tetra_ElementFormat, "format">;
def Tetra_ScaleFormatAttr : Tetra_EnumAttr<Tetra_ScaleFormat, "scale_format">;
def Tetra_ScaleRuleAttr : Tetra_EnumAttr<Tetra_ScaleRule, "scale_rule">;
def Tetra_RoundingAttr : Tetra_EnumAttr<Tetra_Rounding, "rounding">;
def Tetra_SignScheduleAttr
    : Tetra_EnumAttr<Tetra_SignSchedule, "sign_schedule">;

def Tetra_BlockScaleAttr : Tetra_Attr<"BlockScale", "block_scale"> {
  let summary = "Block scaling: block size, scale format and scale rule";
  let description = [{
    Every `block_size` consecutive elements along the quantization axis share
    one scale.

    ```mlir
    #tetra.block_scale<32, e8m0, floor>   // OCP MX
    #tetra.block_scale<16, e4m3>          // NVFP4 (rule nearest)
    #tetra.block_scale<16, e4m3, torchao> // NVFP4 under torchao's rule
    ```

    The block size is a power of two from 2 to 1024; an `e4m3` scale (NVFP4)
    requires a block of 16. The rule is one of its scale format's.
  }];
  let parameters = (ins
    "int64_t":$blockSize,
    EnumParameter<Tetra_ScaleFormat>:$scaleFormat,
    EnumParameter<Tetra_ScaleRule>:$rule);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Tetra_RotationAttr : Tetra_Attr<"Rotation", "rotation"> {
  let summary = "A block Hadamard rotation along the reduction dimension";
  let description = [{
    ```mlir
    #tetra.rotation<none>
    #tetra.rotation<hadamard<32>>                      // deterministic
    #tetra.rotation<random_hadamard<16, per_step, 7>>  // signs from seed 7
    ```

    A normalized Sylvester Hadamard matrix of 16, 32, 64 or 128, applied to
    each block of the reduction dimension, optionally times random signs
    drawn once (`fixed`) or every step (`per_step`).
  }];
  let parameters = (ins
    EnumParameter<Tetra_RotationKind>:$kind,
    "int64_t":$blockSize,
    EnumParameter<Tetra_SignSchedule>:$schedule,
    "uint64_t":$seed);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static RotationAttr getNone(::mlir::MLIRContext *context);
    bool isNone() const { return getKind() == RotationKind::None; }
    /// Whether the rotation needs the training step (signs redrawn).
    bool needsStep() const {
      return getKind() == RotationKind::RandomHadamard &&
             getSchedule() == SignSchedule::PerStep;
    }
  }];
}

def Tetra_OperandQuantAttr : Tetra_Attr<"OperandQuant", "quant"> {
  let summary = "How one GEMM operand is rotated, scaled and rounded";
  let description = [{
    A preset or an element format, then optional modifiers:

    ```mlir
    #tetra.quant<mxfp4>                                   // e2m1, 32, e8m0, floor
    #tetra.quant<mxfp4 round stochastic rotate hadamard<32>>
    #tetra.quant<nvfp4>                                   // e2m1, 16, e4m3
    #tetra.quant<e4m3 block 32 scale e8m0 rceil>          // the full form
    #tetra.quant<bf16>
    ```

    Presets: `mxfp4`, `mxfp8_e4m3` (alias `mxfp8`), `mxfp8_e5m2`, `nvfp4`,
    `bf16`, `f32`. Modifiers: `rule <floor|ceil|even|rceil>`,
    `round <nearest_even|nearest_away|stochastic>`, `rotate <rotation>`.
    FP4 and FP8 formats need a block scale; `bf16` and `f32` take none.
  }];
  let parameters = (ins
    EnumParameter<Tetra_ElementFormat>:$format,
    OptionalParameter<"::tetra::BlockScaleAttr">:$blockScale,
    EnumParameter<Tetra_Rounding>:$rounding,
    "::tetra::RotationAttr":$rotation);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The named preset (no modifiers), or failure for an unknown name.
    static ::mlir::FailureOr<OperandQuantAttr>
    getPreset(::mlir::MLIRContext *context, ::llvm::StringRef name);
    /// Whether the operand is rounded at all (anything but f32).
    bool isQuantized() const { return getFormat() != ElementFormat::F32; }
    /// Whether rounding needs random bits.
    bool isStochastic() const { return getRounding() == Rounding::Stochastic; }
    /// The builtin element type the codes are stored in.
    ::mlir::Type getCodeType() const;
    /// The builtin element type of the block scales (null without blocks).
    ::mlir::Type getScaleType() const;
    /// Block size along the quantization axis, 1 without block scaling.
    int64_t getBlockSize() const;
  }];
}

def Tetra_GemmPolicyAttr : Tetra_Attr<"GemmPolicy", "gemm"> {
  let summary = "The quantization of both operands of one GEMM";
  let description = [{
    Either one operand quantization for both operands, or each on its own:

    ```mlir
    #tetra.gemm<mxfp4 rotate hadamard<32>>
    #tetra.gemm<{lhs = mxfp4 round stochastic, rhs = mxfp4, acc = f32}>
    ```

    The accumulator is `f32` unless said otherwise. A rotation changes the
    product unless both operands get the same one, so the two rotations must
    be equal.
  }];
  let parameters = (ins
    "::tetra::OperandQuantAttr":$lhs,
    "::tetra::OperandQuantAttr":$rhs,
    "::mlir::Type":$accumulateType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether either operand needs random bits or the training step.
    bool needsRandomSource() const;
  }];
}

def Tetra_PolicyAttr : Tetra_Attr<"Policy", "policy"> {
  let summary = "A linear layer's precision: one GEMM policy per role";
  let description = [{
    ```mlir
    #tetra.policy<fprop = mxfp4, dgrad = mxfp4,
                  wgrad = mxfp4 rotate hadamard<32>>
    #tetra.policy<fprop = bf16, dgrad = bf16, wgrad = bf16>
    ```

    Each role takes the syntax of `#tetra.gemm` without its brackets. All
    three roles must be given.
  }];
  let parameters = (ins
    "::tetra::GemmPolicyAttr":$fprop,
    "::tetra::GemmPolicyAttr":$dgrad,
    "::tetra::GemmPolicyAttr":$wgrad);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    GemmPolicyAttr getForRole(Role role) const;
  }];
}

#endif // TETRA_ATTRIBUTES_TD
