//===- PolicyShapes.cpp - A policy's blocks against a model's sizes -------===//
//
// Every block size and rotation a resolved policy gives a GEMM must divide the
// size that GEMM reduces over: the input features (Fprop), the output
// features (Dgrad), the tokens of a micro-batch (Wgrad). `tetra check` and
// `tetra emit` both report violations here, at the policy setting that
// chose the block, before any IR exists.
//
//===----------------------------------------------------------------------===//

#include "frontend/Policy.h"

#include "dialect/LLVMFormatters.h"
#include "frontend/ModelGraph.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

using namespace tetra;
using namespace tetra::frontend;

/// "hadamard<32>", "random_hadamard<64>".
static std::string describeRotation(const numerics::Rotation &rotation) {
  std::string block = fmt::format("<{}>", rotation.blockSize);
  return rotation.kind == numerics::RotationKind::RandomHadamard
             ? "random_hadamard" + block
             : "hadamard" + block;
}

bool tetra::frontend::checkReductionSizes(DiagnosticEngine &diags,
                                          const ModelGraph &model,
                                          const ResolvedPolicy &policy,
                                          int64_t tokens,
                                          const std::string &tokensText,
                                          const std::string &context) {
  // One error per setting, size and reduction, naming the first linear it
  // breaks and how many more: a policy applies one setting to many linears.
  struct Failure {
    std::string message;
    llvm::SMLoc loc;
    std::set<std::string> linears;
  };
  using Key = std::tuple<int, const char *, int64_t, int64_t, bool>;
  std::map<Key, Failure> failures;
  std::vector<Key> order;
  auto check = [&](const std::string &linear, GemmRole role, int64_t extent,
                   const std::string &what, int64_t size, bool isRotation,
                   const FieldOrigin &origin, const std::string &setting) {
    if (size <= 0 || extent % size == 0)
      return;
    Key key{static_cast<int>(role), origin.loc.getPointer(), size, extent,
            isRotation};
    auto [it, inserted] = failures.try_emplace(key);
    it->second.linears.insert(linear);
    if (!inserted)
      return;
    order.push_back(key);
    it->second.loc = origin.loc;
    it->second.message = fmt::format(
        "{}{} of '{}' reduces over {}, which is not a multiple of its {}{} "
        "({})",
        context, roleName(role).str(), linear, what,
        (isRotation ? "rotation block " : "block size "), size, setting);
  };

  for (const LinearPolicy &linear : policy.linears) {
    const Parameter *weight = nullptr;
    for (const Parameter &parameter : model.parameters)
      if (parameter.name == linear.linear)
        weight = &parameter;
    if (!weight || weight->shape.size() != 2)
      continue;
    int64_t out = weight->shape[0], in = weight->shape[1];
    for (GemmRole role : {GemmRole::Fprop, GemmRole::Dgrad, GemmRole::Wgrad}) {
      int64_t extent = role == GemmRole::Fprop   ? in
                       : role == GemmRole::Dgrad ? out
                                                 : tokens;
      if (extent == 0)
        continue; // Wgrad without a run: the tokens are not known yet.
      std::string what =
          role == GemmRole::Fprop   ? fmt::format("{} input features", in)
          : role == GemmRole::Dgrad ? fmt::format("{} output features", out)
                                    : tokensText;
      const RolePolicy &rolePolicy = linear.role(role);
      for (const OperandPolicy *operand : {&rolePolicy.lhs, &rolePolicy.rhs})
        check(linear.linear, role, extent, what, operand->format.blockSize,
              false, operand->formatOrigin, operand->format.describe());
      if (rolePolicy.rotation.kind != numerics::RotationKind::None)
        check(linear.linear, role, extent, what, rolePolicy.rotation.blockSize,
              true, rolePolicy.rotationOrigin,
              describeRotation(rolePolicy.rotation));
    }
  }
  for (const Key &key : order) {
    const Failure &failure = failures[key];
    std::string message = failure.message;
    if (failure.linears.size() > 1)
      message +=
          fmt::format("; so do {} more linears", failure.linears.size() - 1);
    if (failure.loc.isValid())
      diags.error(failure.loc, message);
    else
      diags.error(message);
  }
  return order.empty();
}
