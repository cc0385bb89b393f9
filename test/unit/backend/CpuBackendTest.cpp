//===- CpuBackendTest.cpp - Memory, copies, modules and launches ----------===//

#include "runtime/backend/CpuBackend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

using namespace tetra::backend;

namespace {

/// A test kernel: out[i] = in[i] * factor + offset for `count` elements.
tetra::io::Status affine(const CpuKernelContext &context,
                         ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  const int64_t count = scalars[0].asInt();
  if (buffers[0].size() < count * sizeof(float) ||
      buffers[1].size() < count * sizeof(float))
    return tetra::io::Error(context.signature.name + ": buffers too small");
  const float *in = cpuPointer<float>(buffers[0]);
  float *out = cpuPointer<float>(buffers[1]);
  const float factor = static_cast<float>(scalars[1].asFloat());
  const float offset = static_cast<float>(scalars[2].asFloat());
  context.pool.parallelFor(0, count, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = in[i] * factor + offset;
  });
  return tetra::io::success();
}

/// A test kernel that always fails, like a kernel finding a bad token.
tetra::io::Status failing(const CpuKernelContext &context, ArrayView<Buffer>,
                          ArrayView<Scalar>) {
  return tetra::io::Error(context.signature.name + ": bad data");
}

CpuKernelTable testTable() {
  CpuKernelTable table;
  KernelSignature affineSignature{
      "test.affine",
      {{"in", ElementType::F32, BufferAccess::In},
       {"out", ElementType::F32, BufferAccess::Out}},
      {{"count", ScalarKind::Int},
       {"factor", ScalarKind::Float},
       {"offset", ScalarKind::Float}}};
  EXPECT_TRUE(table.add(affineSignature, affine));
  EXPECT_TRUE(table.add({"test.failing", {}, {}}, failing));
  return table;
}

} // namespace

TEST(CpuBackendTest, AllocateCopyRoundTrip) {
  CpuBackend backend(2);
  EXPECT_EQ(backend.name(), "cpu");
  EXPECT_EQ(backend.description(), "cpu: 2 threads");
  tetra::io::Expected<Buffer> buffer = backend.allocate(1000 * sizeof(float));
  ASSERT_TRUE(buffer);
  EXPECT_EQ(buffer->size(), 4000u);
  EXPECT_EQ(buffer->address() % 64, 0u);
  EXPECT_EQ(backend.bytesInUse(), 4000u);

  std::vector<float> host(1000);
  std::iota(host.begin(), host.end(), 0.5f);
  ASSERT_TRUE(backend.copyToDevice(*buffer, host.data(), 4000));
  tetra::io::Expected<Buffer> other = backend.allocate(4000);
  ASSERT_TRUE(other);
  ASSERT_TRUE(backend.copyOnDevice(*other, *buffer, 4000));
  std::vector<float> back(1000, -1.0f);
  ASSERT_TRUE(backend.copyToHost(back.data(), *other, 4000));
  ASSERT_TRUE(backend.synchronize());
  EXPECT_EQ(back, host);

  // A slice is a view into the allocation.
  tetra::io::Expected<Buffer> slice = other->slice(40, 8);
  ASSERT_TRUE(slice);
  float two[2];
  ASSERT_TRUE(backend.copyToHost(two, *slice, 8));
  EXPECT_EQ(two[0], 10.5f);
  EXPECT_EQ(two[1], 11.5f);
  EXPECT_FALSE(other->slice(3996, 8));

  ASSERT_TRUE(backend.fill(*slice, 0));
  ASSERT_TRUE(backend.copyToHost(back.data(), *other, 4000));
  EXPECT_EQ(back[10], 0.0f);
  EXPECT_EQ(back[11], 0.0f);
  EXPECT_EQ(back[12], 12.5f);

  EXPECT_TRUE(backend.free(*buffer));
  EXPECT_TRUE(backend.free(*other));
  EXPECT_EQ(backend.bytesInUse(), 0u);
  EXPECT_EQ(backend.peakBytesInUse(), 8000u);
}

TEST(CpuBackendTest, MemoryMistakesAreErrors) {
  CpuBackend backend(1);
  Buffer buffer = *backend.allocate(64);
  char host[128] = {};
  EXPECT_FALSE(backend.copyToDevice(buffer, host, 65));
  EXPECT_FALSE(backend.copyToHost(host, buffer, 65));
  EXPECT_FALSE(backend.copyToDevice(buffer, nullptr, 8));
  EXPECT_FALSE(
      backend.copyOnDevice(*buffer.slice(0, 32), *buffer.slice(16, 32), 32))
      << "overlap";
  // A buffer that is not (or no longer) inside an allocation.
  EXPECT_FALSE(
      backend.copyToDevice(Buffer(buffer.address() + 32, 64), host, 8));
  EXPECT_FALSE(backend.free(*buffer.slice(0, 32)));
  EXPECT_TRUE(backend.free(buffer));
  tetra::io::Status twice = backend.free(buffer);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message().find("not a live allocation"),
            std::string::npos);
  EXPECT_FALSE(backend.copyToDevice(buffer, host, 8));
  EXPECT_FALSE(backend.fill(buffer, 0));

  // Zero bytes: the null buffer, freeable.
  tetra::io::Expected<Buffer> empty = backend.allocate(0);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  EXPECT_TRUE(backend.copyToDevice(*empty, nullptr, 0));
  EXPECT_TRUE(backend.free(*empty));
}

