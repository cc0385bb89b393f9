//===- Packer.cpp - Documents to training sequences -----------------------===//

#include "runtime/data/Packer.h"

#include "runtime/io/Json.h"

#include <algorithm>
#include <fmt/format.h>

namespace tetra::data {

using io::Error;
using io::Expected;
using io::Status;

//===- Sources ------------------------------------------------------------===//

Status TokenSource::skip(uint64_t count) {
  std::vector<uint32_t> ids;
  for (uint64_t i = 0; i < count; ++i) {
    Expected<bool> got = next(ids);
    if (!got)
      return got.error();
    if (!*got)
      return Error(fmt::format("data position past the end: document {} "
                               "requested, the data holds {}",
                               count, i));
  }
  return io::success();
}

Expected<bool> TextTokenSource::next(std::vector<uint32_t> &ids) {
  Expected<bool> got = reader_.next(text_);
  if (!got || !*got)
    return got;
  ids = tokenizer_(text_);
  return true;
}

Status TextTokenSource::rewind() {
  reader_.rewind();
  return io::success();
}

Status TextTokenSource::skip(uint64_t count) {
  std::string text;
  for (uint64_t i = 0; i < count; ++i) {
    Expected<bool> got = reader_.next(text);
    if (!got)
      return got.error();
    if (!*got)
      return Error(fmt::format("data position past the end: document {} "
                               "requested, the data holds {}",
                               count, i));
  }
  return io::success();
}

Expected<bool> TokenFileSource::next(std::vector<uint32_t> &ids) {
  while (true) {
    if (!current_) {
      if (fileIndex_ >= files_.size())
        return false;
      Expected<TokenFileReader> reader =
          TokenFileReader::open(files_[fileIndex_], endOfText_);
      if (!reader)
        return reader.error();
      current_ = std::make_unique<TokenFileReader>(reader.take());
    }
    Expected<bool> got = current_->nextDocument(ids);
    if (!got || *got)
      return got;
    current_.reset();
    ++fileIndex_;
  }
}

Status TokenFileSource::rewind() {
  current_.reset();
  fileIndex_ = 0;
  return io::success();
}

//===- DataPosition -------------------------------------------------------===//

std::string DataPosition::serialize() const {
  io::JsonValue json = io::JsonValue::object();
  json.set("version", io::JsonValue::integer(1));
  json.set("epoch", io::JsonValue::string(std::to_string(epoch)));
  json.set("buffer_start", io::JsonValue::string(std::to_string(bufferStart)));
  json.set("cursor", io::JsonValue::string(std::to_string(cursor)));
  json.set("offset", io::JsonValue::string(std::to_string(offset)));
  json.set("sequences", io::JsonValue::string(std::to_string(sequences)));
  json.set("seed", io::JsonValue::string(std::to_string(seed)));
  json.set("seq_len", io::JsonValue::string(std::to_string(seqLen)));
  json.set("shuffle_buffer",
           io::JsonValue::string(std::to_string(shuffleBuffer)));
  return io::writeJson(json);
}

namespace {
bool parseU64(const std::string &text, uint64_t &out) {
  if (text.empty() || text.size() > 20)
    return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
    if (next / 10 != v)
      return false;
    v = next;
  }
  out = v;
  return true;
}
} // namespace

Expected<DataPosition> DataPosition::parse(std::string_view text) {
  Expected<io::JsonValue> json = io::parseJson(text);
  if (!json)
    return json.error().withContext("data position");
  const io::JsonValue *version = json->find("version");
  if (!version || !version->isInteger() || version->asInt64() != 1)
    return Error("data position: missing or unsupported \"version\"");
  DataPosition p;
  uint64_t seqLen = 0;
  struct Field {
    const char *key;
    uint64_t *out;
  } fields[] = {{"epoch", &p.epoch},         {"buffer_start", &p.bufferStart},
                {"cursor", &p.cursor},       {"offset", &p.offset},
                {"sequences", &p.sequences}, {"seed", &p.seed},
                {"seq_len", &seqLen},        {"shuffle_buffer", &p.shuffleBuffer}};
  for (const Field &f : fields) {
    const io::JsonValue *v = json->find(f.key);
    if (!v || !v->isString() || !parseU64(v->asString(), *f.out))
      return Error(std::string("data position: \"") + f.key +
                   "\" is missing or not a decimal string");
  }
  p.seqLen = static_cast<int64_t>(seqLen);
  return p;
}

