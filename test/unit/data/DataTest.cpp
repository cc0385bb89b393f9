//===- DataTest.cpp - Document readers, token files, packing --------------===//

#include "runtime/data/Documents.h"
#include "runtime/data/Packer.h"
#include "runtime/data/TokenFile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#include <zlib.h>

using namespace tetra;
using namespace tetra::data;

namespace {

::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << part << "\"";
}

std::string sourceDir() {
  if (const char *dir = std::getenv("TETRA_SOURCE_DIR"))
    return dir;
  return TETRA_UNIT_SOURCE_DIR;
}

struct TempDir {
  std::string path;
  TempDir() {
    char pattern[] = "/tmp/tetra-data-test-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string file(const std::string &name) const { return path + "/" + name; }
};

void writeFile(const std::string &path, const std::string &contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

std::string gzipBytes(const std::string &contents) {
  std::string path = std::string("/tmp/tetra-gz-") + std::to_string(::getpid());
  gzFile gz = ::gzopen(path.c_str(), "wb");
  ::gzwrite(gz, contents.data(), static_cast<unsigned>(contents.size()));
  ::gzclose(gz);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  return bytes;
}

/// Reads every document; returns the error message, or "" on success.
std::string readAll(DocumentReader &reader, std::vector<std::string> &docs) {
  std::string doc;
  while (true) {
    io::Expected<bool> got = reader.next(doc);
    if (!got)
      return got.error().message();
    if (!*got)
      return "";
    docs.push_back(doc);
  }
}

std::vector<uint32_t> byteTokens(std::string_view text) {
  return std::vector<uint32_t>(text.begin(), text.end());
}
constexpr uint32_t kEot = 256;

} // namespace

//===- Readers ------------------------------------------------------------===//

TEST(Documents, C4TrainAndValidationSamples) {
  for (auto [name, count] :
       {std::pair{"c4-train.sample.json.gz", 1198u},
        std::pair{"c4-validation.sample.json.gz", 2944u}}) {
    io::Expected<DocumentReader> reader =
        DocumentReader::fromGlobs({sourceDir() + "/data/c4/" + name});
    ASSERT_TRUE(reader.ok()) << reader.error().message();
    std::string doc;
    size_t docs = 0, chars = 0;
    while (true) {
      io::Expected<bool> got = reader->next(doc);
      ASSERT_TRUE(got.ok()) << got.error().message();
      if (!*got)
        break;
      ++docs;
      chars += doc.size();
      EXPECT_FALSE(doc.empty());
    }
    EXPECT_EQ(docs, count) << name;
    EXPECT_GT(chars, 1000000u);
  }
}

TEST(Documents, GlobOverBothC4Files) {
  io::Expected<std::vector<std::string>> files =
      expandGlobs({sourceDir() + "/data/c4/*.json.gz"});
  ASSERT_TRUE(files.ok()) << files.error().message();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_TRUE(contains((*files)[0], "c4-train"));
  EXPECT_TRUE(contains((*files)[1], "c4-validation"));
}

TEST(Documents, JsonLinesTextAndGzipText) {
  TempDir dir;
  writeFile(dir.file("a.jsonl"),
            "{\"text\": \"first\", \"url\": \"x\"}\n\n"
            "{\"text\": \"line\\nbreak \\u00e9\"}\r\n"
            "{\"text\": \"\"}\n{\"text\": \"no newline\"}");
  writeFile(dir.file("b.txt"), "a whole\nplain file\n");
  writeFile(dir.file("c.txt.gz"), gzipBytes("gzipped\ntext"));
  writeFile(dir.file("d.jsonl.gz"),
            gzipBytes("{\"text\":\"g1\"}\n{\"text\":\"g2\"}\n"));
  io::Expected<DocumentReader> reader = DocumentReader::fromGlobs(
      {dir.file("*.jsonl"), dir.file("*.txt"), dir.file("*.gz")});
  ASSERT_TRUE(reader.ok()) << reader.error().message();
  std::vector<std::string> docs;
  ASSERT_EQ(readAll(*reader, docs), "");
  std::vector<std::string> expected = {
      "first", "line\nbreak \xc3\xa9", "", "no newline", "a whole\nplain file\n",
      "gzipped\ntext", "g1", "g2"};
  EXPECT_EQ(docs, expected);
  EXPECT_EQ(reader->position(), 8u);

  // Seek re-reads to a document.
  ASSERT_TRUE(reader->seek(5).ok());
  std::string doc;
  ASSERT_TRUE(*reader->next(doc));
  EXPECT_EQ(doc, "gzipped\ntext");
  io::Status past = reader->seek(9);
  ASSERT_FALSE(past.ok());
  EXPECT_TRUE(contains(past.error().message(), "past the end"));
}

TEST(Documents, LongLinesAcrossBuffers) {
  TempDir dir;
  std::string big(300000, 'x');
  writeFile(dir.file("big.jsonl.gz"),
            gzipBytes("{\"text\":\"" + big + "\"}\n{\"text\":\"y\"}\n"));
  io::Expected<DocumentReader> reader =
      DocumentReader::fromGlobs({dir.file("big.jsonl.gz")});
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> docs;
  ASSERT_EQ(readAll(*reader, docs), "");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], big);
  EXPECT_EQ(docs[1], "y");
}

