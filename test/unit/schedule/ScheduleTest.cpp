//===- ScheduleTest.cpp - Memory plan, JSON form and executor -------------===//

#include "runtime/schedule/Schedule.h"
#include "runtime/backend/CpuBackend.h"
#include "runtime/kernels/Registry.h"
#include "runtime/schedule/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tetra;
using namespace tetra::schedule;
using backend::Scalar;

namespace {

BufferDesc temporary(std::string name, std::vector<int64_t> shape) {
  BufferDesc buffer;
  buffer.name = std::move(name);
  buffer.shape = std::move(shape);
  return buffer;
}

BufferDesc bound(std::string name, BufferRole role,
                 std::vector<int64_t> shape) {
  BufferDesc buffer = temporary(std::move(name), std::move(shape));
  buffer.role = role;
  return buffer;
}

Launch makeLaunch(std::string kernel, std::vector<int> buffers,
                  std::vector<Scalar> scalars, std::string origin) {
  Launch launch;
  launch.kernel = std::move(kernel);
  launch.buffers = std::move(buffers);
  launch.scalars = std::move(scalars);
  launch.origin = std::move(origin);
  return launch;
}

/// A chain t0 -> t1 -> ... where launch i reads t(i) and writes t(i+1): only
/// two temporaries are ever live together.
Schedule chain(int length, int64_t elements) {
  Schedule schedule;
  schedule.name = "chain";
  for (int i = 0; i <= length; ++i)
    schedule.buffers.push_back(temporary("t" + std::to_string(i), {elements}));
  for (int i = 0; i < length; ++i)
    schedule.launches.push_back(makeLaunch(
        "silu.forward", {i, i + 1}, {Scalar::integer(elements)}, "chain"));
  return schedule;
}

TEST(MemoryPlan, ChainReusesTwoSlots) {
  Schedule schedule = chain(10, 1000);
  planMemory(schedule);
  EXPECT_TRUE(static_cast<bool>(validate(schedule)));
  // 4000 bytes per buffer, aligned to 64: 4032. Two live at a time.
  EXPECT_EQ(schedule.arenaBytes, 2 * 4032);
  EXPECT_EQ(schedule.unplannedBytes(), 11 * 4000);
}

TEST(MemoryPlan, NoOverlapWhileLiveOnRandomSchedules) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 50; ++trial) {
    Schedule schedule;
    schedule.name = "random";
    int buffers = 2 + random() % 30;
    for (int i = 0; i < buffers; ++i)
      schedule.buffers.push_back(temporary(
          "t" + std::to_string(i), {1 + static_cast<int64_t>(random() % 500)}));
    int launches = 1 + random() % 40;
    for (int l = 0; l < launches; ++l) {
      Launch launch = makeLaunch("k", {}, {}, "");
      int arguments = 1 + random() % 4;
      for (int a = 0; a < arguments; ++a)
        launch.buffers.push_back(random() % buffers);
      schedule.launches.push_back(launch);
    }
    planMemory(schedule);
    io::Status valid = validate(schedule);
    ASSERT_TRUE(static_cast<bool>(valid)) << valid.error().message();
    EXPECT_LE(schedule.arenaBytes, schedule.unplannedBytes() + 64 * buffers);
  }
}

TEST(MemoryPlan, ValidateCatchesOverlappingLiveTemporaries) {
  Schedule schedule = chain(2, 16);
  planMemory(schedule);
  // Put t1 on top of t0: both are live in launch 0.
  schedule.buffers[1].offset = schedule.buffers[0].offset;
  io::Status valid = validate(schedule);
  ASSERT_FALSE(static_cast<bool>(valid));
  EXPECT_NE(valid.error().message().find("share arena bytes"),
            std::string::npos);
}

TEST(MemoryPlan, InPlaceOutputTakesItsDyingInput) {
  // t0 -> t1 -> t2: launch 1 may write t2 over t1 (t1's last use).
  Schedule schedule = chain(2, 1000);
  schedule.launches[1].inPlace = {{1, 0}};
  planMemory(schedule);
  EXPECT_EQ(schedule.buffers[2].offset, schedule.buffers[1].offset);
  EXPECT_TRUE(static_cast<bool>(validate(schedule)));
  // t0 and t1 are live together in launch 0: still apart.
  EXPECT_NE(schedule.buffers[0].offset, schedule.buffers[1].offset);
  io::Expected<Schedule> back = fromJson(toJson(schedule));
  ASSERT_TRUE(static_cast<bool>(back)) << back.error().message();
  EXPECT_EQ(back->launches[1].inPlace, schedule.launches[1].inPlace);

  // An input still read later keeps its memory.
  Schedule later = chain(2, 1000);
  later.launches[1].inPlace = {{1, 0}};
  later.launches.push_back(
      makeLaunch("silu.forward", {1, 0}, {Scalar::integer(1000)}, "again"));
  planMemory(later);
  EXPECT_NE(later.buffers[2].offset, later.buffers[1].offset);
  EXPECT_TRUE(static_cast<bool>(validate(later)));
  // Undeclared, the same sharing is an error.
  Schedule undeclared = schedule;
  undeclared.launches[1].inPlace.clear();
  EXPECT_FALSE(static_cast<bool>(validate(undeclared)));
}

