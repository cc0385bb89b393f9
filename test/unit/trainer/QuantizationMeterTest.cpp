//===- QuantizationMeterTest.cpp - What the SQNR meter measures -----------===//
//
// A GEMM launch's operands are measured where the step holds their fp32
// values: an operand the launch passes, or one in a buffer some launch
// names. One in a buffer no launch names (on the GPU, a BF16 operand whose
// producer writes only the codes its GEMM reads) has no values to measure,
// and gets no SQNR rather than one of whatever lies in the arena.
//
//===----------------------------------------------------------------------===//

#include "runtime/trainer/QuantizationMeter.h"
#include "runtime/backend/CpuBackend.h"
#include "runtime/kernels/Registry.h"
#include "runtime/numerics/BlockQuantize.h"
#include "runtime/schedule/Executor.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tetra;

namespace {

constexpr int64_t kRows = 4, kDim = 64;

/// One launch (rmsnorm.forward: x, weight, y, rstd) described as a GEMM
/// whose operand x is its argument 0 and whose operand w lies in schedule
/// buffer `wBuffer` (-1: a temporary of x's shape that no launch names).
schedule::Schedule meteredStep(int wBuffer) {
  schedule::Schedule plan;
  plan.name = "meter";
  auto add = [&](const char *name, schedule::BufferRole role,
                 std::vector<int64_t> shape) {
    schedule::BufferDesc desc;
    desc.name = name;
    desc.role = role;
    desc.shape = std::move(shape);
    plan.buffers.push_back(desc);
    return static_cast<int>(plan.buffers.size()) - 1;
  };
  const int x = add("x", schedule::BufferRole::Input, {kRows, kDim});
  const int weight = add("weight", schedule::BufferRole::Parameter, {kDim});
  const int y = add("y", schedule::BufferRole::Temporary, {kRows, kDim});
  const int rstd = add("rstd", schedule::BufferRole::Temporary, {kRows});
  const int unnamed =
      add("never_written", schedule::BufferRole::Temporary, {kRows, kDim});
  schedule::Launch launch;
  launch.kernel = "rmsnorm.forward";
  launch.buffers = {x, weight, y, rstd};
  launch.scalars = {backend::Scalar::integer(kRows),
                    backend::Scalar::integer(kDim),
                    backend::Scalar::real(1e-5)};
  schedule::QuantizedOperand operand;
  operand.name = "x";
  operand.argument = 0;
  operand.shape = {kRows, kDim};
  operand.axis = 1;
  operand.quantization.format = *numerics::blockFormatPreset("mxfp4");
  schedule::QuantizedOperand other = operand;
  other.name = "w";
  other.buffer = wBuffer >= 0 ? wBuffer : unnamed;
  launch.gemm =
      schedule::GemmLaunch{"layers.0.mlp.up", "fprop", {operand, other}};
  plan.launches.push_back(launch);
  schedule::planMemory(plan);
  return plan;
}

/// The meter's SQNR per "role.operand" after observing the one launch,
/// with x and weight bound to values that MXFP4 does not keep exactly.
std::map<std::string, double> measured(schedule::Schedule plan) {
  backend::CpuBackend cpu{1};
  io::Expected<backend::Module> library = cpu.loadModule(
      backend::CodeObject::cpuTable(kernels::libraryKernels(), "library"));
  EXPECT_TRUE(static_cast<bool>(library));
  auto step = schedule::StepExecutor::create(cpu, std::move(plan), {*library});
  EXPECT_TRUE(static_cast<bool>(step)) << step.error().message();
  if (!step)
    return {};
  std::vector<float> x(kRows * kDim), weight(kDim, 1.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  std::vector<backend::Buffer> owned;
  auto bind = [&](const char *name, const std::vector<float> &values) {
    backend::Buffer buffer = *cpu.allocate(values.size() * 4);
    owned.push_back(buffer);
    EXPECT_TRUE(static_cast<bool>(
        cpu.copyToDevice(buffer, values.data(), values.size() * 4)));
    EXPECT_TRUE(static_cast<bool>((*step)->bind(name, buffer)));
  };
  bind("x", x);
  bind("weight", weight);
  // What an arena holds where no launch writes: another tensor's values
  // (here x's) from an earlier launch.
  const std::vector<schedule::BufferDesc> &buffers =
      (*step)->schedule().buffers;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].name == "never_written")
      EXPECT_TRUE(static_cast<bool>(cpu.copyToDevice(
          (*step)->bufferAt(static_cast<int>(b)), x.data(), x.size() * 4)));
  trainer::QuantizationMeter meter(cpu, **step, /*seed=*/0, /*step=*/1,
                                   /*sampleElements=*/kRows * kDim);
  io::Status observed = meter.observe(0);
  EXPECT_TRUE(static_cast<bool>(observed)) << observed.error().message();
  std::map<std::string, double> decibels = meter.decibels();
  step->reset();
  for (backend::Buffer buffer : owned)
    EXPECT_TRUE(static_cast<bool>(cpu.free(buffer)));
  return decibels;
}

TEST(QuantizationMeter, MeasuresOperandsTheStepHolds) {
  // w in x's own buffer (named by the launch): both measured, the same
  // values, the same SQNR.
  std::map<std::string, double> both = measured(meteredStep(/*wBuffer=*/0));
  ASSERT_EQ(both.count("fprop.x"), 1u);
  ASSERT_EQ(both.count("fprop.w"), 1u);
  EXPECT_GT(both["fprop.x"], 5.0);
  EXPECT_EQ(both["fprop.x"], both["fprop.w"]);
}

TEST(QuantizationMeter, SkipsAnOperandNoLaunchWrites) {
  std::map<std::string, double> held = measured(meteredStep(/*wBuffer=*/-1));
  EXPECT_EQ(held.count("fprop.x"), 1u);
  EXPECT_EQ(held.count("fprop.w"), 0u);
}

} // namespace