TEST(DocumentErrors, EmptyAndMissingGlob) {
  TempDir dir;
  io::Expected<DocumentReader> none =
      DocumentReader::fromGlobs({dir.file("*.json.gz")});
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(contains(none.error().message(), dir.file("*.json.gz")));
  EXPECT_TRUE(contains(none.error().message(), "no file matches"));
  io::Expected<DocumentReader> missing =
      DocumentReader::fromGlobs({dir.file("missing.jsonl")});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.error().message(), "missing.jsonl"));
  EXPECT_FALSE(DocumentReader::fromGlobs({}).ok());
  writeFile(dir.file("x.csv"), "a,b\n");
  io::Expected<DocumentReader> unknown =
      DocumentReader::fromGlobs({dir.file("x.csv")});
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(contains(unknown.error().message(), "x.csv: unknown data file"));
}

TEST(DocumentErrors, BadJsonLines) {
  TempDir dir;
  struct Case {
    const char *name, *contents, *message;
  } cases[] = {
      {"notjson.jsonl", "{\"text\":\"ok\"}\n{\"text\": oops}\n",
       "notjson.jsonl:2: not JSON: line 1, column"},
      {"notext.jsonl", "{\"text\":\"ok\"}\n\n{\"url\":\"u\"}\n",
       "notext.jsonl:3: the object has no \"text\" field"},
      {"array.jsonl", "[1]\n", "array.jsonl:1: expected a JSON object"},
      {"number.jsonl", "{\"text\": 5}\n", "number.jsonl:1: \"text\" is a number"},
      {"utf8.jsonl", "{\"text\":\"ok\"}\n{\"text\":\"\xff\"}\n",
       "utf8.jsonl:2: not JSON: "},
  };
  for (const Case &c : cases) {
    writeFile(dir.file(c.name), c.contents);
    io::Expected<DocumentReader> reader =
        DocumentReader::fromGlobs({dir.file(c.name)});
    ASSERT_TRUE(reader.ok());
    std::vector<std::string> docs;
    EXPECT_TRUE(contains(readAll(*reader, docs), c.message)) << c.name;
  }
}

TEST(DocumentErrors, TruncatedAndCorruptGzip) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "{\"text\":\"document " + std::to_string(i * 7919) + "\"}\n";
  std::string gz = gzipBytes(text);
  writeFile(dir.file("cut.json.gz"), gz.substr(0, gz.size() / 2));
  io::Expected<DocumentReader> reader =
      DocumentReader::fromGlobs({dir.file("cut.json.gz")});
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> docs;
  std::string message = readAll(*reader, docs);
  EXPECT_TRUE(contains(message, "cut.json.gz: corrupt or truncated gzip data: "
                                "unexpected end of file"))
      << message;
  EXPECT_FALSE(contains(message, "<fd:"));

  // Only the 8-byte trailer missing.
  writeFile(dir.file("trailer.txt.gz"), gz.substr(0, gz.size() - 8));
  reader = DocumentReader::fromGlobs({dir.file("trailer.txt.gz")});
  ASSERT_TRUE(reader.ok());
  docs.clear();
  EXPECT_TRUE(contains(readAll(*reader, docs), "trailer.txt.gz: corrupt"));

  std::string bad = gz;
  bad[bad.size() / 2] ^= 0x55;
  bad[bad.size() / 2 + 1] ^= 0x55;
  writeFile(dir.file("bad.json.gz"), bad);
  reader = DocumentReader::fromGlobs({dir.file("bad.json.gz")});
  ASSERT_TRUE(reader.ok());
  docs.clear();
  EXPECT_TRUE(contains(readAll(*reader, docs), "bad.json.gz: corrupt"));
}

