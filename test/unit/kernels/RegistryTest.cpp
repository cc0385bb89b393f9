//===- RegistryTest.cpp - Library kernels through the CPU backend ---------===//
//
// The registry is the calling convention the compiler's schedule targets, so
// its signatures are pinned here word for word; a change must be made in the
// family's header, runtime/kernels/README.md and the compiler together.
// Every kernel is launched through CpuBackend with valid arguments, and with
// each buffer in turn one element too small, which must be refused.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/Registry.h"

#include "runtime/backend/CpuBackend.h"
#include "runtime/kernels/RMSNorm.h"

#include "KernelTestUtils.h"

#include <cmath>
#include <map>

using namespace tetra::backend;
using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

const char *const kSignatures[] = {
    "embedding.forward(in f32 table, in i32 tokens, out f32 out; i64 count, "
    "i64 vocab, i64 dim)",
    "embedding.backward(in i32 tokens, in f32 dout, inout f32 dtable; i64 "
    "count, i64 vocab, i64 dim, i64 accumulate)",
    "rmsnorm.forward(in f32 x, in f32 weight, out f32 y, out f32 rstd; i64 "
    "rows, i64 dim, f64 eps)",
    "rmsnorm.backward(in f32 x, in f32 weight, in f32 rstd, in f32 dy, out f32 "
    "dx, inout f32 dweight; i64 rows, i64 dim, i64 accumulate)",
    "rope.forward(in f32 x, out f32 y; i64 batch, i64 seq, i64 heads, i64 "
    "head_dim, f64 theta)",
    "rope.backward(in f32 dy, out f32 dx; i64 batch, i64 seq, i64 heads, i64 "
    "head_dim, f64 theta)",
    "attention.forward(in f32 q, in f32 k, in f32 v, out f32 out, out f32 lse; "
    "i64 batch, i64 seq, i64 heads, i64 kv_heads, i64 head_dim, i64 "
    "bf16_operands)",
    "attention.backward(in f32 q, in f32 k, in f32 v, in f32 out, in f32 lse, "
    "in f32 dout, out f32 dq, out f32 dk, out f32 dv, out f32 delta; i64 "
    "batch, i64 seq, i64 heads, i64 kv_heads, i64 head_dim, i64 "
    "bf16_operands)",
    "silu.forward(in f32 x, out f32 y; i64 count)",
    "silu.backward(in f32 x, in f32 dy, out f32 dx; i64 count)",
    "add.forward(in f32 a, in f32 b, out f32 out; i64 count)",
    "add.backward(in f32 dout, out f32 da, out f32 db; i64 count)",
    "sub.forward(in f32 a, in f32 b, out f32 out; i64 count)",
    "sub.backward(in f32 dout, out f32 da, out f32 db; i64 count)",
    "mul.forward(in f32 a, in f32 b, out f32 out; i64 count)",
    "mul.backward(in f32 a, in f32 b, in f32 dout, out f32 da, out f32 db; i64 "
    "count)",
    "scale.forward(in f32 x, out f32 y; i64 count, f64 factor)",
    "scale.backward(in f32 dy, out f32 dx; i64 count, f64 factor)",
    "cross_entropy.forward(in f32 logits, in i32 targets, out f32 loss, out "
    "f32 lse; i64 rows, i64 vocab)",
    "cross_entropy.backward(in f32 logits, in i32 targets, in f32 lse, in f32 "
    "dloss, out f32 dlogits; i64 rows, i64 vocab)",
    "matmul(in f32 a, in f32 b, inout f32 c; i64 m, i64 n, i64 k, i64 "
    "trans_a, i64 trans_b, i64 accumulate)",
    "global_norm(out f32 norm, in f32 tensor...; i64 count...)",
    "clip_by_global_norm(in f32 norm, inout f32 tensor...; f64 max_norm, i64 "
    "count...)",
    "accumulate_gradient(inout f32 sum, in f32 grad; i64 count, f64 scale, "
    "i64 micro_batch)",
    "adamw(inout f32 param, in f32 grad, inout f32 m, inout f32 v; i64 count, "
    "f64 lr, f64 beta1, f64 beta2, f64 eps, f64 weight_decay, i64 step)",
};