/// A pair declared in place by a run of launches (the GPU's cross-entropy
/// gradient written over its logits in row ranges): the output, half the
/// input's size, is placed on it where every launch from the output's
/// first to the input's last declares the pair.
TEST(MemoryPlan, InPlaceRunOfLaunches) {
  Schedule schedule;
  schedule.buffers = {bound("x", BufferRole::Input, {64}),
                      temporary("logits", {1000}), temporary("codes", {500}),
                      temporary("other", {500}),
                      bound("out", BufferRole::Output, {64})};
  const std::vector<Scalar> n = {Scalar::integer(64)};
  schedule.launches = {makeLaunch("k", {0, 1}, n, "logits"),
                       makeLaunch("k", {1, 2}, n, "rows [0, 1)"),
                       makeLaunch("k", {1, 2}, n, "rows [1, 2)"),
                       makeLaunch("k", {1, 2}, n, "rows [2, 4)"),
                       makeLaunch("k", {2, 3}, n, "codes read"),
                       makeLaunch("k", {3, 4}, n, "other read")};
  for (int l = 1; l <= 3; ++l)
    schedule.launches[l].inPlace = {{1, 0}};
  Schedule partly = schedule;
  planMemory(schedule);
  EXPECT_EQ(schedule.buffers[2].offset, schedule.buffers[1].offset);
  EXPECT_TRUE(static_cast<bool>(validate(schedule)));
  EXPECT_EQ(memoryPeak(schedule).bytes, 1000 * 4); // codes within logits
  io::Expected<Schedule> back = fromJson(toJson(schedule));
  ASSERT_TRUE(static_cast<bool>(back)) << back.error().message();
  EXPECT_TRUE(static_cast<bool>(validate(*back)));

  // One launch of the run without the pair: apart, and sharing is an error.
  partly.launches[2].inPlace.clear();
  Schedule forced = partly;
  planMemory(partly);
  EXPECT_NE(partly.buffers[2].offset, partly.buffers[1].offset);
  EXPECT_TRUE(static_cast<bool>(validate(partly)));
  forced.launches[2].inPlace = schedule.launches[2].inPlace;
  planMemory(forced);
  forced.launches[2].inPlace.clear();
  EXPECT_FALSE(static_cast<bool>(validate(forced)));
}
TEST(ScheduleJson, RoundTrip) {
  Schedule schedule = chain(3, 8);
  schedule.buffers.push_back(bound("embed", BufferRole::Parameter, {4, 2}));
  schedule.buffers.push_back(bound("tokens", BufferRole::Input, {2, 3}));
  schedule.buffers.back().type = backend::ElementType::I32;
  schedule.launches.push_back(makeLaunch(
      "scale.forward", {0, 1}, {Scalar::integer(8), Scalar::real(0.1)},
      "layers.0.attn.wq wgrad"));
  schedule.launches.back().boundScalars = {{1, "lr"}};
  GemmLaunch gemm;
  gemm.linear = "layers.0.attn.wq";
  gemm.role = "wgrad";
  QuantizedOperand dy;
  dy.name = "dy";
  dy.argument = 1;
  dy.shape = {2, 4};
  dy.axis = 0;
  dy.quantization.format = *numerics::blockFormatPreset("nvfp4");
  dy.quantization.format.rounding = numerics::Rounding::Stochastic;
  dy.quantization.rotation = {numerics::RotationKind::RandomHadamard, 16,
                              numerics::SignSchedule::PerStep, 1234567};
  dy.tensorId = 0xDEADBEEF;
  gemm.operands.push_back(dy);
  schedule.launches.back().gemm = gemm;
  // A GPU launch: its grid and block, and a GEMM operand named by its
  // schedule buffer (the GEMM launch reads the prologue's codes).
  schedule.launches.push_back(makeLaunch("gemm_launch", {0, 1}, {}, "gemm"));
  schedule.launches.back().config.grid[0] = 40;
  schedule.launches.back().config.grid[1] = 3;
  schedule.launches.back().config.block[0] = 256;
  schedule.launches.back().config.sharedMemoryBytes = 100 * 1024;
  schedule.launches.back().gemm = gemm;
  schedule.launches.back().gemm->operands[0].buffer = 1;
  schedule.phases = {1, 2, 3};
  planMemory(schedule);
  io::Expected<Schedule> back = fromJson(toJson(schedule));
  ASSERT_TRUE(static_cast<bool>(back)) << back.error().message();
  EXPECT_EQ(toJson(*back), toJson(schedule));
  EXPECT_EQ(back->buffers[5].type, backend::ElementType::I32);
  const Launch &scale = back->launches.at(back->launches.size() - 2);
  EXPECT_EQ(scale.scalars[1].asFloat(), 0.1);
  EXPECT_EQ(scale.origin, "layers.0.attn.wq wgrad");
  ASSERT_EQ(scale.boundScalars.size(), 1u);
  EXPECT_EQ(scale.boundScalars[0].second, "lr");
  EXPECT_EQ(back->gradientsEnd(), 2);
  ASSERT_TRUE(scale.gemm.has_value());
  const QuantizedOperand &read = scale.gemm->operands.at(0);
  EXPECT_EQ(read.quantization.format.element, numerics::ElementFormat::E2M1);
  EXPECT_EQ(read.quantization.format.scaling.scaleFormat,
            numerics::ScaleFormat::E4M3);
  EXPECT_EQ(read.quantization.format.scaling.blockSize, 16);
  EXPECT_EQ(read.quantization.format.rounding, numerics::Rounding::Stochastic);
  EXPECT_EQ(read.quantization.rotation.kind,
            numerics::RotationKind::RandomHadamard);
  EXPECT_EQ(read.quantization.rotation.seed, 1234567u);
  EXPECT_EQ(read.tensorId, 0xDEADBEEFu);
  EXPECT_EQ(read.shape, (std::vector<int64_t>{2, 4}));
  const Launch &gpu = back->launches.at(back->launches.size() - 1);
  EXPECT_EQ(gpu.config.grid[0], 40u);
  EXPECT_EQ(gpu.config.grid[1], 3u);
  EXPECT_EQ(gpu.config.grid[2], 1u);
  EXPECT_EQ(gpu.config.block[0], 256u);
  EXPECT_EQ(gpu.config.sharedMemoryBytes, 100u * 1024);
  EXPECT_EQ(gpu.gemm->operands.at(0).buffer, 1);
  // A CPU launch has no grid in its JSON.
  EXPECT_EQ(toJson(schedule).find("\"grid\""),
            toJson(schedule).rfind("\"grid\""));

  // A GEMM operand that does not fit its buffer, and phases out of order.
  Schedule bad = schedule;
  bad.launches[bad.launches.size() - 2].gemm->operands[0].shape = {3, 4};
  EXPECT_NE(validate(bad).error().message().find(
                "gemm operand 'dy': shape does not match its buffer"),
            std::string::npos);
  bad = schedule;
  bad.phases = {2, 1, 3};
  EXPECT_FALSE(static_cast<bool>(validate(bad)));
}