TEST(DocumentErrors, UnreadableFile) {
  TempDir dir;
  // A directory named like a data file cannot be read.
  ::mkdir(dir.file("dir.jsonl").c_str(), 0755);
  io::Expected<DocumentReader> reader =
      DocumentReader::fromGlobs({dir.file("dir.jsonl")});
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> docs;
  std::string message = readAll(*reader, docs);
  EXPECT_TRUE(contains(message, "dir.jsonl: ")) << message;
  // A file removed after the glob.
  writeFile(dir.file("gone.txt"), "x");
  reader = DocumentReader::fromGlobs({dir.file("gone.txt")});
  ASSERT_TRUE(reader.ok());
  std::remove(dir.file("gone.txt").c_str());
  docs.clear();
  EXPECT_TRUE(contains(readAll(*reader, docs), "gone.txt: cannot open"));
}

//===- Token files --------------------------------------------------------===//

TEST(TokenFile, RoundTripAndDocuments) {
  TempDir dir;
  std::vector<uint32_t> ids = {1, 2, kEot, kEot, 3, 0xfffffff0u, kEot, 4};
  ASSERT_TRUE(writeTokenFile(dir.file("a.tok"), ids, 0xffffffffu, kEot).ok());
  io::Expected<TokenFileReader> reader =
      TokenFileReader::open(dir.file("a.tok"), kEot);
  ASSERT_TRUE(reader.ok()) << reader.error().message();
  EXPECT_EQ(reader->count(), ids.size());
  EXPECT_EQ(reader->vocabSize(), 0xffffffffu);
  EXPECT_EQ(reader->endOfText(), kEot);
  std::vector<std::vector<uint32_t>> docs;
  std::vector<uint32_t> doc;
  while (*reader->nextDocument(doc))
    docs.push_back(doc);
  std::vector<std::vector<uint32_t>> expected = {
      {1, 2}, {}, {3, 0xfffffff0u}, {4}};
  EXPECT_EQ(docs, expected);
}

