//===- GpuCodeCache.cpp - Compiled GPU code objects on disk ---------------===//

#include "driver/GpuCodeCache.h"

#include "dialect/LLVMFormatters.h"
#include "driver/CacheRoot.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

using namespace tetra;

namespace {

constexpr llvm::StringLiteral kFormat = "tetra-gpu-code 1";

std::string sha256(llvm::StringRef text) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(text)),
                     /*LowerCase=*/true);
}

std::string entryPath(llvm::StringRef chip, llvm::StringRef key) {
  std::string root = codeCacheRoot();
  if (root.empty())
    return "";
  llvm::SmallString<256> path(root);
  llvm::sys::path::append(path, chip, key + ".code");
  return std::string(path);
}

/// The payload: the code's length in decimal, a newline, the code, then the
/// assembly.
std::string payload(const CachedGpuCode &code) {
  return fmt::format("{}\n{}{}", code.code.size(), code.code, code.assembly);
}

} // namespace

std::string tetra::gpuCacheKey(llvm::StringRef loweredModule,
                               llvm::StringRef chip) {
  llvm::SHA256 hash;
  for (llvm::StringRef part :
       {loweredModule, chip, llvm::StringRef(LLVM_VERSION_STRING),
        llvm::StringRef(kGpuCompilerVersion)}) {
    hash.update(part);
    hash.update(llvm::StringRef("\0", 1));
  }
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

std::optional<CachedGpuCode> tetra::readCachedGpuCode(llvm::StringRef chip,
                                                      llvm::StringRef key) {
  std::string path = entryPath(chip, key);
  if (path.empty())
    return std::nullopt;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return std::nullopt;
  // "tetra-gpu-code 1 <length> <sha256>\n<payload>"
  llvm::StringRef text = (*file)->getBuffer();
  auto [header, rest] = text.split('\n');
  llvm::SmallVector<llvm::StringRef> fields;
  header.split(fields, ' ');
  size_t length = 0;
  if (fields.size() != 4 || (fields[0] + " " + fields[1]).str() != kFormat ||
      fields[2].getAsInteger(10, length) || rest.size() != length ||
      sha256(rest) != fields[3])
    return std::nullopt;
  auto [codeLength, both] = rest.split('\n');
  size_t codeBytes = 0;
  if (codeLength.getAsInteger(10, codeBytes) || codeBytes > both.size())
    return std::nullopt;
  return CachedGpuCode{both.substr(0, codeBytes).str(),
                       both.substr(codeBytes).str()};
}

void tetra::storeCachedGpuCode(llvm::StringRef chip, llvm::StringRef key,
                               const CachedGpuCode &code) {
  std::string path = entryPath(chip, key);
  if (path.empty() ||
      llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return;
  std::string body = payload(code);
  std::string temporary =
      fmt::format("{}.tmp{}", path, llvm::sys::Process::getProcessId());
  {
    std::error_code error;
    llvm::raw_fd_ostream os(temporary, error);
    if (error)
      return;
    os << kFormat << " " << body.size() << " " << sha256(body) << "\n" << body;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(temporary);
      return;
    }
  }
  if (llvm::sys::fs::rename(temporary, path))
    llvm::sys::fs::remove(temporary);
}

std::string tetra::stepCacheKey(llvm::StringRef chip, llvm::StringRef options,
                                const std::vector<std::string> &sources) {
  llvm::SHA256 hash;
  auto part = [&](llvm::StringRef text) {
    hash.update(text);
    hash.update(llvm::StringRef("\0", 1));
  };
  part("tetra-step-cache 1");
  part(LLVM_VERSION_STRING);
  part(chip);
  part(options);
  // The compiler itself: any rebuild changes the key.
  std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  for (const std::string &file : [&] {
         std::vector<std::string> all = {self};
         all.insert(all.end(), sources.begin(), sources.end());
         return all;
       }()) {
    llvm::SmallString<256> path(file);
    if (llvm::sys::fs::make_absolute(path))
      return "";
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> bytes =
        llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
    if (!bytes)
      return "";
    part(path);
    part((*bytes)->getBuffer());
  }
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

std::string tetra::stepCacheDirectory(llvm::StringRef chip,
                                      llvm::StringRef key) {
  std::string root = codeCacheRoot();
  if (root.empty() || key.empty())
    return "";
  llvm::SmallString<256> path(root);
  llvm::sys::path::append(path, "steps", chip, key);
  return std::string(path);
}

bool tetra::copyDirectory(const std::string &from, const std::string &to) {
  std::error_code error;
  if (llvm::sys::fs::create_directories(to))
    return false;
  for (llvm::sys::fs::recursive_directory_iterator entry(from, error), end;
       !error && entry != end; entry.increment(error)) {
    llvm::StringRef relative = llvm::StringRef(entry->path()).drop_front(
        from.size());
    std::string target = to + relative.str();
    llvm::ErrorOr<llvm::sys::fs::basic_file_status> status = entry->status();
    if (!status) {
      error = status.getError();
      break;
    }
    if (status->type() == llvm::sys::fs::file_type::directory_file)
      error = llvm::sys::fs::create_directories(target);
    else
      error = llvm::sys::fs::copy_file(entry->path(), target);
  }
  if (error) {
    llvm::sys::fs::remove_directories(to);
    return false;
  }
  return true;
}