TEST(ScheduleJson, MalformedIsAnError) {
  Schedule schedule = chain(1, 8);
  planMemory(schedule);
  std::string good = toJson(schedule);
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {"\"arena_bytes\"", "\"arena\"", "schedule: missing 'arena_bytes'"},
      {"\"temporary\"", "\"scratch\"", "buffers[0]: unknown role 'scratch'"},
      {"\"f32\"", "\"f64\"", "buffers[0]: unknown type 'f64'"},
      {"\"buffers\":[0,1]", "\"buffers\":[0,7]",
       "launches[0] (silu.forward): buffer index 7 out of range"},
      {"[\"i\",8]", "[\"x\",8]", "launches[0]: unknown scalar kind 'x'"},
      {"\"origin\"", "\"grid\":[1,0,1],\"origin\"",
       "launches[0]: 'grid' must be three positive integers"},
      {"\"origin\"", "\"block\":[32,1],\"origin\"",
       "launches[0]: 'block' must be three positive integers"},
      {"\"origin\"", "\"shared_bytes\":-1,\"origin\"",
       "launches[0]: 'shared_bytes' must be a byte count"},
      {"\"origin\"", "\"in_place\":[[1,5]],\"origin\"",
       "launches[0]: 'in_place' must be [output, input] argument pairs"},
  };
  for (const Case &c : cases) {
    std::string text = good;
    size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    io::Expected<Schedule> parsed = fromJson(text);
    ASSERT_FALSE(static_cast<bool>(parsed)) << c.from;
    EXPECT_NE(parsed.error().message().find(c.message), std::string::npos)
        << parsed.error().message();
  }
  EXPECT_FALSE(static_cast<bool>(fromJson("{\"name\": 3")));
}