TEST(TokenFile, Errors) {
  TempDir dir;
  ASSERT_TRUE(writeTokenFile(dir.file("a.tok"), {1, 2, 3}, 257, kEot).ok());
  io::Status tooBig = writeTokenFile(dir.file("b.tok"), {1, 300}, 257, kEot);
  ASSERT_FALSE(tooBig.ok());
  EXPECT_TRUE(contains(tooBig.error().message(),
                       "b.tok: id 300 at index 1 is not below the vocabulary "
                       "size 257"));
  std::ifstream in(dir.file("a.tok"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 32u + 12u);
  // The header as docs/tokenizers.md describes it.
  EXPECT_EQ(bytes.substr(0, 8), "TETRATOK");
  EXPECT_EQ(bytes.substr(8, 8), std::string("\x01\0\0\0\x04\0\0\0", 8));
  EXPECT_EQ(bytes.substr(16, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(bytes.substr(24, 8), std::string("\x01\x01\0\0\0\x01\0\0", 8));
  std::string badId = bytes;
  badId[32 + 4 + 1] = 0x10; // id 2 -> 4098
  writeFile(dir.file("badid.tok"), badId);
  writeFile(dir.file("cut.tok"), bytes.substr(0, bytes.size() - 2));
  std::string magic = bytes;
  magic[0] = 'X';
  writeFile(dir.file("magic.tok"), magic);
  std::string version = bytes;
  version[8] = 2;
  writeFile(dir.file("version.tok"), version);
  struct Case {
    const char *name, *message;
  } cases[] = {{"cut.tok", "cut.tok: the header says 3 ids"},
               {"magic.tok", "magic.tok: not a token file"},
               {"version.tok", "version.tok: token file version 2"},
               {"missing.tok", "missing.tok: cannot open"}};
  io::Expected<TokenFileReader> otherEot =
      TokenFileReader::open(dir.file("a.tok"), 50256);
  ASSERT_FALSE(otherEot.ok());
  EXPECT_TRUE(contains(otherEot.error().message(),
                       "a.tok: tokenized with end-of-text id 256, expected "
                       "50256"));
  io::Expected<TokenFileReader> bad = TokenFileReader::open(dir.file("badid.tok"));
  ASSERT_TRUE(bad.ok()) << bad.error().message();
  std::vector<uint32_t> doc;
  io::Expected<bool> got = bad->nextDocument(doc);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(contains(got.error().message(),
                       "badid.tok: id 4098 at index 1 is not below the "
                       "vocabulary size 257"));
  for (const Case &c : cases) {
    io::Expected<TokenFileReader> reader =
        TokenFileReader::open(dir.file(c.name), kEot);
    ASSERT_FALSE(reader.ok()) << c.name;
    EXPECT_TRUE(contains(reader.error().message(), c.message))
        << reader.error().message();
  }
}

//===- Packing ------------------------------------------------------------===//

namespace {

/// Documents "d<i>:" + i letters, so each is recognizable.
std::unique_ptr<TokenSource> smallSource(TempDir &dir, int count) {
  std::string jsonl;
  for (int i = 0; i < count; ++i)
    jsonl += "{\"text\":\"d" + std::to_string(i) + ":" +
             std::string(static_cast<size_t>(i % 13), 'a' + i % 26) + "\"}\n";
  writeFile(dir.file("docs.jsonl"), jsonl);
  io::Expected<DocumentReader> reader =
      DocumentReader::fromGlobs({dir.file("docs.jsonl")});
  EXPECT_TRUE(reader.ok());
  return std::make_unique<TextTokenSource>(reader.take(), byteTokens);
}

std::vector<Batch> take(Packer &packer, int count) {
  std::vector<Batch> batches;
  for (int i = 0; i < count; ++i) {
    Batch batch;
    io::Expected<bool> got = packer.nextBatch(batch);
    EXPECT_TRUE(got.ok()) << got.error().message();
    if (!got.ok() || !*got)
      break;
    batches.push_back(batch);
  }
  return batches;
}

bool sameBatches(const std::vector<Batch> &a, const std::vector<Batch> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].tokens != b[i].tokens || a[i].targets != b[i].targets)
      return false;
  return true;
}

PackerOptions trainOptions(uint64_t seed, uint64_t buffer = 8) {
  PackerOptions options;
  options.seqLen = 16;
  options.batchSize = 3;
  options.endOfText = kEot;
  options.seed = seed;
  options.shuffleBuffer = buffer;
  return options;
}

} // namespace

TEST(Packer, SequencesInSourceOrder) {
  TempDir dir;
  std::vector<uint32_t> stream;
  std::vector<std::vector<uint32_t>> docs = {{1, 2, 3}, {4}, {5, 6, 7, 8, 9}};
  std::vector<uint32_t> all;
  for (auto &d : docs) {
    all.insert(all.end(), d.begin(), d.end());
    all.push_back(kEot);
  }
  ASSERT_TRUE(writeTokenFile(dir.file("a.tok"), all, kEot + 1, kEot).ok());
  PackerOptions options = PackerOptions::validation(4, 1, kEot);
  io::Expected<Packer> packer = Packer::create(
      std::make_unique<TokenFileSource>(
          std::vector<std::string>{dir.file("a.tok")}, kEot),
      options);
  ASSERT_TRUE(packer.ok());
  // Stream: 1 2 3 E 4 E 5 6 7 8 9 E (12 ids): sequences at 0, 4 (T+1 = 5).
  std::vector<uint32_t> seq;
  ASSERT_TRUE(*packer->nextSequence(seq));
  EXPECT_EQ(seq, (std::vector<uint32_t>{1, 2, 3, kEot, 4}));
  ASSERT_TRUE(*packer->nextSequence(seq));
  EXPECT_EQ(seq, (std::vector<uint32_t>{4, kEot, 5, 6, 7}));
  // 8 9 E: too short for another sequence; the validation stream ends.
  EXPECT_FALSE(*packer->nextSequence(seq));
  EXPECT_FALSE(*packer->nextSequence(seq));
}

TEST(Packer, BatchesTargetsAndEndOfText) {
  TempDir dir;
  io::Expected<Packer> packer =
      Packer::create(smallSource(dir, 40), trainOptions(1, 1));
  ASSERT_TRUE(packer.ok());
  // Unshuffled: the stream is the documents in order, each followed by EOT.
  std::vector<uint32_t> stream;
  for (int i = 0; i < 40; ++i) {
    std::string text = "d" + std::to_string(i) + ":" +
                       std::string(static_cast<size_t>(i % 13), 'a' + i % 26);
    stream.insert(stream.end(), text.begin(), text.end());
    stream.push_back(kEot);
  }
  std::vector<Batch> batches = take(*packer, 5);
  ASSERT_EQ(batches.size(), 5u);
  size_t T = 16, k = 0;
  for (const Batch &batch : batches) {
    ASSERT_EQ(batch.tokens.size(), 3 * T);
    for (int b = 0; b < 3; ++b, ++k)
      for (size_t t = 0; t < T; ++t) {
        EXPECT_EQ(batch.tokens[b * T + t], static_cast<int32_t>(stream[k * T + t]));
        EXPECT_EQ(batch.targets[b * T + t],
                  static_cast<int32_t>(stream[k * T + t + 1]));
        if (t + 1 < T)
          EXPECT_EQ(batch.targets[b * T + t], batch.tokens[b * T + t + 1]);
      }
  }
}

TEST(Packer, EpochsContinueTheStream) {
  TempDir dir;
  PackerOptions options = trainOptions(3, 1);
  options.seqLen = 7;
  io::Expected<Packer> packer = Packer::create(smallSource(dir, 3), options);
  ASSERT_TRUE(packer.ok());
  // Three short documents, many epochs: the stream repeats.
  std::vector<uint32_t> epoch = {'d', '0', ':', kEot, 'd', '1', ':', 'b', kEot,
                                 'd', '2', ':', 'c', 'c', kEot};
  std::vector<uint32_t> seq;
  for (int k = 0; k < 20; ++k) {
    ASSERT_TRUE(*packer->nextSequence(seq));
    for (size_t t = 0; t < 8; ++t)
      EXPECT_EQ(seq[t], epoch[(k * 7 + t) % epoch.size()]);
  }
  EXPECT_GE(packer->position().epoch, 8u);
}

TEST(Packer, ShuffleIsDeterministicPerSeed) {
  TempDir dir1, dir2, dir3;
  io::Expected<Packer> a = Packer::create(smallSource(dir1, 50), trainOptions(7));
  io::Expected<Packer> b = Packer::create(smallSource(dir2, 50), trainOptions(7));
  io::Expected<Packer> c = Packer::create(smallSource(dir3, 50), trainOptions(8));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<Batch> ba = take(*a, 20), bb = take(*b, 20), bc = take(*c, 20);
  EXPECT_TRUE(sameBatches(ba, bb));
  EXPECT_FALSE(sameBatches(ba, bc));
  // Same multiset of documents within an epoch: every "d<i>:" appears.
  TempDir dir4;
  PackerOptions options = trainOptions(7);
  options.repeat = false;
  io::Expected<Packer> once = Packer::create(smallSource(dir4, 50), options);
  ASSERT_TRUE(once.ok());
  std::vector<uint32_t> seq, stream;
  bool first = true;
  while (*once->nextSequence(seq)) {
    stream.insert(stream.end(), seq.begin() + (first ? 0 : 1), seq.end());
    first = false;
  }
  std::string text(stream.begin(), stream.end());
  std::set<int> seen;
  for (int i = 0; i < 50; ++i)
    if (text.find("d" + std::to_string(i) + ":") != std::string::npos)
      seen.insert(i);
  EXPECT_GE(seen.size(), 48u); // the tail may be dropped
  EXPECT_NE(text.substr(0, 3), "d0:"); // shuffled (seed 7)
}

TEST(Packer, PositionRoundTrip) {
  for (uint64_t buffer : {1u, 8u, 1024u}) {
    TempDir dir1, dir2;
    io::Expected<Packer> a =
        Packer::create(smallSource(dir1, 30), trainOptions(11, buffer));
    ASSERT_TRUE(a.ok());
    // Run past several epochs, checking a restore at every step.
    for (int k = 0; k < 25; ++k) {
      std::string saved = a->position().serialize();
      io::Expected<DataPosition> parsed = DataPosition::parse(saved);
      ASSERT_TRUE(parsed.ok()) << parsed.error().message();
      EXPECT_EQ(*parsed, a->position());
      io::Expected<Packer> b =
          Packer::create(smallSource(dir2, 30), trainOptions(11, buffer));
      ASSERT_TRUE(b.ok());
      io::Status restored = b->restore(*parsed);
      ASSERT_TRUE(restored.ok()) << restored.error().message();
      std::vector<Batch> next = take(*a, 3);
      std::vector<Batch> resumed = take(*b, 3);
      ASSERT_EQ(next.size(), 3u);
      EXPECT_TRUE(sameBatches(next, resumed)) << "buffer " << buffer << " k " << k;
      EXPECT_EQ(a->position(), b->position());
    }
  }
}

TEST(Packer, ResetStartsOver) {
  TempDir dir;
  PackerOptions options = PackerOptions::validation(8, 2, kEot);
  io::Expected<Packer> packer = Packer::create(smallSource(dir, 20), options);
  ASSERT_TRUE(packer.ok());
  std::vector<Batch> first = take(*packer, 100);
  ASSERT_GT(first.size(), 3u);
  Batch batch;
  EXPECT_FALSE(*packer->nextBatch(batch));
  ASSERT_TRUE(packer->reset().ok());
  EXPECT_TRUE(sameBatches(first, take(*packer, 100)));
}

TEST(Packer, TokenFilePositionRoundTrip) {
  TempDir dir;
  std::vector<uint32_t> ids;
  for (uint32_t d = 0; d < 40; ++d) {
    for (uint32_t i = 0; i < d % 9; ++i)
      ids.push_back(d * 10 + i);
    ids.push_back(kEot);
  }
  ASSERT_TRUE(writeTokenFile(dir.file("a.tok"), ids, 1000, kEot).ok());
  ASSERT_TRUE(writeTokenFile(dir.file("b.tok"), {1, 2, 3}, 1000, kEot).ok());
  std::vector<std::string> files = {dir.file("a.tok"), dir.file("b.tok")};
  PackerOptions options = trainOptions(5, 8);
  options.seqLen = 5;
  auto make = [&] {
    return Packer::create(std::make_unique<TokenFileSource>(files, kEot),
                          options);
  };
  io::Expected<Packer> a = make();
  ASSERT_TRUE(a.ok());
  for (int k = 0; k < 30; ++k) {
    io::Expected<DataPosition> p = DataPosition::parse(a->position().serialize());
    ASSERT_TRUE(p.ok());
    io::Expected<Packer> b = make();
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->restore(*p).ok());
    EXPECT_TRUE(sameBatches(take(*a, 2), take(*b, 2))) << k;
  }
}