bool DataPosition::operator==(const DataPosition &o) const {
  return epoch == o.epoch && bufferStart == o.bufferStart &&
         cursor == o.cursor && offset == o.offset && sequences == o.sequences &&
         seed == o.seed && seqLen == o.seqLen && shuffleBuffer == o.shuffleBuffer;
}

//===- Packer -------------------------------------------------------------===//

namespace {
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
} // namespace

Expected<Packer> Packer::create(std::unique_ptr<TokenSource> source,
                                PackerOptions options) {
  if (!source)
    return Error("packer: no token source");
  if (options.seqLen < 1)
    return Error(fmt::format(
        "packer: sequence length must be at least 1, got {}", options.seqLen));
  if (options.batchSize < 1)
    return Error(fmt::format("packer: batch size must be at least 1, got {}",
                             options.batchSize));
  return Packer(std::move(source), options);
}

void Packer::shuffleBuffer() {
  if (options_.shuffleBuffer <= 1 || buffer_.size() < 2)
    return;
  uint64_t state = options_.seed;
  state ^= splitmix64(state) ^ epoch_;
  state ^= splitmix64(state) ^ bufferStart_;
  splitmix64(state);
  for (size_t i = buffer_.size() - 1; i > 0; --i) {
    size_t j = static_cast<size_t>(splitmix64(state) % (i + 1));
    std::swap(buffer_[i], buffer_[j]);
  }
}

Expected<bool> Packer::loadNextBuffer() {
  buffer_.clear();
  cursor_ = 0;
  uint64_t capacity = std::max<uint64_t>(options_.shuffleBuffer, 1);
  while (true) {
    bufferStart_ = docsRead_;
    std::vector<uint32_t> ids;
    while (buffer_.size() < capacity) {
      Expected<bool> got = source_->next(ids);
      if (!got)
        return got.error();
      if (!*got)
        break;
      buffer_.push_back(std::move(ids));
      ids.clear();
    }
    docsRead_ += buffer_.size();
    if (!buffer_.empty()) {
      epochHadDocs_ = true;
      shuffleBuffer();
      return true;
    }
    if (!options_.repeat)
      return false;
    if (!epochHadDocs_)
      return Error("the data holds no documents");
    Status rewound = source_->rewind();
    if (!rewound)
      return rewound.error();
    ++epoch_;
    docsRead_ = 0;
    epochHadDocs_ = false;
  }
}

Expected<bool> Packer::appendDocument() {
  while (cursor_ >= buffer_.size()) {
    Expected<bool> loaded = loadNextBuffer();
    if (!loaded || !*loaded)
      return loaded;
  }
  std::vector<uint32_t> &doc = buffer_[cursor_];
  pending_.insert(pending_.end(), doc.begin(), doc.end());
  pending_.push_back(options_.endOfText);
  segments_.push_back({epoch_, bufferStart_, cursor_, doc.size() + 1});
  std::vector<uint32_t>().swap(doc);
  ++cursor_;
  return true;
}

Expected<bool> Packer::nextSequence(std::vector<uint32_t> &sequence) {
  if (exhausted_)
    return false;
  size_t T = static_cast<size_t>(options_.seqLen);
  while (pending_.size() - pendingBegin_ < T + 1) {
    Expected<bool> appended = appendDocument();
    if (!appended)
      return appended.error();
    if (!*appended) {
      exhausted_ = true;
      return false;
    }
  }
  sequence.assign(pending_.begin() + pendingBegin_,
                  pending_.begin() + pendingBegin_ + T + 1);
  pendingBegin_ += T;
  uint64_t advance = T;
  while (advance > 0) {
    Segment &head = segments_.front();
    uint64_t left = head.length - headOffset_;
    if (advance >= left) {
      advance -= left;
      segments_.pop_front();
      headOffset_ = 0;
    } else {
      headOffset_ += advance;
      advance = 0;
    }
  }
  if (pendingBegin_ > (1u << 20) && pendingBegin_ * 2 > pending_.size()) {
    pending_.erase(pending_.begin(), pending_.begin() + pendingBegin_);
    pendingBegin_ = 0;
  }
  ++sequences_;
  return true;
}

