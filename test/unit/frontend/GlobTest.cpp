//===- GlobTest.cpp - The globs of policy rules ---------------------------===//

#include "frontend/Diagnostics.h"
#include "frontend/PolicyGlob.h"

#include <gtest/gtest.h>

using namespace tetra::frontend;

namespace {

Glob compile(const std::string &pattern) {
  GlobError error;
  std::optional<Glob> glob = Glob::compile(pattern, error);
  EXPECT_TRUE(glob.has_value()) << pattern << ": " << error.message;
  return glob ? *glob : Glob();
}

/// The error offset and message of a pattern that must not compile.
GlobError failure(const std::string &pattern) {
  GlobError error;
  std::optional<Glob> glob = Glob::compile(pattern, error);
  EXPECT_FALSE(glob.has_value()) << pattern << " compiled";
  return error;
}

TEST(GlobTest, Literal) {
  Glob glob = compile("layers.0.attn.wq");
  EXPECT_TRUE(glob.isLiteral());
  EXPECT_TRUE(glob.matches("layers.0.attn.wq"));
  EXPECT_FALSE(glob.matches("layers.0.attn.wqx"));
  EXPECT_FALSE(glob.matches("layers.0.attn"));
  EXPECT_FALSE(glob.matches("layers.10.attn.wq"));
  EXPECT_TRUE(compile("lm_head").matches("lm_head"));
}

TEST(GlobTest, StarStaysWithinOneSegment) {
  Glob glob = compile("layers.*.mlp.*");
  EXPECT_FALSE(glob.isLiteral());
  EXPECT_TRUE(glob.matches("layers.0.mlp.w1"));
  EXPECT_TRUE(glob.matches("layers.31.mlp.down"));
  EXPECT_FALSE(glob.matches("layers.0.attn.wq"));
  EXPECT_FALSE(glob.matches("layers.0.1.mlp.w1"));
  EXPECT_FALSE(glob.matches("layers.0.mlp.w1.bias"));
  // Within a segment, with literal text around it.
  Glob partial = compile("layers.*.attn.w*");
  EXPECT_TRUE(partial.matches("layers.2.attn.wq"));
  EXPECT_TRUE(partial.matches("layers.2.attn.w"));
  EXPECT_FALSE(partial.matches("layers.2.attn.out"));
  EXPECT_TRUE(compile("*").matches("lm_head"));
  EXPECT_FALSE(compile("*").matches("layers.0"));
}

TEST(GlobTest, DoubleStarCrossesSegments) {
  Glob all = compile("**");
  EXPECT_TRUE(all.matches("lm_head"));
  EXPECT_TRUE(all.matches("layers.3.attn.wq"));
  Glob layers = compile("layers.**");
  EXPECT_TRUE(layers.matches("layers.0.attn.wq"));
  EXPECT_TRUE(layers.matches("layers.0"));
  EXPECT_FALSE(layers.matches("lm_head"));
  Glob suffix = compile("**.wq");
  EXPECT_TRUE(suffix.matches("layers.0.attn.wq"));
  EXPECT_TRUE(suffix.matches("wq"));
  EXPECT_FALSE(suffix.matches("layers.0.attn.wk"));
  // Zero or more segments in the middle.
  Glob middle = compile("layers.**.w1");
  EXPECT_TRUE(middle.matches("layers.w1"));
  EXPECT_TRUE(middle.matches("layers.0.mlp.w1"));
  EXPECT_FALSE(middle.matches("layers.0.mlp.w2"));
}

TEST(GlobTest, Alternatives) {
  Glob glob = compile("layers.*.attn.{wq,wk,wv}");
  EXPECT_TRUE(glob.matches("layers.0.attn.wq"));
  EXPECT_TRUE(glob.matches("layers.0.attn.wv"));
  EXPECT_FALSE(glob.matches("layers.0.attn.wo"));
  // Alternatives next to literal text and nested.
  Glob nested = compile("layers.0.mlp.w{1,{2,3}}");
  EXPECT_TRUE(nested.matches("layers.0.mlp.w1"));
  EXPECT_TRUE(nested.matches("layers.0.mlp.w3"));
  EXPECT_FALSE(nested.matches("layers.0.mlp.w4"));
  Glob product = compile("{a,b}{c,d}");
  EXPECT_TRUE(product.matches("ad"));
  EXPECT_FALSE(product.matches("ab"));
  // A star inside an alternative.
  EXPECT_TRUE(compile("{lm_*,embed}").matches("lm_head"));
}

TEST(GlobTest, IntegerRanges) {
  Glob glob = compile("layers.{0..3}.**");
  EXPECT_TRUE(glob.matches("layers.0.attn.wq"));
  EXPECT_TRUE(glob.matches("layers.3.mlp.w2"));
  EXPECT_FALSE(glob.matches("layers.4.mlp.w2"));
  EXPECT_FALSE(glob.matches("layers.00.mlp.w2")); // not canonical
  EXPECT_FALSE(glob.matches("layers.x.mlp.w2"));
  Glob wide = compile("layers.{2..12}.attn.wq");
  EXPECT_TRUE(wide.matches("layers.12.attn.wq"));
  EXPECT_TRUE(wide.matches("layers.2.attn.wq"));
  EXPECT_FALSE(wide.matches("layers.1.attn.wq"));
  EXPECT_FALSE(wide.matches("layers.13.attn.wq"));
  // Ranges and plain alternatives mix.
  Glob ends = compile("layers.{0,31}.**");
  EXPECT_TRUE(ends.matches("layers.31.attn.wq"));
  EXPECT_FALSE(ends.matches("layers.3.attn.wq"));
  Glob mixed = compile("layers.{0..1,30..31}.**");
  EXPECT_TRUE(mixed.matches("layers.30.mlp.w1"));
  EXPECT_FALSE(mixed.matches("layers.29.mlp.w1"));
  // A range followed by literal text.
  Glob suffix = compile("block{1..3}x");
  EXPECT_TRUE(suffix.matches("block2x"));
  EXPECT_FALSE(suffix.matches("block4x"));
}

TEST(GlobTest, InvalidPatternsReportTheOffset) {
  GlobError error = failure("");
  EXPECT_EQ(error.message, "empty pattern");

  error = failure("layers..wq");
  EXPECT_EQ(error.offset, 7u);
  EXPECT_NE(error.message.find("empty segment"), std::string::npos);

  error = failure(".wq");
  EXPECT_EQ(error.offset, 0u);
  error = failure("layers.");
  EXPECT_EQ(error.offset, 7u);

  error = failure("layers.{0..3.wq");
  EXPECT_EQ(error.offset, 7u);
  EXPECT_NE(error.message.find("unclosed '{'"), std::string::npos);

  error = failure("layers.0}.wq");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_NE(error.message.find("unmatched '}'"), std::string::npos);

  error = failure("layers.{}.wq");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_NE(error.message.find("empty alternative"), std::string::npos);

  error = failure("layers.{wq,}");
  EXPECT_EQ(error.offset, 11u);

  error = failure("layers.{3..1}.wq");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_NE(error.message.find("empty range {3..1}"), std::string::npos);

  error = failure("layers.{a..b}.wq");
  EXPECT_NE(error.message.find("{LOW..HIGH}"), std::string::npos);

  error = failure("layers.a**");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_NE(error.message.find("'**' must be a whole segment"),
            std::string::npos);
  failure("***");

  error = failure("layers.0 .wq");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_NE(error.message.find("invalid character ' '"), std::string::npos);
  failure("layers/0");
  failure("layers.?.wq");

  error = failure("a,b");
  EXPECT_EQ(error.offset, 1u);
  EXPECT_NE(error.message.find("outside braces"), std::string::npos);

  error = failure("{attn.wq,mlp.w1}");
  EXPECT_EQ(error.offset, 5u);
}

TEST(GlobTest, SuggestsTheIntendedPattern) {
  std::vector<std::string> names = {"layers.0.attn.wq", "layers.0.mlp.w1",
                                    "layers.1.attn.wq", "layers.1.mlp.w1",
                                    "lm_head"};
  EXPECT_EQ(compile("layers.*.mpl.*").suggest(names), "layers.*.mlp.*");
  EXPECT_EQ(compile("layers.{0..1}.atn.wq").suggest(names),
            "layers.{0..1}.attn.wq");
  EXPECT_EQ(compile("lm_haed").suggest(names), "lm_head");
  EXPECT_EQ(compile("embedding").suggest(names), "");
}

// The one did-you-mean rule (Diagnostics.h), which the glob suggestions
// above build on.
TEST(GlobTest, ClosestMatchAllowsOneTransposition) {
  std::vector<std::string> names = {"train", "eval", "tokenizer"};
  EXPECT_EQ(closestMatch("trian", names), "train");
  EXPECT_EQ(closestMatch("tokenizr", names), "tokenizer");
  EXPECT_EQ(closestMatch("evla", names), "eval");
  EXPECT_EQ(closestMatch("rtian", names), "");
  EXPECT_EQ(closestMatch("train", names), "");
}

} // namespace