/// x -> rmsnorm -> silu -> scale, through the executor, against the same
/// kernels called one by one.
TEST(StepExecutor, RunsLibraryKernelsInOrder) {
  const int64_t rows = 3, dim = 8;
  Schedule schedule;
  schedule.name = "norm_silu";
  schedule.buffers = {bound("x", BufferRole::Input, {rows, dim}),
                      bound("w", BufferRole::Parameter, {dim}),
                      temporary("y", {rows, dim}),
                      temporary("rstd", {rows}),
                      temporary("s", {rows, dim}),
                      bound("out", BufferRole::Output, {rows, dim})};
  schedule.launches = {
      makeLaunch(
          "rmsnorm.forward", {0, 1, 2, 3},
          {Scalar::integer(rows), Scalar::integer(dim), Scalar::real(1e-5)},
          "norm"),
      makeLaunch("silu.forward", {2, 4}, {Scalar::integer(rows * dim)}, "silu"),
      makeLaunch("scale.forward", {4, 5},
                 {Scalar::integer(rows * dim), Scalar::real(0.0)}, "scale")};
  // The factor is set per run, like a learning rate.
  schedule.launches.back().boundScalars = {{1, "factor"}};
  planMemory(schedule);

  backend::CpuBackend cpu(2);
  backend::Module library = *cpu.loadModule(
      backend::CodeObject::cpuTable(kernels::libraryKernels(), "library"));
  io::Expected<std::unique_ptr<StepExecutor>> step =
      StepExecutor::create(cpu, schedule, {library});
  ASSERT_TRUE(static_cast<bool>(step)) << step.error().message();

  std::vector<float> x(rows * dim), w(dim);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.7f * i) * 2;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.5f + 0.1f * i;
  backend::Buffer xb = *cpu.allocate(x.size() * 4), wb = *cpu.allocate(dim * 4),
                  ob = *cpu.allocate(x.size() * 4);
  ASSERT_TRUE(static_cast<bool>(cpu.copyToDevice(xb, x.data(), x.size() * 4)));
  ASSERT_TRUE(static_cast<bool>(cpu.copyToDevice(wb, w.data(), dim * 4)));

  io::Status unbound = (*step)->run();
  ASSERT_FALSE(static_cast<bool>(unbound));
  EXPECT_NE(unbound.error().message().find("buffer 'x' (input) is not bound"),
            std::string::npos);
  ASSERT_TRUE(static_cast<bool>((*step)->bind("x", xb)));
  ASSERT_TRUE(static_cast<bool>((*step)->bind("w", wb)));
  ASSERT_TRUE(static_cast<bool>((*step)->bind("out", ob)));
  EXPECT_FALSE(static_cast<bool>((*step)->bind("y", ob)));
  io::Status unset = (*step)->run();
  ASSERT_FALSE(static_cast<bool>(unset));
  EXPECT_NE(unset.error().message().find("scalar 'factor' is not set"),
            std::string::npos);
  (*step)->setScalar("factor", Scalar::real(0.5));
  io::Status ran = (*step)->run();
  ASSERT_TRUE(static_cast<bool>(ran)) << ran.error().message();
  ASSERT_TRUE(static_cast<bool>(cpu.synchronize()));
  std::vector<float> out(x.size());
  ASSERT_TRUE(
      static_cast<bool>(cpu.copyToHost(out.data(), ob, out.size() * 4)));
  ASSERT_TRUE(static_cast<bool>(cpu.synchronize()));

  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t d = 0; d < dim; ++d)
      sum += double(x[r * dim + d]) * x[r * dim + d];
    double rstd = 1 / std::sqrt(sum / dim + 1e-5);
    for (int64_t d = 0; d < dim; ++d) {
      double y = x[r * dim + d] * rstd * w[d];
      double expected = 0.5 * y / (1 + std::exp(-y));
      EXPECT_NEAR(out[r * dim + d], expected, 1e-5) << r << "," << d;
    }
  }

  // The second run replays the recorded launches: a changed run-time
  // scalar reaches its launch, and a rebound buffer is the one written.
  (*step)->setScalar("factor", Scalar::real(2.0));
  backend::Buffer other = *cpu.allocate(x.size() * 4);
  ASSERT_TRUE(static_cast<bool>((*step)->bind("out", other)));
  ASSERT_TRUE(static_cast<bool>((*step)->run()));
  std::vector<float> twice(x.size());
  ASSERT_TRUE(static_cast<bool>(
      cpu.copyToHost(twice.data(), other, twice.size() * 4)));
  ASSERT_TRUE(static_cast<bool>(cpu.synchronize()));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(twice[i], 4.0f * out[i]) << i;
  for (backend::Buffer b : {xb, wb, ob, other})
    ASSERT_TRUE(static_cast<bool>(cpu.free(b)));
}

