//===- Recompute.h - What the backward recomputes ---------------*- C++ -*-===//
//
// A run's `recompute` setting (docs/language.md, "Run files"): which of the
// forward's activations the backward makes again instead of keeping them
// through the step's peak (schedule::rematerialize).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_SCHEDULE_RECOMPUTE_H
#define TETRA_RUNTIME_SCHEDULE_RECOMPUTE_H

#include <array>
#include <optional>
#include <string_view>

namespace tetra::schedule {

enum class Recompute {
  /// Every activation the backward reads is kept from the forward.
  None,
  /// Large outputs of RMSNorms and elementwise kernels: one cheap launch
  /// each (the default).
  Cheap,
  /// Cheap's, and the outputs of the layers' GEMMs and RoPEs (those before
  /// the last RMSNorm) that the backward reads — the SwiGLU's gate and up,
  /// attention's queries, keys and values — each launch run once more;
  /// the residual stream and attention's output are kept.
  Products,
  /// Everything the layers compute from the residual stream (the RMSNorms'
  /// inputs, which stay): GEMMs, RoPE, attention too — activation
  /// checkpointing at each norm, about one more forward pass of the layers.
  Layers,
};

inline constexpr std::array<std::pair<std::string_view, Recompute>, 4>
    kRecomputeNames{{{"none", Recompute::None},
                     {"cheap", Recompute::Cheap},
                     {"products", Recompute::Products},
                     {"layers", Recompute::Layers}}};

inline std::optional<Recompute> parseRecompute(std::string_view name) {
  for (auto [text, mode] : kRecomputeNames)
    if (text == name)
      return mode;
  return std::nullopt;
}

inline std::string_view recomputeName(Recompute mode) {
  for (auto [text, value] : kRecomputeNames)
    if (value == mode)
      return text;
  return "cheap";
}

} // namespace tetra::schedule

#endif // TETRA_RUNTIME_SCHEDULE_RECOMPUTE_H
