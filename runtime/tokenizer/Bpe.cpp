//===- Bpe.cpp - Byte-level BPE with PCRE2 pre-tokenization -----------------===//

#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/tokenizer/Bpe.h"

#include <pcre2.h>

#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <limits>
#include <queue>

namespace tetra::tokenizer {

const char *const kGPT2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char *const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// A compiled PCRE2 pattern (JIT where available) and its match data.
class Regex {
public:
  static io::Expected<std::unique_ptr<Regex>> compile(const std::string &pattern) {
    int errorCode = 0;
    PCRE2_SIZE errorOffset = 0;
    pcre2_code *code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &errorCode,
        &errorOffset, nullptr);
    if (!code) {
      PCRE2_UCHAR buffer[256];
      pcre2_get_error_message(errorCode, buffer, sizeof(buffer));
      return io::Error(fmt::format("pre-tokenization pattern, offset {}: {}",
                                   errorOffset,
                                   reinterpret_cast<const char *>(buffer)));
    }
    std::unique_ptr<Regex> regex(new Regex);
    regex->code_ = code;
    // Without JIT (not built for this CPU) the interpreter still works.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    regex->data_ = pcre2_match_data_create_from_pattern(code, nullptr);
    return regex;
  }
  ~Regex() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }

  /// Calls piece(begin, end) for every piece of `text`, in order. Bytes no
  /// match covers (invalid UTF-8) form pieces of their own.
  template <typename F> void split(std::string_view text, F &&piece) {
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t offset = 0, size = text.size();
    while (offset < size) {
      int rc = pcre2_match(code_, subject, size, offset, 0, data_, nullptr);
      if (rc < 0) { // no match (or a matching error): the rest is a gap
        piece(offset, size);
        return;
      }
      PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(data_);
      size_t start = ovector[0], end = ovector[1];
      if (start > offset)
        piece(offset, start);
      if (end <= start) // an empty match: none of the patterns has one
        end = start + 1;
      if (end > size)
        end = size;
      piece(start, end);
      offset = end;
    }
  }

private:
  Regex() = default;
  pcre2_code *code_ = nullptr;
  pcre2_match_data *data_ = nullptr;
};

namespace {

/// The pair table, flattened: open addressing over (key, value) pairs, for
/// one probe into a contiguous array where a node-based map chases pointers.
class PairTable {
public:
  explicit PairTable(const std::unordered_map<uint64_t, uint64_t> &pairs) {
    size_t capacity = 16;
    while (capacity < pairs.size() * 2)
      capacity *= 2;
    mask_ = capacity - 1;
    slots_.assign(capacity, Slot{kEmpty, 0});
    for (const auto &[key, value] : pairs) {
      size_t i = index(key);
      while (slots_[i].key != kEmpty)
        i = (i + 1) & mask_;
      slots_[i] = Slot{key, value};
    }
  }
  /// The (rank << 32 | merged id) of a pair, or kNone.
  uint64_t find(uint64_t key) const {
    for (size_t i = index(key);; i = (i + 1) & mask_) {
      const Slot &slot = slots_[i];
      if (slot.key == key)
        return slot.value;
      if (slot.key == kEmpty)
        return kNone;
    }
  }
  static constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

private:
  static constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();
  struct Slot {
    uint64_t key, value;
  };
  size_t index(uint64_t key) const {
    return (key * 0x9E3779B97F4A7C15ull) >> 20 & mask_;
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

/// Encodings of pieces seen before: open addressing over a key arena and an
/// id arena, looked up without building a std::string. Cleared when full,
/// so that a corpus of endless distinct words does not grow it forever.
class WordCache {
public:
  WordCache() { reset(1 << 12); }

  /// The ids of `key`, or false.
  bool find(std::string_view key, size_t hash, std::vector<TokenId> &ids) const {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot &slot = slots_[i];
      if (slot.keyLength == 0)
        return false;
      if (slot.hash == hash && slot.keyLength == key.size() &&
          std::memcmp(keys_.data() + slot.keyOffset, key.data(), key.size()) == 0) {
        ids.insert(ids.end(), ids_.begin() + slot.idsOffset,
                   ids_.begin() + slot.idsOffset + slot.idsLength);
        return true;
      }
    }
  }

  void insert(std::string_view key, size_t hash, const std::vector<TokenId> &ids) {
    if (key.empty() || key.size() > kMaxKey)
      return;
    if ((used_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots)
        reset(slots_.size()); // full: start over at the same size
      else
        grow();
    }
    place(Slot{hash, static_cast<uint32_t>(keys_.size()),
               static_cast<uint32_t>(key.size()),
               static_cast<uint32_t>(ids_.size()),
               static_cast<uint32_t>(ids.size())});
    keys_.append(key.data(), key.size());
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++used_;
  }

private:
  struct Slot {
    size_t hash;
    uint32_t keyOffset, keyLength, idsOffset, idsLength;
  };
  static constexpr size_t kMaxSlots = size_t(1) << 21;
  static constexpr size_t kMaxKey = 1 << 16;

  void place(const Slot &slot) {
    size_t i = slot.hash & mask_;
    while (slots_[i].keyLength != 0)
      i = (i + 1) & mask_;
    slots_[i] = slot;
  }
  void reset(size_t capacity) {
    slots_.assign(capacity, Slot{0, 0, 0, 0, 0});
    mask_ = capacity - 1;
    keys_.clear();
    ids_.clear();
    used_ = 0;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{0, 0, 0, 0, 0});
    mask_ = slots_.size() - 1;
    for (const Slot &slot : old)
      if (slot.keyLength != 0)
        place(slot);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string keys_;
  std::vector<TokenId> ids_;
  size_t used_ = 0;
};

/// What the copies of one tokenizer share: read-only once built.
struct SharedModel {
  explicit SharedModel(BpeModel built)
      : model(std::move(built)), pairs(model.pairs) {
    model.pairs.clear();
  }
  BpeModel model;
  PairTable pairs;
};

class BpeTokenizer final : public Tokenizer {
public:
  BpeTokenizer(std::shared_ptr<const SharedModel> shared,
               std::unique_ptr<Regex> regex)
      : shared_(std::move(shared)), model_(shared_->model),
        pairs_(shared_->pairs), regex_(std::move(regex)) {}

