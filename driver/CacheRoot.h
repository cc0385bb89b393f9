//===- CacheRoot.h - Where the compile caches live --------------*- C++ -*-===//
//
// The root of every compile cache (the CPU JIT's objects, CpuJit.h; GPU code
// objects and step bundles, GpuCodeCache.h): $TETRA_CACHE_DIR,
// $XDG_CACHE_HOME/tetra or $HOME/.cache/tetra; none where TETRA_CACHE_DIR is
// "off" or nothing is set.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_CACHEROOT_H
#define TETRA_DRIVER_CACHEROOT_H

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <string>

namespace tetra {

/// The cache root, or "" for none.
inline std::string codeCacheRoot() {
  llvm::SmallString<256> directory;
  if (const char *tetra = std::getenv("TETRA_CACHE_DIR"); tetra && *tetra) {
    if (llvm::StringRef(tetra) == "off")
      return "";
    directory = tetra;
  } else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    directory = xdg;
    llvm::sys::path::append(directory, "tetra");
  } else if (const char *home = std::getenv("HOME"); home && *home) {
    directory = home;
    llvm::sys::path::append(directory, ".cache", "tetra");
  }
  return std::string(directory);
}

} // namespace tetra

#endif // TETRA_DRIVER_CACHEROOT_H
