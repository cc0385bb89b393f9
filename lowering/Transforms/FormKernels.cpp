//===- FormKernels.cpp - Group ops into tetra.kernel regions --------------===//
//
// `--tetra-form-kernels`: each scaled matmul with the rotations, quantizers
// and bf16 round trips that prepare its operands becomes one tetra.kernel,
// and so does each chain of elementwise ops. Kernels are the unit every
// target generates code for.
//
//===----------------------------------------------------------------------===//

#include "lowering/Transforms/Passes.h"

#include "dialect/LLVMFormatters.h"
#include "dialect/TetraOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace tetra {
#define GEN_PASS_DEF_FORMKERNELS
#include "lowering/Transforms/Passes.h.inc"
} // namespace tetra

using namespace mlir;
using namespace tetra;

namespace {

/// Ops that prepare a scaled matmul's operand and move into its kernel.
bool preparesOperand(Operation *op) {
  if (isa<QuantizeOp, RotateOp>(op))
    return true;
  if (isa<arith::TruncFOp, arith::ExtFOp>(op))
    return isa<RankedTensorType>(op->getResult(0).getType());
  return false;
}

bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, SiluOp, ScaleOp, SiluGradOp>(op);
}

/// Copies each elementwise op of one operand (silu, scale) whose uses are
/// all elementwise ops of its block, other than a single one, into each of
/// those users: every copy then has one use and joins its user's chain, so
/// the op's result is never stored and its users read its operand instead,
/// as many bytes. The forward's silu(gate) then fuses into its product with
/// up, and the backward's d(up) = d(product) * silu(gate) computes it
/// again, where it was stored, read back and (rematerialized) recomputed.
/// Later ops first: a copied op's operand, if it is such an op itself, is
/// then copied too.
void recomputeUnaryOpsInUsers(ModuleOp module) {
  SmallVector<Operation *> unary;
  module.walk([&](Operation *op) {
    if (isa<SiluOp, ScaleOp>(op) && !op->getParentOfType<KernelOp>())
      unary.push_back(op);
  });
  for (Operation *op : llvm::reverse(unary)) {
    Value result = op->getResult(0);
    llvm::SetVector<Operation *> users(result.getUsers().begin(),
                                       result.getUsers().end());
    if (users.size() < 2 || !llvm::all_of(users, [&](Operation *user) {
          return isElementwise(user) && user->getBlock() == op->getBlock();
        }))
      continue;
    for (Operation *user : users) {
      OpBuilder builder(user);
      Value copy = builder.clone(*op)->getResult(0);
      user->replaceUsesOfWith(result, copy);
    }
    op->erase();
  }
}

/// Whether `kernel` is an elementwise kernel (no scaled matmul inside).
bool isElementwiseKernel(KernelOp kernel) {
  return llvm::all_of(kernel.getBodyBlock().without_terminator(),
                      [](Operation &op) { return isElementwise(&op); });
}

/// The element count every tensor of an elementwise kernel has, or none
/// where they differ (or one is not a static tensor).
std::optional<int64_t> commonElementCount(KernelOp kernel) {
  std::optional<int64_t> count;
  for (Value value : llvm::concat<Value>(kernel.getInputs(), kernel.getResults())) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || !type.hasStaticShape() ||
        (count && *count != type.getNumElements()))
      return std::nullopt;
    count = type.getNumElements();
  }
  return count;
}