  io::Expected<std::unique_ptr<Tokenizer>> clone() const override {
    io::Expected<std::unique_ptr<Regex>> regex = Regex::compile(model_.pattern);
    if (!regex)
      return regex.error();
    return std::unique_ptr<Tokenizer>(new BpeTokenizer(shared_, regex.take()));
  }

  void encode(std::string_view text, std::vector<TokenId> &ids) override {
    regex_->split(text, [&](size_t begin, size_t end) {
      encodePiece(text.substr(begin, end - begin), ids);
    });
  }

  io::Expected<std::string> decode(const std::vector<TokenId> &ids) const override {
    std::string out;
    for (TokenId id : ids) {
      if (id >= model_.vocab.size())
        return io::Error(
            fmt::format("token id {} is outside the {} vocabulary ({} ids)", id,
                        model_.name, model_.vocab.size()));
      out += model_.vocab[id];
    }
    return out;
  }

  std::string_view tokenBytes(TokenId id) const override {
    if (id >= model_.vocab.size())
      return {};
    return model_.vocab[id];
  }
  uint32_t vocabSize() const override { return model_.vocab.size(); }
  TokenId endOfText() const override { return model_.endOfText; }
  std::string_view name() const override { return model_.name; }

private:
  void encodePiece(std::string_view piece, std::vector<TokenId> &ids) {
    if (piece.size() == 1) {
      ids.push_back(model_.byteId[static_cast<uint8_t>(piece[0])]);
      return;
    }
    size_t hash = std::hash<std::string_view>()(piece);
    if (cache_.find(piece, hash, ids))
      return;
    if (piece.size() > kHeapMergeAbove) {
      mergeLong(piece);
      ids.insert(ids.end(), parts_.begin(), parts_.end());
      cache_.insert(piece, hash, parts_);
      return;
    }
    parts_.clear();
    for (char c : piece)
      parts_.push_back(model_.byteId[static_cast<uint8_t>(c)]);
    while (parts_.size() > 1) {
      uint64_t best = PairTable::kNone;
      size_t bestAt = 0;
      for (size_t i = 0; i + 1 < parts_.size(); ++i) {
        uint64_t found = pairs_.find(uint64_t(parts_[i]) << 32 | parts_[i + 1]);
        if (found < best) {
          best = found;
          bestAt = i;
        }
      }
      if (best == PairTable::kNone)
        break;
      parts_[bestAt] = static_cast<TokenId>(best & 0xffffffffu);
      parts_.erase(parts_.begin() + bestAt + 1);
    }
    ids.insert(ids.end(), parts_.begin(), parts_.end());
    cache_.insert(piece, hash, parts_);
  }

