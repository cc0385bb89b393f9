//===- Philox.h - Counter-based random bits for every target ----*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., SC'11), the generator behind stochastic
// rounding and random Hadamard signs. Counter-based: any target can draw the
// bits of element i without drawing those before it, so the CPU, sm_90a and
// gfx950 kernels all round the same element the same way.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_PHILOX_H
#define TETRA_RUNTIME_NUMERICS_PHILOX_H

#include <array>
#include <string_view>
#include <cstdint>

namespace tetra::numerics {

/// One Philox4x32-10 block: 10 rounds over `counter` with `key` (the standard
/// constants 0xD2511F53, 0xCD9E8D57, key bumps 0x9E3779B9, 0xBB67AE85).
/// Matches the Random123 reference (and cuRAND's / PyTorch's philox4x32_10).
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                   std::array<uint32_t, 2> key);

/// Where a stream of random bits comes from: Tetra keys every draw by the
/// run's seed, the training step, and a tensor id the compiler assigns to each
/// quantized operand.
struct RandomStream {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t tensorId = 0;
};

/// The tensor id of a tensor named `name` (FNV-1a, 32 bits): the one
/// naming of stochastic-rounding streams. The compiler keys each quantized
/// operand by its name (stepping past a collision and the rotation signs'
/// id, MaterializeQuantization), `tetra quantize` each tensor of a file.
uint32_t tensorIdOf(std::string_view name);

/// The 32 random bits for element `index` of `stream`:
///   key     = (seed & 0xffffffff, seed >> 32)
///   counter = (index/4 & 0xffffffff, index/4 >> 32, step, tensorId)
///   result  = philox4x32(counter, key)[index % 4]
uint32_t randomBits(const RandomStream &stream, uint64_t index);

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_PHILOX_H
