//===- NumericsOf.h - Dialect attributes as numerics values -----*- C++ -*-===//
//
// The one mapping from the tetra dialect's formats, roundings, scalings and
// rotations to runtime/numerics' types, for the code that needs both: the
// CPU code generator (format constants) and the schedule builder (what a
// GEMM kernel does to its operands, for the runtime's SQNR measurement).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_LOWERING_NUMERICSOF_H
#define TETRA_LOWERING_NUMERICSOF_H

#include "dialect/TetraAttributes.h"
#include "runtime/numerics/BlockQuantize.h"

namespace tetra {

numerics::ElementFormat numericsOf(ElementFormat format);
numerics::Rounding numericsOf(Rounding rounding);
numerics::ScaleRule numericsOf(ScaleRule rule);
numerics::Rotation numericsOf(RotationAttr rotation);
/// `quant`'s element format, block scaling (block size 1 for f32 and bf16)
/// and rounding; its rotation is separate (numericsOf(RotationAttr)).
numerics::BlockFormat blockFormatOf(OperandQuantAttr quant);

} // namespace tetra

#endif // TETRA_LOWERING_NUMERICSOF_H
