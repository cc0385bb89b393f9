//===- Matmul.cpp - Blocked fp32 matrix product ---------------------------===//
//
// Loop nest (per task = one MC x NC tile of C):
//
//   for k0 in steps of KC:           pack A[m0:+MC, k0:+KC] into MR-row panels
//                                    pack B[k0:+KC, n0:+NC] into NR-column
//                                    panels
//     for each NR panel of B:        (stays in L1)
//       for each MR panel of A:      (the packed A block stays in L2)
//         C[MR x NR] += Apanel * Bpanel   (acc in registers, k in order)
//
// The tile sizes follow the vector width the compiler targets; edges are
// zero-padded in the packed panels and masked when C is written.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/Matmul.h"

#include "runtime/kernels/LaunchArguments.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tetra::kernels {

using backend::ArrayView;
using backend::Buffer;
using backend::CpuKernelContext;
using backend::Scalar;
using backend::ThreadPool;

namespace {

// The micro-tile: MR x NR accumulators must fit the vector registers.
#if defined(__AVX512F__)
constexpr int64_t kMR = 8, kNR = 32; // 16 zmm accumulators of 32
#elif defined(__AVX__)
constexpr int64_t kMR = 6, kNR = 16; // 12 ymm accumulators of 16
#else
constexpr int64_t kMR = 6, kNR = 8; // 12 xmm accumulators of 16
#endif
constexpr int64_t kMC = kMR * 16;
constexpr int64_t kNC = 256;
constexpr int64_t kKC = 256;
static_assert(kNC % kNR == 0, "NC must be a multiple of NR");

/// A[m0:+mc, k0:+kc] as MR-row panels: panel p holds, for every k, the MR
/// values of rows p*MR .. p*MR+MR-1 (zero past the last row).
void packA(const float *a, int64_t m, int64_t k, bool transA, int64_t m0,
           int64_t mc, int64_t k0, int64_t kc, float *packed) {
  for (int64_t p = 0; p < mc; p += kMR) {
    const int64_t rows = std::min(kMR, mc - p);
    float *dst = packed + p * kc;
    if (transA) {
      for (int64_t r = 0; r < kc; ++r) {
        const float *src = a + (k0 + r) * m + m0 + p;
        for (int64_t i = 0; i < kMR; ++i)
          dst[r * kMR + i] = i < rows ? src[i] : 0.0f;
      }
    } else {
      for (int64_t i = 0; i < kMR; ++i) {
        if (i >= rows) {
          for (int64_t r = 0; r < kc; ++r)
            dst[r * kMR + i] = 0.0f;
          continue;
        }
        const float *src = a + (m0 + p + i) * k + k0;
        for (int64_t r = 0; r < kc; ++r)
          dst[r * kMR + i] = src[r];
      }
    }
  }
}

/// B[k0:+kc, n0:+nc] as NR-column panels: panel q holds, for every k, the NR
/// values of columns q*NR .. q*NR+NR-1 (zero past the last column).
void packB(const float *b, int64_t n, int64_t k, bool transB, int64_t n0,
           int64_t nc, int64_t k0, int64_t kc, float *packed) {
  for (int64_t q = 0; q < nc; q += kNR) {
    const int64_t cols = std::min(kNR, nc - q);
    float *dst = packed + q * kc;
    if (transB) {
      for (int64_t j = 0; j < kNR; ++j) {
        if (j >= cols) {
          for (int64_t r = 0; r < kc; ++r)
            dst[r * kNR + j] = 0.0f;
          continue;
        }
        const float *src = b + (n0 + q + j) * k + k0;
        for (int64_t r = 0; r < kc; ++r)
          dst[r * kNR + j] = src[r];
      }
    } else {
      for (int64_t r = 0; r < kc; ++r) {
        const float *src = b + (k0 + r) * n + n0 + q;
        float *row = dst + r * kNR;
        if (cols == kNR) {
          std::memcpy(row, src, kNR * sizeof(float));
        } else {
          for (int64_t j = 0; j < kNR; ++j)
            row[j] = j < cols ? src[j] : 0.0f;
        }
      }
    }
  }
}

#if defined(__GNUC__) || defined(__clang__)
/// One row of the register tile: NR floats. GCC and Clang lower a vector
/// type wider than the machine's registers to several registers, so the tile
/// is MR x (NR / width) registers on every target. This is the one place the
/// kernels spell out SIMD: left to the auto-vectorizer, the tile's
/// accumulators end up in memory (or in gathers) depending on the target.
typedef float TileRow __attribute__((vector_size(kNR * sizeof(float))));

/// tile [MR x NR] = the product of an MR-row panel and an NR-column panel
/// over kc, k in order.
void microKernel(int64_t kc, const float *ap, const float *bp, float *tile) {
  TileRow acc[kMR] = {};
  for (int64_t r = 0; r < kc; ++r) {
    TileRow b;
    std::memcpy(&b, bp + r * kNR, sizeof(TileRow));
    const float *av = ap + r * kMR;
    for (int64_t i = 0; i < kMR; ++i)
      acc[i] += av[i] * b;
  }
  std::memcpy(tile, acc, sizeof(acc));
}
#else
/// tile [MR x NR] = the product of an MR-row panel and an NR-column panel
/// over kc, k in order (portable C++; the auto-vectorizer's best effort).
void microKernel(int64_t kc, const float *ap, const float *bp, float *tile) {
  float acc[kMR][kNR] = {};
  for (int64_t r = 0; r < kc; ++r)
    for (int64_t i = 0; i < kMR; ++i)
      for (int64_t j = 0; j < kNR; ++j)
        acc[i][j] += ap[r * kMR + i] * bp[r * kNR + j];
  std::memcpy(tile, acc, sizeof(acc));
}
#endif

/// C[0:rows, 0:cols] (leading dimension ldc) = (add ? C : 0) + tile.
void storeTile(const float *tile, float *c, int64_t ldc, int64_t rows,
               int64_t cols, bool add) {
  for (int64_t i = 0; i < rows; ++i) {
    float *row = c + i * ldc;
    const float *values = tile + i * kNR;
    if (add) {
      for (int64_t j = 0; j < cols; ++j)
        row[j] += values[j];
    } else {
      for (int64_t j = 0; j < cols; ++j)
        row[j] = values[j];
    }
  }
}

/// Per-thread packing buffers, kept across calls.
struct PackBuffers {
  std::vector<float> a = std::vector<float>(kMC * kKC);
  std::vector<float> b = std::vector<float>(kKC * kNC);
  std::vector<float> tile = std::vector<float>(kMR * kNR);
};

} // namespace

