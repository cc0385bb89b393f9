//===- Documents.cpp - Streaming document readers -------------------------===//

#include "runtime/data/Documents.h"

#include "runtime/io/Json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <glob.h>
#include <set>
#include <unistd.h>
#include <zlib.h>

namespace tetra::data {

using io::Error;
using io::Expected;
using io::Status;

namespace {

bool endsWith(const std::string &text, const char *suffix) {
  size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

constexpr size_t kChunk = 1 << 16;

} // namespace

Expected<std::vector<std::string>>
expandGlobs(const std::vector<std::string> &patterns) {
  if (patterns.empty())
    return Error("no data files given");
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const std::string &pattern : patterns) {
    glob_t result;
    std::memset(&result, 0, sizeof(result));
    int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &result);
    if (rc == GLOB_NOMATCH || (rc == 0 && result.gl_pathc == 0)) {
      ::globfree(&result);
      return Error(pattern + ": no file matches");
    }
    if (rc == GLOB_ABORTED) {
      ::globfree(&result);
      return Error(pattern + ": no file matches (a folder on its path cannot "
                             "be read, or does not exist)");
    }
    if (rc != 0) {
      ::globfree(&result);
      return Error(pattern + ": cannot expand (read error or out of memory)");
    }
    for (size_t i = 0; i < result.gl_pathc; ++i) { // glob sorts
      std::string path = result.gl_pathv[i];
      if (seen.insert(path).second)
        files.push_back(path);
    }
    ::globfree(&result);
  }
  return files;
}

Expected<DocumentFormat> documentFormatOf(const std::string &path) {
  for (const char *s : {".json.gz", ".jsonl.gz", ".json", ".jsonl"})
    if (endsWith(path, s))
      return DocumentFormat::JsonLines;
  for (const char *s : {".txt", ".txt.gz"})
    if (endsWith(path, s))
      return DocumentFormat::Text;
  return Error(path + ": unknown data file type (expected .json.gz, .jsonl, "
                      ".json, .txt or .txt.gz)");
}

//===- LineReader ---------------------------------------------------------===//

Expected<LineReader> LineReader::open(const std::string &path) {
  LineReader reader;
  reader.path_ = path;
  reader.gzip_ = endsWith(path, ".gz");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  if (reader.gzip_) {
    gzFile gz = ::gzdopen(fd, "rb");
    if (!gz) {
      ::close(fd);
      return Error(path + ": cannot open as gzip");
    }
    ::gzbuffer(gz, 1 << 17);
    reader.gz_ = gz;
  } else {
    reader.fd_ = fd;
  }
  reader.buffer_.resize(kChunk);
  return reader;
}

LineReader::LineReader(LineReader &&other) noexcept { *this = std::move(other); }

LineReader &LineReader::operator=(LineReader &&other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    gz_ = other.gz_;
    fd_ = other.fd_;
    gzip_ = other.gzip_;
    eof_ = other.eof_;
    buffer_ = std::move(other.buffer_);
    begin_ = other.begin_;
    end_ = other.end_;
    lineNumber_ = other.lineNumber_;
    other.gz_ = nullptr;
    other.fd_ = -1;
  }
  return *this;
}

LineReader::~LineReader() { close(); }

void LineReader::close() {
  if (gz_)
    ::gzclose(static_cast<gzFile>(gz_));
  if (fd_ >= 0)
    ::close(fd_);
  gz_ = nullptr;
  fd_ = -1;
}

/// Reads more bytes after end_ (compacting first); false at the end.
Expected<bool> LineReader::fill() {
  if (eof_)
    return false;
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < kChunk)
    buffer_.resize(std::max(buffer_.size() * 2, end_ + kChunk));
  size_t room = buffer_.size() - end_;
  long got;
  if (gzip_) {
    gzFile gz = static_cast<gzFile>(gz_);
    int n = ::gzread(gz, buffer_.data() + end_, static_cast<unsigned>(room));
    int code = Z_OK;
    const char *message = ::gzerror(gz, &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      if (code == Z_ERRNO)
        return Error(path_ + ": read failed: " + std::strerror(errno));
      // zlib prefixes its message with "<fd:N>: ", which names nothing.
      std::string text = message ? message : "unknown zlib error";
      if (!text.empty() && text[0] == '<') {
        size_t colon = text.find(": ");
        if (colon != std::string::npos)
          text.erase(0, colon + 2);
      }
      return Error(path_ + ": corrupt or truncated gzip data: " + text);
    }
    got = n;
  } else {
    ssize_t n;
    do
      n = ::read(fd_, buffer_.data() + end_, room);
    while (n < 0 && errno == EINTR);
    if (n < 0)
      return Error(path_ + ": read failed: " + std::strerror(errno));
    got = n;
  }
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += static_cast<size_t>(got);
  return true;
}

