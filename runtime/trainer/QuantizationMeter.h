//===- QuantizationMeter.h - Sampled SQNR of GEMM operands ------*- C++ -*-===//
//
// Measures, while the gradient part of a step runs, the quantization error of
// every operand a compiled GEMM kernel rotates and quantizes (the schedule's
// Launch::gemm says which, and how): right after the kernel's launch, while
// its operands are still in place, each operand is copied to the host and
// numerics::quantizationError() measures the quantizer on a sample of its
// fibers — exactly the codes the kernel used (same stochastic-rounding bits
// and rotation signs, from the run's seed and the step). The energies are
// pooled over all linears per GEMM role and operand: "fprop.x", "fprop.w",
// "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x" — and kept per linear too
// (the same measurements, no extra cost), to see which layer and which GEMM
// degrade. For MXFP4 x MXFP4 GEMMs it
// also counts, over every fiber of both operands, the 128 x 128 tiles whose
// scales sm_90a's GEMM would fold into its codes (numerics::countFoldable:
// its fast path), per GEMM role. An operand whose fp32 values the step never
// holds (a GPU step's BF16 operand written as codes by its producer) has no
// measurement.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TRAINER_QUANTIZATIONMETER_H
#define TETRA_RUNTIME_TRAINER_QUANTIZATIONMETER_H

#include "runtime/numerics/QuantizationError.h"
#include "runtime/numerics/ScaleFolding.h"
#include "runtime/schedule/Executor.h"

#include <map>
#include <string>

namespace tetra::trainer {

class QuantizationMeter {
public:
  /// `sampleElements`: about how many elements of each operand to measure.
  QuantizationMeter(backend::Backend &backend,
                    const schedule::StepExecutor &executor, uint64_t seed,
                    int64_t step, int64_t sampleElements);

  /// Measures launch `launch`'s quantized operands, if it is a GEMM kernel
  /// (StepExecutor::runObserving calls it after every launch).
  io::Status observe(int launch);

  /// The pooled energies per "role.operand".
  const std::map<std::string, numerics::ErrorEnergy> &energies() const {
    return energies_;
  }
  /// SQNR in dB per "role.operand"; lossless operands have none.
  std::map<std::string, double> decibels() const;
  /// SQNR in dB per linear ("layers.0.attn.wq") and "role.operand".
  std::map<std::string, std::map<std::string, double>> linearDecibels() const;
  /// Per GEMM role with MXFP4 x MXFP4 GEMMs: the fraction of their 128 x 128
  /// result tiles that sm_90a's GEMM folds (numerics/ScaleFolding.h).
  std::map<std::string, double> foldingTiles() const;
  /// The fraction of MXFP4 x MXFP4 results whose row and column both sum
  /// exactly (the contract's exact sums: numerics::fiberSumsExactly), per
  /// GEMM role.
  std::map<std::string, double> exactPairs() const;

private:
  backend::Backend &backend_;
  const schedule::StepExecutor &executor_;
  uint64_t seed_;
  int64_t step_;
  int64_t sampleElements_;
  std::map<std::string, numerics::ErrorEnergy> energies_;
  /// Per linear, per "role.operand".
  std::map<std::string, std::map<std::string, numerics::ErrorEnergy>>
      linearEnergies_;
  /// Per role: result tiles counted, and those that fold.
  std::map<std::string, std::pair<int64_t, int64_t>> tiles_;
  /// Per role: results, and those that sum exactly.
  std::map<std::string, std::pair<double, double>> pairs_;
  std::vector<float> host_;
  /// The schedule buffers its launches name. An operand in another (on the
  /// GPU, a BF16 operand whose producer writes only the codes its GEMM
  /// reads: its fp32 values never exist) is not measured.
  std::vector<bool> named_;
};

} // namespace tetra::trainer

#endif // TETRA_RUNTIME_TRAINER_QUANTIZATIONMETER_H
