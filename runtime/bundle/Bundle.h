//===- Bundle.h - A compiled bundle, read back ------------------*- C++ -*-===//
//
// What `tetra compile` writes (docs/tools/compile.md), read by whatever runs
// it with only a GPU driver: the manifest's kernels, each with its code
// object, what it computes and its launches. A manifest that is not one —
// malformed JSON, a missing field, a launch that names nothing it can bind —
// is an error naming the file and the kernel, never a crash.
//
//   io::Expected<bundle::Bundle> bundle = bundle::Bundle::open(dir);
//   for (const bundle::Kernel &kernel : bundle->kernels) {
//     io::Expected<std::string> code = bundle->code(kernel);
//     ...
//     for (const bundle::Launch &launch : kernel.launches)
//       backend.launch(function, launch.config,
//                      launch.bind(buffers, seed, step)...);
//   }
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_BUNDLE_BUNDLE_H
#define TETRA_RUNTIME_BUNDLE_BUNDLE_H

#include "runtime/backend/Backend.h"
#include "runtime/io/Json.h"

#include <map>
#include <string>
#include <vector>

namespace tetra::bundle {

/// One launch of a kernel: its function, geometry and what each parameter
/// is ("input:0", "result:0", "scratch:lhs.codes", "scalar:seed").
struct Launch {
  std::string function;
  backend::LaunchConfig config;
  std::vector<std::string> arguments;

  /// The launch's buffers (named in `buffers`) and scalars (the step's
  /// seed and step), in the order the backend passes them; an error for an
  /// argument with no buffer.
  io::Status bind(const std::map<std::string, backend::Buffer> &buffers,
                  int64_t seed, int64_t step,
                  std::vector<backend::Buffer> &boundBuffers,
                  std::vector<backend::Scalar> &boundScalars) const;
};

struct Kernel {
  std::string name;
  std::string codeFile; ///< Relative to the bundle.
  /// What it computes (the GEMM, its sizes, its operands' quantization) and,
  /// for gfx950, each function's resources: as the manifest has them.
  io::JsonValue computes, resources;
  std::map<std::string, int64_t> scratch; ///< "scratch:lhs.codes" -> bytes.
  std::vector<Launch> launches;
};

struct Bundle {
  std::string directory;
  std::string target, model, policy;
  std::vector<Kernel> kernels;

  /// Reads and checks DIR/manifest.json.
  static io::Expected<Bundle> open(const std::string &directory);
  /// The kernel's code object, as bytes.
  io::Expected<std::string> code(const Kernel &kernel) const;
};

} // namespace tetra::bundle

#endif // TETRA_RUNTIME_BUNDLE_BUNDLE_H