/// y = rmsnorm(x) feeds the forward and, after two backward launches whose
/// temporaries are live together, the backward: rematerializeCheapLaunches
/// runs the RMSNorm again right before the backward's read, y dies with the
/// forward, the arena shrinks (two slots of 1 MiB where three were live),
/// and the backward's result is the same bits.
TEST(Rematerialize, RecomputesAnRMSNormForTheBackward) {
  const int64_t rows = 512, dim = 512; // y: 1 MiB
  auto make = [&] {
    Schedule schedule;
    schedule.name = "remat";
    schedule.buffers = {bound("x", BufferRole::Input, {rows, dim}),
                        bound("w", BufferRole::Parameter, {dim}),
                        temporary("y", {rows, dim}),
                        temporary("rstd", {rows}),
                        temporary("s", {rows, dim}),
                        bound("loss", BufferRole::Output, {rows, dim}),
                        temporary("t", {rows, dim}),
                        bound("grad", BufferRole::Output, {rows, dim})};
    const Scalar n = Scalar::integer(rows * dim);
    schedule.launches = {
        makeLaunch(
            "rmsnorm.forward", {0, 1, 2, 3},
            {Scalar::integer(rows), Scalar::integer(dim), Scalar::real(1e-5)},
            "norm"),
        makeLaunch("silu.forward", {2, 5}, {n}, "loss"),
        makeLaunch("silu.forward", {0, 6}, {n}, "backward, first"),
        makeLaunch("silu.forward", {6, 4}, {n}, "backward, second"),
        makeLaunch("silu.forward", {2, 7}, {n}, "backward, reads y")};
    schedule.phases = {/*forwardEnd=*/2, /*gradientsEnd=*/5,
                       /*updateBegin=*/5};
    return schedule;
  };
  Schedule kept = make(), recomputed = make();
  EXPECT_EQ(rematerialize(recomputed, Recompute::Cheap), 1);
  planMemory(kept);
  planMemory(recomputed);
  ASSERT_EQ(recomputed.launches.size(), 6u);
  EXPECT_EQ(recomputed.launches[4].kernel, "rmsnorm.forward");
  EXPECT_EQ(recomputed.buffers[recomputed.launches[4].buffers[2]].name,
            "y.again");
  EXPECT_EQ(recomputed.launches[5].buffers[0],
            recomputed.launches[4].buffers[2]);
  EXPECT_EQ(recomputed.launches[3].buffers, kept.launches[3].buffers);
  EXPECT_EQ(recomputed.phases.forwardEnd, 2);
  EXPECT_EQ(recomputed.phases.gradientsEnd, 6);
  EXPECT_EQ(recomputed.phases.updateBegin, 6);
  EXPECT_LT(recomputed.arenaBytes, kept.arenaBytes);
  ASSERT_TRUE(static_cast<bool>(validate(recomputed)));

  backend::CpuBackend cpu(2);
  backend::Module library = *cpu.loadModule(
      backend::CodeObject::cpuTable(kernels::libraryKernels(), "library"));
  std::vector<float> x(rows * dim), w(dim);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * i) * 3;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.5f + 0.01f * i;
  std::vector<std::vector<float>> grads;
  for (Schedule *schedule : {&kept, &recomputed}) {
    auto step = StepExecutor::create(cpu, *schedule, {library});
    ASSERT_TRUE(static_cast<bool>(step)) << step.error().message();
    backend::Buffer xb = *cpu.allocate(x.size() * 4),
                    wb = *cpu.allocate(dim * 4),
                    lb = *cpu.allocate(x.size() * 4),
                    gb = *cpu.allocate(x.size() * 4);
    ASSERT_TRUE(
        static_cast<bool>(cpu.copyToDevice(xb, x.data(), x.size() * 4)));
    ASSERT_TRUE(static_cast<bool>(cpu.copyToDevice(wb, w.data(), dim * 4)));
    for (auto [name, buffer] : {std::pair{"x", xb}, {"w", wb}, {"loss", lb},
                                {"grad", gb}})
      ASSERT_TRUE(static_cast<bool>((*step)->bind(name, buffer)));
    ASSERT_TRUE(static_cast<bool>((*step)->run()));
    ASSERT_TRUE(static_cast<bool>(cpu.synchronize()));
    grads.emplace_back(x.size());
    ASSERT_TRUE(static_cast<bool>(
        cpu.copyToHost(grads.back().data(), gb, x.size() * 4)));
    ASSERT_TRUE(static_cast<bool>(cpu.synchronize()));
    for (backend::Buffer b : {xb, wb, lb, gb})
      ASSERT_TRUE(static_cast<bool>(cpu.free(b)));
  }
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_NE(grads[0][1], 0.0f);
}

