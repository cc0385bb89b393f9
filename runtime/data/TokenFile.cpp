//===- TokenFile.cpp - Pre-tokenized token files --------------------------===//

#include "runtime/data/TokenFile.h"

#include "runtime/io/AtomicFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tetra::data {

using io::Error;
using io::Expected;
using io::Status;

namespace {

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t getLE(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

bool readFully(int fd, void *data, size_t size, uint64_t offset) {
  char *p = static_cast<char *>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

constexpr size_t kBufferIds = 1 << 16;

} // namespace

Status writeTokenFile(const std::string &path,
                      const std::vector<uint32_t> &ids, uint32_t vocabSize,
                      uint32_t endOfText) {
  if (endOfText >= vocabSize)
    return Error(
        fmt::format("{}: end-of-text id {} is not below the vocabulary size {}",
                    path, endOfText, vocabSize));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocabSize)
      return Error(fmt::format(
          "{}: id {} at index {} is not below the vocabulary size {}", path,
          ids[i], i, vocabSize));
  std::string out(kTokenFileMagic, 8);
  putU32(out, kTokenFileVersion);
  putU32(out, 4);
  putU64(out, ids.size());
  putU32(out, vocabSize);
  putU32(out, endOfText);
  out.reserve(out.size() + 4 * ids.size());
  for (uint32_t id : ids)
    putU32(out, id);
  return io::writeFileAtomically(path, out);
}

Expected<TokenFileReader>
TokenFileReader::open(const std::string &path,
                      std::optional<uint32_t> endOfText) {
  TokenFileReader reader;
  reader.path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  reader.fd_ = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Error(path + ": cannot stat: " + std::strerror(errno));
  uint64_t size = static_cast<uint64_t>(st.st_size);
  unsigned char header[kTokenFileHeaderBytes];
  if (size < kTokenFileHeaderBytes ||
      !readFully(fd, header, sizeof(header), 0))
    return Error(fmt::format("{}: too short for a token file header ({} bytes)",
                             path, size));
  if (std::memcmp(header, kTokenFileMagic, 8) != 0)
    return Error(path + ": not a token file (no \"TETRATOK\" magic)");
  uint64_t version = getLE(header + 8, 4);
  if (version != kTokenFileVersion)
    return Error(
        fmt::format("{}: token file version {} is not supported (expected 1)",
                    path, version));
  uint64_t width = getLE(header + 12, 4);
  if (width != 4)
    return Error(fmt::format(
        "{}: {} bytes per id is not supported (expected 4)", path, width));
  reader.count_ = getLE(header + 16, 8);
  reader.vocabSize_ = static_cast<uint32_t>(getLE(header + 24, 4));
  reader.endOfText_ = static_cast<uint32_t>(getLE(header + 28, 4));
  if (reader.endOfText_ >= reader.vocabSize_)
    return Error(
        fmt::format("{}: end-of-text id {} is not below the vocabulary size {}",
                    path, reader.endOfText_, reader.vocabSize_));
  if (endOfText && *endOfText != reader.endOfText_)
    return Error(fmt::format("{}: tokenized with end-of-text id {}, expected "
                             "{} (another tokenizer?)",
                             path, reader.endOfText_, *endOfText));
  if (reader.count_ > (size - kTokenFileHeaderBytes) / 4 ||
      kTokenFileHeaderBytes + 4 * reader.count_ != size)
    return Error(fmt::format("{}: the header says {} ids but the file holds {} "
                             "bytes (truncated or trailing data)",
                             path, reader.count_, size));
  reader.buffer_.resize(kBufferIds);
  return reader;
}

TokenFileReader::TokenFileReader(TokenFileReader &&other) noexcept {
  *this = std::move(other);
}

TokenFileReader &TokenFileReader::operator=(TokenFileReader &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    endOfText_ = other.endOfText_;
    vocabSize_ = other.vocabSize_;
    count_ = other.count_;
    read_ = other.read_;
    buffer_ = std::move(other.buffer_);
    begin_ = other.begin_;
    end_ = other.end_;
    other.fd_ = -1;
  }
  return *this;
}

TokenFileReader::~TokenFileReader() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status TokenFileReader::rewind() {
  read_ = 0;
  begin_ = end_ = 0;
  return io::success();
}

Expected<bool> TokenFileReader::refill() {
  if (read_ >= count_)
    return false;
  uint64_t n = std::min<uint64_t>(kBufferIds, count_ - read_);
  std::vector<unsigned char> raw(n * 4);
  if (!readFully(fd_, raw.data(), raw.size(),
                 kTokenFileHeaderBytes + 4 * read_))
    return Error(fmt::format("{}: read failed at id {}", path_, read_));
  for (uint64_t i = 0; i < n; ++i) {
    buffer_[i] = static_cast<uint32_t>(getLE(raw.data() + 4 * i, 4));
    if (buffer_[i] >= vocabSize_)
      return Error(fmt::format(
          "{}: id {} at index {} is not below the vocabulary size {}", path_,
          buffer_[i], read_ + i, vocabSize_));
  }
  begin_ = 0;
  end_ = n;
  read_ += n;
  return true;
}

Expected<bool> TokenFileReader::nextDocument(std::vector<uint32_t> &ids) {
  ids.clear();
  bool any = false;
  while (true) {
    if (begin_ == end_) {
      Expected<bool> more = refill();
      if (!more)
        return more.error();
      if (!*more)
        return any;
    }
    any = true;
    while (begin_ < end_) {
      uint32_t id = buffer_[begin_++];
      if (id == endOfText_)
        return true;
      ids.push_back(id);
    }
  }
}

} // namespace tetra::data