TEST(CpuBackendTest, Streams) {
  CpuBackend backend(1);
  tetra::io::Expected<Stream> stream = backend.createStream();
  ASSERT_TRUE(stream);
  EXPECT_NE(stream->handle, 0u);
  Buffer buffer = *backend.allocate(16);
  EXPECT_TRUE(backend.fill(buffer, 1, *stream));
  EXPECT_TRUE(backend.synchronize(*stream));
  EXPECT_TRUE(backend.destroyStream(*stream));
  EXPECT_FALSE(backend.synchronize(*stream));
  EXPECT_FALSE(backend.fill(buffer, 1, *stream));
  EXPECT_FALSE(backend.destroyStream(Stream{}));
  EXPECT_TRUE(backend.free(buffer));
}

TEST(CpuBackendTest, LaunchRoundTrip) {
  CpuBackend backend(3);
  const CpuKernelTable table = testTable();
  tetra::io::Expected<Module> module =
      backend.loadModule(CodeObject::cpuTable(table, "test kernels"));
  ASSERT_TRUE(module);
  tetra::io::Expected<Kernel> kernel =
      backend.getKernel(*module, "test.affine");
  ASSERT_TRUE(kernel);
  ASSERT_NE(backend.signature(*kernel), nullptr);
  EXPECT_EQ(describe(*backend.signature(*kernel)),
            "test.affine(in f32 in, out f32 out; i64 count, f64 factor, f64 "
            "offset)");
  EXPECT_EQ(backend.getKernel(*module, "test.affine")->handle, kernel->handle);

  const int64_t count = 1001;
  std::vector<float> host(count);
  std::iota(host.begin(), host.end(), 0.0f);
  Buffer in = *backend.allocate(count * sizeof(float));
  Buffer out = *backend.allocate(count * sizeof(float));
  Stream stream = *backend.createStream();
  ASSERT_TRUE(backend.copyToDevice(in, host.data(), in.size(), stream));
  ASSERT_TRUE(backend.launch(
      *kernel, LaunchConfig(), {in, out},
      {Scalar::integer(count), Scalar::real(2.0), Scalar::real(-1.0)}, stream));
  std::vector<float> result(count);
  ASSERT_TRUE(backend.copyToHost(result.data(), out, out.size(), stream));
  ASSERT_TRUE(backend.synchronize(stream));
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(result[i], 2.0f * i - 1.0f) << i;

  // A kernel's own failure comes back from the launch.
  Kernel failingKernel = *backend.getKernel(*module, "test.failing");
  tetra::io::Status failed = backend.launch(failingKernel, {}, {}, {});
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message(), "test.failing: bad data");

  ASSERT_TRUE(backend.unloadModule(*module));
  tetra::io::Status stale = backend.launch(
      *kernel, {}, {in, out},
      {Scalar::integer(1), Scalar::real(1.0), Scalar::real(0.0)});
  EXPECT_FALSE(stale) << "a kernel of an unloaded module";
  EXPECT_EQ(backend.signature(*kernel), nullptr);
  EXPECT_TRUE(backend.free(in));
  EXPECT_TRUE(backend.free(out));
}

TEST(CpuBackendTest, LaunchArgumentsAreChecked) {
  CpuBackend backend(1);
  const CpuKernelTable table = testTable();
  Module module = *backend.loadModule(CodeObject::cpuTable(table, "test"));
  Kernel kernel = *backend.getKernel(module, "test.affine");
  Buffer in = *backend.allocate(64), out = *backend.allocate(64);
  const std::vector<Scalar> good = {Scalar::integer(4), Scalar::real(1.0),
                                    Scalar::real(0.0)};
  ASSERT_TRUE(backend.launch(kernel, {}, {in, out}, good));

  tetra::io::Status count = backend.launch(kernel, {}, {in}, good);
  ASSERT_FALSE(count);
  EXPECT_EQ(count.error().message(),
            "test.affine: expects 2 buffers and 3 scalars, got 1 and 3");
  tetra::io::Status kind = backend.launch(
      kernel, {}, {in, out},
      {Scalar::integer(4), Scalar::integer(1), Scalar::real(0.0)});
  ASSERT_FALSE(kind);
  EXPECT_EQ(kind.error().message(),
            "test.affine: scalar 1 'factor' must be f64, got i64");
  ASSERT_TRUE(backend.free(out));
  tetra::io::Status freed = backend.launch(kernel, {}, {in, out}, good);
  ASSERT_FALSE(freed);
  EXPECT_EQ(freed.error().message(), "test.affine buffer 1: the buffer of 64 "
                                     "bytes is not inside a live allocation");

  EXPECT_FALSE(backend.getKernel(module, "test.missing"));
  EXPECT_FALSE(backend.getKernel(Module{999}, "test.affine"));
  const uint8_t image[4] = {0x7f, 'E', 'L', 'F'};
  tetra::io::Expected<Module> cubin = backend.loadModule(
      CodeObject::binary(CodeObjectFormat::Cubin, image, "kernel.cubin"));
  ASSERT_FALSE(cubin);
  EXPECT_EQ(cubin.error().message(),
            "kernel.cubin: the cpu backend loads kernel tables, not GPU code");
  EXPECT_TRUE(backend.free(in));
}

