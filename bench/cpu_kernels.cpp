//===- cpu_kernels.cpp - Time the CPU library kernels ---------------------===//
//
// Times every library kernel (runtime/kernels) at two sizes: the tiny model
// (models/llama_tiny.tetra: dim 64, 4 heads of 16 over 2 KV heads, FFN 128,
// vocabulary 256; batch 8 x seq 128) and the ~125M model
// (models/llama_125m.tetra: dim 640, 10 heads of 64, FFN 1792, vocabulary
// 50304; batch 1 x seq 1024). A benchmark, not a test: correctness is
// KernelTests' job.
//
//   tetra-bench-cpu-kernels [--threads N] [--size tiny|125m|all]
//                           [--filter TEXT] [--min-time SECONDS]
//
// Each kernel runs once to warm up (unless that run took over half a
// second), then repeatedly until --min-time has passed and at least three
// runs are done; the table shows the median. GFLOP/s counts the useful
// multiply-adds (2 per MAC; causal attention counts the lower triangle
// only, the backward as twice the forward, no recomputation); GB/s counts
// each tensor read or written once.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CpuBackend.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/kernels/Attention.h"
#include "runtime/kernels/CrossEntropy.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Embedding.h"
#include "runtime/kernels/Matmul.h"
#include "runtime/kernels/Optimizer.h"
#include "runtime/kernels/RMSNorm.h"
#include "runtime/kernels/Registry.h"
#include "runtime/kernels/Rope.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <string>
#include <vector>

using namespace tetra;
using namespace tetra::kernels;
using backend::ThreadPool;

namespace {

struct Options {
  int threads = 0; // 0: ThreadPool::configuredThreadCount()
  std::string size = "all";
  std::string filter;
  double minTime = 0.3;
};

/// A model's shapes.
struct ModelSize {
  const char *name;
  int64_t batch, seq, dim, heads, kvHeads, ffn, vocab, parameters;
  int64_t tokens() const { return batch * seq; }
  int64_t headDim() const { return dim / heads; }
};

const ModelSize kTiny = {"tiny", 8, 128, 64, 4, 2, 128, 256, 106816};
const ModelSize k125M = {"125m", 1, 1024, 640, 10, 10, 1792, 50304, 125353600};

/// Deterministic values in [-1, 1) (an LCG: speed matters, quality not).
std::vector<float> values(int64_t count, uint32_t seed, float scale = 1.0f) {
  std::vector<float> result(count);
  uint32_t state = seed * 2654435761u + 1;
  for (float &value : result) {
    state = state * 1664525u + 1013904223u;
    value = scale * (static_cast<float>(state >> 8) * 0x1p-23f - 1.0f);
  }
  return result;
}

std::vector<int32_t> ids(int64_t count, int32_t limit, uint32_t seed) {
  std::vector<int32_t> result(count);
  uint32_t state = seed;
  for (int32_t &id : result) {
    state = state * 1664525u + 1013904223u;
    id = static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(limit));
  }
  return result;
}

