//===- Tokenizer.h - Text to token ids and back -----------------*- C++ -*-===//
//
// The trainer's tokenizers (docs/tokenizers.md):
//
//   bytes   raw bytes: vocabulary 256, id = byte value, end-of-text id 0
//           (the NUL byte; C4 and the corpus contain none).
//   gpt2    GPT-2's byte-level BPE (encoder.json + vocab.bpe), end-of-text
//           <|endoftext|> = 50256.
//   llama3  Llama 3's tiktoken BPE (tokenizer.model: base64 token + rank per
//           line, 128,000 ranks) plus 256 special tokens 128000..128255;
//           end-of-text <|end_of_text|> = 128001.
//
// encode() treats its input as plain text: special-token strings such as
// "<|endoftext|>" are encoded as ordinary text (tiktoken's encode_ordinary).
// Any byte string is accepted; bytes that the pre-tokenization regex cannot
// match (invalid UTF-8) are byte-pair encoded as a piece of their own, so
// decode(encode(x)) == x for every x.
//
// A tokenizer caches word encodings: encode() is not thread-safe; give each
// thread its own clone() (which shares the vocabulary and merge tables).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TOKENIZER_TOKENIZER_H
#define TETRA_RUNTIME_TOKENIZER_TOKENIZER_H

#include "runtime/io/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::tokenizer {

using TokenId = uint32_t;

class Tokenizer {
public:
  virtual ~Tokenizer() = default;

  /// Appends the ids of `text` to `ids`.
  virtual void encode(std::string_view text, std::vector<TokenId> &ids) = 0;
  std::vector<TokenId> encode(std::string_view text) {
    std::vector<TokenId> ids;
    encode(text, ids);
    return ids;
  }

  /// The bytes of `ids`; an id outside the vocabulary is an error.
  virtual io::Expected<std::string> decode(const std::vector<TokenId> &ids) const = 0;

  /// The bytes of one id (special tokens: their text); empty if out of range.
  virtual std::string_view tokenBytes(TokenId id) const = 0;

  /// Number of ids, special tokens included: every id is < vocabSize().
  virtual uint32_t vocabSize() const = 0;
  /// The id that separates documents.
  virtual TokenId endOfText() const = 0;
  /// "bytes", "gpt2" or "llama3".
  virtual std::string_view name() const = 0;

  /// A tokenizer for another thread: it shares the (read-only) vocabulary
  /// and merge tables and has its own word cache.
  virtual io::Expected<std::unique_ptr<Tokenizer>> clone() const = 0;
};

/// What to load: the runtime's counterpart of the run file's tokenizer
/// setting (frontend's TokenizerConfig), without depending on frontend/.
struct TokenizerSpec {
  enum class Kind { Bytes, GPT2, Llama3 };
  Kind kind = Kind::Bytes;
  /// gpt2: the directory holding encoder.json and vocab.bpe;
  /// llama3: the tokenizer.model file; bytes: unused.
  std::string path;
};

/// Parses "bytes", "gpt2:DIR" or "llama3:FILE".
io::Expected<TokenizerSpec> parseTokenizerSpec(std::string_view text);

/// "bytes", "gpt2", "llama3".
std::string_view kindName(TokenizerSpec::Kind kind);

io::Expected<std::unique_ptr<Tokenizer>> makeTokenizer(const TokenizerSpec &spec);

std::unique_ptr<Tokenizer> makeByteTokenizer();
/// `directory` holds encoder.json and vocab.bpe.
io::Expected<std::unique_ptr<Tokenizer>> loadGPT2Tokenizer(const std::string &directory);
io::Expected<std::unique_ptr<Tokenizer>> loadLlama3Tokenizer(const std::string &modelFile);

/// The 256 special tokens of Llama 3 as Meta's llama-models defines them:
/// the name of id 128000 + i.
std::string llama3SpecialTokenName(unsigned i);

/// Reads a whole file; a name ending in ".gz" is gunzipped.
io::Expected<std::string> readTextFile(const std::string &path);

} // namespace tetra::tokenizer

#endif // TETRA_RUNTIME_TOKENIZER_TOKENIZER_H
