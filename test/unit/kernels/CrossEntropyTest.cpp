//===- CrossEntropyTest.cpp - Softmax cross-entropy forward and backward --===//

#include "runtime/kernels/CrossEntropy.h"
#include "runtime/kernels/reference/CrossEntropy.h"

#include "KernelTestUtils.h"

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

struct Size {
  int64_t rows, vocab;
};

const Size kSizes[] = {{1, 1}, {1, 7}, {5, 300}, {64, 257}, {3, 50304}};

} // namespace

TEST(CrossEntropyTest, ForwardMatchesReference) {
  for (const Size &s : kSizes)
    for (float range : {3.0f, 80.0f}) { // 80: exp overflows without the max
      const std::vector<float> logits =
          randomFloats(s.rows * s.vocab, 1, -range, range);
      const std::vector<int32_t> targets = randomIds(s.rows, s.vocab, 2);
      float loss = 0.0f;
      std::vector<float> lse(s.rows);
      ASSERT_TRUE(crossEntropyForward(testPool(), logits.data(), targets.data(),
                                      &loss, lse.data(), s.rows, s.vocab));
      const double expected = reference::crossEntropyForward(
          widen(logits).data(), targets.data(), s.rows, s.vocab);
      EXPECT_NEAR(loss, expected, 1e-6 * std::max(1.0, std::fabs(expected)));
      std::vector<double> expectedLse(s.rows);
      for (int64_t r = 0; r < s.rows; ++r)
        expectedLse[r] = reference::detail::logSumExp(
            widen(logits).data() + r * s.vocab, s.vocab);
      expectClose(lse, expectedLse, 1e-6, 1e-6, "lse");
    }
}

TEST(CrossEntropyTest, ReferenceBackwardMatchesFiniteDifferences) {
  const Size s{4, 6};
  const std::vector<double> logits =
      widen(randomFloats(s.rows * s.vocab, 3, -3.0f, 3.0f));
  const std::vector<int32_t> targets = randomIds(s.rows, s.vocab, 4);
  const double dloss = 0.7;
  std::vector<double> analytic(s.rows * s.vocab);
  reference::crossEntropyBackward(logits.data(), targets.data(), dloss,
                                  analytic.data(), s.rows, s.vocab);
  auto loss = [&](const std::vector<double> &x) {
    return dloss * reference::crossEntropyForward(x.data(), targets.data(),
                                                  s.rows, s.vocab);
  };
  expectClose(analytic, numericalGradient(loss, logits), 1e-7, 1e-9,
              "reference dlogits");
}

TEST(CrossEntropyTest, BackwardMatchesReference) {
  for (const Size &s : kSizes) {
    const std::vector<float> logits =
        randomFloats(s.rows * s.vocab, 5, -10.0f, 10.0f);
    const std::vector<int32_t> targets = randomIds(s.rows, s.vocab, 6);
    float loss = 0.0f;
    std::vector<float> lse(s.rows), dlogits(s.rows * s.vocab);
    ASSERT_TRUE(crossEntropyForward(testPool(), logits.data(), targets.data(),
                                    &loss, lse.data(), s.rows, s.vocab));
    ASSERT_TRUE(crossEntropyBackward(testPool(), logits.data(), targets.data(),
                                     lse.data(), 1.5f, dlogits.data(), s.rows,
                                     s.vocab));
    std::vector<double> expected(s.rows * s.vocab);
    reference::crossEntropyBackward(widen(logits).data(), targets.data(), 1.5,
                                    expected.data(), s.rows, s.vocab);
    expectClose(dlogits, expected, 1e-5, 1e-9, "dlogits");
  }
}

TEST(CrossEntropyTest, TargetOutOfRangeIsAnError) {
  const std::vector<float> logits(3 * 4, 0.5f);
  float loss = -1.0f;
  std::vector<float> lse(3, -1.0f), dlogits(12, -1.0f);
  for (int32_t bad : {4, -1}) {
    const std::vector<int32_t> targets = {1, 2, bad};
    tetra::io::Status status = crossEntropyForward(
        testPool(), logits.data(), targets.data(), &loss, lse.data(), 3, 4);
    ASSERT_FALSE(status);
    EXPECT_EQ(status.error().message(), "target " + std::to_string(bad) +
                                            " at position 2 is outside [0, 4)");
    EXPECT_EQ(loss, -1.0f);
    EXPECT_EQ(lse, std::vector<float>(3, -1.0f));
    EXPECT_FALSE(crossEntropyBackward(testPool(), logits.data(), targets.data(),
                                      lse.data(), 1.0f, dlogits.data(), 3, 4));
    EXPECT_EQ(dlogits, std::vector<float>(12, -1.0f));
  }
}

TEST(CrossEntropyTest, LossIsDeterministic) {
  const int64_t rows = 2048, vocab = 300;
  const std::vector<float> logits = randomFloats(rows * vocab, 7, -5.0f, 5.0f);
  const std::vector<int32_t> targets = randomIds(rows, vocab, 8);
  std::vector<float> lse1(rows), lseN(rows);
  float loss1 = 0.0f, lossN = 0.0f;
  ASSERT_TRUE(crossEntropyForward(serialPool(), logits.data(), targets.data(),
                                  &loss1, lse1.data(), rows, vocab));
  ASSERT_TRUE(crossEntropyForward(testPool(), logits.data(), targets.data(),
                                  &lossN, lseN.data(), rows, vocab));
  EXPECT_TRUE(sameBits({loss1}, {lossN}));
  EXPECT_TRUE(sameBits(lse1, lseN));
}
