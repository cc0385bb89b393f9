//===- Tokenizer.cpp - Loaders, the byte tokenizer, the factory -------------===//

#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/io/Json.h"
#include "runtime/tokenizer/Bpe.h"

#include <zlib.h>

#include <cstdio>
#include <fmt/format.h>
#include <unordered_map>

namespace tetra::tokenizer {

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

io::Expected<std::string> readTextFile(const std::string &path) {
  bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (!gz) {
    std::FILE *file = std::fopen(path.c_str(), "rb");
    if (!file)
      return io::Error(path + ": cannot open the file");
    std::string out;
    char buffer[1 << 16];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
      out.append(buffer, n);
    bool failed = std::ferror(file);
    std::fclose(file);
    if (failed)
      return io::Error(path + ": read error");
    return out;
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file)
    return io::Error(path + ": cannot open the file");
  gzbuffer(file, 1 << 17);
  std::string out;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0)
    out.append(buffer, n);
  if (n < 0) {
    int code = 0;
    std::string message = gzerror(file, &code);
    gzclose(file);
    return io::Error(path + ": gzip: " + message);
  }
  gzclose(file);
  return out;
}

//===----------------------------------------------------------------------===//
// Raw bytes
//===----------------------------------------------------------------------===//

namespace {

class ByteTokenizer final : public Tokenizer {
public:
  void encode(std::string_view text, std::vector<TokenId> &ids) override {
    for (char c : text)
      ids.push_back(static_cast<uint8_t>(c));
  }
  io::Expected<std::string> decode(const std::vector<TokenId> &ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (TokenId id : ids) {
      if (id >= 256)
        return io::Error(fmt::format(
            "token id {} is outside the bytes vocabulary (256 ids)", id));
      out.push_back(static_cast<char>(id));
    }
    return out;
  }
  std::string_view tokenBytes(TokenId id) const override {
    static const std::string bytes = [] {
      std::string all(256, '\0');
      for (int i = 0; i < 256; ++i)
        all[i] = static_cast<char>(i);
      return all;
    }();
    if (id >= 256)
      return {};
    return std::string_view(bytes).substr(id, 1);
  }
  uint32_t vocabSize() const override { return 256; }
  TokenId endOfText() const override { return 0; }
  std::string_view name() const override { return "bytes"; }
  io::Expected<std::unique_ptr<Tokenizer>> clone() const override {
    return std::unique_ptr<Tokenizer>(new ByteTokenizer);
  }
};

//===----------------------------------------------------------------------===//
// Shared loader pieces
//===----------------------------------------------------------------------===//

/// Fills byteId and the pair table of tiktoken-style ranks: the pair (x, y)
/// ranks as the token xy. `byId` are the mergeable tokens (no specials).
io::Status addRankPairs(BpeModel &model, size_t mergeable,
                        const std::unordered_map<std::string, TokenId> &ids) {
  for (int b = 0; b < 256; ++b) {
    auto found = ids.find(std::string(1, static_cast<char>(b)));
    if (found == ids.end())
      return io::Error(fmt::format("no token for the byte {}", b));
    model.byteId[b] = found->second;
  }
  model.pairs.reserve(mergeable * 2);
  std::string left, right;
  for (size_t id = 0; id < mergeable; ++id) {
    const std::string &token = model.vocab[id];
    for (size_t k = 1; k < token.size(); ++k) {
      left.assign(token, 0, k);
      right.assign(token, k, std::string::npos);
      auto l = ids.find(left);
      if (l == ids.end())
        continue;
      auto r = ids.find(right);
      if (r == ids.end())
        continue;
      model.pairs.emplace(uint64_t(l->second) << 32 | r->second,
                          uint64_t(id) << 32 | id);
    }
  }
  return io::success();
}

//===----------------------------------------------------------------------===//
// GPT-2
//===----------------------------------------------------------------------===//

/// GPT-2's bytes_to_unicode: the code point each byte is written as in
/// encoder.json and vocab.bpe.
void gpt2ByteToUnicode(uint32_t (&table)[256]) {
  bool printable[256] = {};
  for (int b = '!'; b <= '~'; ++b)
    printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b)
    printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b)
    printable[b] = true;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b)
    table[b] = printable[b] ? b : next++;
}

/// Decodes a GPT-2 token string (UTF-8 of byte-mapped code points) to bytes.
bool gpt2TokenBytes(std::string_view text,
                    const std::unordered_map<uint32_t, uint8_t> &toByte,
                    std::string &out) {
  out.clear();
  for (size_t i = 0; i < text.size();) {
    uint8_t c = text[i];
    uint32_t cp;
    size_t len;
    if (c < 0x80) { cp = c; len = 1; }
    else if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; len = 2; }
    else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; len = 3; }
    else return false;
    if (i + len > text.size())
      return false;
    for (size_t k = 1; k < len; ++k)
      cp = cp << 6 | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    auto found = toByte.find(cp);
    if (found == toByte.end())
      return false;
    out.push_back(static_cast<char>(found->second));
    i += len;
  }
  return true;
}

