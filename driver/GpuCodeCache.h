//===- GpuCodeCache.h - Compiled GPU code objects on disk -------*- C++ -*-===//
//
// The GPU targets' compile cache, beside the CPU JIT's (CpuJit.h): each
// lowered gpu.module's code object (PTX, or HSACO and its assembly) stored
// under `<cache>/<chip>/<key>.code`, the key a SHA-256 over the module's
// LLVM-dialect text, the chip, LLVM's version and kGpuCompilerVersion — so a
// second `tetra compile` of an unchanged step skips LLVM's optimizer and
// code generation for every module it has seen (<cache> is
// $TETRA_CACHE_DIR, $XDG_CACHE_HOME/tetra or $HOME/.cache/tetra;
// TETRA_CACHE_DIR=off disables it).
//
// An entry starts with a line naming its format, its payload's length and
// the payload's SHA-256: a truncated or altered entry is not used (the
// module is compiled again and the entry rewritten). Entries are written
// through a temporary file and a rename; failing to write one is not an
// error.
//
// Whole step bundles are cached too, under `<cache>/steps/<chip>/<key>/`,
// the key a SHA-256 over the compiler's own executable, the chip, the
// options and every source file (its absolute path and its bytes): a second
// `tetra compile` of an unchanged run copies the bundle, once its checksum
// has been verified.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_GPUCODECACHE_H
#define TETRA_DRIVER_GPUCODECACHE_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace tetra {

/// Bumped when GPU code generation changes in a way the lowered IR would
/// not show (the LLVM pipeline, the PTX features, the HSACO link).
constexpr const char *kGpuCompilerVersion = "tetra-gpu-1";

/// A compiled module as cached: its code object and its assembly.
struct CachedGpuCode {
  std::string code;
  std::string assembly;
};

/// The key of a lowered module for `chip`.
std::string gpuCacheKey(llvm::StringRef loweredModule, llvm::StringRef chip);

/// The entry of `key`, if there is a whole one.
std::optional<CachedGpuCode> readCachedGpuCode(llvm::StringRef chip,
                                               llvm::StringRef key);

/// Stores an entry (quietly does nothing where it cannot).
void storeCachedGpuCode(llvm::StringRef chip, llvm::StringRef key,
                        const CachedGpuCode &code);

/// The key of a step compiled for `chip` with `options` (the command's
/// settings as text) from `sources`; "" where a source or the executable
/// cannot be read.
std::string stepCacheKey(llvm::StringRef chip, llvm::StringRef options,
                         const std::vector<std::string> &sources);

/// `<cache>/steps/<chip>/<key>`, or "" without a cache.
std::string stepCacheDirectory(llvm::StringRef chip, llvm::StringRef key);

/// Copies the files under `from` (subfolders too) into a new folder `to`;
/// false (with `to` removed) where anything fails.
bool copyDirectory(const std::string &from, const std::string &to);

} // namespace tetra

#endif // TETRA_DRIVER_GPUCODECACHE_H