/// A small output stays: a launch for it is not worth its bytes.
TEST(Rematerialize, LeavesSmallOutputs) {
  Schedule schedule;
  schedule.buffers = {bound("x", BufferRole::Input, {4, 8}),
                      bound("w", BufferRole::Parameter, {8}),
                      temporary("y", {4, 8}), temporary("rstd", {4}),
                      bound("grad", BufferRole::Output, {4, 8})};
  schedule.launches = {
      makeLaunch("rmsnorm.forward", {0, 1, 2, 3},
                 {Scalar::integer(4), Scalar::integer(8), Scalar::real(1e-5)},
                 "norm"),
      makeLaunch("silu.forward", {2, 4}, {Scalar::integer(32)}, "backward")};
  schedule.phases = {1, 2, 2};
  EXPECT_EQ(rematerialize(schedule, Recompute::Cheap), 0);
  EXPECT_EQ(schedule.launches.size(), 2u);
}

/// recompute = layers on a two-norm forward: x -> rmsnorm -> y -> h -> r ->
/// x2 (the next norm's input) -> rmsnorm -> y2 -> loss. The backward reads
/// r, x2 and y2. x2 is a checkpoint (an RMSNorm's input): kept. r is
/// recomputed right before its first backward read, after its inputs —
/// y, and h, which the backward never reads (an intermediate); the last
/// norm's output y2 is kept (what comes after the last norm is not
/// recomputed). `cheap` recomputes nothing here (every buffer is small),
/// nor does `none`.
TEST(Rematerialize, LayersRecomputesFromTheNormsInputs) {
  auto make = [] {
    Schedule schedule;
    schedule.name = "layers";
    schedule.buffers = {bound("x", BufferRole::Input, {4, 8}), // 0
                        bound("w", BufferRole::Parameter, {8}),
                        temporary("y", {4, 8}),
                        temporary("rstd", {4}),
                        temporary("h", {4, 8}),
                        temporary("r", {4, 8}), // 4, 5
                        temporary("x2", {4, 8}),
                        temporary("y2", {4, 8}),
                        temporary("rstd2", {4}), // 8
                        bound("loss", BufferRole::Output, {4, 8}),
                        temporary("g1", {4, 8}),
                        temporary("g2", {4, 8}), // 10, 11
                        bound("grad", BufferRole::Output, {4, 8})};
    const std::vector<Scalar> norm = {Scalar::integer(4), Scalar::integer(8),
                                      Scalar::real(1e-5)};
    const std::vector<Scalar> n = {Scalar::integer(32)};
    schedule.launches = {
        makeLaunch("rmsnorm.forward", {0, 1, 2, 3}, norm, "n1"),
        makeLaunch("silu.forward", {2, 4}, n, "h"),
        makeLaunch("silu.forward", {4, 5}, n, "r"),
        makeLaunch("silu.forward", {5, 6}, n, "x2"),
        makeLaunch("rmsnorm.forward", {6, 1, 7, 8}, norm, "n2"),
        makeLaunch("silu.forward", {7, 9}, n, "loss"),
        makeLaunch("silu.forward", {7, 10}, n, "reads y2"),
        makeLaunch("silu.forward", {5, 11}, n, "reads r"),
        makeLaunch("silu.forward", {6, 12}, n, "reads x2")};
    schedule.phases = {/*forwardEnd=*/6, /*gradientsEnd=*/9,
                       /*updateBegin=*/9};
    return schedule;
  };
  for (Recompute mode : {Recompute::None, Recompute::Cheap}) {
    Schedule kept = make();
    EXPECT_EQ(rematerialize(kept, mode), 0) << recomputeName(mode);
  }
  Schedule schedule = make();
  ASSERT_EQ(rematerialize(schedule, Recompute::Layers), 3);
  const std::vector<Launch> &l = schedule.launches;
  ASSERT_EQ(l.size(), 12u);
  auto name = [&](int b) { return schedule.buffers[b].name; };
  // Launches 0-6 as they were; then y, h and r again, in order.
  EXPECT_EQ(l[6].origin, "reads y2");
  EXPECT_EQ(l[6].buffers[0], 7); // y2 kept
  EXPECT_EQ(l[7].kernel, "rmsnorm.forward");
  EXPECT_EQ(l[7].buffers[0], 0);
  EXPECT_EQ(name(l[7].buffers[2]), "y.again");
  EXPECT_EQ(l[8].buffers[0], l[7].buffers[2]);
  EXPECT_EQ(name(l[8].buffers[1]), "h.again");
  EXPECT_EQ(l[9].buffers[0], l[8].buffers[1]);
  EXPECT_EQ(name(l[9].buffers[1]), "r.again");
  EXPECT_EQ(l[9].origin, "r (recomputed for the backward)");
  EXPECT_EQ(l[10].origin, "reads r");
  EXPECT_EQ(l[10].buffers[0], l[9].buffers[1]);
  EXPECT_EQ(l[11].buffers[0], 6); // x2 kept: a checkpoint
  EXPECT_EQ(schedule.phases.gradientsEnd, 12);
  planMemory(schedule);
  ASSERT_TRUE(static_cast<bool>(validate(schedule)));
}

