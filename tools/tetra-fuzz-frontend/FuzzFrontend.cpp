//===- FuzzFrontend.cpp - libFuzzer entry point for the frontend ----------===//
//
// Feeds arbitrary bytes to the frontend exactly as `tetra check` and `tetra
// emit --stage=ast` would: the header keyword picks the kind, then a model
// is elaborated (loadModel) and its syntax tree printed, a policy resolved
// against the linears of a small Llama, a run file checked. Diagnostics go
// to a null stream; whatever the input, nothing may crash, hang, leak or
// trip a sanitizer. Policy and run files are read from disk by their
// loaders, so those inputs go through a per-process temporary file.
//
//   tetra-fuzz-frontend -dict=tools/tetra-fuzz-frontend/tetra.dict CORPUS
//
//===----------------------------------------------------------------------===//

#include "frontend/Diagnostics.h"
#include "frontend/Frontend.h"
#include "frontend/ModelAST.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <vector>

using namespace tetra::frontend;

namespace {

/// Where policy and run inputs are written: a file of this process.
std::string scratchPath;

/// The linears of llama_tiny: what policies are resolved against.
std::vector<std::string> linearNames() {
  std::vector<std::string> names;
  for (int layer = 0; layer < 2; ++layer)
    for (const char *name : {"attn.wq", "attn.wk", "attn.wv", "attn.wo",
                             "mlp.gate", "mlp.up", "mlp.down"})
      names.push_back(fmt::format("layers.{}.{}", layer, name));
  names.push_back("lm_head");
  return names;
}

bool writeScratch(llvm::StringRef bytes) {
  std::error_code error;
  llvm::raw_fd_ostream os(scratchPath, error);
  if (error)
    return false;
  os << bytes;
  return true;
}

void fuzzModel(DiagnosticEngine &diags, unsigned bufferId) {
  if (std::optional<ModelGraph> model = loadModelBuffer(diags, bufferId)) {
    (void)model->parameterCount();
    (void)model->linearNames();
  }
  if (auto file = modelast::parseModelFile(diags, bufferId))
    modelast::printModelAST(*file, diags.getSourceMgr(), llvm::nulls());
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  llvm::SmallString<128> path;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, path);
  llvm::sys::path::append(
      path,
      fmt::format("tetra-fuzz-{}.tetra", llvm::sys::Process::getProcessId()));
  scratchPath = std::string(path);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  llvm::SourceMgr sourceMgr;
  DiagnosticEngine diags(sourceMgr, llvm::nulls());
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(bytes, "fuzz.tetra"), llvm::SMLoc());
  std::optional<FileKind> kind = detectFileKindBuffer(diags, bufferId);
  if (!kind)
    return 0;
  switch (*kind) {
  case FileKind::Model:
    fuzzModel(diags, bufferId);
    break;
  case FileKind::Policy:
    if (writeScratch(bytes)) {
      (void)loadPolicy(diags, scratchPath, linearNames());
      (void)dumpPolicyAST(diags, scratchPath, llvm::nulls());
    }
    break;
  case FileKind::Run:
    if (writeScratch(bytes)) {
      (void)loadRun(diags, scratchPath);
      (void)dumpRunAST(diags, scratchPath, llvm::nulls());
    }
    break;
  }
  return 0;
}