/// Median seconds per run of `fn`.
double timeIt(const std::function<void()> &fn, double minTime) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  auto start = Clock::now();
  fn();
  const double first = seconds(start, Clock::now());
  std::vector<double> runs;
  if (first > 0.5)
    runs.push_back(first);
  const auto begin = Clock::now();
  while (runs.size() < 3 ||
         (seconds(begin, Clock::now()) < minTime && runs.size() < 10000)) {
    start = Clock::now();
    fn();
    runs.push_back(seconds(start, Clock::now()));
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

class Table {
public:
  Table(const Options &options) : options_(options) {
    fmt::print("{:<5} {:<24} {:<36} {:>11} {:>9} {:>8}\n", "model", "kernel",
               "shape", "time", "GFLOP/s", "GB/s");
    fmt::print("{}\n", std::string(98, '-'));
  }

  /// Times `fn`; `flops` and `bytes` per run (0: not shown).
  void row(const ModelSize &model, const std::string &kernel,
           const std::string &shape, double flops, double bytes,
           const std::function<void()> &fn) {
    if (!options_.filter.empty() &&
        kernel.find(options_.filter) == std::string::npos)
      return;
    const double seconds = timeIt(fn, options_.minTime);
    const std::string time = seconds < 1e-3
                                 ? fmt::format("{:8.1f} us", seconds * 1e6)
                                 : fmt::format("{:8.2f} ms", seconds * 1e3);
    const std::string gflops =
        flops > 0 ? fmt::format("{:9.2f}", flops / seconds * 1e-9) : "";
    const std::string gbytes =
        bytes > 0 ? fmt::format("{:8.2f}", bytes / seconds * 1e-9) : "";
    fmt::print("{:<5} {:<24} {:<36} {:>11} {:>9} {:>8}\n", model.name, kernel,
               shape, time, gflops, gbytes);
    std::fflush(stdout);
  }

private:
  const Options &options_;
};

std::string dims(std::initializer_list<int64_t> values) {
  return fmt::format("{}", fmt::join(values, "x"));
}

void check(const io::Status &status) {
  if (!status) {
    fmt::print(stderr, "error: {}\n", status.error().message());
    std::exit(1);
  }
}

void benchModel(const ModelSize &s, ThreadPool &pool, Table &table) {
  const int64_t n = s.tokens(), d = s.dim, hd = s.headDim();
  const double f4 = 4.0; // bytes per float

  // Embedding.
  {
    const std::vector<float> embed = values(s.vocab * d, 1, 0.02f);
    const std::vector<int32_t> tokens = ids(n, s.vocab, 2);
    std::vector<float> out(n * d), dEmbed(s.vocab * d, 0.0f);
    const std::string shape = dims({n}) + " of " + dims({s.vocab, d});
    table.row(s, "embedding.forward", shape, 0, 2 * f4 * n * d, [&] {
      check(embeddingForward(pool, embed.data(), tokens.data(), out.data(), n,
                             s.vocab, d));
    });
    table.row(s, "embedding.backward", shape + " acc", 0, 3 * f4 * n * d, [&] {
      check(embeddingBackward(pool, tokens.data(), out.data(), dEmbed.data(), n,
                              s.vocab, d, /*accumulate=*/true));
    });
  }

  // RMSNorm.
  {
    const std::vector<float> x = values(n * d, 3), w = values(d, 4);
    std::vector<float> y(n * d), rstd(n), dx(n * d), dw(d);
    const std::string shape = dims({n, d});
    table.row(s, "rmsnorm.forward", shape, 0, 2 * f4 * n * d, [&] {
      rmsnormForward(pool, x.data(), w.data(), y.data(), rstd.data(), n, d,
                     1e-5);
    });
    table.row(s, "rmsnorm.backward", shape, 0, 3 * f4 * n * d, [&] {
      rmsnormBackward(pool, x.data(), w.data(), rstd.data(), y.data(),
                      dx.data(), dw.data(), n, d, false);
    });
  }

  // Rope on q.
  {
    const std::vector<float> q = values(n * d, 5);
    std::vector<float> out(n * d);
    const std::string shape = dims({s.batch, s.seq, s.heads, hd});
    table.row(s, "rope.forward", shape, 0, 2 * f4 * n * d, [&] {
      ropeForward(pool, q.data(), out.data(), s.batch, s.seq, s.heads, hd,
                  10000.0);
    });
    table.row(s, "rope.backward", shape, 0, 2 * f4 * n * d, [&] {
      ropeBackward(pool, q.data(), out.data(), s.batch, s.seq, s.heads, hd,
                   10000.0);
    });
  }

  // Attention.
  {
    const AttentionShape shape{s.batch, s.seq, s.heads, s.kvHeads, hd};
    const int64_t qSize = n * s.heads * hd, kvSize = n * s.kvHeads * hd;
    const int64_t rows = s.batch * s.heads * s.seq;
    const std::vector<float> q = values(qSize, 6), k = values(kvSize, 7),
                             v = values(kvSize, 8), dout = values(qSize, 9);
    std::vector<float> out(qSize), lse(rows), dq(qSize), dk(kvSize), dv(kvSize),
        delta(rows);
    const double forwardFlops =
        4.0 * s.batch * s.heads * hd * (s.seq * (s.seq + 1) / 2.0);
    const std::string text = fmt::format("B{} T{} H{} G{} hd{}", s.batch, s.seq,
                                         s.heads, s.kvHeads, hd);
    table.row(s, "attention.forward", text, forwardFlops, 0, [&] {
      attentionForward(pool, q.data(), k.data(), v.data(), out.data(),
                       lse.data(), shape);
    });
    table.row(s, "attention.backward", text, 2 * forwardFlops, 0, [&] {
      attentionBackward(pool, q.data(), k.data(), v.data(), out.data(),
                        lse.data(), dout.data(), dq.data(), dk.data(),
                        dv.data(), delta.data(), shape);
    });
  }

  // SwiGLU's elementwise ops over [tokens, ffn].
  {
    const int64_t count = n * s.ffn;
    const std::vector<float> a = values(count, 10, 4.0f), b = values(count, 11);
    std::vector<float> out(count), da(count), db(count);
    const std::string shape = dims({n, s.ffn});
    table.row(s, "silu.forward", shape, 0, 2 * f4 * count,
              [&] { siluForward(pool, a.data(), out.data(), count); });
    table.row(s, "silu.backward", shape, 0, 3 * f4 * count, [&] {
      siluBackward(pool, a.data(), b.data(), out.data(), count);
    });
    table.row(s, "mul.forward", shape, 0, 3 * f4 * count, [&] {
      binaryForward(pool, BinaryOp::Mul, a.data(), b.data(), out.data(), count);
    });
    table.row(s, "mul.backward", shape, 0, 5 * f4 * count, [&] {
      binaryBackward(pool, BinaryOp::Mul, a.data(), b.data(), out.data(),
                     da.data(), db.data(), count);
    });
    table.row(s, "add.forward", dims({n, d}), 0, 3 * f4 * n * d, [&] {
      binaryForward(pool, BinaryOp::Add, a.data(), b.data(), out.data(), n * d);
    });
  }

  // The loss.
  {
    const int64_t count = n * s.vocab;
    const std::vector<float> logits = values(count, 12, 4.0f);
    const std::vector<int32_t> targets = ids(n, s.vocab, 13);
    std::vector<float> lse(n), dlogits(count);
    float loss = 0.0f;
    const std::string shape = dims({n, s.vocab});
    table.row(s, "cross_entropy.forward", shape, 0, f4 * count, [&] {
      check(crossEntropyForward(pool, logits.data(), targets.data(), &loss,
                                lse.data(), n, s.vocab));
    });
    table.row(s, "cross_entropy.backward", shape, 0, 2 * f4 * count, [&] {
      check(crossEntropyBackward(pool, logits.data(), targets.data(),
                                 lse.data(), 1.0f, dlogits.data(), n, s.vocab));
    });
  }

  // The linears' fp32 GEMMs: y = x w^T (fprop), dx = dy w (dgrad),
  // dw = dy^T x (wgrad).
  struct Linear {
    const char *name;
    int64_t out, in;
  };
  const Linear linears[] = {{"wq", s.heads * hd, d},
                            {"gate", s.ffn, d},
                            {"down", d, s.ffn},
                            {"lm_head", s.vocab, d}};
  for (const Linear &linear : linears) {
    const std::vector<float> x = values(n * linear.in, 14),
                             w = values(linear.out * linear.in, 15),
                             dy = values(n * linear.out, 16);
    std::vector<float> y(n * linear.out), dx(n * linear.in),
        dw(linear.out * linear.in);
    const double flops = 2.0 * n * linear.out * linear.in;
    const std::string name = std::string("matmul ") + linear.name;
    table.row(s, name + " fprop", dims({n, linear.out, linear.in}) + " (NT)",
              flops, 0, [&] {
                matmul(pool, x.data(), w.data(), y.data(), n, linear.out,
                       linear.in, false, true, false);
              });
    table.row(s, name + " dgrad", dims({n, linear.in, linear.out}) + " (NN)",
              flops, 0, [&] {
                matmul(pool, dy.data(), w.data(), dx.data(), n, linear.in,
                       linear.out, false, false, false);
              });
    table.row(s, name + " wgrad", dims({linear.out, linear.in, n}) + " (TN)",
              flops, 0, [&] {
                matmul(pool, dy.data(), x.data(), dw.data(), linear.out,
                       linear.in, n, true, false, false);
              });
  }

  // The optimizer over every parameter, as one tensor.
  {
    const int64_t count = s.parameters;
    std::vector<float> p = values(count, 17), g = values(count, 18, 1e-3f),
                       m(count, 0.0f), v(count, 0.0f);
    const std::string shape = dims({count});
    table.row(s, "global_norm", shape, 0, f4 * count, [&] {
      const float *tensor = g.data();
      (void)globalNorm(pool, {&tensor, 1}, {&count, 1});
    });
    AdamWConfig config;
    config.weightDecay = 0.1;
    table.row(s, "adamw", shape, 0, 7 * f4 * count, [&] {
      check(adamw(pool, p.data(), g.data(), m.data(), v.data(), count, config));
    });
  }
}

/// The cost of one launch through the backend (argument checks, buffer
/// lookups) around a kernel that does almost nothing.
void benchLaunch(ThreadPool &pool, int threads, Table &table) {
  (void)pool;
  backend::CpuBackend cpu(threads);
  backend::Module module = *cpu.loadModule(
      backend::CodeObject::cpuTable(libraryKernels(), "library"));
  backend::Kernel add = *cpu.getKernel(module, "add.forward");
  backend::Buffer a = *cpu.allocate(64), b = *cpu.allocate(64),
                  out = *cpu.allocate(64);
  const ModelSize launch = {"-", 0, 0, 0, 0, 0, 0, 0, 0};
  table.row(
      launch, "launch (add.forward)", "count 1, through CpuBackend", 0, 0, [&] {
        check(cpu.launch(add, {}, {a, b, out}, {backend::Scalar::integer(1)}));
      });
}

bool parse(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> const char * {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char *value = nullptr;
    if (arg == "--threads" && (value = next()))
      options.threads = std::atoi(value);
    else if (arg == "--size" && (value = next()))
      options.size = value;
    else if (arg == "--filter" && (value = next()))
      options.filter = value;
    else if (arg == "--min-time" && (value = next()))
      options.minTime = std::atof(value);
    else
      return false;
  }
  return options.threads >= 0 &&
         (options.size == "tiny" || options.size == "125m" ||
          options.size == "all");
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    fmt::print(stderr,
               "usage: {} [--threads N] [--size tiny|125m|all] [--filter TEXT] "
               "[--min-time SECONDS]\n",
               argv[0]);
    return 2;
  }
  if (options.threads == 0) {
    io::Expected<int> threads = ThreadPool::configuredThreadCount();
    if (!threads) {
      fmt::print(stderr, "error: {}\n", threads.error().message());
      return 1;
    }
    options.threads = *threads;
  }
  ThreadPool pool(options.threads);
  fmt::print(
      "tetra-bench-cpu-kernels: {} threads, median of runs >= {:.2f} s\n\n",
      options.threads, options.minTime);
  Table table(options);
  if (options.size != "125m")
    benchModel(kTiny, pool, table);
  if (options.size != "tiny")
    benchModel(k125M, pool, table);
  if (options.filter.empty() ||
      std::string("launch").find(options.filter) != std::string::npos)
    benchLaunch(pool, options.threads, table);
  return 0;
}
