//===- Target.h - The targets Tetra compiles for ----------------*- C++ -*-===//
//
// The one registry of targets: the run checker (a run file's `target`),
// `tetra train --target`, `tetra emit --target` and `tetra compile --target`
// all read it. A leaf: no MLIR, no LLVM, so the front end can use it.
//
//   cpu     x86-64 reference loops (the oracle for the other two)
//   sm_90a  NVIDIA Hopper (H100/H200): MXFP4 emulated exactly on the FP8
//           tensor cores
//   gfx950  AMD MI355X: native MXFP4 scaled MFMA
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_DRIVER_TARGET_H
#define TETRA_DRIVER_TARGET_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tetra {

enum class Target { Cpu, Sm90a, Gfx950 };

struct TargetInfo {
  Target target;
  const char *name;        ///< As a run file and --target spell it.
  const char *description; ///< "NVIDIA Hopper (H100/H200)".
  bool gpu;
};

/// Every target, in the order above.
const std::vector<TargetInfo> &allTargets();
const TargetInfo &targetInfo(Target target);
inline const char *targetName(Target target) {
  return targetInfo(target).name;
}
/// The target named `name`, if there is one.
std::optional<Target> parseTarget(std::string_view name);
/// Every target's name, in order.
std::vector<std::string> targetNames();
/// "cpu, sm_90a or gfx950", for messages.
std::string targetNameList();

} // namespace tetra

#endif // TETRA_DRIVER_TARGET_H