Expected<bool> Packer::nextBatch(Batch &batch) {
  int64_t B = options_.batchSize, T = options_.seqLen;
  batch.batchSize = B;
  batch.seqLen = T;
  batch.tokens.resize(static_cast<size_t>(B * T));
  batch.targets.resize(static_cast<size_t>(B * T));
  std::vector<uint32_t> sequence;
  for (int64_t b = 0; b < B; ++b) {
    Expected<bool> got = nextSequence(sequence);
    if (!got || !*got)
      return got;
    for (int64_t t = 0; t < T; ++t) {
      batch.tokens[b * T + t] = static_cast<int32_t>(sequence[t]);
      batch.targets[b * T + t] = static_cast<int32_t>(sequence[t + 1]);
    }
  }
  return true;
}

DataPosition Packer::position() const {
  DataPosition p;
  if (!segments_.empty()) {
    const Segment &head = segments_.front();
    p.epoch = head.epoch;
    p.bufferStart = head.bufferStart;
    p.cursor = head.cursor;
    p.offset = headOffset_;
  } else if (cursor_ < buffer_.size()) {
    p.epoch = epoch_;
    p.bufferStart = bufferStart_;
    p.cursor = cursor_;
  } else {
    p.epoch = epoch_;
    p.bufferStart = bufferStart_ + buffer_.size();
  }
  p.sequences = sequences_;
  p.seed = options_.seed;
  p.seqLen = options_.seqLen;
  p.shuffleBuffer = options_.shuffleBuffer;
  return p;
}

Status Packer::reset() {
  Status rewound = source_->rewind();
  if (!rewound)
    return rewound;
  epoch_ = 0;
  bufferStart_ = 0;
  docsRead_ = 0;
  epochHadDocs_ = false;
  buffer_.clear();
  cursor_ = 0;
  pending_.clear();
  pendingBegin_ = 0;
  segments_.clear();
  headOffset_ = 0;
  exhausted_ = false;
  sequences_ = 0;
  return io::success();
}

Status Packer::restore(const DataPosition &position) {
  if (position.seed != options_.seed || position.seqLen != options_.seqLen ||
      position.shuffleBuffer != options_.shuffleBuffer)
    return Error(fmt::format("data position was made for seed {}, sequence "
                             "length {}, shuffle buffer {}; this stream has "
                             "seed {}, sequence length {}, shuffle buffer {}",
                             position.seed, position.seqLen,
                             position.shuffleBuffer, options_.seed,
                             options_.seqLen, options_.shuffleBuffer));
  uint64_t capacity = std::max<uint64_t>(options_.shuffleBuffer, 1);
  if (position.bufferStart % capacity != 0)
    return Error(fmt::format("data position: buffer start {} is not a multiple "
                             "of the shuffle buffer",
                             position.bufferStart));
  Status rewound = source_->rewind();
  if (!rewound)
    return rewound;
  Status skipped = source_->skip(position.bufferStart);
  if (!skipped)
    return skipped.error().withContext("data position");
  epoch_ = position.epoch;
  docsRead_ = position.bufferStart;
  epochHadDocs_ = position.bufferStart > 0;
  pending_.clear();
  pendingBegin_ = 0;
  segments_.clear();
  headOffset_ = 0;
  exhausted_ = false;
  sequences_ = position.sequences;
  Expected<bool> loaded = loadNextBuffer();
  if (!loaded)
    return loaded.error();
  if (!*loaded) {
    if (position.cursor != 0 || position.offset != 0)
      return Error("data position: past the end of the data");
    exhausted_ = true;
    return io::success();
  }
  if (epoch_ != position.epoch && (position.cursor != 0 || position.offset != 0))
    return Error("data position: past the end of the data");
  if (position.cursor >= buffer_.size())
    return Error(fmt::format("data position: document {} of a buffer of {}",
                             position.cursor, buffer_.size()));
  cursor_ = position.cursor;
  Expected<bool> appended = appendDocument();
  if (!appended)
    return appended.error();
  if (position.offset >= segments_.front().length)
    return Error(
        fmt::format("data position: offset {} past the document's {} ids",
                    position.offset, segments_.front().length));
  headOffset_ = position.offset;
  pendingBegin_ = position.offset;
  return io::success();
}

} // namespace tetra::data
