//===- CpuRotateTest.cpp - Generated Hadamard rotations vs numerics -------===//
//
// JIT-compiles one tetra.rotate kernel per block size (16..128), kind
// (deterministic, random signs fixed for the run, random signs per step),
// direction and axis, and checks every output float against
// numerics::rotate bit for bit: same butterflies, same order, same 1/sqrt(B)
// constant, same Philox signs.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

using namespace tetra;
using namespace tetra::testing;
using numerics::Rotation;
using numerics::RotationKind;
using numerics::SignSchedule;

namespace {

struct RotateCase {
  int blockSize;
  RotationKind kind;
  SignSchedule schedule;
  uint64_t seed;
  bool inverse;
  int axis;
  int rank = 2;

  Rotation rotation() const { return {kind, blockSize, schedule, seed}; }
  std::string kindName() const {
    if (kind == RotationKind::Hadamard)
      return "hadamard";
    return schedule == SignSchedule::Fixed ? "random_fixed" : "random_per_step";
  }
  std::string name() const {
    return "rotate_" + kindName() + "_" + std::to_string(blockSize) +
           (inverse ? "_inverse" : "") + "_axis" + std::to_string(axis) +
           (rank != 2 ? "_rank" + std::to_string(rank) : "");
  }
  std::string rotationSyntax() const {
    if (kind == RotationKind::Hadamard)
      return "hadamard<" + std::to_string(blockSize) + ">";
    return "random_hadamard<" + std::to_string(blockSize) + ", " +
           (schedule == SignSchedule::Fixed ? "fixed" : "per_step") + ", " +
           std::to_string(seed) + ">";
  }
};

void PrintTo(const RotateCase &c, std::ostream *os) { *os << c.name(); }

std::vector<RotateCase> allCases() {
  std::vector<RotateCase> cases;
  for (int blockSize : {16, 32, 64, 128})
    for (auto [kind, schedule, seed] :
         {std::tuple{RotationKind::Hadamard, SignSchedule::Fixed, uint64_t{0}},
          std::tuple{RotationKind::RandomHadamard, SignSchedule::Fixed,
                     uint64_t{7}},
          std::tuple{RotationKind::RandomHadamard, SignSchedule::PerStep,
                     uint64_t{0xDEADBEEFCAFEF00Dull}}})
      for (bool inverse : {false, true})
        for (int axis : {0, 1})
          cases.push_back({blockSize, kind, schedule, seed, inverse, axis});
  cases.push_back({32, RotationKind::RandomHadamard, SignSchedule::PerStep, 3,
                   false, 1, 3});
  cases.push_back(
      {128, RotationKind::Hadamard, SignSchedule::Fixed, 0, true, 1, 3});
  return cases;
}

std::string kernelSource(const RotateCase &c) {
  std::string type = c.rank == 3 ? "tensor<?x?x?xf32>" : "tensor<?x?xf32>";
  std::string name = c.name();
  return "func.func @host_" + name + "(%x: " + type + ", %step: i64) -> " +
         type + " {\n  %r = tetra.kernel \"" + name +
         "\" (%a = %x, %s = %step) : (" + type + ", i64) -> " + type +
         " {\n    %y = tetra.rotate %a by #tetra.rotation<" +
         c.rotationSyntax() + "> along " + std::to_string(c.axis) +
         (c.inverse ? " inverse" : "") + " step(%s) : " + type +
         "\n    tetra.yield %y : " + type + "\n  }\n  return %r : " + type +
         "\n}\n";
}

const cpu::KernelLibrary *library() {
  static std::unique_ptr<cpu::KernelLibrary> compiled = [] {
    std::string source;
    for (const RotateCase &c : allCases())
      source += kernelSource(c);
    return compileOrFail(source);
  }();
  return compiled.get();
}

template <int Rank>
std::vector<float> runKernel(const RotateCase &c, std::vector<float> data,
                             const std::vector<int64_t> &shape, int64_t step) {
  std::array<int64_t, Rank> sizes;
  for (int d = 0; d < Rank; ++d)
    sizes[d] = shape[d];
  std::vector<float> result(data.size(), kNaN);
  auto input = describe<float, Rank>(data.data(), sizes);
  auto output = describe<float, Rank>(result.data(), sizes);
  auto *kernel =
      library()
          ->lookupAs<void(MemRefDescriptor<float, Rank> *, int64_t,
                          MemRefDescriptor<float, Rank> *)>(c.name());
  kernel(&input, step, &output);
  return result;
}

/// Values of every size and sign, with a few Infs, NaNs, subnormals and
/// values large enough that the butterflies overflow.
std::vector<float> rotateData(int64_t count, uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::vector<float> data(count);
  for (float &x : data) {
    x = std::ldexp(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng),
                   int(rng() % 40) - 20);
  }
  if (specials) {
    data[rng() % count] = kNaN;
    data[rng() % count] = kInf;
    data[rng() % count] = -kInf;
    data[rng() % count] = numerics::bitsToFloat(0x00000123);
    data[rng() % count] = std::numeric_limits<float>::max();
    data[rng() % count] = -std::numeric_limits<float>::max();
  }
  return data;
}

class CpuRotateTest : public ::testing::TestWithParam<RotateCase> {};

} // namespace

TEST_P(CpuRotateTest, MatchesNumericsBitForBit) {
  const RotateCase &c = GetParam();
  ASSERT_NE(library(), nullptr);
  ASSERT_NE(library()->lookup(c.name()), nullptr);
  std::vector<int64_t> shape(c.rank, 3);
  shape[c.axis] = 2 * c.blockSize;
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  // Steps, as the kernel gets them (i64), and as numerics keys them (the
  // low 32 bits).
  for (int64_t step :
       {int64_t{0}, int64_t{1}, int64_t{12345}, (int64_t{1} << 32) + 9}) {
    for (bool specials : {false, true}) {
      const std::vector<float> data =
          rotateData(count, step * 31 + c.blockSize + specials, specials);
      std::vector<float> expected = data;
      numerics::rotate(expected.data(), numerics::viewAlong(shape, c.axis),
                       c.rotation(), static_cast<uint32_t>(step), c.inverse);
      const std::vector<float> actual =
          c.rank == 3 ? runKernel<3>(c, data, shape, step)
                      : runKernel<2>(c, data, shape, step);
      EXPECT_TRUE(sameFloats(expected, actual))
          << c.name() << ", step " << step << (specials ? ", specials" : "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllRotations, CpuRotateTest,
                         ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<RotateCase> &info) {
                           return info.param.name();
                         });

TEST(CpuRotateRoundTrip, InverseUndoesForward) {
  // Forward then inverse, both generated, returns the input to within the
  // roundings of 2 log2(B) additions and two multiplies per element.
  ASSERT_NE(library(), nullptr);
  const RotateCase forward{64,
                           RotationKind::RandomHadamard,
                           SignSchedule::PerStep,
                           0xDEADBEEFCAFEF00Dull,
                           false,
                           1};
  RotateCase inverse = forward;
  inverse.inverse = true;
  const std::vector<float> data = rotateData(3 * 128, 5, false);
  const std::vector<float> rotated = runKernel<2>(forward, data, {3, 128}, 17);
  const std::vector<float> back = runKernel<2>(inverse, rotated, {3, 128}, 17);
  for (size_t k = 0; k < data.size(); ++k)
    EXPECT_NEAR(back[k], data[k], 1e-5f * std::ldexp(1.0f, 20)) << k;
}
