//===- Target.cpp - The targets Tetra compiles for ------------------------===//

#include "driver/Target.h"

using namespace tetra;

const std::vector<TargetInfo> &tetra::allTargets() {
  static const std::vector<TargetInfo> targets = {
      {Target::Cpu, "cpu", "the CPU (x86-64)", false},
      {Target::Sm90a, "sm_90a", "NVIDIA Hopper (H100/H200)", true},
      {Target::Gfx950, "gfx950", "AMD MI355X", true},
  };
  return targets;
}

const TargetInfo &tetra::targetInfo(Target target) {
  for (const TargetInfo &info : allTargets())
    if (info.target == target)
      return info;
  return allTargets().front();
}

std::optional<Target> tetra::parseTarget(std::string_view name) {
  for (const TargetInfo &info : allTargets())
    if (name == info.name)
      return info.target;
  return std::nullopt;
}

std::vector<std::string> tetra::targetNames() {
  std::vector<std::string> names;
  for (const TargetInfo &info : allTargets())
    names.push_back(info.name);
  return names;
}

std::string tetra::targetNameList() {
  std::string list;
  const std::vector<TargetInfo> &targets = allTargets();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (i > 0)
      list += i + 1 == targets.size() ? " or " : ", ";
    list += targets[i].name;
  }
  return list;
}
