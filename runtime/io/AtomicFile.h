//===- AtomicFile.h - Write a file completely or not at all -----*- C++ -*-===//
//
// Outputs the runtime writes (quantized tensors, checkpoints) must never be
// left half-written, and a failed write must never destroy the previous
// version. AtomicFileWriter writes to a temporary file in the destination's
// directory, fsyncs it, renames it over the destination (atomic on POSIX
// file systems) and fsyncs the directory. Until commit() succeeds the
// destination is untouched; a writer destroyed without commit() deletes its
// temporary file.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_IO_ATOMICFILE_H
#define TETRA_RUNTIME_IO_ATOMICFILE_H

#include "runtime/io/Error.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace tetra::io {

class AtomicFileWriter {
public:
  /// Creates the temporary file next to `path`. Fails if its directory does
  /// not exist or is not writable.
  static Expected<AtomicFileWriter> create(const std::string &path);

  AtomicFileWriter(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter &operator=(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;
  /// Discards the temporary file unless commit() succeeded.
  ~AtomicFileWriter();

  /// Appends `size` bytes.
  Status write(const void *data, size_t size);
  Status write(std::string_view bytes) {
    return write(bytes.data(), bytes.size());
  }

  /// Flushes the data to disk and renames the file into place. On failure
  /// the temporary file is removed and the destination left as it was.
  Status commit();

  /// Removes the temporary file without touching the destination.
  void discard();

  const std::string &path() const { return path_; }
  const std::string &temporaryPath() const { return temporaryPath_; }

private:
  AtomicFileWriter(std::string path, std::string temporaryPath, int fd)
      : path_(std::move(path)), temporaryPath_(std::move(temporaryPath)),
        fd_(fd) {}

  std::string path_;
  std::string temporaryPath_;
  int fd_ = -1;
};

/// Writes `contents` to `path` atomically.
Status writeFileAtomically(const std::string &path, std::string_view contents);

/// The whole file at `path` as bytes; an error naming it when it cannot
/// be read.
Expected<std::string> readFile(const std::string &path);

/// Creates `path` and its missing parents (mkdir -p); an error naming the
/// first one that cannot be made, or a path that is not a directory.
Status createDirectories(const std::string &path);

} // namespace tetra::io

#endif // TETRA_RUNTIME_IO_ATOMICFILE_H
