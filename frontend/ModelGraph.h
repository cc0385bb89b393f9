//===- ModelGraph.h - An elaborated model: parameters and op lists -*- C++
//-*-===//
//
// What the model elaborator (sema) produces and MLIRGen consumes: constants
// evaluated, parameter groups expanded into dotted names, helper functions
// inlined, `for` loops unrolled, every shape inferred and checked. Each
// function is a straight-line list of ops over numbered values, each op with
// the source location it came from.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_MODELGRAPH_H
#define TETRA_FRONTEND_MODELGRAPH_H

#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tetra::frontend {

/// A dimension: a known size, or a symbol (`batch`, `seq`) the run fixes.
struct Dim {
  int64_t size = 0;   ///< Valid when symbol is empty.
  std::string symbol; ///< Non-empty for a symbolic dimension.

  bool isSymbolic() const { return !symbol.empty(); }
  bool operator==(const Dim &other) const {
    return size == other.size && symbol == other.symbol;
  }
  bool operator!=(const Dim &other) const { return !(*this == other); }
};
using Shape = std::vector<Dim>;

/// "[batch, seq, 4096]".
std::string formatShape(const Shape &shape);

enum class ElementType { F32, BF16, I32 };

struct TensorType {
  ElementType element = ElementType::F32;
  Shape shape;
};

/// A compile-time constant of the config block.
struct Constant {
  std::string name;
  std::variant<int64_t, double> value;
  llvm::SMLoc loc;
};

struct Initializer {
  enum class Kind { Normal, Zeros, Ones };
  Kind kind = Kind::Zeros;
  double std = 0; ///< Normal only (mean 0).
};

struct Parameter {
  std::string name; ///< "layers.3.attn.wq"
  std::vector<int64_t> shape;
  Initializer init;
  llvm::SMLoc loc; ///< Its declaration.

  int64_t numElements() const;
};

enum class OpKind {
  Embedding,    ///< (table, tokens)
  Linear,       ///< (x, w): y = x·wᵀ; `linearName` is w's name
  RMSNorm,      ///< (x, w) {eps}
  Rope,         ///< (x) {headDim, theta}
  Attention,    ///< (q, k, v) {heads, kvHeads}; causal
  Silu,         ///< (x)
  Add,          ///< (x, y)
  Sub,          ///< (x, y)
  Mul,          ///< (x, y)
  Scale,        ///< (x) {factor}: x * constant
  CrossEntropy, ///< (logits, targets) -> f32[]: mean over positions
};

/// Where a value comes from: a function argument, a parameter, an op.
struct Value {
  enum class Source { Argument, Parameter, Op };
  Source source = Source::Op;
  int index = 0; ///< Argument number, index into parameters, or op index.
  TensorType type;
};

struct Op {
  OpKind kind = OpKind::Add;
  std::vector<int> operands; ///< Value ids.
  int result = -1;           ///< Value id.
  llvm::SMLoc loc;           ///< The call or operator in the source.
  std::string linearName;    ///< Linear only.
  double eps = 0, theta = 0, factor = 0;
  int64_t headDim = 0, heads = 0, kvHeads = 0;
};

struct Function {
  std::string name; ///< "forward", "loss"
  std::vector<std::string> argumentNames;
  std::vector<int> arguments; ///< Value ids, in order.
  std::vector<Value> values;
  std::vector<Op> ops;
  int result = -1; ///< Value id of the returned value.
  llvm::SMLoc loc;
};

struct ModelGraph {
  std::string name;
  std::vector<Constant> constants;
  std::vector<Parameter> parameters;
  std::vector<Function> functions; ///< "forward" and "loss", at least.

  int64_t parameterCount() const;
  const Function *findFunction(const std::string &name) const;
  /// Every linear's name, in the order the forward function first uses it;
  /// each once (a weight used twice is one linear: tied weights).
  std::vector<std::string> linearNames() const;
};

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_MODELGRAPH_H