/// Replaces `first` and `second` (a later kernel whose inputs are all
/// defined before `first`) by one kernel at `first`: the inputs of both,
/// the results of `first` then of `second`.
void mergeInto(KernelOp first, KernelOp second) {
  llvm::SetVector<Value> inputs(first.getInputs().begin(),
                                first.getInputs().end());
  inputs.insert(second.getInputs().begin(), second.getInputs().end());
  SmallVector<Type> types(first.getResultTypes());
  llvm::append_range(types, second.getResultTypes());
  OpBuilder builder(first);
  auto kernel = KernelOp::create(builder, first.getLoc(), types,
                                 first.getKernelNameAttr(),
                                 inputs.getArrayRef());
  Block *body = new Block();
  kernel.getBody().push_back(body);
  DenseMap<Value, Value> argumentOf;
  for (Value input : inputs)
    argumentOf[input] = body->addArgument(input.getType(), input.getLoc());
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  SmallVector<Value> yielded;
  for (KernelOp part : {first, second}) {
    IRMapping mapping;
    for (auto [argument, input] :
         llvm::zip(part.getBodyBlock().getArguments(), part.getInputs()))
      mapping.map(argument, argumentOf[input]);
    for (Operation &op : part.getBodyBlock().without_terminator())
      inner.clone(op, mapping);
    for (Value value : part.getBodyBlock().getTerminator()->getOperands())
      yielded.push_back(mapping.lookup(value));
  }
  YieldOp::create(inner, first.getLoc(), yielded);
  const unsigned firstResults = first.getNumResults();
  for (auto [n, result] : llvm::enumerate(first.getResults()))
    result.replaceAllUsesWith(kernel.getResult(n));
  for (auto [n, result] : llvm::enumerate(second.getResults()))
    result.replaceAllUsesWith(kernel.getResult(firstResults + n));
  first->erase();
  second->erase();
}

/// Merges elementwise kernels that read at least two of the same tensors:
/// each kernel into the nearest earlier one of its block that does, where
/// all of its inputs are defined before that one (so it cannot depend on
/// it) and all tensors of both have as many elements — until no two
/// merge. The shared tensors are then read once. A merged kernel takes the
/// earlier one's place and name; its results are the earlier one's, then
/// the later one's, each computed by its own ops: the same values. The
/// SwiGLU backward's d(up) = d(p) * silu(gate) and d(gate) = silu_grad(gate,
/// d(p) * up) become one kernel reading d(p), gate and up once. (Kernels
/// sharing one tensor stay apart: a residual connection's adds, which a
/// GEMM's epilogue may take over, share one.)
void mergeSiblingKernels(ModuleOp module) {
  // Whether `value` is available at `op`: a value from outside op's
  // block (an argument, or an enclosing region's) always is.
  auto definedBefore = [](Value value, Operation *op) {
    Operation *definer = value.getDefiningOp();
    return !definer || definer->getBlock() != op->getBlock() ||
           definer->isBeforeInBlock(op);
  };
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<KernelOp> kernels;
    module.walk([&](KernelOp kernel) {
      if (isElementwiseKernel(kernel) && commonElementCount(kernel))
        kernels.push_back(kernel);
    });
    for (size_t later = 0; later < kernels.size() && !changed; ++later) {
      KernelOp second = kernels[later];
      llvm::SmallPtrSet<Value, 8> reads(second.getInputs().begin(),
                                        second.getInputs().end());
      KernelOp first;
      for (size_t earlier = later; earlier-- > 0 && !first;) {
        KernelOp candidate = kernels[earlier];
        if (candidate->getBlock() != second->getBlock() ||
            *commonElementCount(candidate) != *commonElementCount(second))
          continue;
        const int64_t shared =
            llvm::count_if(candidate.getInputs(),
                           [&](Value input) { return reads.contains(input); });
        if (shared >= 2 && llvm::all_of(second.getInputs(), [&](Value input) {
              return definedBefore(input, candidate);
            }))
          first = candidate;
      }
      if (!first)
        continue;
      mergeInto(first, second);
      changed = true;
    }
  }
}

/// `name` with every character other than a letter, digit or `_` replaced
/// by `_`.
std::string sanitize(StringRef name) {
  std::string result;
  for (char c : name)
    result.push_back(llvm::isAlnum(c) || c == '_' ? c : '_');
  return result;
}

class FormKernels : public tetra::impl::FormKernelsBase<FormKernels> {
public:
  void runOnOperation() override;

private:
  /// A name for a new kernel, unique in the module.
  std::string uniqueName(StringRef base);
  /// Moves `ops` (of one block, `result` defined by the last) into a kernel
  /// placed at the last op. Ops whose results are still used outside stay.
  void outline(ArrayRef<Operation *> ops, Value result, StringRef name,
               Location loc);
  void formGemmKernel(ScaledMatmulOp matmul);

  llvm::StringSet<> names;
  unsigned elementwiseCount = 0;
};

} // namespace

std::string FormKernels::uniqueName(StringRef base) {
  std::string name = base.str();
  for (unsigned suffix = 2; names.contains(name); ++suffix)
    name = (base + "_" + Twine(suffix)).str();
  names.insert(name);
  return name;
}

