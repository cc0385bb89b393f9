//===- TokenFile.h - Pre-tokenized token files -------------------*- C++ -*-===//
//
// The token files `tetra tokenize` writes (docs/tokenizers.md, docs/data.md).
// All integers little-endian:
//
//   offset 0   8 bytes  magic "TETRATOK"
//   offset 8   u32      version, 1
//   offset 12  u32      bytes per id, 4
//   offset 16  u64      count: the number of ids
//   offset 24  u32      vocabulary size (every id is below it)
//   offset 28  u32      end-of-text id
//   offset 32  count x u32 ids
//
// The file size must be exactly 32 + 4 * count. Documents are separated by
// the end-of-text id: doc0 EOT doc1 EOT ... ; a last document without a
// trailing EOT is still a document. Reading streams (a fixed buffer), never
// the whole file, and checks every id against the vocabulary size.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DATA_TOKENFILE_H
#define TETRA_RUNTIME_DATA_TOKENFILE_H

#include "runtime/io/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tetra::data {

constexpr char kTokenFileMagic[8] = {'T', 'E', 'T', 'R', 'A', 'T', 'O', 'K'};
constexpr uint32_t kTokenFileVersion = 1;
constexpr uint64_t kTokenFileHeaderBytes = 32;

/// Writes `ids` as a token file, atomically. Fails if an id is not below
/// `vocabSize` or `endOfText` is not.
io::Status writeTokenFile(const std::string &path,
                          const std::vector<uint32_t> &ids, uint32_t vocabSize,
                          uint32_t endOfText);

/// Streams the documents of a token file.
class TokenFileReader {
public:
  /// Opens `path` and validates its header and size. With `endOfText`,
  /// the file's end-of-text id must equal it (a file tokenized with another
  /// tokenizer is refused).
  static io::Expected<TokenFileReader>
  open(const std::string &path,
       std::optional<uint32_t> endOfText = std::nullopt);
  TokenFileReader(TokenFileReader &&other) noexcept;
  TokenFileReader &operator=(TokenFileReader &&other) noexcept;
  TokenFileReader(const TokenFileReader &) = delete;
  TokenFileReader &operator=(const TokenFileReader &) = delete;
  ~TokenFileReader();

  uint64_t count() const { return count_; }
  uint32_t vocabSize() const { return vocabSize_; }
  uint32_t endOfText() const { return endOfText_; }
  /// The next document's ids without the end-of-text id (true), or the end
  /// (false).
  io::Expected<bool> nextDocument(std::vector<uint32_t> &ids);
  /// Back to the first id.
  io::Status rewind();

private:
  TokenFileReader() = default;
  io::Expected<bool> refill();

  std::string path_;
  int fd_ = -1;
  uint32_t endOfText_ = 0;
  uint32_t vocabSize_ = 0;
  uint64_t count_ = 0;
  uint64_t read_ = 0; // ids read from the file
  std::vector<uint32_t> buffer_;
  size_t begin_ = 0, end_ = 0;
};

} // namespace tetra::data

#endif // TETRA_RUNTIME_DATA_TOKENFILE_H