io::Expected<std::unique_ptr<Tokenizer>> loadGPT2(const std::string &directory) {
  std::string encoderPath = directory + "/encoder.json";
  std::string mergesPath = directory + "/vocab.bpe";
  io::Expected<std::string> encoderText = readTextFile(encoderPath);
  if (!encoderText)
    return encoderText.error();
  io::Expected<io::JsonValue> encoder = io::parseJson(*encoderText);
  if (!encoder)
    return encoder.error().withContext(encoderPath);
  if (!encoder->isObject())
    return io::Error(encoderPath + ": expected an object of token -> id");

  uint32_t byteToUnicode[256];
  gpt2ByteToUnicode(byteToUnicode);
  std::unordered_map<uint32_t, uint8_t> toByte;
  for (int b = 0; b < 256; ++b)
    toByte[byteToUnicode[b]] = static_cast<uint8_t>(b);

  BpeModel model;
  model.name = "gpt2";
  model.pattern = kGPT2Pattern;
  size_t count = encoder->members().size();
  model.vocab.assign(count, std::string());
  std::vector<bool> seen(count, false);
  std::unordered_map<std::string, TokenId> ids;
  ids.reserve(count * 2);
  std::string bytes;
  bool haveEndOfText = false;
  for (const io::JsonMember &member : encoder->members()) {
    const io::JsonValue &value = member.value;
    if (!value.isInteger() || value.asInt64() < 0 ||
        value.asInt64() >= static_cast<int64_t>(count))
      return io::Error(
          fmt::format("{}: token '{}': the id must be an integer in [0, {})",
                      encoderPath, member.key, count));
    TokenId id = static_cast<TokenId>(value.asInt64());
    if (seen[id])
      return io::Error(
          fmt::format("{}: id {} is given to two tokens", encoderPath, id));
    seen[id] = true;
    if (member.key == "<|endoftext|>") {
      model.vocab[id] = member.key;
      model.endOfText = id;
      haveEndOfText = true;
      continue;
    }
    if (!gpt2TokenBytes(member.key, toByte, bytes))
      return io::Error(encoderPath + ": token '" + member.key +
                       "' is not written in GPT-2's byte alphabet");
    model.vocab[id] = bytes;
    ids.emplace(bytes, id);
  }
  if (!haveEndOfText)
    return io::Error(encoderPath + ": no <|endoftext|> token");
  for (int b = 0; b < 256; ++b) {
    auto found = ids.find(std::string(1, static_cast<char>(b)));
    if (found == ids.end())
      return io::Error(
          fmt::format("{}: no token for the byte {}", encoderPath, b));
    model.byteId[b] = found->second;
  }

  io::Expected<std::string> merges = readTextFile(mergesPath);
  if (!merges)
    return merges.error();
  std::string_view rest = *merges;
  size_t lineNumber = 0;
  uint64_t rank = 0;
  std::string left, right;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    ++lineNumber;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty() || (lineNumber == 1 && line.substr(0, 9) == "#version:"))
      continue;
    size_t space = line.find(' ');
    std::string where = fmt::format("{}:{}", mergesPath, lineNumber);
    if (space == std::string_view::npos || space == 0 ||
        space + 1 >= line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      return io::Error(where + ": expected two tokens separated by one space");
    if (!gpt2TokenBytes(line.substr(0, space), toByte, left) ||
        !gpt2TokenBytes(line.substr(space + 1), toByte, right))
      return io::Error(where + ": a token is not written in GPT-2's byte alphabet");
    auto l = ids.find(left), r = ids.find(right), m = ids.find(left + right);
    if (l == ids.end() || r == ids.end() || m == ids.end())
      return io::Error(where + ": the merge names a token encoder.json lacks");
    model.pairs.emplace(uint64_t(l->second) << 32 | r->second,
                        rank++ << 32 | m->second);
  }
  if (rank == 0)
    return io::Error(mergesPath + ": no merges");
  return makeBpeTokenizer(std::move(model));
}

//===----------------------------------------------------------------------===//
// Llama 3
//===----------------------------------------------------------------------===//

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool decodeBase64(std::string_view text, std::string &out) {
  out.clear();
  if (text.empty() || text.size() % 4 != 0)
    return false;
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int padding = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++padding;
        continue;
      }
      if (padding)
        return false; // data after '='
      v[k] = base64Value(c);
      if (v[k] < 0)
        return false;
    }
    uint32_t bits = v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3];
    out.push_back(static_cast<char>(bits >> 16));
    if (padding < 2)
      out.push_back(static_cast<char>(bits >> 8 & 0xFF));
    if (padding < 1)
      out.push_back(static_cast<char>(bits & 0xFF));
  }
  return true;
}

constexpr unsigned kLlama3Mergeable = 128000;
constexpr unsigned kLlama3Special = 256;

