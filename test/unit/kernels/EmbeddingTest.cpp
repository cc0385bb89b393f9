//===- EmbeddingTest.cpp - Embedding forward and backward -----------------===//

#include "runtime/kernels/Embedding.h"
#include "runtime/kernels/reference/Embedding.h"

#include "KernelTestUtils.h"

using namespace tetra::kernels;
using namespace tetra::kernels::testing;

namespace {

struct EmbeddingSize {
  int64_t count, vocab, dim;
};

const EmbeddingSize kSizes[] = {
    {1, 1, 1}, {7, 5, 3}, {64, 300, 65}, {33, 2, 130}};

} // namespace

TEST(EmbeddingTest, ForwardMatchesReference) {
  for (const EmbeddingSize &s : kSizes) {
    const std::vector<float> table = randomFloats(s.vocab * s.dim, 1);
    const std::vector<int32_t> tokens = randomIds(s.count, s.vocab, 2);
    std::vector<float> out(s.count * s.dim);
    ASSERT_TRUE(embeddingForward(testPool(), table.data(), tokens.data(),
                                 out.data(), s.count, s.vocab, s.dim));
    std::vector<double> expected(s.count * s.dim);
    reference::embeddingForward(widen(table).data(), tokens.data(),
                                expected.data(), s.count, s.dim);
    expectClose(out, expected, 0.0, 0.0, "embedding.forward");
  }
}

TEST(EmbeddingTest, ReferenceBackwardMatchesFiniteDifferences) {
  const EmbeddingSize s{9, 4, 3}; // more tokens than rows: repeats
  const std::vector<int32_t> tokens = randomIds(s.count, s.vocab, 3);
  const std::vector<double> weights = widen(randomFloats(s.count * s.dim, 4));
  auto loss = [&](const std::vector<double> &table) {
    std::vector<double> out(s.count * s.dim);
    reference::embeddingForward(table.data(), tokens.data(), out.data(),
                                s.count, s.dim);
    return weightedSum(out, weights);
  };
  const std::vector<double> table = widen(randomFloats(s.vocab * s.dim, 5));
  std::vector<double> analytic(s.vocab * s.dim, 0.0);
  reference::embeddingBackward(tokens.data(), weights.data(), analytic.data(),
                               s.count, s.dim);
  expectClose(analytic, numericalGradient(loss, table), 1e-7, 1e-8, "d table");
}

TEST(EmbeddingTest, BackwardMatchesReference) {
  for (const EmbeddingSize &s : kSizes)
    for (bool accumulate : {false, true}) {
      const std::vector<int32_t> tokens = randomIds(s.count, s.vocab, 6);
      const std::vector<float> dout = randomFloats(s.count * s.dim, 7);
      const std::vector<float> initial = randomFloats(s.vocab * s.dim, 8);
      std::vector<float> dtable = initial;
      ASSERT_TRUE(embeddingBackward(testPool(), tokens.data(), dout.data(),
                                    dtable.data(), s.count, s.vocab, s.dim,
                                    accumulate));
      std::vector<double> expected(s.vocab * s.dim, 0.0);
      if (accumulate)
        expected = widen(initial);
      reference::embeddingBackward(tokens.data(), widen(dout).data(),
                                   expected.data(), s.count, s.dim);
      expectClose(dtable, expected, 1e-6, 1e-6, "embedding.backward");
    }
}

TEST(EmbeddingTest, BackwardIsDeterministic) {
  // Many repeats of few tokens: every row of dtable is a long sum.
  const int64_t count = 4096, vocab = 3, dim = 200;
  const std::vector<int32_t> tokens = randomIds(count, vocab, 9);
  const std::vector<float> dout = randomFloats(count * dim, 10);
  std::vector<float> serial(vocab * dim), parallel(vocab * dim);
  ASSERT_TRUE(embeddingBackward(serialPool(), tokens.data(), dout.data(),
                                serial.data(), count, vocab, dim, false));
  ASSERT_TRUE(embeddingBackward(testPool(), tokens.data(), dout.data(),
                                parallel.data(), count, vocab, dim, false));
  EXPECT_TRUE(sameBits(serial, parallel));
}

TEST(EmbeddingTest, TokenOutOfRangeIsAnError) {
  const std::vector<float> table(4 * 2, 1.0f);
  std::vector<float> out(3 * 2, -7.0f);
  for (int32_t bad : {4, -1, 1 << 30}) {
    const std::vector<int32_t> tokens = {0, bad, 3};
    tetra::io::Status status = embeddingForward(
        testPool(), table.data(), tokens.data(), out.data(), 3, 4, 2);
    ASSERT_FALSE(status);
    EXPECT_EQ(status.error().message(), "token " + std::to_string(bad) +
                                            " at position 1 is outside [0, 4)");
    EXPECT_EQ(out, std::vector<float>(6, -7.0f)) << "nothing written";
    std::vector<float> dtable(8, 0.0f);
    EXPECT_FALSE(embeddingBackward(testPool(), tokens.data(), out.data(),
                                   dtable.data(), 3, 4, 2, false));
  }
}
