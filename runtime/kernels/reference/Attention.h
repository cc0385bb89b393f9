//===- Attention.h - Reference causal grouped-query attention ---*- C++ -*-===//
//
// The oracle for runtime/kernels/Attention.h: the full score matrix of every
// (batch, head) in fp64, softmax with the maximum subtracted, and the
// textbook backward (dS = P * (dP - rowsum(P * dP))), templated on the scalar
// type. Nothing is saved between forward and backward.
//
// With bf16Operands, the definition of Attention.h: q, k, v and dout rounded
// to BF16 (nearest even) before any product; P = exp(s - lse) rounded for
// out and dV; dS = P (dP - D) rounded for dQ and dK, D = dout . out from the
// unrounded dout and the (bf16-mode) out.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_REFERENCE_ATTENTION_H
#define TETRA_RUNTIME_KERNELS_REFERENCE_ATTENTION_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tetra::kernels::reference {

/// q [batch, seq, heads * headDim], k and v [batch, seq, kvHeads * headDim].
struct AttentionShape {
  int64_t batch, seq, heads, kvHeads, headDim;
  bool bf16Operands = false;
};

namespace detail {

/// x rounded to BF16, nearest even (through fp32; x is finite).
inline double bf16(double x) {
  const float f = static_cast<float>(x);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  float rounded;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

/// What a product sees of x.
inline double operand(double x, const AttentionShape &s) {
  return s.bf16Operands ? bf16(x) : x;
}

/// x, or a copy rounded to BF16.
template <typename T>
std::vector<T> operands(const T *x, int64_t count, const AttentionShape &s) {
  std::vector<T> copy(x, x + count);
  for (T &value : copy)
    value = static_cast<T>(operand(static_cast<double>(value), s));
  return copy;
}

/// P[i][j] (j <= i, zero above the diagonal) of one (b, h), in fp64, and the
/// log-sum-exp of each row of scaled scores.
template <typename T>
void attentionProbabilities(const T *q, const T *k, const AttentionShape &s,
                            int64_t b, int64_t h, std::vector<double> &p,
                            std::vector<double> &lse) {
  const int64_t g = h / (s.heads / s.kvHeads);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.headDim));
  p.assign(s.seq * s.seq, 0.0);
  lse.assign(s.seq, 0.0);
  for (int64_t i = 0; i < s.seq; ++i) {
    const T *qi = q + ((b * s.seq + i) * s.heads + h) * s.headDim;
    double maximum = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      const T *kj = k + ((b * s.seq + j) * s.kvHeads + g) * s.headDim;
      double score = 0.0;
      for (int64_t d = 0; d < s.headDim; ++d)
        score += static_cast<double>(qi[d]) * kj[d];
      p[i * s.seq + j] = score * scale;
      maximum = std::max(maximum, score * scale);
    }
    double sum = 0.0;
    for (int64_t j = 0; j <= i; ++j)
      sum += std::exp(p[i * s.seq + j] - maximum);
    for (int64_t j = 0; j <= i; ++j)
      p[i * s.seq + j] = std::exp(p[i * s.seq + j] - maximum) / sum;
    lse[i] = maximum + std::log(sum);
  }
}

} // namespace detail

/// out = softmax(q k^T / sqrt(headDim), causal) v per head; query head h
/// reads key/value head h / (heads / kvHeads). lse [batch, heads, seq] (may be
/// null) receives each row's log-sum-exp of scaled scores.
template <typename T>
void attentionForward(const T *qIn, const T *kIn, const T *vIn, T *out, T *lse,
                      const AttentionShape &s) {
  const int64_t qSize = s.batch * s.seq * s.heads * s.headDim;
  const int64_t kvSize = s.batch * s.seq * s.kvHeads * s.headDim;
  const std::vector<T> qs = detail::operands(qIn, qSize, s),
                       ks = detail::operands(kIn, kvSize, s),
                       vs = detail::operands(vIn, kvSize, s);
  const T *q = qs.data(), *k = ks.data(), *v = vs.data();
  std::vector<double> p, rowLse;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / (s.heads / s.kvHeads);
      detail::attentionProbabilities(q, k, s, b, h, p, rowLse);
      for (int64_t i = 0; i < s.seq; ++i) {
        T *oi = out + ((b * s.seq + i) * s.heads + h) * s.headDim;
        for (int64_t d = 0; d < s.headDim; ++d) {
          double sum = 0.0;
          for (int64_t j = 0; j <= i; ++j)
            sum += detail::operand(p[i * s.seq + j], s) *
                   v[((b * s.seq + j) * s.kvHeads + g) * s.headDim + d];
          oi[d] = static_cast<T>(sum);
        }
        if (lse)
          lse[(b * s.heads + h) * s.seq + i] = static_cast<T>(rowLse[i]);
      }
    }
}

/// dq, dk, dv (overwritten) for the forward above, given dout.
template <typename T>
void attentionBackward(const T *qIn, const T *kIn, const T *vIn,
                       const T *doutIn, T *dq, T *dk, T *dv,
                       const AttentionShape &s) {
  const int64_t qSize = s.batch * s.seq * s.heads * s.headDim;
  const int64_t kvSize = s.batch * s.seq * s.kvHeads * s.headDim;
  // D = dout . out: out of the forward (with its rounding), dout unrounded.
  std::vector<T> out(qSize);
  attentionForward(qIn, kIn, vIn, out.data(), static_cast<T *>(nullptr), s);
  const std::vector<T> qs = detail::operands(qIn, qSize, s),
                       ks = detail::operands(kIn, kvSize, s),
                       vs = detail::operands(vIn, kvSize, s),
                       douts = detail::operands(doutIn, qSize, s);
  const T *q = qs.data(), *k = ks.data(), *v = vs.data(), *dout = douts.data();
  std::vector<double> dqSum(qSize, 0.0), dkSum(kvSize, 0.0), dvSum(kvSize, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.headDim));
  std::vector<double> p, rowLse, dp(s.seq);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / (s.heads / s.kvHeads);
      detail::attentionProbabilities(q, k, s, b, h, p, rowLse);
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t qi = ((b * s.seq + i) * s.heads + h) * s.headDim;
        double rowSum = 0.0;
        for (int64_t d = 0; d < s.headDim; ++d)
          rowSum += static_cast<double>(doutIn[qi + d]) * out[qi + d];
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kj = ((b * s.seq + j) * s.kvHeads + g) * s.headDim;
          const double pij = p[i * s.seq + j];
          dp[j] = 0.0;
          for (int64_t d = 0; d < s.headDim; ++d) {
            dp[j] += static_cast<double>(dout[qi + d]) * v[kj + d];
            dvSum[kj + d] += detail::operand(pij, s) * dout[qi + d];
          }
        }
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kj = ((b * s.seq + j) * s.kvHeads + g) * s.headDim;
          const double ds =
              detail::operand(p[i * s.seq + j] * (dp[j] - rowSum), s) * scale;
          for (int64_t d = 0; d < s.headDim; ++d) {
            dqSum[qi + d] += ds * k[kj + d];
            dkSum[kj + d] += ds * q[qi + d];
          }
        }
      }
    }
  for (int64_t i = 0; i < qSize; ++i)
    dq[i] = static_cast<T>(dqSum[i]);
  for (int64_t i = 0; i < kvSize; ++i) {
    dk[i] = static_cast<T>(dkSum[i]);
    dv[i] = static_cast<T>(dvSum[i]);
  }
}

} // namespace tetra::kernels::reference

#endif // TETRA_RUNTIME_KERNELS_REFERENCE_ATTENTION_H
