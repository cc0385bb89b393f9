//===- gpu_gemm.cpp - Time a bundle's GEMM kernels on the GPU -------------===//
//
// Times every GEMM kernel of an sm_90a bundle (`tetra compile`) on the GPU:
// each operand's prologue launches (rotate + quantize; NVFP4 also its amax)
// and the MMA launch, each launch on its own, on random inputs. A benchmark first: the full correctness suite is
// GpuBundleTests' (tools/gpu_tests.sh).
//
//   tetra-bench-gpu-gemm BUNDLE [--reps N] [--filter TEXT]
//
// Each launch runs once to warm up, then N times (default 5) a batch of
// kBatch launches back to back, timed from the first submission to the end
// of one synchronize: a launch's time is the median batch over kBatch, so
// the host's submission cost overlaps the GPU's work, as in a training
// step (each operand is far larger than the L2, so back-to-back launches
// still read it from memory). TFLOP/s counts 2·M·N·K for the MMA launch
// alone and for the whole GEMM (operand launches included); "X q TB/s"
// and "W q TB/s" are each operand's quantize launch alone (NAME__lhs,
// NAME__rhs: the rotation and quantization, not the fold launches) in
// bytes moved per second — its fp32 input read, its codes (one byte each,
// two for bf16) and its scale codes written — with its registers per
// thread and resident warps per SM ("q regs", "q warps", X/W). For the MMA launch as the driver compiled it: its
// registers per thread, static shared memory, local bytes per thread
// (spills) and resident warps per SM (the occupancy). Then a check of the
// MMA launch on the shapes it was timed on: 256 sampled results (the
// corners among them) against tetra.scaled_matmul's contract
// (numerics::contractSum) on the scratch codes and scales the prologue
// wrote (an MN-major operand's read in its own [K][M or N] layout) — bit for bit for MXFP4 x MXFP4, within the contract's bound
// otherwise; a mismatch fails the benchmark.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CudaBackend.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/io/Json.h"
#include "runtime/numerics/Formats.h"
#include "runtime/numerics/ScaleFolding.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace tetra;

