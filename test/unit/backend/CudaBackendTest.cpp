//===- CudaBackendTest.cpp - The CUDA driver backend ----------------------===//
//
// Without a GPU (CI) only the first test runs: creating the backend fails
// with a message, never a crash. On a machine with an NVIDIA GPU and its
// driver (the H200 the device tool lends) the others run: memory round
// trips, streams, a PTX module JIT-compiled by the driver and launched, and
// the errors a user can cause. `BackendTests` is self-contained (no CUDA SDK,
// no MLIR): build it here, carry it to the GPU machine, run it there.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CudaBackend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

using namespace tetra::backend;

namespace {

/// A test kernel in PTX: out[i] = in[i] * factor + offset for i < count,
/// one element per thread, the multiply and the add each rounded (no FMA),
/// parameters in the backend's calling convention: buffers as 64-bit
/// addresses, then an i64 and two f64 scalars.
const char kAffinePtx[] = R"(
.version 8.0
.target sm_80
.address_size 64

.visible .entry affine(
    .param .u64 in_ptr, .param .u64 out_ptr, .param .s64 count,
    .param .f64 factor, .param .f64 offset)
{
  .reg .pred %p<2>;
  .reg .b32 %r<5>;
  .reg .b64 %rd<10>;
  .reg .f32 %f<6>;
  .reg .f64 %fd<3>;
  ld.param.u64 %rd1, [in_ptr];
  ld.param.u64 %rd2, [out_ptr];
  ld.param.s64 %rd3, [count];
  ld.param.f64 %fd1, [factor];
  ld.param.f64 %fd2, [offset];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  cvt.s64.s32 %rd4, %r4;
  setp.ge.s64 %p1, %rd4, %rd3;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd5, %rd1;
  cvta.to.global.u64 %rd6, %rd2;
  shl.b64 %rd7, %rd4, 2;
  add.s64 %rd8, %rd5, %rd7;
  add.s64 %rd9, %rd6, %rd7;
  ld.global.f32 %f1, [%rd8];
  cvt.rn.f32.f64 %f2, %fd1;
  cvt.rn.f32.f64 %f3, %fd2;
  mul.rn.f32 %f4, %f1, %f2;
  add.rn.f32 %f5, %f4, %f3;
  st.global.f32 [%rd9], %f5;
DONE:
  ret;
}
)";

ArrayView<uint8_t> bytesOf(const std::string &text) {
  return ArrayView<uint8_t>(reinterpret_cast<const uint8_t *>(text.data()),
                            text.size());
}

/// The backend on device 0, or null (and the test skipped) without one.
std::unique_ptr<CudaBackend> gpuOrSkip() {
  tetra::io::Expected<std::unique_ptr<CudaBackend>> backend =
      CudaBackend::create();
  if (!backend)
    return nullptr;
  return std::move(*backend);
}

#define REQUIRE_GPU(backend)                                                   \
  std::unique_ptr<CudaBackend> backend = gpuOrSkip();                          \
  if (!backend)                                                                \
  GTEST_SKIP() << "no CUDA device here"

TEST(CudaBackend, CreateFailsCleanlyOrDescribesTheDevice) {
  tetra::io::Expected<std::unique_ptr<CudaBackend>> backend =
      CudaBackend::create();
  if (!backend) {
    // No driver (CI), or a driver without a device: a message, no crash.
    EXPECT_FALSE(backend.error().message().empty());
    return;
  }
  std::string description = (*backend)->description();
  EXPECT_NE(description.find("(sm_"), std::string::npos) << description;
  EXPECT_GE((*backend)->computeCapability(), 50);
  EXPECT_EQ((*backend)->name(), "cuda");
  std::printf("device: %s\n", description.c_str());
  // A device that does not exist.
  tetra::io::Expected<std::unique_ptr<CudaBackend>> missing =
      CudaBackend::create(4096);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("no CUDA device 4096"),
            std::string::npos);
}

