//===- Packer.h - Documents to training sequences ----------------*- C++ -*-===//
//
// Turns a stream of documents into training sequences and micro-batches.
//
//  * A TokenSource yields documents as token ids: TextTokenSource tokenizes
//    a DocumentReader's texts with any callable tokenizer; TokenFileSource
//    reads pre-tokenized token files (TokenFile.h).
//  * The Packer reads documents in shuffle buffers of N documents: buffer b
//    of epoch e holds documents [b*N, b*N + N) of the source, in an order
//    permuted by a PRNG seeded from (seed, e, b*N) (Fisher-Yates over
//    SplitMix64). N <= 1 keeps the source order. Each document's ids followed
//    by the end-of-text id are appended to one token stream.
//  * Sequence k is stream[k*T, k*T + T] (T+1 ids): inputs are its first T,
//    targets its last T (inputs shifted by one). Consecutive sequences share
//    one id, so no token is lost as a target.
//  * A training packer repeats: at the end of the source it rewinds and
//    starts epoch e+1 (the stream continues across the boundary). A
//    validation packer makes one pass and drops the incomplete tail.
//
// The DataPosition is exact: the document (epoch, buffer start, index within
// the shuffled buffer) at which the next sequence starts and the offset of
// its first id inside that document's ids. restore() rewinds the source,
// skips to the buffer, rebuilds it and continues with exactly the sequence
// that would have come next.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DATA_PACKER_H
#define TETRA_RUNTIME_DATA_PACKER_H

#include "runtime/data/Documents.h"
#include "runtime/data/TokenFile.h"
#include "runtime/io/Error.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::data {

using Tokenizer = std::function<std::vector<uint32_t>(std::string_view)>;

/// Documents as token ids (without any end-of-text id).
class TokenSource {
public:
  virtual ~TokenSource() = default;
  /// The next document (true) or the end of the source (false).
  virtual io::Expected<bool> next(std::vector<uint32_t> &ids) = 0;
  /// Back to the first document.
  virtual io::Status rewind() = 0;
  /// Skips `count` documents (cheaper than next() where possible); running
  /// out is an error.
  virtual io::Status skip(uint64_t count);
};

/// Texts from a DocumentReader, tokenized.
class TextTokenSource : public TokenSource {
public:
  TextTokenSource(DocumentReader reader, Tokenizer tokenizer)
      : reader_(std::move(reader)), tokenizer_(std::move(tokenizer)) {}
  io::Expected<bool> next(std::vector<uint32_t> &ids) override;
  io::Status rewind() override;
  io::Status skip(uint64_t count) override;

private:
  DocumentReader reader_;
  Tokenizer tokenizer_;
  std::string text_;
};

/// The documents of token files, in order.
class TokenFileSource : public TokenSource {
public:
  TokenFileSource(std::vector<std::string> files, uint32_t endOfText)
      : files_(std::move(files)), endOfText_(endOfText) {}
  io::Expected<bool> next(std::vector<uint32_t> &ids) override;
  io::Status rewind() override;

private:
  std::vector<std::string> files_;
  uint32_t endOfText_;
  size_t fileIndex_ = 0;
  std::unique_ptr<TokenFileReader> current_;
};

struct PackerOptions {
  int64_t seqLen = 0;      ///< T
  int64_t batchSize = 1;   ///< B
  uint32_t endOfText = 0;  ///< appended after every document
  uint64_t seed = 0;
  uint64_t shuffleBuffer = 1024; ///< N; <= 1: no shuffling
  bool repeat = true;      ///< false: one pass (validation)

  /// A validation stream: source order, one pass.
  static PackerOptions validation(int64_t seqLen, int64_t batchSize,
                                  uint32_t endOfText) {
    PackerOptions options;
    options.seqLen = seqLen;
    options.batchSize = batchSize;
    options.endOfText = endOfText;
    options.shuffleBuffer = 1;
    options.repeat = false;
    return options;
  }
};

/// Where the next sequence starts. Serializes to one line of JSON.
struct DataPosition {
  uint64_t epoch = 0;
  uint64_t bufferStart = 0; ///< source document index of the buffer
  uint64_t cursor = 0;      ///< index within the shuffled buffer
  uint64_t offset = 0;      ///< ids of that document already consumed
  uint64_t sequences = 0;   ///< sequences returned so far (informational)
  // The configuration it is valid for; restore() checks these.
  uint64_t seed = 0;
  int64_t seqLen = 0;
  uint64_t shuffleBuffer = 0;

  std::string serialize() const;
  static io::Expected<DataPosition> parse(std::string_view text);
  bool operator==(const DataPosition &o) const;
};

/// B sequences as row-major int32 [B, T] arrays.
struct Batch {
  int64_t batchSize = 0;
  int64_t seqLen = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
};

class Packer {
public:
  /// Fails on T < 1 or B < 1.
  static io::Expected<Packer> create(std::unique_ptr<TokenSource> source,
                                     PackerOptions options);

  /// The next T+1 ids (true), or the end of a one-pass stream (false).
  io::Expected<bool> nextSequence(std::vector<uint32_t> &sequence);
  /// The next B sequences (true), or false when fewer than B remain.
  io::Expected<bool> nextBatch(Batch &batch);

  DataPosition position() const;
  /// Continues from `position` (made by a packer with the same source,
  /// seed, T and N).
  io::Status restore(const DataPosition &position);

  /// Back to the very beginning (epoch 0, first sequence): e.g. before
  /// each evaluation pass over a validation stream.
  io::Status reset();

  const PackerOptions &options() const { return options_; }

private:
  Packer(std::unique_ptr<TokenSource> source, PackerOptions options)
      : source_(std::move(source)), options_(options) {}
  io::Expected<bool> loadNextBuffer();
  io::Expected<bool> appendDocument();
  void shuffleBuffer();

  struct Segment {
    uint64_t epoch, bufferStart, cursor, length;
  };

  std::unique_ptr<TokenSource> source_;
  PackerOptions options_;
  uint64_t epoch_ = 0;
  uint64_t bufferStart_ = 0;
  uint64_t docsRead_ = 0; // source documents read in this epoch
  bool exhausted_ = false;
  bool epochHadDocs_ = false;
  std::vector<std::vector<uint32_t>> buffer_;
  uint64_t cursor_ = 0;
  std::vector<uint32_t> pending_;
  size_t pendingBegin_ = 0;
  std::deque<Segment> segments_;
  uint64_t headOffset_ = 0;
  uint64_t sequences_ = 0;
};

} // namespace tetra::data

#endif // TETRA_RUNTIME_DATA_PACKER_H
