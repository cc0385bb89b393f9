//===- Documents.h - Streaming document readers ------------------*- C++ -*-===//
//
// Reads training text one document at a time, never a whole corpus:
//
//   *.json.gz, *.jsonl.gz, *.json, *.jsonl   JSON lines (C4's own format): one
//                                            object per line, its "text"
//                                            string is the document; blank
//                                            lines are skipped
//   *.txt, *.txt.gz                          the whole file is one document
//
// Files ending in ".gz" are read through zlib; a truncated or corrupt stream
// is an error. Every error names the file (and, for JSON lines, the 1-based
// line): "c4.jsonl:17: not JSON: line 1, column 3 (byte 2): ...".
//
// A DocumentReader walks a list of files (see expandGlobs) in order and
// counts documents, so that a position "document k" can be restored by
// rewinding and skipping k documents.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DATA_DOCUMENTS_H
#define TETRA_RUNTIME_DATA_DOCUMENTS_H

#include "runtime/io/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tetra::data {

/// Expands each pattern with glob(3) (sorted, no duplicates across
/// patterns kept in first-seen order). A pattern that matches nothing is an
/// error naming it, as is an empty pattern list.
io::Expected<std::vector<std::string>>
expandGlobs(const std::vector<std::string> &patterns);

enum class DocumentFormat { JsonLines, Text };

/// The format a path's name implies, or an error for an unknown suffix.
io::Expected<DocumentFormat> documentFormatOf(const std::string &path);

/// A file read line by line, through zlib when it ends in ".gz".
class LineReader {
public:
  static io::Expected<LineReader> open(const std::string &path);
  LineReader(LineReader &&other) noexcept;
  LineReader &operator=(LineReader &&other) noexcept;
  LineReader(const LineReader &) = delete;
  LineReader &operator=(const LineReader &) = delete;
  ~LineReader();

  /// The next line without its '\n' (true), or the end of the file
  /// (false). A last line without '\n' is still a line.
  io::Expected<bool> nextLine(std::string &line);
  /// The rest of the file.
  io::Expected<std::string> readAll();
  /// 1-based number of the line nextLine returned last.
  uint64_t lineNumber() const { return lineNumber_; }
  const std::string &path() const { return path_; }

private:
  LineReader() = default;
  io::Expected<bool> fill();
  void close();

  std::string path_;
  void *gz_ = nullptr; // gzFile
  int fd_ = -1;
  bool gzip_ = false;
  bool eof_ = false;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  uint64_t lineNumber_ = 0;
};

/// The documents of a list of files, in order.
class DocumentReader {
public:
  explicit DocumentReader(std::vector<std::string> files)
      : files_(std::move(files)) {}
  /// From glob patterns (expandGlobs).
  static io::Expected<DocumentReader>
  fromGlobs(const std::vector<std::string> &patterns);

  /// The next document (true) or the end of the last file (false).
  io::Expected<bool> next(std::string &document);
  /// Back to the first document of the first file.
  void rewind();
  /// Rewinds and skips `count` documents; fewer is an error.
  io::Status seek(uint64_t count);
  /// Documents returned since the last rewind.
  uint64_t position() const { return position_; }
  const std::vector<std::string> &files() const { return files_; }

private:
  std::vector<std::string> files_;
  size_t fileIndex_ = 0;
  std::unique_ptr<LineReader> current_;
  DocumentFormat format_ = DocumentFormat::Text;
  bool textDone_ = false;
  uint64_t position_ = 0;
  std::string line_;
};

} // namespace tetra::data

#endif // TETRA_RUNTIME_DATA_DOCUMENTS_H
