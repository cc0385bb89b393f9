//===- NumericsOf.cpp - Dialect attributes as numerics values -------------===//

#include "lowering/NumericsOf.h"

#include "llvm/Support/ErrorHandling.h"

using namespace tetra;

numerics::ElementFormat tetra::numericsOf(ElementFormat format) {
  switch (format) {
  case ElementFormat::E2M1:
    return numerics::ElementFormat::E2M1;
  case ElementFormat::E4M3:
    return numerics::ElementFormat::E4M3;
  case ElementFormat::E5M2:
    return numerics::ElementFormat::E5M2;
  case ElementFormat::BF16:
    return numerics::ElementFormat::BF16;
  case ElementFormat::F32:
    return numerics::ElementFormat::F32;
  }
  llvm_unreachable("unknown element format");
}

numerics::Rounding tetra::numericsOf(Rounding rounding) {
  switch (rounding) {
  case Rounding::NearestEven:
    return numerics::Rounding::NearestEven;
  case Rounding::NearestAway:
    return numerics::Rounding::NearestAway;
  case Rounding::Stochastic:
    return numerics::Rounding::Stochastic;
  }
  llvm_unreachable("unknown rounding");
}

numerics::ScaleRule tetra::numericsOf(ScaleRule rule) {
  switch (rule) {
  case ScaleRule::Floor:
    return numerics::ScaleRule::Floor;
  case ScaleRule::Ceil:
    return numerics::ScaleRule::Ceil;
  case ScaleRule::Even:
    return numerics::ScaleRule::Even;
  case ScaleRule::RCeil:
    return numerics::ScaleRule::RCeil;
  case ScaleRule::Nearest:
    return numerics::ScaleRule::Nearest;
  case ScaleRule::Torchao:
    return numerics::ScaleRule::Torchao;
  }
  llvm_unreachable("unknown scale rule");
}

numerics::Rotation tetra::numericsOf(RotationAttr rotation) {
  numerics::Rotation result;
  switch (rotation.getKind()) {
  case RotationKind::None:
    return result;
  case RotationKind::Hadamard:
    result.kind = numerics::RotationKind::Hadamard;
    break;
  case RotationKind::RandomHadamard:
    result.kind = numerics::RotationKind::RandomHadamard;
    break;
  }
  result.blockSize = static_cast<int>(rotation.getBlockSize());
  result.schedule = rotation.getSchedule() == SignSchedule::PerStep
                        ? numerics::SignSchedule::PerStep
                        : numerics::SignSchedule::Fixed;
  result.seed = rotation.getSeed();
  return result;
}

numerics::BlockFormat tetra::blockFormatOf(OperandQuantAttr quant) {
  numerics::BlockFormat format;
  format.element = numericsOf(quant.getFormat());
  format.rounding = numericsOf(quant.getRounding());
  if (BlockScaleAttr scale = quant.getBlockScale()) {
    format.scaling.blockSize = static_cast<int>(scale.getBlockSize());
    format.scaling.scaleFormat = scale.getScaleFormat() == ScaleFormat::E4M3
                                     ? numerics::ScaleFormat::E4M3
                                     : numerics::ScaleFormat::E8M0;
    format.scaling.rule = numericsOf(scale.getRule());
  } else {
    format.scaling.blockSize = 1;
  }
  return format;
}