namespace {

int fail(const std::string &message) {
  fmt::print(stderr, "tetra-bench-gpu-gemm: error: {}\n", message);
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0); // each row as it is measured
  std::string bundle, filter;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (bundle.empty() && arg[0] != '-')
      bundle = arg;
    else
      return fail("usage: tetra-bench-gpu-gemm BUNDLE [--reps N] [--filter TEXT]");
  }
  if (bundle.empty())
    return fail("no bundle given");
  io::Expected<bundle::Bundle> compiled = bundle::Bundle::open(bundle);
  if (!compiled)
    return fail(compiled.error().message());
  io::Expected<std::unique_ptr<backend::CudaBackend>> created =
      backend::CudaBackend::create();
  if (!created)
    return fail(created.error().message());
  backend::CudaBackend &gpu = **created;
  fmt::print("{}; bundle {} ({}, policy {}), median of {}\n", gpu.description(),
             bundle, compiled->model, compiled->policy, reps);
  fmt::print("{:<28} {:<6} {:<22} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} "
             "{:>7} {:>7} {:>5} {:>7} {:>6} {:>8}  {}\n",
             "kernel", "role", "M x N x K", "lhs ms", "rhs ms", "mma ms",
             "mma TF/s", "all TF/s", "X q TB/s", "W q TB/s", "q regs",
             "q warps", "regs", "smem KB", "local", "warps/SM", "check");
  // One pool of random inputs (normal, from a fixed seed), drawn once and
  // reused by every kernel: drawing each operand afresh costs the host more
  // than all the timed launches together.
  // Random normal inputs: a pool of at most kPool values, repeated to fill
  // a larger operand (lm_head's 32768 x 50304 output gradient would take
  // minutes to draw on one thread, and 6.6 GB of host memory).
  constexpr int64_t kPool = int64_t{1} << 26;
  std::vector<float> pool;
  auto upload = [&](backend::Buffer buffer, int64_t count) -> bool {
    if (pool.empty()) {
      std::mt19937 random(1);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      pool.resize(kPool);
      for (float &x : pool)
        x = normal(random);
    }
    for (int64_t at = 0; at < count; at += kPool) {
      const int64_t n = std::min(kPool, count - at);
      io::Expected<backend::Buffer> part = buffer.slice(at * 4, n * 4);
      if (!part || !gpu.copyToDevice(*part, pool.data(), n * 4))
        return false;
    }
    return gpu.synchronize().ok();
  };
  for (const bundle::Kernel &kernel : compiled->kernels) {
    const std::string &name = kernel.name;
    if (!filter.empty() && name.find(filter) == std::string::npos)
      continue;
    const io::JsonValue &computes = kernel.computes;
    int64_t m = computes.get("m").asInt64(), n = computes.get("n").asInt64(),
            k = computes.get("k").asInt64();
    io::Expected<std::string> code = compiled->code(kernel);
    if (!code)
      return fail(code.error().message());
    const std::string &ptx = *code;
    io::Expected<backend::Module> module = gpu.loadModule(
        backend::CodeObject::binary(backend::CodeObjectFormat::Ptx,
                                    {reinterpret_cast<const uint8_t *>(ptx.data()),
                                     ptx.size()},
                                    name));
    if (!module)
      return fail(module.error().message());
    std::map<std::string, backend::Buffer> buffers;
    auto allocate = [&](const std::string &key, size_t bytes) -> bool {
      io::Expected<backend::Buffer> buffer = gpu.allocate(bytes);
      if (!buffer)
        return false;
      buffers[key] = *buffer;
      return true;
    };
    for (const char *side : {"lhs", "rhs"}) {
      const io::JsonValue &operand = computes.get(side);
      const auto &shape = operand.get("shape").items();
      int64_t count = shape[0].asInt64() * shape[1].asInt64();
      std::string key = fmt::format("input:{}", operand.get("input").asInt64());
      if (!allocate(key, count * 4) || !upload(buffers[key], count))
        return fail("cannot upload " + key + " of " + name);
    }
    for (const auto &[key, bytes] : kernel.scratch)
      if (!allocate(key, bytes))
        return fail("out of memory for " + name);
    if (!allocate("result:0", m * n * 4))
      return fail("out of memory for " + name);

    // Median milliseconds of the left operand's prologue launches, the
    // right's, and the GEMM launch.
    double medians[3] = {0, 0, 0};
    // Each operand's quantize launch alone, and the bytes it moves.
    double quantizeMs[2] = {0, 0}, quantizeBytes[2] = {0, 0};
    int quantizeRegisters[2] = {0, 0}, quantizeWarps[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      const io::JsonValue &operand = computes.get(side == 0 ? "lhs" : "rhs");
      const auto &shape = operand.get("shape").items();
      const double count = double(shape[0].asInt64()) * shape[1].asInt64();
      const std::string kind = operand.get("kind").asString();
      const double block = kind == "mx" ? 32 : kind == "nvfp4" ? 16 : 0;
      quantizeBytes[side] = count * (4 + (kind == "bf16" ? 2 : 1)) +
                            (block > 0 ? count / block : 0);
    }
    backend::CudaBackend::KernelResources used;
    int warpsPerBlock = 0;
    for (const bundle::Launch &launch : kernel.launches) {
      io::Expected<backend::Kernel> function =
          gpu.getKernel(*module, launch.function);
      if (!function)
        return fail(function.error().message());
      std::vector<backend::Buffer> args;
      std::vector<backend::Scalar> scalars;
      if (io::Status bound = launch.bind(buffers, 42, 3, args, scalars); !bound)
        return fail(bound.error().message());
      if (!gpu.launch(*function, launch.config, args, scalars) ||
          !gpu.synchronize()) // warm-up
        return fail("launch of " + launch.function + " failed");
      constexpr int kBatch = 10;
      std::vector<double> times;
      for (int rep = 0; rep < reps; ++rep) {
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kBatch; ++i)
          if (!gpu.launch(*function, launch.config, args, scalars))
            return fail("launch of " + launch.function + " failed");
        if (!gpu.synchronize())
          return fail("launch of " + launch.function + " failed");
        times.push_back(std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count() /
                        kBatch);
      }
      std::sort(times.begin(), times.end());
      const std::string &launched = launch.function;
      int slot = launched.find("__lhs") != std::string::npos   ? 0
                 : launched.find("__rhs") != std::string::npos ? 1
                                                               : 2;
      medians[slot] += times[times.size() / 2];
      const bool quantizes =
          slot < 2 && launched == name + (slot == 0 ? "__lhs" : "__rhs");
      if (quantizes || slot == 2) {
        const uint32_t *block = launch.config.block;
        int threads = static_cast<int>(block[0] * block[1] * block[2]);
        io::Expected<backend::CudaBackend::KernelResources> found =
            gpu.resources(*function, threads);
        if (!found)
          return fail(found.error().message());
        if (quantizes) {
          quantizeMs[slot] = times[times.size() / 2];
          quantizeRegisters[slot] = found->registers;
          quantizeWarps[slot] = found->blocksPerSM * threads / 32;
        } else {
          warpsPerBlock = threads / 32;
          used = *found;
        }
      }
    }
    // The sampled check (see the header).
    std::string checked;
    {
      struct Side {
        std::vector<float> values; ///< [rows][k], dequantized
        std::vector<bool> exact;   ///< per row: sums exactly
      } sides[2];
      bool mxfp4 = true;
      for (int side = 0; side < 2; ++side) {
        const std::string name = side == 0 ? "lhs" : "rhs";
        const io::JsonValue &operand = computes.get(name);
        const int64_t rows = side == 0 ? m : n;
        const bool bf16 = operand.get("kind").asString() == "bf16";
        // An MN-major operand's codes keep its own layout, [k][rows].
        const bool mnMajor =
            operand.get("scratch_layout").asString() == "mn_major";
        mxfp4 &= operand.get("kind").asString() == "mx" &&
                 operand.get("format").asString() == "e2m1";
        std::vector<uint8_t> codes(rows * k * (bf16 ? 2 : 1));
        if (!gpu.copyToHost(codes.data(), buffers["scratch:" + name + ".codes"],
                            codes.size()))
          return fail("cannot download the codes of " + kernel.name);
        std::vector<uint8_t> scales;
        if (!bf16) {
          scales.resize(rows * k / 32);
          if (operand.get("kind").asString() != "mx" ||
              operand.get("scratch_encoding").asString() != "e4m3" ||
              !gpu.copyToHost(scales.data(), buffers["scratch:" + name + ".scales"],
                              scales.size()))
            return fail("the check reads bf16 or MX codes as E4M3 bytes (" +
                        kernel.name + ")");
        }
        if (!gpu.synchronize())
          return fail("cannot download the operands of " + kernel.name);
        Side &s = sides[side];
        s.values.resize(rows * k);
        s.exact.assign(rows, false);
        for (int64_t r = 0; r < rows; ++r) {
          int largest = 0, smallest = 0xFF;
          for (int64_t i = 0; i < k; ++i) {
            float value;
            if (bf16) {
              const int64_t at = mnMajor ? i * rows + r : r * k + i;
              uint32_t bits = uint32_t(codes[2 * at]) |
                              uint32_t(codes[2 * at + 1]) << 8;
              bits <<= 16;
              std::memcpy(&value, &bits, 4);
            } else {
              const int scale = scales[(r * k + i) / 32];
              largest = std::max(largest, scale);
              smallest = std::min(smallest, scale);
              value = numerics::decodeE4M3(codes[r * k + i]) *
                      std::ldexp(1.0f, scale - 127);
            }
            s.values[r * k + i] = value;
          }
          s.exact[r] = !bf16 && k <= numerics::kExactMaxK &&
                       numerics::fiberSumsExactly(largest, smallest);
        }
      }
      std::vector<float> result(m * n);
      if (!gpu.copyToHost(result.data(), buffers["result:0"], result.size() * 4) ||
          !gpu.synchronize())
        return fail("cannot download the result of " + kernel.name);
      const int64_t chunk = computes.get("plan").get("chunk").asInt64();
      const double unit = std::ldexp(1.0, -24), g = chunk + k / chunk + 2;
      const double gamma = g * unit / (1 - g * unit);
      std::mt19937_64 random(7);
      int samples = 0, good = 0;
      for (int i = 0; i < 256; ++i) {
        const int64_t row = i < 4 ? (i & 1) * (m - 1) : random() % m;
        const int64_t col = i < 4 ? (i >> 1) * (n - 1) : random() % n;
        const float *a = &sides[0].values[row * k], *b = &sides[1].values[col * k];
        const bool exact = mxfp4 && sides[0].exact[row] && sides[1].exact[col];
        const float expected = numerics::contractSum(a, 1, b, 1, k, chunk, exact);
        const float got = result[row * n + col];
        double magnitude = 0;
        for (int64_t j = 0; j < k; ++j)
          magnitude += std::fabs(double(a[j]) * b[j]);
        ++samples;
        good += mxfp4 ? std::memcmp(&got, &expected, 4) == 0
                      : std::fabs(double(got) - expected) <= 2 * gamma * magnitude;
      }
      checked = fmt::format("{}/{}{}", good, samples,
                            (mxfp4 ? " bit-exact" : " in bound"));
      if (good != samples) {
        fmt::print("{}: {}\n", kernel.name, checked);
        return fail(kernel.name + ": the MMA launch does not compute the contract");
      }
    }
    double flops = 2.0 * m * n * k;
    double all = medians[0] + medians[1] + medians[2];
    const std::string shape = fmt::format("{} x {} x {}", m, n, k);
    const std::string quantizeUse[2] = {
        fmt::format("{}/{}", quantizeRegisters[0], quantizeRegisters[1]),
        fmt::format("{}/{}", quantizeWarps[0], quantizeWarps[1])};
    fmt::print("{:<28} {:<6} {:<22} {:10.3f} {:10.3f} {:10.3f} {:9.2f} {:9.2f} "
               "{:9.2f} {:9.2f} {:>7} {:>7} {:5} {:7.1f} {:6} {:8}  {}\n",
               name.substr(0, 28), computes.get("role").asString(), shape,
               medians[0], medians[1], medians[2], flops / (medians[2] * 1e9),
               flops / (all * 1e9), quantizeBytes[0] / (quantizeMs[0] * 1e9),
               quantizeBytes[1] / (quantizeMs[1] * 1e9), quantizeUse[0],
               quantizeUse[1], used.registers, used.staticSharedBytes / 1024.0,
               used.localBytes, used.blocksPerSM * warpsPerBlock, checked);
    for (auto &[key, buffer] : buffers)
      (void)gpu.free(buffer);
    (void)gpu.unloadModule(*module);
  }
  return 0;
}
