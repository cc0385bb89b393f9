//===- QuantizationMeter.cpp - Sampled SQNR of quantized GEMM operands ---===//

#include "runtime/trainer/QuantizationMeter.h"

using namespace tetra;
using namespace tetra::trainer;

QuantizationMeter::QuantizationMeter(backend::Backend &backend,
                                     const schedule::StepExecutor &executor,
                                     uint64_t seed, int64_t step,
                                     int64_t sampleElements)
    : backend_(backend), executor_(executor), seed_(seed), step_(step),
      sampleElements_(sampleElements),
      named_(executor.schedule().namedBuffers()) {}

io::Status QuantizationMeter::observe(int launch) {
  const schedule::Launch &desc = executor_.schedule().launches[launch];
  if (!desc.gemm)
    return io::success();
  // Folding is sm_90a's for E2M1 codes under E8M0 scales on both sides.
  auto foldable = [](const schedule::QuantizedOperand &operand) {
    const numerics::BlockFormat &format = operand.quantization.format;
    return format.element == numerics::ElementFormat::E2M1 &&
           format.scaling.scaleFormat == numerics::ScaleFormat::E8M0;
  };
  const bool folds = desc.gemm->operands.size() == 2 &&
                     foldable(desc.gemm->operands[0]) &&
                     foldable(desc.gemm->operands[1]);
  std::vector<numerics::FoldCount> counts;
  for (const schedule::QuantizedOperand &operand : desc.gemm->operands) {
    if (operand.buffer >= 0 && !named_[operand.buffer])
      continue;
    int64_t elements = 1;
    for (int64_t size : operand.shape)
      elements *= size;
    host_.resize(static_cast<size_t>(elements));
    backend::Buffer buffer = operand.buffer >= 0
                                 ? executor_.bufferAt(operand.buffer)
                                 : executor_.argument(launch, operand.argument);
    if (io::Status copied = backend_.copyToHost(host_.data(), buffer,
                                                host_.size() * sizeof(float));
        !copied)
      return copied;
    if (io::Status done = backend_.synchronize(); !done)
      return done;
    int64_t stride =
        numerics::fiberStrideFor(operand.shape, operand.axis, sampleElements_);
    numerics::RandomStream stream{seed_, static_cast<uint32_t>(step_),
                                  operand.tensorId};
    const numerics::ErrorEnergy measured =
        numerics::quantizationError(host_.data(), operand.shape, operand.axis,
                                    operand.quantization, stream, stride);
    const std::string key = desc.gemm->role + "." + operand.name;
    energies_[key].add(measured);
    linearEnergies_[desc.gemm->linear][key].add(measured);
    if (folds)
      counts.push_back(numerics::countFoldable(host_.data(), operand.shape,
                                               operand.axis,
                                               operand.quantization, stream));
  }
  if (folds && counts.size() == 2) {
    // A tile folds when its lhs rows and its rhs columns all do.
    auto &[tiles, folding] = tiles_[desc.gemm->role];
    tiles += counts[0].groups * counts[1].groups;
    folding += counts[0].foldingGroups * counts[1].foldingGroups;
    // A result sums exactly when its lhs row and its rhs column do.
    auto &[results, exact] = pairs_[desc.gemm->role];
    results += static_cast<double>(counts[0].fibers) * counts[1].fibers;
    exact += static_cast<double>(counts[0].exactFibers) * counts[1].exactFibers;
  }
  return io::success();
}

std::map<std::string, double> QuantizationMeter::decibels() const {
  std::map<std::string, double> result;
  for (const auto &[key, energy] : energies_)
    if (std::optional<double> db = energy.sqnrDecibels())
      result[key] = *db;
  return result;
}

std::map<std::string, std::map<std::string, double>>
QuantizationMeter::linearDecibels() const {
  std::map<std::string, std::map<std::string, double>> result;
  for (const auto &[linear, energies] : linearEnergies_)
    for (const auto &[key, energy] : energies)
      if (std::optional<double> db = energy.sqnrDecibels())
        result[linear][key] = *db;
  return result;
}

std::map<std::string, double> QuantizationMeter::exactPairs() const {
  std::map<std::string, double> result;
  for (const auto &[role, count] : pairs_)
    if (count.first > 0)
      result[role] = count.second / count.first;
  return result;
}

std::map<std::string, double> QuantizationMeter::foldingTiles() const {
  std::map<std::string, double> result;
  for (const auto &[role, count] : tiles_)
    if (count.first > 0)
      result[role] = static_cast<double>(count.second) / count.first;
  return result;
}