TEST(CudaBackend, MemoryRoundTrips) {
  REQUIRE_GPU(gpu);
  const size_t count = 1 << 20;
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i)
    host[i] = static_cast<float>(i) * 0.5f - 7.0f;
  Buffer a = *gpu->allocate(count * 4), b = *gpu->allocate(count * 4);
  ASSERT_TRUE(gpu->copyToDevice(a, host.data(), count * 4));
  ASSERT_TRUE(gpu->copyOnDevice(b, a, count * 4));
  std::vector<float> back(count, 0.0f);
  ASSERT_TRUE(gpu->copyToHost(back.data(), b, count * 4));
  ASSERT_TRUE(gpu->synchronize());
  EXPECT_EQ(std::memcmp(back.data(), host.data(), count * 4), 0);

  // fill on a slice, on a stream of its own.
  tetra::io::Expected<Stream> stream = gpu->createStream();
  ASSERT_TRUE(stream);
  Buffer middle = *b.slice(4 * 100, 4 * 10);
  ASSERT_TRUE(gpu->fill(middle, 0xFF, *stream));
  ASSERT_TRUE(gpu->copyToHost(back.data(), b, count * 4, *stream));
  ASSERT_TRUE(gpu->synchronize(*stream));
  ASSERT_TRUE(gpu->destroyStream(*stream));
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &back[i], 4);
    if (i >= 100 && i < 110)
      ASSERT_EQ(bits, 0xFFFFFFFFu) << i;
    else
      ASSERT_EQ(back[i], host[i]) << i;
  }

  // Mistakes are errors, not crashes.
  EXPECT_FALSE(gpu->copyToDevice(a, host.data(), count * 4 + 4));
  EXPECT_FALSE(gpu->copyToHost(back.data(), Buffer(12345, 4), 4));
  EXPECT_FALSE(gpu->destroyStream(Stream{}));
  ASSERT_TRUE(gpu->free(a));
  tetra::io::Status twice = gpu->free(a);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message().find("not an allocation"),
            std::string::npos);
  EXPECT_FALSE(gpu->copyToDevice(a, host.data(), 4)); // freed
  ASSERT_TRUE(gpu->free(b));
  // Out of memory is a message.
  tetra::io::Expected<Buffer> huge = gpu->allocate(size_t{1} << 50);
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message().find("cuMemAlloc"), std::string::npos);
}

TEST(CudaBackend, LaunchesAPtxKernel) {
  REQUIRE_GPU(gpu);
  tetra::io::Expected<Module> module = gpu->loadModule(CodeObject::binary(
      CodeObjectFormat::Ptx, bytesOf(kAffinePtx), "affine.ptx"));
  ASSERT_TRUE(module) << module.error().message();
  tetra::io::Expected<Kernel> kernel = gpu->getKernel(*module, "affine");
  ASSERT_TRUE(kernel) << kernel.error().message();
  EXPECT_EQ(gpu->signature(*kernel), nullptr);

  const int64_t count = 100003; // not a multiple of the block
  std::vector<float> in(count);
  for (int64_t i = 0; i < count; ++i)
    in[i] = std::sin(static_cast<float>(i)) * 1000.0f;
  Buffer input = *gpu->allocate(count * 4), output = *gpu->allocate(count * 4);
  ASSERT_TRUE(gpu->copyToDevice(input, in.data(), count * 4));
  ASSERT_TRUE(gpu->fill(output, 0));
  LaunchConfig config;
  config.block[0] = 128;
  config.grid[0] = static_cast<uint32_t>((count + 127) / 128);
  const double factor = 0.1, offset = -3.25;
  Buffer buffers[] = {input, output};
  Scalar scalars[] = {Scalar::integer(count), Scalar::real(factor),
                      Scalar::real(offset)};
  ASSERT_TRUE(gpu->launch(*kernel, config, buffers, scalars));
  std::vector<float> out(count);
  ASSERT_TRUE(gpu->copyToHost(out.data(), output, count * 4));
  ASSERT_TRUE(gpu->synchronize());
  const float f = static_cast<float>(factor), o = static_cast<float>(offset);
  for (int64_t i = 0; i < count; ++i) {
    float product = in[i] * f;
    float expected = product + o;
    ASSERT_EQ(out[i], expected) << i;
  }

  // A launch naming a freed buffer is refused before it reaches the GPU.
  ASSERT_TRUE(gpu->free(input));
  tetra::io::Status stale = gpu->launch(*kernel, config, buffers, scalars);
  ASSERT_FALSE(stale);
  EXPECT_NE(stale.error().message().find("buffer argument 0"),
            std::string::npos);
  ASSERT_TRUE(gpu->free(output));
  tetra::io::Expected<Kernel> missing = gpu->getKernel(*module, "nope");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("'affine.ptx' has no kernel 'nope'"),
            std::string::npos);
  ASSERT_TRUE(gpu->unloadModule(*module));
  EXPECT_FALSE(gpu->unloadModule(*module));
}