TEST(CpuBackendTest, VariadicSignatures) {
  KernelSignature signature{"test.sum",
                            {{"out", ElementType::F32, BufferAccess::Out},
                             {"tensor", ElementType::F32, BufferAccess::In}},
                            {{"count", ScalarKind::Int}}};
  signature.variadic = true;
  EXPECT_EQ(describe(signature), "test.sum(out f32 out, in f32 tensor...; i64 "
                                 "count...)");
  const Buffer b;
  const Scalar s = Scalar::integer(1);
  EXPECT_TRUE(checkArguments(signature, {b, b}, {s}));
  EXPECT_TRUE(checkArguments(signature, {b, b, b, b}, {s, s, s}));
  EXPECT_FALSE(checkArguments(signature, {b}, {}));
  EXPECT_FALSE(checkArguments(signature, {b, b, b}, {s}));
  EXPECT_FALSE(checkArguments(signature, {b, b}, {Scalar::real(1.0)}));
}

TEST(CpuBackendTest, DuplicateKernelNamesAreRejected) {
  CpuKernelTable table;
  EXPECT_TRUE(table.add({"x", {}, {}}, failing));
  tetra::io::Status again = table.add({"x", {}, {}}, failing);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message(), "kernel 'x' is registered twice");
  EXPECT_FALSE(table.add({"y", {}, {}}, nullptr));
  EXPECT_EQ(table.kernels().size(), 1u);
  EXPECT_NE(table.find("x"), nullptr);
  EXPECT_EQ(table.find("y"), nullptr);
}

// A recorded list replays its launches in order with the scalars it was
// given, then with those a replay changed (and keeps the changes); a
// refused launch is named by its position; a released list is gone.
TEST(CpuBackendTest, RecordedLaunchesReplayWithChangedScalars) {
  CpuBackend backend(2);
  const CpuKernelTable table = testTable();
  Module module = *backend.loadModule(CodeObject::cpuTable(table, "test"));
  Kernel affineKernel = *backend.getKernel(module, "test.affine");
  const int64_t count = 257;
  std::vector<float> host(count);
  std::iota(host.begin(), host.end(), 1.0f);
  Buffer a = *backend.allocate(count * 4), b = *backend.allocate(count * 4),
         c = *backend.allocate(count * 4);
  ASSERT_TRUE(backend.copyToDevice(a, host.data(), a.size()));
  auto affineLaunch = [&](Buffer in, Buffer out, double factor) {
    return ListedLaunch{affineKernel,
                        LaunchConfig(),
                        {in, out},
                        {Scalar::integer(count), Scalar::real(factor),
                         Scalar::real(0.0)}};
  };
  // b = 2a, then c = 3b: the order matters.
  LaunchList list =
      *backend.recordLaunches({affineLaunch(a, b, 2.0), affineLaunch(b, c, 3.0)});
  std::vector<float> result(count);
  ASSERT_TRUE(backend.replay(list, {}));
  ASSERT_TRUE(backend.copyToHost(result.data(), c, c.size()));
  ASSERT_TRUE(backend.synchronize());
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(result[i], 6.0f * (i + 1)) << i;

  // The second launch's factor becomes 5: c = 10a, on this replay and the
  // next.
  ScalarChange change{1, 1, Scalar::real(5.0)};
  ASSERT_TRUE(backend.replay(list, ArrayView<ScalarChange>(&change, 1)));
  ASSERT_TRUE(backend.replay(list, {}));
  ASSERT_TRUE(backend.copyToHost(result.data(), c, c.size()));
  ASSERT_TRUE(backend.synchronize());
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(result[i], 10.0f * (i + 1)) << i;

  ScalarChange outside{2, 0, Scalar::integer(1)};
  tetra::io::Status bad =
      backend.replay(list, ArrayView<ScalarChange>(&outside, 1));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("no scalar 0 in launch 2"),
            std::string::npos)
      << bad.error().message();

  // A launch refused when it is submitted is named by its position.
  Kernel failingKernel = *backend.getKernel(module, "test.failing");
  LaunchList failingList = *backend.recordLaunches(
      {affineLaunch(a, b, 1.0), ListedLaunch{failingKernel, {}, {}, {}}});
  int refused = 7;
  tetra::io::Status failed = backend.replay(failingList, {}, {}, &refused);
  ASSERT_FALSE(failed);
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(failed.error().message(), "test.failing: bad data");

  ASSERT_TRUE(backend.releaseLaunches(list));
  EXPECT_FALSE(backend.replay(list, {}));
  EXPECT_FALSE(backend.releaseLaunches(list));
  ASSERT_TRUE(backend.releaseLaunches(failingList));
  for (Buffer buffer : {a, b, c})
    EXPECT_TRUE(backend.free(buffer));
}