Expected<bool> LineReader::nextLine(std::string &line) {
  size_t scanned = begin_;
  while (true) {
    const char *start = buffer_.data() + scanned;
    const void *newline = std::memchr(start, '\n', end_ - scanned);
    if (newline) {
      size_t at = static_cast<const char *>(newline) - buffer_.data();
      line.assign(buffer_.data() + begin_, at - begin_);
      begin_ = at + 1;
      ++lineNumber_;
      return true;
    }
    size_t offset = end_ - begin_;
    Expected<bool> more = fill();
    if (!more)
      return more.error();
    if (!*more) {
      if (end_ == begin_)
        return false;
      line.assign(buffer_.data() + begin_, end_ - begin_);
      begin_ = end_;
      ++lineNumber_;
      return true;
    }
    scanned = begin_ + offset;
  }
}

Expected<std::string> LineReader::readAll() {
  while (true) {
    Expected<bool> more = fill();
    if (!more)
      return more.error();
    if (!*more)
      break;
  }
  std::string all(buffer_.data() + begin_, end_ - begin_);
  begin_ = end_;
  return all;
}

//===- DocumentReader -----------------------------------------------------===//

Expected<DocumentReader>
DocumentReader::fromGlobs(const std::vector<std::string> &patterns) {
  Expected<std::vector<std::string>> files = expandGlobs(patterns);
  if (!files)
    return files.error();
  for (const std::string &file : *files) {
    Expected<DocumentFormat> format = documentFormatOf(file);
    if (!format)
      return format.error();
  }
  return DocumentReader(files.take());
}

void DocumentReader::rewind() {
  current_.reset();
  fileIndex_ = 0;
  position_ = 0;
}

Status DocumentReader::seek(uint64_t count) {
  rewind();
  std::string document;
  for (uint64_t i = 0; i < count; ++i) {
    Expected<bool> got = next(document);
    if (!got)
      return got.error();
    if (!*got)
      return Error(fmt::format("data position past the end: document {} "
                               "requested, the files hold {}",
                               count, i));
  }
  return io::success();
}

Expected<bool> DocumentReader::next(std::string &document) {
  while (true) {
    if (!current_) {
      if (fileIndex_ >= files_.size())
        return false;
      const std::string &path = files_[fileIndex_];
      Expected<DocumentFormat> format = documentFormatOf(path);
      if (!format)
        return format.error();
      Expected<LineReader> reader = LineReader::open(path);
      if (!reader)
        return reader.error();
      current_ = std::make_unique<LineReader>(reader.take());
      format_ = *format;
      textDone_ = false;
    }
    if (format_ == DocumentFormat::Text) {
      if (!textDone_) {
        textDone_ = true;
        Expected<std::string> all = current_->readAll();
        if (!all)
          return all.error();
        document = all.take();
        ++position_;
        return true;
      }
    } else {
      while (true) {
        Expected<bool> got = current_->nextLine(line_);
        if (!got)
          return got.error();
        if (!*got)
          break;
        if (line_.find_first_not_of(" \t\r") == std::string::npos)
          continue;
        std::string where =
            fmt::format("{}:{}", current_->path(), current_->lineNumber());
        Expected<io::JsonValue> value = io::parseJson(line_);
        if (!value)
          return Error(where + ": not JSON: " + value.error().message());
        if (!value->isObject())
          return Error(where + ": expected a JSON object, found " +
                       std::string(io::JsonValue::kindName(value->kind())));
        const io::JsonValue *text = value->find("text");
        if (!text)
          return Error(where + ": the object has no \"text\" field");
        if (!text->isString())
          return Error(where + ": \"text\" is a " +
                       std::string(io::JsonValue::kindName(text->kind())) +
                       ", expected a string");
        document = text->asString();
        ++position_;
        return true;
      }
    }
    current_.reset();
    ++fileIndex_;
  }
}

} // namespace tetra::data