TEST(Rematerialize, ProductsRecomputesGemmOutputsButNotTheStream) {
  Schedule schedule;
  schedule.name = "products";
  schedule.buffers = {bound("x", BufferRole::Input, {4, 8}), // 0
                      bound("w", BufferRole::Parameter, {8}),
                      temporary("y", {4, 8}),
                      temporary("rstd", {4}),
                      temporary("p", {4, 8}), // 4: a projection
                      temporary("r", {4, 8}), // 5: the stream plus a GEMM
                      temporary("y2", {4, 8}),
                      temporary("rstd2", {4}),
                      temporary("z", {4, 8}), // 8: after the last norm
                      bound("g1", BufferRole::Output, {4, 8}),
                      bound("g2", BufferRole::Output, {4, 8}),
                      bound("g3", BufferRole::Output, {4, 8}),
                      bound("g4", BufferRole::Output, {4, 8})};
  const std::vector<Scalar> norm = {Scalar::integer(4), Scalar::integer(8),
                                    Scalar::real(1e-5)};
  const std::vector<Scalar> n = {Scalar::integer(32)};
  auto gemm = [](std::vector<int> buffers, std::string origin) {
    Launch launch = makeLaunch("k_" + origin, std::move(buffers), {}, origin);
    launch.gemm = GemmLaunch{origin, "fprop", {}};
    return launch;
  };
  schedule.launches = {makeLaunch("rmsnorm.forward", {0, 1, 2, 3}, norm, "n1"),
                       gemm({2, 1, 4}, "p"),
                       gemm({4, 0, 5}, "r"),
                       makeLaunch("rmsnorm.forward", {5, 1, 6, 7}, norm, "n2"),
                       gemm({6, 1, 8}, "z"),
                       makeLaunch("silu.forward", {2, 9}, n, "reads y"),
                       makeLaunch("silu.forward", {4, 10}, n, "reads p"),
                       makeLaunch("silu.forward", {5, 11}, n, "reads r"),
                       makeLaunch("silu.forward", {8, 12}, n, "reads z")};
  schedule.phases = {/*forwardEnd=*/5, /*gradientsEnd=*/9, /*updateBegin=*/9};
  Schedule cheap = schedule;
  EXPECT_EQ(rematerialize(cheap, Recompute::Cheap), 0); // all under 1 MiB
  // p again before its backward reader, from y (kept: the backward reads
  // it); r (a norm's input) and z (after the last norm) kept.
  ASSERT_EQ(rematerialize(schedule, Recompute::Products), 1);
  const std::vector<Launch> &l = schedule.launches;
  ASSERT_EQ(l.size(), 10u);
  EXPECT_EQ(l[5].origin, "reads y");
  EXPECT_EQ(l[6].origin, "p (recomputed for the backward)");
  EXPECT_EQ(l[6].buffers[0], 2);
  EXPECT_EQ(schedule.buffers[l[6].buffers[2]].name, "p.again");
  EXPECT_EQ(l[7].buffers[0], l[6].buffers[2]);
  EXPECT_EQ(l[8].buffers[0], 5);
  EXPECT_EQ(l[9].buffers[0], 8);
  EXPECT_EQ(schedule.phases.gradientsEnd, 10);
  planMemory(schedule);
  ASSERT_TRUE(static_cast<bool>(validate(schedule)));
}