void FormKernels::outline(ArrayRef<Operation *> ops, Value result,
                          StringRef name, Location loc) {
  llvm::SmallPtrSet<Operation *, 8> inside(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs;
  for (Operation *op : ops)
    for (Value operand : op->getOperands())
      if (!inside.contains(operand.getDefiningOp()))
        inputs.insert(operand);

  OpBuilder builder(ops.back());
  auto kernel =
      KernelOp::create(builder, loc, TypeRange{result.getType()},
                       builder.getStringAttr(name), inputs.getArrayRef());
  Block *body = new Block();
  kernel.getBody().push_back(body);
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  for (Operation *op : ops)
    inner.clone(*op, mapping);
  YieldOp::create(inner, loc, ValueRange{mapping.lookup(result)});

  result.replaceAllUsesWith(kernel.getResult(0));
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty())
      op->erase();
}

void FormKernels::formGemmKernel(ScaledMatmulOp matmul) {
  Block *block = matmul->getBlock();
  llvm::SetVector<Operation *> ops;
  SmallVector<Value> worklist(matmul->getOperands());
  while (!worklist.empty()) {
    Operation *producer = worklist.pop_back_val().getDefiningOp();
    if (!producer || producer->getBlock() != block ||
        !preparesOperand(producer) || !ops.insert(producer))
      continue;
    llvm::append_range(worklist, producer->getOperands());
  }
  ops.insert(matmul);
  Value result = matmul.getResult();
  if (result.hasOneUse()) {
    Operation *user = *result.getUsers().begin();
    if (isa<arith::TruncFOp>(user) && user->getBlock() == block) {
      ops.insert(user);
      result = user->getResult(0);
    }
  }
  SmallVector<Operation *> ordered(ops.begin(), ops.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });

  std::string base = "gemm";
  if (auto nameLoc = [&]() -> NameLoc {
        NameLoc found;
        matmul.getLoc()->walk([&](Location nested) {
          if ((found = dyn_cast<NameLoc>(nested)))
            return WalkResult::interrupt();
          return WalkResult::advance();
        });
        return found;
      }())
    base = sanitize(nameLoc.getName().getValue());
  if (std::optional<Role> role = matmul.getRole()) {
    std::string suffix = "_" + stringifyRole(*role).str();
    if (!StringRef(base).ends_with(suffix))
      base += suffix;
  }
  outline(ordered, result, uniqueName(base), matmul.getLoc());
}

void FormKernels::runOnOperation() {
  ModuleOp module = getOperation();
  names.clear();
  elementwiseCount = 0;
  module.walk([&](KernelOp kernel) { names.insert(kernel.getKernelName()); });

  SmallVector<ScaledMatmulOp> matmuls;
  module.walk([&](ScaledMatmulOp matmul) {
    if (!matmul->getParentOfType<KernelOp>())
      matmuls.push_back(matmul);
  });
  for (ScaledMatmulOp matmul : matmuls)
    formGemmKernel(matmul);

  recomputeUnaryOpsInUsers(module);
  // Chains, in program order: a chain's first op comes before the rest, so
  // the first ungrouped elementwise op met is the head of its chain.
  SmallVector<SmallVector<Operation *>> chains;
  llvm::SmallPtrSet<Operation *, 16> grouped;
  module.walk([&](Operation *op) {
    if (!isElementwise(op) || grouped.contains(op) ||
        op->getParentOfType<KernelOp>())
      return;
    SmallVector<Operation *> chain{op};
    grouped.insert(op);
    for (Operation *last = op; last->getResult(0).hasOneUse();) {
      Operation *user = *last->getResult(0).getUsers().begin();
      if (!isElementwise(user) || user->getBlock() != op->getBlock() ||
          grouped.contains(user))
        break;
      chain.push_back(user);
      grouped.insert(user);
      last = user;
    }
    chains.push_back(std::move(chain));
  });
  for (ArrayRef<Operation *> chain : chains)
    outline(chain, chain.back()->getResult(0),
            uniqueName(fmt::format("elementwise_{}", elementwiseCount++)),
            chain.back()->getLoc());
  mergeSiblingKernels(module);
}