Scalar I(int64_t value) { return Scalar::integer(value); }
Scalar F(double value) { return Scalar::real(value); }

/// Valid arguments for one kernel: the element count of every buffer (types
/// come from the signature) and the scalars.
struct Case {
  std::vector<int64_t> elements;
  std::vector<Scalar> scalars;
};

/// B 2, T 3, H 2, G 1, head_dim 4: q is 48 floats, k and v 24, rows 12.
std::map<std::string, Case> validCases() {
  const std::vector<Scalar> attention = {I(2), I(3), I(2), I(1), I(4), I(0)};
  const std::vector<Scalar> rope = {I(2), I(3), I(2), I(4), F(10000.0)};
  return {
      {"embedding.forward", {{20, 3, 12}, {I(3), I(5), I(4)}}},
      {"embedding.backward", {{3, 12, 20}, {I(3), I(5), I(4), I(1)}}},
      {"rmsnorm.forward", {{12, 4, 12, 3}, {I(3), I(4), F(1e-5)}}},
      {"rmsnorm.backward", {{12, 4, 3, 12, 12, 4}, {I(3), I(4), I(0)}}},
      {"rope.forward", {{48, 48}, rope}},
      {"rope.backward", {{48, 48}, rope}},
      {"attention.forward", {{48, 24, 24, 48, 12}, attention}},
      {"attention.backward",
       {{48, 24, 24, 48, 12, 48, 48, 24, 24, 12}, attention}},
      {"silu.forward", {{10, 10}, {I(10)}}},
      {"silu.backward", {{10, 10, 10}, {I(10)}}},
      {"add.forward", {{10, 10, 10}, {I(10)}}},
      {"add.backward", {{10, 10, 10}, {I(10)}}},
      {"sub.forward", {{10, 10, 10}, {I(10)}}},
      {"sub.backward", {{10, 10, 10}, {I(10)}}},
      {"mul.forward", {{10, 10, 10}, {I(10)}}},
      {"mul.backward", {{10, 10, 10, 10, 10}, {I(10)}}},
      {"scale.forward", {{10, 10}, {I(10), F(0.5)}}},
      {"scale.backward", {{10, 10}, {I(10), F(0.5)}}},
      {"cross_entropy.forward", {{15, 3, 1, 3}, {I(3), I(5)}}},
      {"cross_entropy.backward", {{15, 3, 3, 1, 15}, {I(3), I(5)}}},
      {"matmul", {{12, 20, 15}, {I(3), I(5), I(4), I(0), I(1), I(1)}}},
      {"global_norm", {{1, 10, 7}, {I(10), I(7)}}},
      {"clip_by_global_norm", {{1, 10, 7}, {F(1.0), I(10), I(7)}}},
      {"accumulate_gradient", {{10, 10}, {I(10), F(0.5), I(1)}}},
      {"adamw",
       {{10, 10, 10, 10},
        {I(10), F(1e-3), F(0.9), F(0.999), F(1e-8), F(0.1), I(1)}}},
  };
}

class RegistryTest : public ::testing::Test {
protected:
  void SetUp() override {
    tetra::io::Expected<Module> loaded =
        backend_.loadModule(CodeObject::cpuTable(libraryKernels(), "library"));
    ASSERT_TRUE(loaded);
    module_ = *loaded;
  }

  template <typename T> Buffer upload(const std::vector<T> &values) {
    Buffer buffer = *backend_.allocate(values.size() * sizeof(T));
    EXPECT_TRUE(backend_.copyToDevice(buffer, values.data(), buffer.size()));
    return buffer;
  }