TEST(CudaBackend, BadPtxReportsTheDriversLog) {
  REQUIRE_GPU(gpu);
  std::string broken = kAffinePtx;
  broken.replace(broken.find("mul.rn.f32"), 10, "mul.xx.f32");
  tetra::io::Expected<Module> module = gpu->loadModule(
      CodeObject::binary(CodeObjectFormat::Ptx, bytesOf(broken), "broken.ptx"));
  ASSERT_FALSE(module);
  const std::string &message = module.error().message();
  EXPECT_NE(message.find("'broken.ptx': cuModuleLoadData"), std::string::npos)
      << message;
  std::printf("%s\n", message.c_str());
  EXPECT_FALSE(gpu->loadModule(CodeObject::binary(
      CodeObjectFormat::Hsaco, bytesOf(broken), "amd.hsaco")));
}

} // namespace

// The step's launches as a CUDA graph: a chain of kernel nodes replayed with
// one submission, a scalar changed on the instantiated graph between
// replays; buffers are checked when the list is recorded.
TEST(CudaBackend, RecordedLaunchesReplayAsAGraph) {
  REQUIRE_GPU(gpu);
  Module module = *gpu->loadModule(CodeObject::binary(
      CodeObjectFormat::Ptx, bytesOf(kAffinePtx), "affine.ptx"));
  Kernel kernel = *gpu->getKernel(module, "affine");
  const int64_t count = 4099;
  std::vector<float> in(count);
  for (int64_t i = 0; i < count; ++i)
    in[i] = static_cast<float>(i % 97) - 48.0f;
  Buffer a = *gpu->allocate(count * 4), b = *gpu->allocate(count * 4),
         c = *gpu->allocate(count * 4);
  ASSERT_TRUE(gpu->copyToDevice(a, in.data(), count * 4));
  LaunchConfig config;
  config.block[0] = 128;
  config.grid[0] = static_cast<uint32_t>((count + 127) / 128);
  auto affineLaunch = [&](Buffer from, Buffer to, double factor,
                          double offset) {
    return ListedLaunch{kernel,
                        config,
                        {from, to},
                        {Scalar::integer(count), Scalar::real(factor),
                         Scalar::real(offset)}};
  };
  // b = 2a + 1, then c = 3b - 2.
  tetra::io::Expected<LaunchList> list = gpu->recordLaunches(
      {affineLaunch(a, b, 2.0, 1.0), affineLaunch(b, c, 3.0, -2.0)});
  ASSERT_TRUE(list) << list.error().message();
  auto expectC = [&](float factor2, float offset2) {
    std::vector<float> out(count);
    ASSERT_TRUE(gpu->copyToHost(out.data(), c, count * 4));
    ASSERT_TRUE(gpu->synchronize());
    for (int64_t i = 0; i < count; ++i) {
      float first = in[i] * 2.0f;
      first = first + 1.0f;
      float second = first * factor2;
      ASSERT_EQ(out[i], second + offset2) << i;
    }
  };
  ASSERT_TRUE(gpu->replay(*list, {}));
  expectC(3.0f, -2.0f);
  // The second launch's offset changes, and stays changed.
  ScalarChange change{1, 2, Scalar::real(0.5)};
  tetra::io::Status replayed =
      gpu->replay(*list, ArrayView<ScalarChange>(&change, 1));
  ASSERT_TRUE(replayed) << replayed.error().message();
  expectC(3.0f, 0.5f);
  ASSERT_TRUE(gpu->fill(c, 0));
  ASSERT_TRUE(gpu->replay(*list, {}));
  expectC(3.0f, 0.5f);
  ASSERT_TRUE(gpu->releaseLaunches(*list));
  EXPECT_FALSE(gpu->replay(*list, {}));

  // A freed buffer is refused when the list is recorded.
  ASSERT_TRUE(gpu->free(c));
  tetra::io::Expected<LaunchList> stale =
      gpu->recordLaunches({affineLaunch(a, b, 1.0, 0.0),
                           affineLaunch(b, c, 1.0, 0.0)});
  ASSERT_FALSE(stale);
  EXPECT_NE(stale.error().message().find("launch 1 of the list"),
            std::string::npos)
      << stale.error().message();
  ASSERT_TRUE(gpu->free(a));
  ASSERT_TRUE(gpu->free(b));
  ASSERT_TRUE(gpu->unloadModule(module));
}
