//===- VectorMath.h - Inner loops the compiler can vectorize ----*- C++ -*-===//
//
// Without -ffast-math a compiler may not reorder a float sum, so a plain
// `for (i) sum += a[i] * b[i]` runs one element at a time. These helpers keep
// eight independent partial sums (eight lanes, which the SLP vectorizer maps
// to SIMD registers) and combine them in a fixed tree. The order of every
// addition depends only on n, so results are the same on every run and with
// every thread count.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_KERNELS_VECTORMATH_H
#define TETRA_RUNTIME_KERNELS_VECTORMATH_H

#include <cstdint>
#include <cstring>
#include <limits>

namespace tetra::kernels {

/// Lanes of the partial sums.
constexpr int kLanes = 8;

/// Combines eight partial sums in a fixed tree.
inline float combineLanes(const float (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// sum_i a[i] * b[i] in fp32.
inline float dot(const float *a, const float *b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int lane = 0; lane < kLanes; ++lane)
      acc[lane] += a[i + lane] * b[i + lane];
  float sum = combineLanes(acc);
  for (; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

/// sum_i x[i]^2, accumulated in fp64 (for norms over millions of elements).
inline double sumOfSquaresF64(const float *x, int64_t n) {
  double acc[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int lane = 0; lane < 4; ++lane)
      acc[lane] += static_cast<double>(x[i + lane]) * x[i + lane];
  double sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; ++i)
    sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

/// The largest of x[0..n), n >= 1 (NaNs are not propagated reliably: callers
/// on the loss path check the result).
inline float maxOf(const float *x, int64_t n) {
  float acc[kLanes];
  for (int lane = 0; lane < kLanes; ++lane)
    acc[lane] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int lane = 0; lane < kLanes; ++lane)
      acc[lane] = acc[lane] > x[i + lane] ? acc[lane] : x[i + lane];
  float result = acc[0];
  for (int lane = 1; lane < kLanes; ++lane)
    result = result > acc[lane] ? result : acc[lane];
  for (; i < n; ++i)
    result = result > x[i] ? result : x[i];
  return result;
}

/// sum_i x[i] in fp64 (four lanes, a fixed tree).
inline double sumF64(const float *x, int64_t n) {
  double acc[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int lane = 0; lane < 4; ++lane)
      acc[lane] += x[i + lane];
  double sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; ++i)
    sum += x[i];
  return sum;
}

/// e^x in fp32 without a libm call, so that loops over it vectorize; within
/// 1 ulp of e^x wherever the result is a normal float (KernelTests checks).
/// Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so that
/// n ln2 is exact), e^r by a polynomial, 2^n by building the exponent bits.
/// Below ln(FLT_MIN) the result is 0 (no subnormals); above 127.5 ln2 (about
/// 88.38, where 2^n would overflow) it is +inf, though e^x is finite up to
/// 88.72; NaN stays NaN. Softmax arguments are <= 0, far from both ends.
inline float fastExp(float x) {
  constexpr float kMax = 88.3762626647949f;  // 127.5 ln2
  constexpr float kMin = -87.3365447505531f; // ln(FLT_MIN)
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f;
  constexpr float kLn2Low = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f; // 1.5 * 2^23: t + kRound rounds t
  const float clamped = x < kMin ? kMin : (x > kMax ? kMax : x);
  const float shifted = clamped * kLog2e + kRound;
  const float n = shifted - kRound;
  const float r = clamped - n * kLn2High - n * kLn2Low;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t shiftedBits;
  std::memcpy(&shiftedBits, &shifted, sizeof(float));
  // The low bits of `shifted` hold n (two's complement, offset by kRound).
  // Unsigned: for a NaN x the bits are garbage (the select below discards
  // them) and a signed shift could overflow.
  const uint32_t exponent =
      static_cast<uint32_t>(shiftedBits - 0x4B400000) + 127u;
  const uint32_t scaleBits = exponent << 23;
  float scale;
  std::memcpy(&scale, &scaleBits, sizeof(float));
  const float result = p * scale;
  return x < kMin   ? 0.0f
         : x > kMax ? std::numeric_limits<float>::infinity()
         : x != x   ? x
                    : result;
}

/// y[i] = fastExp(x[i] - shift).
inline void expShifted(const float *x, float shift, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fastExp(x[i] - shift);
}

/// y[i] += alpha * x[i].
inline void axpy(float alpha, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += alpha * x[i];
}

} // namespace tetra::kernels

#endif // TETRA_RUNTIME_KERNELS_VECTORMATH_H
