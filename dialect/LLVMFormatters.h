//===- LLVMFormatters.h - fmt for LLVM's string types ------------*- C++ -*-===//
//
// fmt::format arguments of LLVM's string types (llvm::StringRef, llvm::Twine)
// for the code built on LLVM and MLIR (the dialect, the frontend, the
// lowering, the driver): formatted as their text.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DIALECT_LLVMFORMATTERS_H
#define TETRA_DIALECT_LLVMFORMATTERS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <fmt/format.h>

#include <string_view>

template <>
struct fmt::formatter<llvm::StringRef> : fmt::formatter<std::string_view> {
  auto format(llvm::StringRef text, format_context &context) const {
    return fmt::formatter<std::string_view>::format(
        std::string_view(text.data(), text.size()), context);
  }
};

template <>
struct fmt::formatter<llvm::Twine> : fmt::formatter<std::string_view> {
  auto format(const llvm::Twine &text, format_context &context) const {
    return fmt::formatter<std::string_view>::format(text.str(), context);
  }
};

#endif // TETRA_DIALECT_LLVMFORMATTERS_H