  /// Merges a long piece (a run of spaces, a line of '=') in O(n log n):
  /// the same merges in the same order as the quadratic loop above (lowest
  /// rank first, leftmost on a tie), from a heap of candidate pairs over a
  /// linked list of parts. Leaves the ids in parts_.
  void mergeLong(std::string_view piece) {
    size_t n = piece.size();
    std::vector<TokenId> id(n);
    std::vector<uint32_t> next(n), prev(n);
    std::vector<bool> alive(n, true);
    constexpr uint32_t kNil = std::numeric_limits<uint32_t>::max();
    for (size_t i = 0; i < n; ++i) {
      id[i] = model_.byteId[static_cast<uint8_t>(piece[i])];
      next[i] = i + 1 < n ? static_cast<uint32_t>(i + 1) : kNil;
      prev[i] = i > 0 ? static_cast<uint32_t>(i - 1) : kNil;
    }
    // (rank << 32 | left position, right position); positions order the
    // parts left to right, so the smallest entry is the leftmost of the
    // lowest rank.
    using Entry = std::pair<uint64_t, uint32_t>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    auto push = [&](uint32_t left, uint32_t right) {
      if (left == kNil || right == kNil)
        return;
      uint64_t found = pairs_.find(uint64_t(id[left]) << 32 | id[right]);
      if (found != PairTable::kNone)
        heap.emplace((found >> 32) << 32 | left, right);
    };
    for (size_t i = 0; i + 1 < n; ++i)
      push(i, i + 1);
    while (!heap.empty()) {
      auto [key, right] = heap.top();
      heap.pop();
      uint32_t left = static_cast<uint32_t>(key & 0xffffffffu);
      if (!alive[left] || !alive[right] || next[left] != right)
        continue;
      uint64_t found = pairs_.find(uint64_t(id[left]) << 32 | id[right]);
      if (found == PairTable::kNone || found >> 32 != key >> 32)
        continue; // stale: a part changed since the entry was pushed
      id[left] = static_cast<TokenId>(found & 0xffffffffu);
      alive[right] = false;
      next[left] = next[right];
      if (next[right] != kNil)
        prev[next[right]] = left;
      push(prev[left], left);
      push(left, next[left]);
    }
    parts_.clear();
    for (uint32_t i = 0; i != kNil; i = next[i])
      parts_.push_back(id[i]);
  }

#ifndef TETRA_BPE_HEAP_MERGE_ABOVE
#define TETRA_BPE_HEAP_MERGE_ABOVE 128
#endif
  /// Pieces longer than this merge with mergeLong.
  static constexpr size_t kHeapMergeAbove = TETRA_BPE_HEAP_MERGE_ABOVE;

  std::shared_ptr<const SharedModel> shared_;
  const BpeModel &model_;
  const PairTable &pairs_;
  std::unique_ptr<Regex> regex_;
  WordCache cache_;
  std::vector<TokenId> parts_;
};

} // namespace

io::Expected<std::unique_ptr<Tokenizer>> makeBpeTokenizer(BpeModel model) {
  io::Expected<std::unique_ptr<Regex>> regex = Regex::compile(model.pattern);
  if (!regex)
    return regex.error();
  return std::unique_ptr<Tokenizer>(new BpeTokenizer(
      std::make_shared<const SharedModel>(std::move(model)), regex.take()));
}

io::Expected<std::vector<std::string>> splitWithPattern(const std::string &pattern,
                                                        std::string_view text) {
  io::Expected<std::unique_ptr<Regex>> regex = Regex::compile(pattern);
  if (!regex)
    return regex.error();
  std::vector<std::string> pieces;
  (*regex)->split(text, [&](size_t begin, size_t end) {
    pieces.emplace_back(text.substr(begin, end - begin));
  });
  return pieces;
}

} // namespace tetra::tokenizer
