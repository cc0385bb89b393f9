//===- ElementwiseTest.cpp - SiLU, add, sub, mul, scale -------------------===//

#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/reference/Elementwise.h"

#include "KernelTestUtils.h"

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

/// Sizes around the chunk size (32 K) and tiny ones.
const int64_t kCounts[] = {1, 7, 1000, 32768, 32769, 100003};

reference::BinaryOp toReference(BinaryOp op) {
  return op == BinaryOp::Add   ? reference::BinaryOp::Add
         : op == BinaryOp::Sub ? reference::BinaryOp::Sub
                               : reference::BinaryOp::Mul;
}

} // namespace

TEST(ElementwiseTest, SiluForwardMatchesReference) {
  for (int64_t n : kCounts) {
    const std::vector<float> x = randomFloats(n, 1, -12.0f, 12.0f);
    std::vector<float> y(n);
    siluForward(testPool(), x.data(), y.data(), n);
    std::vector<double> expected(n);
    reference::siluForward(widen(x).data(), expected.data(), n);
    expectClose(y, expected, 1e-6, 1e-7, "silu.forward");
  }
}

TEST(ElementwiseTest, SiluBackward) {
  const int64_t n = 50;
  const std::vector<double> x = widen(randomFloats(n, 2, -6.0f, 6.0f));
  const std::vector<double> dy = widen(randomFloats(n, 3));
  std::vector<double> analytic(n);
  reference::siluBackward(x.data(), dy.data(), analytic.data(), n);
  auto loss = [&](const std::vector<double> &input) {
    std::vector<double> y(n);
    reference::siluForward(input.data(), y.data(), n);
    return weightedSum(y, dy);
  };
  expectClose(analytic, numericalGradient(loss, x), 1e-7, 1e-9,
              "reference silu backward");

  for (int64_t count : kCounts) {
    const std::vector<float> xf = randomFloats(count, 4, -12.0f, 12.0f);
    const std::vector<float> dyf = randomFloats(count, 5);
    std::vector<float> dx(count);
    siluBackward(testPool(), xf.data(), dyf.data(), dx.data(), count);
    std::vector<double> expected(count);
    reference::siluBackward(widen(xf).data(), widen(dyf).data(),
                            expected.data(), count);
    expectClose(dx, expected, 1e-5, 1e-7, "silu.backward");
  }
}

TEST(ElementwiseTest, BinaryForwardAndBackwardMatchReference) {
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul})
    for (int64_t n : kCounts) {
      const std::vector<float> a = randomFloats(n, 6), b = randomFloats(n, 7);
      const std::vector<float> dout = randomFloats(n, 8);
      std::vector<float> out(n), da(n), db(n);
      binaryForward(testPool(), op, a.data(), b.data(), out.data(), n);
      binaryBackward(testPool(), op, a.data(), b.data(), dout.data(), da.data(),
                     db.data(), n);
      std::vector<double> expected(n), expectedDa(n), expectedDb(n);
      reference::binaryForward(toReference(op), widen(a).data(),
                               widen(b).data(), expected.data(), n);
      reference::binaryBackward(toReference(op), widen(a).data(),
                                widen(b).data(), widen(dout).data(),
                                expectedDa.data(), expectedDb.data(), n);
      // One fp32 rounding of an exact fp64 result.
      expectClose(out, expected, 0x1p-24, 0.0, "binary forward");
      expectClose(da, expectedDa, 0x1p-24, 0.0, "binary backward da");
      expectClose(db, expectedDb, 0x1p-24, 0.0, "binary backward db");
    }
}

TEST(ElementwiseTest, ReferenceMulBackwardMatchesFiniteDifferences) {
  const int64_t n = 20;
  const std::vector<double> a = widen(randomFloats(n, 9));
  const std::vector<double> b = widen(randomFloats(n, 10));
  const std::vector<double> dout = widen(randomFloats(n, 11));
  std::vector<double> da(n), db(n);
  reference::binaryBackward(reference::BinaryOp::Mul, a.data(), b.data(),
                            dout.data(), da.data(), db.data(), n);
  auto lossOfA = [&](const std::vector<double> &x) {
    std::vector<double> out(n);
    reference::binaryForward(reference::BinaryOp::Mul, x.data(), b.data(),
                             out.data(), n);
    return weightedSum(out, dout);
  };
  auto lossOfB = [&](const std::vector<double> &x) {
    std::vector<double> out(n);
    reference::binaryForward(reference::BinaryOp::Sub, a.data(), x.data(),
                             out.data(), n);
    return weightedSum(out, dout);
  };
  expectClose(da, numericalGradient(lossOfA, a), 1e-7, 1e-8, "mul da");
  std::vector<double> subDa(n), subDb(n);
  reference::binaryBackward(reference::BinaryOp::Sub, a.data(), b.data(),
                            dout.data(), subDa.data(), subDb.data(), n);
  expectClose(subDb, numericalGradient(lossOfB, b), 1e-7, 1e-8, "sub db");
}

TEST(ElementwiseTest, InPlace) {
  const int64_t n = 1000;
  const std::vector<float> a = randomFloats(n, 12), b = randomFloats(n, 13);
  std::vector<float> inPlace = a;
  binaryForward(testPool(), BinaryOp::Mul, inPlace.data(), b.data(),
                inPlace.data(), n);
  std::vector<float> separate(n);
  binaryForward(testPool(), BinaryOp::Mul, a.data(), b.data(), separate.data(),
                n);
  EXPECT_TRUE(sameBits(inPlace, separate));

  // mul.backward with da written over dout.
  std::vector<float> dout = randomFloats(n, 14), db(n);
  const std::vector<float> doutCopy = dout;
  binaryBackward(testPool(), BinaryOp::Mul, a.data(), b.data(), dout.data(),
                 dout.data(), db.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(dout[i], doutCopy[i] * b[i]);
    EXPECT_EQ(db[i], doutCopy[i] * a[i]);
  }
}

TEST(ElementwiseTest, Scale) {
  const int64_t n = 40000;
  const std::vector<float> x = randomFloats(n, 15);
  std::vector<float> y(n);
  scale(testPool(), x.data(), y.data(), n, -0.125f);
  std::vector<double> expected(n);
  reference::scale(widen(x).data(), expected.data(), n, -0.125);
  expectClose(y, expected, 0.0, 0.0, "scale"); // a power of two: exact
}