TEST(Packer, PositionErrors) {
  TempDir dir;
  io::Expected<Packer> a = Packer::create(smallSource(dir, 10), trainOptions(1));
  ASSERT_TRUE(a.ok());
  DataPosition p = a->position();
  p.seed = 2;
  io::Status wrongSeed = a->restore(p);
  ASSERT_FALSE(wrongSeed.ok());
  EXPECT_TRUE(contains(wrongSeed.error().message(), "seed 2"));
  p = a->position();
  p.bufferStart = 800;
  EXPECT_FALSE(a->restore(p).ok());
  EXPECT_FALSE(DataPosition::parse("{\"version\":1}").ok());
  EXPECT_FALSE(DataPosition::parse("not json").ok());
  EXPECT_FALSE(Packer::create(smallSource(dir, 1), PackerOptions()).ok());
}

TEST(Packer, EmptyDataIsAnError) {
  TempDir dir;
  writeFile(dir.file("empty.jsonl"), "\n\n");
  io::Expected<DocumentReader> reader =
      DocumentReader::fromGlobs({dir.file("empty.jsonl")});
  ASSERT_TRUE(reader.ok());
  io::Expected<Packer> packer = Packer::create(
      std::make_unique<TextTokenSource>(reader.take(), byteTokens),
      trainOptions(1));
  ASSERT_TRUE(packer.ok());
  std::vector<uint32_t> seq;
  io::Expected<bool> got = packer->nextSequence(seq);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(contains(got.error().message(), "no documents"));
}

TEST(Packer, ValidationStreamOverC4) {
  io::Expected<DocumentReader> reader = DocumentReader::fromGlobs(
      {sourceDir() + "/data/c4/c4-validation.sample.json.gz"});
  ASSERT_TRUE(reader.ok());
  io::Expected<Packer> packer = Packer::create(
      std::make_unique<TextTokenSource>(reader.take(), byteTokens),
      PackerOptions::validation(1024, 8, kEot));
  ASSERT_TRUE(packer.ok());
  Batch batch;
  size_t batches = 0, eots = 0;
  while (true) {
    io::Expected<bool> got = packer->nextBatch(batch);
    ASSERT_TRUE(got.ok()) << got.error().message();
    if (!*got)
      break;
    ++batches;
    for (int32_t t : batch.tokens)
      eots += t == static_cast<int32_t>(kEot);
  }
  // 6.3 M bytes / (8 * 1024) per batch.
  EXPECT_GT(batches, 700u);
  EXPECT_LT(batches, 800u);
  EXPECT_GT(eots, 2800u);
}
