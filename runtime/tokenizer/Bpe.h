//===- Bpe.h - Byte-level BPE shared by GPT-2 and Llama 3 -------*- C++ -*-===//
//
// Both tokenizers split text with a PCRE2 regex (UTF + UCP, invalid UTF-8
// tolerated) and byte-pair encode each piece: the piece starts as one token
// per byte and the adjacent pair of lowest rank is merged until no pair has
// a rank. GPT-2 ranks a pair by its line in vocab.bpe; tiktoken (Llama 3)
// ranks it by the rank of the merged token. Both become one table from a
// pair of ids to (rank, merged id).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TOKENIZER_BPE_H
#define TETRA_RUNTIME_TOKENIZER_BPE_H

#include "runtime/tokenizer/Tokenizer.h"

#include <unordered_map>

namespace tetra::tokenizer {

class Regex;

/// The parts a loader fills in.
struct BpeModel {
  std::string name;
  /// The bytes of every id (special tokens: their text).
  std::vector<std::string> vocab;
  /// The id of each single byte.
  TokenId byteId[256] = {};
  /// (left << 32 | right) -> (rank << 32 | merged id).
  std::unordered_map<uint64_t, uint64_t> pairs;
  TokenId endOfText = 0;
  /// The pre-tokenization pattern (PCRE2 syntax).
  std::string pattern;
};

/// Compiles the pattern; an invalid one is an error.
io::Expected<std::unique_ptr<Tokenizer>> makeBpeTokenizer(BpeModel model);

/// Splits `text` into pre-tokenization pieces with `pattern`, for tests:
/// every byte is in exactly one piece, in order.
io::Expected<std::vector<std::string>> splitWithPattern(const std::string &pattern,
                                                        std::string_view text);

/// The GPT-2 and Llama 3 split patterns.
extern const char *const kGPT2Pattern;
extern const char *const kLlama3Pattern;

} // namespace tetra::tokenizer

#endif // TETRA_RUNTIME_TOKENIZER_BPE_H
