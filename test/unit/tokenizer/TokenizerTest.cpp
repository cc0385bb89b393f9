//===- TokenizerTest.cpp - bytes, GPT-2 and Llama 3 tokenizers --------------===//

#include "runtime/io/Json.h"
#include "runtime/tokenizer/Bpe.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

using namespace tetra;
using namespace tetra::tokenizer;

namespace {

std::string sourceDir() {
  const char *dir = std::getenv("TETRA_SOURCE_DIR");
  return dir ? dir : TETRA_UNIT_SOURCE_DIR;
}

Tokenizer &gpt2() {
  static std::unique_ptr<Tokenizer> tokenizer = [] {
    auto loaded = loadGPT2Tokenizer(sourceDir() + "/data/tokenizers/gpt2");
    if (!loaded) {
      std::fprintf(stderr, "%s\n", loaded.error().message().c_str());
      std::abort();
    }
    return loaded.take();
  }();
  return *tokenizer;
}

Tokenizer &llama3() {
  static std::unique_ptr<Tokenizer> tokenizer = [] {
    auto loaded =
        loadLlama3Tokenizer(sourceDir() + "/data/tokenizers/llama3/tokenizer.model");
    if (!loaded) {
      std::fprintf(stderr, "%s\n", loaded.error().message().c_str());
      std::abort();
    }
    return loaded.take();
  }();
  return *tokenizer;
}

std::vector<std::string> c4Documents() {
  std::vector<std::string> docs;
  for (const char *name : {"c4-train.sample.json.gz", "c4-validation.sample.json.gz"}) {
    auto text = readTextFile(sourceDir() + "/data/c4/" + name);
    EXPECT_TRUE(text.ok()) << (text ? "" : text.error().message());
    if (!text)
      continue;
    std::string_view rest = *text;
    while (!rest.empty()) {
      size_t eol = rest.find('\n');
      std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
      if (line.empty())
        continue;
      auto record = io::parseJson(line);
      EXPECT_TRUE(record.ok());
      if (!record)
        continue;
      const io::JsonValue *field = record->find("text");
      EXPECT_TRUE(field && field->isString());
      if (field && field->isString())
        docs.push_back(field->asString());
    }
  }
  return docs;
}

void expectRoundTrip(Tokenizer &tokenizer, std::string_view text) {
  std::vector<TokenId> ids = tokenizer.encode(text);
  for (TokenId id : ids)
    ASSERT_LT(id, tokenizer.vocabSize());
  auto back = tokenizer.decode(ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

std::vector<std::string> split(const char *pattern, std::string_view text) {
  auto pieces = splitWithPattern(pattern, text);
  EXPECT_TRUE(pieces.ok());
  return pieces ? *pieces : std::vector<std::string>{};
}

using Pieces = std::vector<std::string>;
using Ids = std::vector<TokenId>;

} // namespace

TEST(Bytes, EncodeDecode) {
  auto tokenizer = makeByteTokenizer();
  EXPECT_EQ(tokenizer->vocabSize(), 256u);
  EXPECT_EQ(tokenizer->endOfText(), 0u);
  EXPECT_EQ(tokenizer->name(), "bytes");
  EXPECT_EQ(tokenizer->encode("A\xff"), (Ids{65, 255}));
  expectRoundTrip(*tokenizer, std::string("a\0b\x80", 4));
  EXPECT_FALSE(tokenizer->decode({256}).ok());
}

TEST(GPT2, KnownEncodings) {
  Tokenizer &t = gpt2();
  EXPECT_EQ(t.vocabSize(), 50257u);
  EXPECT_EQ(t.endOfText(), 50256u);
  EXPECT_EQ(t.tokenBytes(50256), "<|endoftext|>");
  EXPECT_EQ(t.encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(t.encode(" the"), (Ids{262}));
  EXPECT_EQ(t.encode(""), Ids{});
  // Special-token text is plain text.
  EXPECT_NE(t.encode("<|endoftext|>"), (Ids{50256}));
}

TEST(GPT2, Split) {
  EXPECT_EQ(split(kGPT2Pattern, "I'm don't we'll"),
            (Pieces{"I", "'m", " don", "'t", " we", "'ll"}));
  EXPECT_EQ(split(kGPT2Pattern, "abc 12345 x"), (Pieces{"abc", " 12345", " x"}));
  // A run of spaces leaves its last one to the next word.
  EXPECT_EQ(split(kGPT2Pattern, "a   b"), (Pieces{"a", "  ", " b"}));
  // As in GPT-2: "\n\n" before a word splits into two newlines.
  EXPECT_EQ(split(kGPT2Pattern, "a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split(kGPT2Pattern, "a\n\n"), (Pieces{"a", "\n\n"}));
  EXPECT_EQ(split(kGPT2Pattern, "héllo wörld"), (Pieces{"héllo", " wörld"}));
  EXPECT_EQ(split(kGPT2Pattern, "hi 😀😀!"), (Pieces{"hi", " 😀😀!"}));
}

TEST(Llama3, KnownEncodings) {
  Tokenizer &t = llama3();
  EXPECT_EQ(t.vocabSize(), 128256u);
  EXPECT_EQ(t.endOfText(), 128001u);
  EXPECT_EQ(t.encode("Hello world"), (Ids{9906, 1917}));
  EXPECT_EQ(t.encode(""), Ids{});
  EXPECT_EQ(t.tokenBytes(128000), "<|begin_of_text|>");
  EXPECT_EQ(t.tokenBytes(128001), "<|end_of_text|>");
  EXPECT_EQ(t.tokenBytes(128002), "<|reserved_special_token_0|>");
  EXPECT_EQ(t.tokenBytes(128003), "<|reserved_special_token_1|>");
  EXPECT_EQ(t.tokenBytes(128004), "<|finetune_right_pad_id|>");
  EXPECT_EQ(t.tokenBytes(128005), "<|reserved_special_token_2|>");
  EXPECT_EQ(t.tokenBytes(128006), "<|start_header_id|>");
  EXPECT_EQ(t.tokenBytes(128007), "<|end_header_id|>");
  EXPECT_EQ(t.tokenBytes(128008), "<|eom_id|>");
  EXPECT_EQ(t.tokenBytes(128009), "<|eot_id|>");
  EXPECT_EQ(t.tokenBytes(128010), "<|python_tag|>");
  EXPECT_EQ(t.tokenBytes(128011), "<|reserved_special_token_3|>");
  EXPECT_EQ(t.tokenBytes(128255), "<|reserved_special_token_247|>");
  EXPECT_EQ(t.tokenBytes(128256), "");
  EXPECT_FALSE(t.decode({128256}).ok());
}

TEST(Llama3, Split) {
  // Contractions, case-insensitively.
  EXPECT_EQ(split(kLlama3Pattern, "I'M DON'T"),
            (Pieces{"I", "'M", " DON", "'T"}));
  // Numbers in groups of three, without the leading space.
  EXPECT_EQ(split(kLlama3Pattern, "x 1234567"),
            (Pieces{"x", " ", "123", "456", "7"}));
  // Whitespace runs and newlines.
  EXPECT_EQ(split(kLlama3Pattern, "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split(kLlama3Pattern, "a.\n\nb"), (Pieces{"a", ".\n\n", "b"}));
  EXPECT_EQ(split(kLlama3Pattern, "a\n  \nb"), (Pieces{"a", "\n  \n", "b"}));
  // Non-ASCII letters, emoji.
  EXPECT_EQ(split(kLlama3Pattern, "héllo wörld"), (Pieces{"héllo", " wörld"}));
  EXPECT_EQ(split(kLlama3Pattern, "hi 😀😀!"), (Pieces{"hi", " 😀😀!"}));
}

TEST(Tokenizers, InvalidUtf8IsEncodedAsBytes) {
  // Invalid sequences are pieces of their own, byte-pair encoded from their
  // bytes: no crash, and decode gives the input back.
  std::string inputs[] = {
      "abc\xff\xfe def", "\x80", "caf\xc3", "\xe2\x82 x", "ok\xc0\xafok",
      std::string("nul\0byte", 8), "\xed\xa0\x80 surrogate"};
  for (const std::string &input : inputs) {
    expectRoundTrip(gpt2(), input);
    expectRoundTrip(llama3(), input);
  }
  EXPECT_EQ(split(kGPT2Pattern, "ab\xff" "cd"), (Pieces{"ab", "\xff", "cd"}));
}

TEST(Tokenizers, EdgeCaseRoundTrips) {
  const char *inputs[] = {"", " ", "\n", "   \n\t  ", "it's 2024-01-01: 3.14159!",
                          "ÄÖÜ ß 日本語 テキスト 😀👍🏽", "\r\n\r\n", "a",
                          "                                                    x"};
  for (const char *input : inputs) {
    expectRoundTrip(gpt2(), input);
    expectRoundTrip(llama3(), input);
    expectRoundTrip(*makeByteTokenizer(), input);
  }
}

TEST(Tokenizers, C4RoundTrip) {
  std::vector<std::string> docs = c4Documents();
  ASSERT_GT(docs.size(), 1000u);
  auto bytes = makeByteTokenizer();
  for (Tokenizer *t : {&gpt2(), &llama3(), bytes.get()}) {
    size_t failures = 0;
    for (const std::string &doc : docs) {
      auto back = t->decode(t->encode(doc));
      if (!back || *back != doc)
        ++failures;
    }
    EXPECT_EQ(failures, 0u) << t->name();
  }
}

TEST(Tokenizers, Factory) {
  auto spec = parseTokenizerSpec("gpt2:" + sourceDir() + "/data/tokenizers/gpt2");
  ASSERT_TRUE(spec.ok());
  auto t = makeTokenizer(*spec);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->name(), "gpt2");
  EXPECT_TRUE(parseTokenizerSpec("bytes").ok());
  EXPECT_FALSE(parseTokenizerSpec("gpt2").ok());
  EXPECT_FALSE(parseTokenizerSpec("sentencepiece:x").ok());
}

namespace {

std::string tempDir() {
  const char *dir = std::getenv("TMPDIR");
  std::string base = dir ? dir : "/tmp";
  char name[] = "/tetra-tok-XXXXXX";
  std::string path = base + name;
  std::vector<char> buffer(path.begin(), path.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data()))
    std::abort();
  return buffer.data();
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string loadError(const std::string &kind, const std::string &path) {
  auto spec = parseTokenizerSpec(kind + ":" + path);
  if (!spec)
    return spec.error().message();
  auto t = makeTokenizer(*spec);
  return t ? std::string("(loaded)") : t.error().message();
}

} // namespace

TEST(Tokenizers, MalformedFiles) {
  std::string dir = tempDir();
  EXPECT_NE(loadError("gpt2", dir + "/missing").find("cannot open"), std::string::npos);
  EXPECT_NE(loadError("llama3", dir + "/missing.model").find("cannot open"),
            std::string::npos);

  writeFile(dir + "/encoder.json", "{not json");
  writeFile(dir + "/vocab.bpe", "#version: 0.2\n");
  std::string error = loadError("gpt2", dir);
  EXPECT_NE(error.find("encoder.json: line 1"), std::string::npos) << error;

  // A tiny but complete byte alphabet, then a bad merges line.
  std::string encoder = "{";
  uint32_t table[256];
  {
    bool printable[256] = {};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) table[b] = printable[b] ? b : next++;
  }
  for (int b = 0; b < 256; ++b) {
    std::string utf8;
    uint32_t cp = table[b];
    if (cp < 0x80) utf8.push_back(char(cp));
    else { utf8.push_back(char(0xC0 | cp >> 6)); utf8.push_back(char(0x80 | (cp & 0x3F))); }
    io::JsonValue key = io::JsonValue::string(utf8);
    encoder += io::writeJson(key) + ":" + std::to_string(b) + ",";
  }
  encoder += "\"ab\":256,\"<|endoftext|>\":257}";
  writeFile(dir + "/encoder.json", encoder);
  writeFile(dir + "/vocab.bpe", "#version: 0.2\na b\nabc\n");
  error = loadError("gpt2", dir);
  EXPECT_NE(error.find("vocab.bpe:3: expected two tokens"), std::string::npos) << error;
  writeFile(dir + "/vocab.bpe", "#version: 0.2\na b\n");
  EXPECT_EQ(loadError("gpt2", dir), "(loaded)");

  writeFile(dir + "/bad.model", "IQ== 0\nnot*base64 1\n");
  error = loadError("llama3", dir + "/bad.model");
  EXPECT_NE(error.find("bad.model:2: the token is not valid base64"), std::string::npos)
      << error;
  writeFile(dir + "/short.model", "IQ== 0\n");
  error = loadError("llama3", dir + "/short.model");
  EXPECT_NE(error.find("expected 128000 ranks, found 1"), std::string::npos) << error;
}

// Ids produced by tiktoken for C4 documents (make_reference_ids.py). The file
// is generated on a machine that has tiktoken; without it the test skips.
TEST(Tokenizers, ReferenceIds) {
  std::string path = sourceDir() + "/test/unit/tokenizer/Inputs/reference_ids.jsonl";
  std::ifstream file(path);
  if (!file)
    GTEST_SKIP() << path
                 << " does not exist: run test/unit/tokenizer/make_reference_ids.py "
                    "on a machine with Python tiktoken to generate it";
  std::vector<std::string> docs = c4Documents();
  std::string line;
  size_t compared = 0;
  while (std::getline(file, line)) {
    if (line.empty())
      continue;
    auto record = io::parseJson(line);
    ASSERT_TRUE(record.ok()) << record.error().message();
    const io::JsonValue *tokenizer = record->find("tokenizer");
    const io::JsonValue *doc = record->find("doc");
    const io::JsonValue *ids = record->find("ids");
    ASSERT_TRUE(tokenizer && doc && ids && doc->isInteger() && ids->isArray());
    ASSERT_LT(static_cast<size_t>(doc->asInt64()), docs.size());
    Tokenizer &t = tokenizer->asString() == "gpt2" ? gpt2() : llama3();
    Ids expected;
    for (const io::JsonValue &id : ids->items())
      expected.push_back(static_cast<TokenId>(id.asInt64()));
    EXPECT_EQ(t.encode(docs[doc->asInt64()]), expected)
        << tokenizer->asString() << " document " << doc->asInt64();
    ++compared;
  }
  EXPECT_EQ(compared, 600u); // 300 C4 documents, GPT-2 and Llama 3
}

TEST(Tokenizers, CloneEncodesTheSame) {
  const char *text = "Clones share the vocabulary, not the cache: 12345 ünïcode.";
  for (Tokenizer *t : {&gpt2(), &llama3()}) {
    auto clone = t->clone();
    ASSERT_TRUE(clone.ok());
    EXPECT_EQ((*clone)->encode(text), t->encode(text));
    EXPECT_EQ((*clone)->vocabSize(), t->vocabSize());
    EXPECT_EQ((*clone)->endOfText(), t->endOfText());
  }
}

// Long pieces (a run of spaces, a line of '=', a word without spaces) merge
// from a heap in O(n log n) rather than quadratically: a megabyte of them
// takes well under a second. The heap gives the same ids as the simple loop
// (checked on all C4 samples by building with TETRA_BPE_HEAP_MERGE_ABOVE=1).
TEST(Tokenizers, LongPieces) {
  std::string text = std::string(400000, ' ') + "x" + std::string(400000, '=') +
                     std::string(200000, 'a') + "\n";
  for (Tokenizer *t : {&gpt2(), &llama3()}) {
    expectRoundTrip(*t, text);
    // Below and above the heap threshold, the same repeated unit.
    Ids shortIds = t->encode(std::string(100, '='));
    Ids longIds = t->encode(std::string(200, '='));
    EXPECT_LT(shortIds.size(), longIds.size());
    // Around the threshold (128 bytes), the parts always decode back.
    for (size_t n = 120; n < 140; ++n)
      expectRoundTrip(*t, std::string(n, '-') + std::string(n, 'b'));
  }
}