io::Expected<std::unique_ptr<Tokenizer>> loadLlama3(const std::string &path) {
  io::Expected<std::string> text = readTextFile(path);
  if (!text)
    return text.error();
  BpeModel model;
  model.name = "llama3";
  model.pattern = kLlama3Pattern;
  model.vocab.assign(kLlama3Mergeable + kLlama3Special, std::string());
  std::vector<bool> seen(kLlama3Mergeable, false);
  std::unordered_map<std::string, TokenId> ids;
  ids.reserve(kLlama3Mergeable * 2);
  std::string_view rest = *text;
  size_t lineNumber = 0, count = 0;
  std::string bytes;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    ++lineNumber;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      continue;
    std::string where = fmt::format("{}:{}", path, lineNumber);
    size_t space = line.find(' ');
    if (space == std::string_view::npos)
      return io::Error(where + ": expected a base64 token and a rank");
    if (!decodeBase64(line.substr(0, space), bytes))
      return io::Error(where + ": the token is not valid base64");
    std::string_view rankText = line.substr(space + 1);
    uint64_t rank = 0;
    bool good = !rankText.empty() && rankText.size() < 10;
    for (char c : rankText) {
      if (c < '0' || c > '9') { good = false; break; }
      rank = rank * 10 + (c - '0');
    }
    if (!good || rank >= kLlama3Mergeable)
      return io::Error(fmt::format("{}: the rank must be an integer in [0, {})",
                                   where, kLlama3Mergeable));
    if (seen[rank])
      return io::Error(fmt::format("{}: rank {} is given twice", where, rank));
    if (!ids.emplace(bytes, static_cast<TokenId>(rank)).second)
      return io::Error(where + ": the token appears twice");
    seen[rank] = true;
    model.vocab[rank] = bytes;
    ++count;
  }
  if (count != kLlama3Mergeable)
    return io::Error(fmt::format("{}: expected {} ranks, found {}", path,
                                 kLlama3Mergeable, count));
  for (unsigned i = 0; i < kLlama3Special; ++i)
    model.vocab[kLlama3Mergeable + i] = llama3SpecialTokenName(i);
  model.endOfText = kLlama3Mergeable + 1;
  if (io::Status status = addRankPairs(model, kLlama3Mergeable, ids); !status)
    return status.error().withContext(path);
  return makeBpeTokenizer(std::move(model));
}

} // namespace

std::string llama3SpecialTokenName(unsigned i) {
  // Meta's llama-models (Llama 3.1): eleven named tokens, then reserved
  // tokens numbered from 3 fill the rest, in order.
  static const char *const named[] = {
      "<|begin_of_text|>",           "<|end_of_text|>",
      "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
      "<|finetune_right_pad_id|>",   "<|reserved_special_token_2|>",
      "<|start_header_id|>",         "<|end_header_id|>",
      "<|eom_id|>",                  "<|eot_id|>",
      "<|python_tag|>"};
  constexpr unsigned kNamed = sizeof(named) / sizeof(named[0]);
  if (i < kNamed)
    return named[i];
  return fmt::format("<|reserved_special_token_{}|>", i - kNamed + 3);
}

std::unique_ptr<Tokenizer> makeByteTokenizer() {
  return std::make_unique<ByteTokenizer>();
}

io::Expected<std::unique_ptr<Tokenizer>> loadGPT2Tokenizer(const std::string &directory) {
  return loadGPT2(directory);
}

io::Expected<std::unique_ptr<Tokenizer>> loadLlama3Tokenizer(const std::string &modelFile) {
  return loadLlama3(modelFile);
}

std::string_view kindName(TokenizerSpec::Kind kind) {
  switch (kind) {
  case TokenizerSpec::Kind::Bytes: return "bytes";
  case TokenizerSpec::Kind::GPT2: return "gpt2";
  case TokenizerSpec::Kind::Llama3: return "llama3";
  }
  return "?";
}

io::Expected<TokenizerSpec> parseTokenizerSpec(std::string_view text) {
  TokenizerSpec spec;
  size_t colon = text.find(':');
  std::string_view kind = text.substr(0, colon);
  std::string path =
      colon == std::string_view::npos ? std::string() : std::string(text.substr(colon + 1));
  if (kind == "bytes") {
    if (!path.empty())
      return io::Error("tokenizer 'bytes' takes no path");
    spec.kind = TokenizerSpec::Kind::Bytes;
    return spec;
  }
  if (kind == "gpt2")
    spec.kind = TokenizerSpec::Kind::GPT2;
  else if (kind == "llama3")
    spec.kind = TokenizerSpec::Kind::Llama3;
  else
    return io::Error("unknown tokenizer '" + std::string(text) +
                     "' (expected bytes, gpt2:DIR or llama3:FILE)");
  if (path.empty())
    return io::Error("tokenizer '" + std::string(kind) + "' needs a path (" +
                     std::string(kind) +
                     (spec.kind == TokenizerSpec::Kind::GPT2 ? ":DIR)" : ":FILE)"));
  spec.path = path;
  return spec;
}

io::Expected<std::unique_ptr<Tokenizer>> makeTokenizer(const TokenizerSpec &spec) {
  switch (spec.kind) {
  case TokenizerSpec::Kind::Bytes: return makeByteTokenizer();
  case TokenizerSpec::Kind::GPT2: return loadGPT2(spec.path);
  case TokenizerSpec::Kind::Llama3: return loadLlama3(spec.path);
  }
  return io::Error("unknown tokenizer kind");
}

} // namespace tetra::tokenizer