void matmul(ThreadPool &pool, const float *a, const float *b, float *c,
            int64_t m, int64_t n, int64_t k, bool transA, bool transB,
            bool accumulate) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!accumulate)
      std::fill(c, c + m * n, 0.0f);
    return;
  }
  const int64_t mBlocks = (m + kMC - 1) / kMC;
  const int64_t nBlocks = (n + kNC - 1) / kNC;
  pool.parallelFor(0, mBlocks * nBlocks, 1, [&](int64_t begin, int64_t end) {
    thread_local PackBuffers buffers;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m0 = (task / nBlocks) * kMC;
      const int64_t n0 = (task % nBlocks) * kNC;
      const int64_t mc = std::min(kMC, m - m0);
      const int64_t nc = std::min(kNC, n - n0);
      for (int64_t k0 = 0; k0 < k; k0 += kKC) {
        const int64_t kc = std::min(kKC, k - k0);
        packA(a, m, k, transA, m0, mc, k0, kc, buffers.a.data());
        packB(b, n, k, transB, n0, nc, k0, kc, buffers.b.data());
        const bool add = accumulate || k0 > 0;
        float *tile = buffers.tile.data();
        for (int64_t q = 0; q < nc; q += kNR)
          for (int64_t p = 0; p < mc; p += kMR) {
            microKernel(kc, buffers.a.data() + p * kc,
                        buffers.b.data() + q * kc, tile);
            storeTile(tile, c + (m0 + p) * n + n0 + q, n, std::min(kMR, mc - p),
                      std::min(kNR, nc - q), add);
          }
      }
    }
  });
}

namespace {

io::Status launchMatmul(const CpuKernelContext &context,
                        ArrayView<Buffer> buffers, ArrayView<Scalar> scalars) {
  LaunchArguments args(context, buffers, scalars);
  const int64_t m = args.size(0), n = args.size(1), k = args.size(2);
  const bool transA = args.flag(3), transB = args.flag(4),
             accumulate = args.flag(5);
  const float *a = args.input<float>(0, args.product({m, k}));
  const float *b = args.input<float>(1, args.product({k, n}));
  float *c = args.output<float>(2, args.product({m, n}));
  if (!args.ok())
    return args.status();
  matmul(args.pool(), a, b, c, m, n, k, transA, transB, accumulate);
  return io::success();
}

} // namespace

io::Status addMatmulKernels(backend::CpuKernelTable &table) {
  return table.add({"matmul",
                    {inF32("a"), inF32("b"), inoutF32("c")},
                    {i64("m"), i64("n"), i64("k"), i64("trans_a"),
                     i64("trans_b"), i64("accumulate")}},
                   launchMatmul);
}

} // namespace tetra::kernels
