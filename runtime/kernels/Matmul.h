//===- Matmul.h - Blocked fp32 matrix product -------------------*- C++ -*-===//
//
// C = op(A) op(B) for the GEMMs that stay in fp32 (a policy of plain f32, and
// the CPU's fallback while quantized kernels are compiled). op(A) is [m, k]
// and op(B) is [k, n]; the flags say how they are stored:
//
//   A: [m, k] row-major, or [k, m] when trans_a
//   B: [k, n] row-major, or [n, k] when trans_b
//   C: [m, n] row-major
//
// so a linear layer y = x w^T is (trans_b), its Dgrad dx = dy w is plain, and
// its Wgrad dw = dy^T x is (trans_a) with k = tokens.
//
// Blocked in the GotoBLAS way: panels of A and B are packed into contiguous
// micro-panels, and a register-tiled micro-kernel (plain C++ the compiler
// vectorizes) accumulates each tile of C over k in order. Work is split over
// tiles of C, and every element of C is summed by one thread in a fixed
// order, so results do not depend on the thread count.
//
// Registered kernel (KernelABI.h calling convention):
//
//   matmul
//     buffers: in f32 a, in f32 b, inout f32 c [m, n]
//     scalars: i64 m, i64 n, i64 k, i64 trans_a, i64 trans_b, i64 accumulate
//     c = (accumulate ? c : 0) + op(a) op(b). c must not alias a or b.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_MATMUL_H
#define TETRA_RUNTIME_KERNELS_MATMUL_H

#include "runtime/backend/KernelABI.h"
#include "runtime/backend/ThreadPool.h"
#include "runtime/io/Error.h"

#include <cstdint>

namespace tetra::kernels {

/// c = (accumulate ? c : 0) + op(a) op(b); see the file comment for layouts.
void matmul(backend::ThreadPool &pool, const float *a, const float *b, float *c,
            int64_t m, int64_t n, int64_t k, bool transA, bool transB,
            bool accumulate);

/// Registers matmul.
io::Status addMatmulKernels(backend::CpuKernelTable &table);

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_MATMUL_H