  std::vector<float> download(Buffer buffer) {
    std::vector<float> values(buffer.size() / sizeof(float));
    EXPECT_TRUE(backend_.copyToHost(values.data(), buffer, buffer.size()));
    EXPECT_TRUE(backend_.synchronize());
    return values;
  }

  /// Buffers for `c` with small valid contents: floats in [0.1, 1), ids in
  /// {0, 1, 2}; buffer `shortIndex` (if any) one element short.
  std::vector<Buffer> buffersFor(const KernelSignature &signature,
                                 const Case &c, int shortIndex = -1) {
    std::vector<Buffer> buffers;
    for (size_t i = 0; i < c.elements.size(); ++i) {
      const BufferParam &param =
          signature.buffers[std::min(i, signature.buffers.size() - 1)];
      const int64_t count =
          c.elements[i] - (static_cast<int>(i) == shortIndex ? 1 : 0);
      if (param.type == ElementType::I32)
        buffers.push_back(upload(randomIds(count, 3, 100 + i)));
      else
        buffers.push_back(upload(randomFloats(count, 200 + i, 0.1f, 1.0f)));
    }
    return buffers;
  }

  tetra::io::Status launch(const std::string &name,
                           const std::vector<Buffer> &buffers,
                           const std::vector<Scalar> &scalars) {
    tetra::io::Expected<Kernel> kernel = backend_.getKernel(module_, name);
    if (!kernel)
      return kernel.error();
    return backend_.launch(*kernel, LaunchConfig(), buffers, scalars);
  }

  CpuBackend backend_{3};
  Module module_;
};

} // namespace

TEST_F(RegistryTest, SignaturesArePinned) {
  const std::vector<CpuKernel> &kernels = libraryKernels().kernels();
  ASSERT_EQ(kernels.size(), std::size(kSignatures));
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_EQ(describe(kernels[i].signature), kSignatures[i]);
    EXPECT_EQ(librarySignature(kernels[i].signature.name),
              &kernels[i].signature);
  }
  EXPECT_EQ(librarySignature("rmsnorm.sideways"), nullptr);
}

TEST_F(RegistryTest, EveryKernelLaunchesAndChecksEveryBufferSize) {
  const std::map<std::string, Case> cases = validCases();
  for (const CpuKernel &kernel : libraryKernels().kernels()) {
    const std::string &name = kernel.signature.name;
    auto it = cases.find(name);
    ASSERT_NE(it, cases.end()) << "no test case for " << name;
    const Case &c = it->second;
    tetra::io::Status status =
        launch(name, buffersFor(kernel.signature, c), c.scalars);
    EXPECT_TRUE(status) << name << ": " << status.error().message();
    for (size_t i = 0; i < c.elements.size(); ++i) {
      tetra::io::Status tooSmall =
          launch(name, buffersFor(kernel.signature, c, i), c.scalars);
      ASSERT_FALSE(tooSmall) << name << " buffer " << i;
      EXPECT_NE(tooSmall.error().message().find("buffer " + std::to_string(i)),
                std::string::npos)
          << tooSmall.error().message();
    }
  }
}

TEST_F(RegistryTest, LaunchGivesTheSameBitsAsADirectCall) {
  const int64_t rows = 37, dim = 64;
  const std::vector<float> x = randomFloats(rows * dim, 1);
  const std::vector<float> w = randomFloats(dim, 2);
  Buffer xBuffer = upload(x), wBuffer = upload(w);
  Buffer y = *backend_.allocate(rows * dim * 4),
         rstd = *backend_.allocate(rows * 4);
  ASSERT_TRUE(launch("rmsnorm.forward", {xBuffer, wBuffer, y, rstd},
                     {I(rows), I(dim), F(1e-5)}));
  std::vector<float> directY(rows * dim), directRstd(rows);
  rmsnormForward(backend_.pool(), x.data(), w.data(), directY.data(),
                 directRstd.data(), rows, dim, 1e-5);
  EXPECT_TRUE(sameBits(download(y), directY));
  EXPECT_TRUE(sameBits(download(rstd), directRstd));
}

