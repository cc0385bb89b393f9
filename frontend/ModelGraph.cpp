//===- ModelGraph.cpp - An elaborated model: parameters and op lists ------===//

#include "frontend/ModelGraph.h"

#include <set>

using namespace tetra::frontend;

std::string tetra::frontend::formatShape(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text +=
        shape[i].isSymbolic() ? shape[i].symbol : std::to_string(shape[i].size);
  }
  return text + "]";
}

int64_t Parameter::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

int64_t ModelGraph::parameterCount() const {
  int64_t count = 0;
  for (const Parameter &parameter : parameters)
    count += parameter.numElements();
  return count;
}

const Function *ModelGraph::findFunction(const std::string &name) const {
  for (const Function &function : functions)
    if (function.name == name)
      return &function;
  return nullptr;
}

std::vector<std::string> ModelGraph::linearNames() const {
  // Forward first: its order is the model's order. A linear that only
  // another function uses (loss, say) comes after, in that function's order.
  std::vector<const Function *> order;
  if (const Function *forward = findFunction("forward"))
    order.push_back(forward);
  for (const Function &function : functions)
    if (function.name != "forward")
      order.push_back(&function);

  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const Function *function : order)
    for (const Op &op : function->ops)
      if (op.kind == OpKind::Linear && seen.insert(op.linearName).second)
        names.push_back(op.linearName);
  return names;
}
