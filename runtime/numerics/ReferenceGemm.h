//===- ReferenceGemm.h - The quantized GEMM oracle --------------*- C++ -*-===//
//
// C = A * B^T with A (M x K) and B (N x K) both quantized along K: dequantize
// exactly, accumulate in fp64. Every target's GEMM is checked against this.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_NUMERICS_REFERENCEGEMM_H
#define TETRA_RUNTIME_NUMERICS_REFERENCEGEMM_H

#include "runtime/numerics/BlockQuantize.h"

#include <cstdint>
#include <vector>

namespace tetra::numerics {

/// C[m][n] = sum_k A[m][k] * B[n][k] in fp64; A is M x K, B is N x K,
/// row-major. Products and sums in fp64, k = 0, 1, ..., K-1 in order.
std::vector<double> referenceGemm(const float *a, const float *b, int64_t m,
                                  int64_t n, int64_t k);

/// The same over quantized operands: `a` has shape {M, K}, `b` {N, K}, both
/// quantized along axis 1. The product of the dequantized values, where each
/// value is decode(code) * scale (* tensorScale) formed in fp64, exactly.
/// For MX that equals dequantize(); for NVFP4 dequantize() rounds the final
/// product with tensorScale to fp32 and can differ from it.
std::vector<double> referenceGemm(const QuantizedTensor &a,
                                  const QuantizedTensor &b);

/// Rotate both operands along K, quantize each with its own quantization,
/// multiply in fp64. Both rotations must be the same for the product to mean
/// A * B^T; the caller checks. Each operand's rotation uses its stream's step
/// (per-step random signs), so the two steps must match too.
std::vector<double> quantizedGemm(const float *a, const float *b, int64_t m,
                                  int64_t n, int64_t k,
                                  const OperandQuantization &lhs,
                                  const OperandQuantization &rhs,
                                  const RandomStream &lhsStream = {},
                                  const RandomStream &rhsStream = {});

} // namespace tetra::numerics

#endif // TETRA_RUNTIME_NUMERICS_REFERENCEGEMM_H