TEST_F(RegistryTest, KernelsOnSlicesOfOneArena) {
  // A memory plan hands kernels slices of one allocation.
  Buffer arena = *backend_.allocate(4096);
  Buffer a = *arena.slice(0, 40), b = *arena.slice(64, 40),
         out = *arena.slice(128, 40);
  const std::vector<float> ones(10, 1.0f), twos(10, 2.0f);
  ASSERT_TRUE(backend_.copyToDevice(a, ones.data(), 40));
  ASSERT_TRUE(backend_.copyToDevice(b, twos.data(), 40));
  ASSERT_TRUE(launch("add.forward", {a, b, out}, {I(10)}));
  EXPECT_EQ(download(out), std::vector<float>(10, 3.0f));
  // A slice that is not 4-byte aligned cannot hold floats.
  tetra::io::Status misaligned =
      launch("add.forward", {a, b, *arena.slice(130, 40)}, {I(10)});
  ASSERT_FALSE(misaligned);
  EXPECT_EQ(misaligned.error().message(),
            "add.forward: buffer 2 'out' is not aligned to 4 bytes");
}

TEST_F(RegistryTest, BadAttributesAndDataAreErrors) {
  const std::map<std::string, Case> cases = validCases();
  auto run = [&](const std::string &name, std::vector<Scalar> scalars) {
    return launch(
        name,
        buffersFor(libraryKernels().find(name)->signature, cases.at(name)),
        scalars);
  };
  auto message = [](const tetra::io::Status &status) {
    return status ? std::string("success") : status.error().message();
  };
  EXPECT_EQ(message(run("attention.forward", {I(2), I(3), I(3), I(2), I(4), I(0)})),
            "attention.forward: 'heads' (3) must be a multiple of 'kv_heads' "
            "(2)");
  EXPECT_EQ(message(run("attention.backward",
                        {I(2), I(3), I(2), I(1), I(4), I(2)})),
            "attention.backward: 'bf16_operands' is 2, must be 0 or 1");
  EXPECT_EQ(message(run("rmsnorm.backward", {I(3), I(4), I(2)})),
            "rmsnorm.backward: 'accumulate' is 2, must be 0 or 1");
  EXPECT_EQ(message(run("matmul", {I(-3), I(5), I(4), I(0), I(1), I(1)})),
            "matmul: 'm' is -3, must be at least 0");
  EXPECT_EQ(message(run("rope.forward", {I(2), I(3), I(2), I(3), F(1e4)})),
            "rope.forward: 'head_dim' must be even");
  EXPECT_EQ(message(run("adamw", {I(10), F(1e-3), F(0.9), F(0.999), F(1e-8),
                                  F(0.1), I(0)})),
            "adamw: AdamW step 0 is not positive (the first step is 1)");
  EXPECT_EQ(
      message(run("matmul", {I(1), I(1), I(INT64_MAX / 2), I(0), I(0), I(0)})),
      "matmul: the element count overflows");

  // Data errors: a target outside the vocabulary, a NaN gradient norm.
  Buffer logits = upload(randomFloats(15, 3));
  Buffer targets = upload(std::vector<int32_t>{0, 7, 1});
  Buffer loss = *backend_.allocate(4), lse = *backend_.allocate(12);
  EXPECT_EQ(message(launch("cross_entropy.forward",
                           {logits, targets, loss, lse}, {I(3), I(5)})),
            "cross_entropy.forward: target 7 at position 1 is outside [0, 5)");
  Buffer norm = upload(std::vector<float>{NAN});
  Buffer grad = upload(randomFloats(10, 4));
  EXPECT_EQ(
      message(launch("clip_by_global_norm", {norm, grad}, {F(1.0), I(10)})),
      "clip_by_global_norm: the gradient norm is nan; refusing to clip "
      "(and train on) it");
}
