//===- AtomicFile.cpp - Write a file completely or not at all -------------===//

#include "runtime/io/AtomicFile.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace tetra::io {

namespace {

std::string errnoText(int error) { return std::strerror(error); }

/// The directory part of `path` ("." when there is none).
std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

std::string baseNameOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

Expected<AtomicFileWriter> AtomicFileWriter::create(const std::string &path) {
  if (path.empty())
    return Error("cannot write a file with an empty name");
  std::string base = baseNameOf(path);
  if (base.empty() || base == "." || base == "..")
    return Error(path + ": not a file name");
  std::string directory = directoryOf(path);
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    return Error(path + ": is a directory");
  // A hidden name, so that a crash before commit() leaves an obvious
  // leftover rather than something that looks like the output. open() with
  // O_EXCL and mode 0666 (not mkstemp, which forces 0600) gives the file the
  // permissions the user's umask asks for.
  static std::atomic<unsigned> counter{0};
  std::string buffer;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    buffer = fmt::format("{}/.{}.tmp.{}.{}", directory, base, ::getpid(),
                         counter.fetch_add(1));
    fd = ::open(buffer.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return Error(path + ": cannot create a temporary file in '" + directory +
                 "': " + errnoText(errno));
  return AtomicFileWriter(path, buffer, fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter &&other) noexcept
    : path_(std::move(other.path_)),
      temporaryPath_(std::move(other.temporaryPath_)), fd_(other.fd_) {
  other.fd_ = -1;
  other.temporaryPath_.clear();
}

AtomicFileWriter &
AtomicFileWriter::operator=(AtomicFileWriter &&other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    temporaryPath_ = std::move(other.temporaryPath_);
    fd_ = other.fd_;
    other.fd_ = -1;
    other.temporaryPath_.clear();
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temporaryPath_.empty()) {
    ::unlink(temporaryPath_.c_str());
    temporaryPath_.clear();
  }
}

Status AtomicFileWriter::write(const void *data, size_t size) {
  if (fd_ < 0)
    return Error(path_ + ": write after the file was closed");
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      int error = errno;
      discard();
      return Error(path_ + ": write failed: " + errnoText(error));
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return success();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0)
    return Error(path_ + ": commit after the file was closed");
  if (::fsync(fd_) != 0) {
    int error = errno;
    discard();
    return Error(path_ + ": fsync failed: " + errnoText(error));
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int error = errno;
    discard();
    return Error(path_ + ": close failed: " + errnoText(error));
  }
  if (::rename(temporaryPath_.c_str(), path_.c_str()) != 0) {
    int error = errno;
    discard();
    return Error(path_ + ": cannot rename the temporary file into place: " +
                 errnoText(error));
  }
  temporaryPath_.clear();
  // Make the rename itself durable. Failure here is not an error: the data
  // is complete under its final name either way.
  int directory = ::open(directoryOf(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (directory >= 0) {
    ::fsync(directory);
    ::close(directory);
  }
  return success();
}

Status writeFileAtomically(const std::string &path, std::string_view contents) {
  Expected<AtomicFileWriter> writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.error();
  if (Status status = writer->write(contents); !status)
    return status;
  return writer->commit();
}

Expected<std::string> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status createDirectories(const std::string &path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/')
      continue;
    std::string prefix = path.substr(0, at);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
      return Error("cannot create the directory '" + prefix +
                   "': " + std::strerror(errno));
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return Error("'" + path + "' is not a directory");
  return success();
}

} // namespace tetra::io
