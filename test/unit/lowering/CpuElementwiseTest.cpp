//===- CpuElementwiseTest.cpp - Generated elementwise chains vs kernels ---===//
//
// JIT-compiles elementwise tetra.kernels holding tetra.silu_grad — alone,
// and at the end of a chain, as kernel formation builds SwiGLU's backward:
// d(gate) = silu_grad(gate, d(product) * up) — and checks every output
// float against the runtime's silu.backward (runtime/kernels/Elementwise.h)
// bit for bit: the same fastExp, operation for operation.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include "runtime/backend/ThreadPool.h"
#include "runtime/kernels/Elementwise.h"

using namespace tetra;
using namespace tetra::testing;

namespace {

const char *kSource = R"(
func.func @host_silu_grad(%x: tensor<?xf32>, %dy: tensor<?xf32>) -> tensor<?xf32> {
  %r = tetra.kernel "silu_grad" (%a = %x, %b = %dy) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    %d = tetra.silu_grad %a, %b : tensor<?xf32>
    tetra.yield %d : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @host_swiglu_gate_grad(%g: tensor<?xf32>, %dp: tensor<?xf32>, %u: tensor<?xf32>) -> tensor<?xf32> {
  %r = tetra.kernel "swiglu_gate_grad" (%a = %g, %b = %dp, %c = %u) : (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
    %dg = tetra.mul %b, %c : tensor<?xf32>
    %d = tetra.silu_grad %a, %dg : tensor<?xf32>
    tetra.yield %d : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
)";

const cpu::KernelLibrary *library() {
  static std::unique_ptr<cpu::KernelLibrary> compiled = compileOrFail(kSource);
  return compiled.get();
}

/// Values around SiLU's interesting ranges (fastExp's clamps at about
/// +-88, the sigmoid's saturation, zeros of both signs, subnormals) and
/// NaN, Inf, the largest floats.
std::vector<float> siluData(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> data(count);
  for (float &x : data)
    x = std::ldexp(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng),
                   int(rng() % 16) - 8);
  const float specials[] = {0.0f,
                            -0.0f,
                            kNaN,
                            kInf,
                            -kInf,
                            numerics::bitsToFloat(0x00000123),
                            -numerics::bitsToFloat(0x00000123),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            88.0f,
                            88.5f,
                            -87.0f,
                            -88.0f,
                            -100.0f,
                            20.0f,
                            -20.0f};
  for (size_t i = 0; i < std::size(specials); ++i)
    data[(i * 37) % count] = specials[i];
  return data;
}

} // namespace

TEST(CpuElementwise, SiluGradMatchesTheRuntimeKernelBitForBit) {
  ASSERT_NE(library(), nullptr);
  constexpr int64_t kCount = 4099; // not a multiple of any vector width
  const std::vector<float> x = siluData(kCount, 1), dy = siluData(kCount, 2);
  backend::ThreadPool pool(2);
  std::vector<float> expected(kCount);
  kernels::siluBackward(pool, x.data(), dy.data(), expected.data(), kCount);

  std::vector<float> actual(kCount, kNaN);
  auto xs = describe<float, 1>(const_cast<float *>(x.data()), {kCount});
  auto dys = describe<float, 1>(const_cast<float *>(dy.data()), {kCount});
  auto out = describe<float, 1>(actual.data(), {kCount});
  library()
      ->lookupAs<void(MemRefDescriptor<float, 1> *, MemRefDescriptor<float, 1> *,
                      MemRefDescriptor<float, 1> *)>("silu_grad")(&xs, &dys,
                                                                  &out);
  EXPECT_TRUE(sameFloats(expected, actual));
}

TEST(CpuElementwise, SwiGluGateGradientChainMatchesTheRuntimeKernels) {
  ASSERT_NE(library(), nullptr);
  constexpr int64_t kCount = 1031;
  const std::vector<float> g = siluData(kCount, 3), dp = siluData(kCount, 4),
                           u = siluData(kCount, 5);
  backend::ThreadPool pool(2);
  std::vector<float> dg(kCount), expected(kCount);
  kernels::binaryForward(pool, kernels::BinaryOp::Mul, dp.data(), u.data(),
                         dg.data(), kCount);
  kernels::siluBackward(pool, g.data(), dg.data(), expected.data(), kCount);

  std::vector<float> actual(kCount, kNaN);
  auto gs = describe<float, 1>(const_cast<float *>(g.data()), {kCount});
  auto dps = describe<float, 1>(const_cast<float *>(dp.data()), {kCount});
  auto us = describe<float, 1>(const_cast<float *>(u.data()), {kCount});
  auto out = describe<float, 1>(actual.data(), {kCount});
  library()
      ->lookupAs<void(MemRefDescriptor<float, 1> *, MemRefDescriptor<float, 1> *,
                      MemRefDescriptor<float, 1> *,
                      MemRefDescriptor<float, 1> *)>("swiglu_gate_grad")(
          &gs, &dps, &us, &out);
  EXPECT_TRUE(sameFloats(expected, actual));
}