/// a -> b -> c, then a read again: a lives throughout. Without sharing
/// the arena is fullest at launch 2 (a, b, c); with c written over b in
/// place (b dies there) launches 1 and 2 cover the same bytes, and the
/// first is the peak. Largest first.
TEST(MemoryPeak, FindsTheLaunchWhereTheArenaIsFullest) {
  Schedule schedule;
  schedule.buffers = {bound("x", BufferRole::Input, {64}),
                      temporary("a", {64}), temporary("b", {256}),
                      temporary("c", {64}),
                      bound("out", BufferRole::Output, {64})};
  const std::vector<Scalar> n = {Scalar::integer(64)};
  schedule.launches = {makeLaunch("silu.forward", {0, 1}, n, "a"),
                       makeLaunch("silu.forward", {1, 2}, n, "b"),
                       makeLaunch("silu.forward", {2, 3}, n, "c"),
                       makeLaunch("silu.forward", {1, 4}, n, "reads a")};
  Schedule shared = schedule;
  planMemory(schedule);
  MemoryPeak peak = memoryPeak(schedule);
  EXPECT_EQ(peak.launch, 2);
  EXPECT_EQ(peak.bytes, (256 + 64 + 64) * 4);
  EXPECT_EQ(peak.live, (std::vector<int>{2, 1, 3}));
  EXPECT_EQ(peak.bytes, schedule.arenaBytes);

  shared.launches[2].inPlace = {{1, 0}};
  planMemory(shared);
  peak = memoryPeak(shared);
  EXPECT_EQ(peak.launch, 1);
  EXPECT_EQ(peak.bytes, (256 + 64) * 4);
  EXPECT_EQ(peak.live, (std::vector<int>{2, 1}));
  EXPECT_EQ(peak.bytes, shared.arenaBytes);
}

/// A NaN in the input shows up first in rmsnorm's output: the checked run
/// names that buffer, the launch and its origin; a plain run just runs.
TEST(StepExecutor, CheckedRunNamesTheFirstNonFiniteLaunch) {
  const int64_t rows = 2, dim = 4;
  Schedule schedule;
  schedule.name = "nan";
  schedule.buffers = {bound("x", BufferRole::Input, {rows, dim}),
                      bound("w", BufferRole::Parameter, {dim}),
                      temporary("y", {rows, dim}), temporary("rstd", {rows}),
                      bound("out", BufferRole::Output, {rows, dim})};
  schedule.launches = {makeLaunch("rmsnorm.forward", {0, 1, 2, 3},
                                  {Scalar::integer(rows), Scalar::integer(dim),
                                   Scalar::real(1e-5)},
                                  "layers.1.attn_norm at model.tetra:12:3"),
                       makeLaunch("silu.forward", {2, 4},
                                  {Scalar::integer(rows * dim)}, "silu")};
  planMemory(schedule);
  backend::CpuBackend cpu(2);
  backend::Module library = *cpu.loadModule(
      backend::CodeObject::cpuTable(kernels::libraryKernels(), "library"));
  auto step = StepExecutor::create(cpu, schedule, {library});
  ASSERT_TRUE(static_cast<bool>(step)) << step.error().message();
  std::vector<float> x(rows * dim, 1.0f), w(dim, 1.0f);
  x[5] = NAN;
  backend::Buffer xb = *cpu.allocate(x.size() * 4), wb = *cpu.allocate(16),
                  ob = *cpu.allocate(x.size() * 4);
  ASSERT_TRUE(static_cast<bool>(cpu.copyToDevice(xb, x.data(), x.size() * 4)));
  ASSERT_TRUE(static_cast<bool>(cpu.copyToDevice(wb, w.data(), 16)));
  ASSERT_TRUE(static_cast<bool>((*step)->bind("x", xb)));
  ASSERT_TRUE(static_cast<bool>((*step)->bind("w", wb)));
  ASSERT_TRUE(static_cast<bool>((*step)->bind("out", ob)));
  EXPECT_TRUE(static_cast<bool>((*step)->run()));
  io::Status checked = (*step)->runCheckingFinite();
  ASSERT_FALSE(static_cast<bool>(checked));
  EXPECT_NE(checked.error().message().find(
                "of 'y', written by launch 0 (rmsnorm.forward, "
                "layers.1.attn_norm at model.tetra:12:3)"),
            std::string::npos)
      << checked.error().message();
  // Finite again: the checked run passes.
  x[5] = 2.0f;
  ASSERT_TRUE(static_cast<bool>(cpu.copyToDevice(xb, x.data(), x.size() * 4)));
  io::Status clean = (*step)->runCheckingFinite();
  EXPECT_TRUE(static_cast<bool>(clean)) << clean.error().message();
  for (backend::Buffer b : {xb, wb, ob})
    ASSERT_TRUE(static_cast<bool>(cpu.free(b)));
}

TEST(StepExecutor, UnknownKernelIsAnError) {
  Schedule schedule = chain(1, 4);
  schedule.launches[0].kernel = "frobnicate.forward";
  planMemory(schedule);
  backend::CpuBackend cpu(2);
  backend::Module library = *cpu.loadModule(
      backend::CodeObject::cpuTable(kernels::libraryKernels(), "library"));
  io::Expected<std::unique_ptr<StepExecutor>> step =
      StepExecutor::create(cpu, schedule, {library});
  ASSERT_FALSE(static_cast<bool>(step));
  EXPECT_NE(step.error().message().find("no kernel 'frobnicate.forward'"),
            std::string::npos);
}

} // namespace
