//===- CompileStep.cpp - A model and a policy into a runnable step --------===//

#include "driver/CompileStep.h"

#include "dialect/LLVMFormatters.h"
#include "dialect/TetraOps.h"
#include "driver/AmdgpuCompiler.h"
#include "driver/NvptxCompiler.h"
#include "driver/Pipeline.h"
#include "frontend/MLIRGen.h"
#include "lowering/Conversion/GemmKernelPlan.h"
#include "lowering/Conversion/GpuStepKernels.h"
#include "runtime/io/Json.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace tetra;

namespace {

/// The step's module through kernel formation, with the run's optimizer.
OwningOpRef<ModuleOp> formKernels(MLIRContext &context,
                                  const llvm::SourceMgr &sourceMgr,
                                  const frontend::ModelGraph &model,
                                  const frontend::ResolvedPolicy *policy,
                                  const CompileOptions &options) {
  frontend::EmitOptions emit;
  emit.dimensions = options.dimensions;
  OwningOpRef<ModuleOp> module =
      frontend::emitModule(context, sourceMgr, model, policy, emit);
  if (!module)
    return nullptr;
  PassManager pm(&context);
  PipelineOptions pipeline;
  pipeline.beta1 = options.beta1;
  pipeline.beta2 = options.beta2;
  pipeline.eps = options.eps;
  pipeline.weightDecay = options.weightDecay;
  pipeline.clip = options.clip;
  buildPipeline(pm, pipeline, PipelineStage::Kernels);
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

} // namespace

FailureOr<CompiledStep> tetra::compileTrainingStep(
    MLIRContext &context, const llvm::SourceMgr &sourceMgr,
    const frontend::ModelGraph &model, const frontend::ResolvedPolicy *policy,
    const CompileOptions &options) {
  OwningOpRef<ModuleOp> module =
      formKernels(context, sourceMgr, model, policy, options);
  if (!module)
    return failure();

  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  FailureOr<schedule::Schedule> plan = buildSchedule(step, options.schedule);
  if (failed(plan))
    return failure();
  llvm::Expected<std::unique_ptr<cpu::CompiledKernelTable>> kernels =
      cpu::CompiledKernelTable::compile(*module, options.jit);
  if (!kernels)
    return emitError(module->getLoc()) << "compiling the CPU kernels: "
                                       << llvm::toString(kernels.takeError());
  return CompiledStep{std::move(*plan), std::move(*kernels)};
}

namespace {

/// Replaces a compiled kernel's launch by its GPU launches: their
/// arguments ("input:N", "result:N", "scratch:NAME", "scalar:seed") bound to
/// the launch's buffers, new scratch temporaries and the run's scalars.
LogicalResult expandCompiledLaunch(const schedule::Launch &launch,
                                   const GpuKernelCode &kernel,
                                   const std::vector<bool> &tensorInputs,
                                   schedule::Schedule &plan, Location loc,
                                   std::vector<schedule::Launch> &launches) {
  // The kernel's tensor inputs come first among the launch's buffers, then
  // its results; scalar inputs (the seed, the step) are bound scalars.
  // "input:N" counts every input: its buffer is the tensors' before it.
  std::vector<int> bufferOfInput;
  int tensors = 0;
  for (bool tensor : tensorInputs)
    bufferOfInput.push_back(tensor ? tensors++ : -1);
  const size_t inputs = static_cast<size_t>(tensors);
  const size_t results = launch.buffers.size() - inputs;
  std::map<std::string, int> scratch;
  for (const GpuLaunch &gpu : kernel.launches) {
    if (gpu.variant) // launched only in its function's place
      continue;
    schedule::Launch next;
    next.kernel = gpu.function;
    next.origin = launch.origin;
    for (int d = 0; d < 3; ++d) {
      next.config.grid[d] = static_cast<uint32_t>(gpu.grid[d]);
      next.config.block[d] = static_cast<uint32_t>(gpu.block[d]);
    }
    for (const std::string &argument : gpu.arguments) {
      StringRef text(argument);
      auto [kind, what] = text.split(':');
      int64_t number = -1;
      if (kind == "input" && !what.getAsInteger(10, number) &&
          number < static_cast<int64_t>(bufferOfInput.size()) &&
          bufferOfInput[number] >= 0) {
        next.buffers.push_back(launch.buffers[bufferOfInput[number]]);
      } else if (kind == "result" && !what.getAsInteger(10, number) &&
                 number < static_cast<int64_t>(results)) {
        next.buffers.push_back(launch.buffers[inputs + number]);
      } else if (kind == "scratch") {
        auto found = scratch.find(what.str());
        if (found == scratch.end()) {
          schedule::BufferDesc desc;
          desc.name = kernel.name + "." + what.str();
          desc.role = schedule::BufferRole::Temporary;
          desc.type = backend::ElementType::I32;
          // The kernel's description lists each scratch buffer's bytes.
          int64_t bytes = 0;
          io::Expected<io::JsonValue> description =
              io::parseJson(kernel.description);
          const io::JsonValue *sizes =
              description ? description->find("scratch") : nullptr;
          const io::JsonValue *size = sizes ? sizes->find(what) : nullptr;
          if (size && size->isNumber())
            bytes = size->asInt64();
          if (bytes <= 0)
            return emitError(loc) << "kernel '" << kernel.name
                                  << "': no size for its scratch buffer '"
                                  << what << "'";
          desc.shape = {(bytes + 3) / 4};
          plan.buffers.push_back(desc);
          found = scratch.emplace(what.str(),
                                  static_cast<int>(plan.buffers.size()) - 1)
                      .first;
        }
        next.buffers.push_back(found->second);
      } else if (kind == "scalar" && (what == "seed" || what == "step")) {
        next.boundScalars.push_back(
            {static_cast<int>(next.scalars.size()), what.str()});
        next.scalars.push_back(backend::Scalar::integer(0));
      } else {
        return emitError(loc) << "kernel '" << kernel.name << "': launch '"
                              << gpu.function << "' has an argument '"
                              << argument << "' the schedule cannot bind";
      }
    }
    launches.push_back(std::move(next));
  }
  // What the GEMM computes goes with its last launch (the GEMM itself),
  // its operands named by their schedule buffers.
  if (launch.gemm && !kernel.launches.empty()) {
    schedule::GemmLaunch gemm = *launch.gemm;
    for (schedule::QuantizedOperand &operand : gemm.operands) {
      operand.buffer = launch.buffers[operand.argument];
      operand.argument = 0;
    }
    launches.back().gemm = std::move(gemm);
  }
  return success();
}

/// Keeps one gpu.module of each set whose code is identical but for its
/// name — the same GEMM of every layer, the same elementwise chain — and
/// returns the renaming of the others' functions to the kept ones' (a
/// function is named after its module: "layers_3_attn_wq_fprop__lhs" is
/// the module's name and "__lhs"). Compiling, loading and storing each code
/// once: the 12 layers of llama_125m, the 32 of Llama 3.1-8B.
std::map<std::string, std::string> dropDuplicateModules(ModuleOp module) {
  std::map<std::string, std::string> renamed;
  std::map<std::string, std::string> kept; // canonical text -> module name
  for (gpu::GPUModuleOp gpuModule :
       llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>())) {
    const std::string name = gpuModule.getName().str();
    // The module's body with every function named by its suffix alone.
    OwningOpRef<Operation *> copy = gpuModule->clone();
    auto canonical = cast<gpu::GPUModuleOp>(*copy);
    bool named = true;
    for (gpu::GPUFuncOp func : canonical.getOps<gpu::GPUFuncOp>()) {
      StringRef function = func.getName();
      named &= function.starts_with(name);
      func.setName(function.drop_front(std::min(function.size(), name.size())));
    }
    canonical.setName("m");
    canonical->removeAttr("tetra.gemm");
    // Unused constants (a deterministic quantizer's stochastic-rounding
    // tensor id) are no code.
    canonical.walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (op != canonical.getOperation() && isOpTriviallyDead(op))
        op->erase();
    });
    std::string text;
    llvm::raw_string_ostream os(text);
    canonical->print(os, OpPrintingFlags().printGenericOpForm());
    auto [found, inserted] = kept.emplace(text, name);
    if (inserted || !named)
      continue;
    for (gpu::GPUFuncOp func : gpuModule.getOps<gpu::GPUFuncOp>())
      renamed[func.getName().str()] =
          found->second + func.getName().drop_front(name.size()).str();
    gpuModule.erase();
  }
  return renamed;
}

} // namespace

CompileOptions tetra::compileOptionsFor(const frontend::RunConfig &run) {
  CompileOptions options;
  options.dimensions = {{"batch", run.microBatch}, {"seq", run.seqLen}};
  options.beta1 = run.beta1;
  options.beta2 = run.beta2;
  options.eps = run.eps;
  options.weightDecay = run.weightDecay;
  options.clip = run.clip;
  options.schedule.accumulateGradients = run.accumulation > 1;
  options.schedule.recompute = run.recompute;
  return options;
}

/// For each GEMM operand function (a kernel's "__lhs...", "__rhs..."), the
/// name of the first one with the same code — its body, grid and block,
/// whatever its name and the names of its arguments: the BF16 rounding of
/// an output gradient is one function for its Dgrad (K-major) and its
/// Wgrad (MN-major), whose kernels otherwise differ.
std::map<std::string, std::string> operandCodeNames(ModuleOp module) {
  std::map<std::string, std::string> first; // canonical text -> name
  std::map<std::string, std::string> codeName;
  module.walk([&](gpu::GPUFuncOp func) {
    StringRef name = func.getName();
    size_t mark = name.rfind("__");
    if (mark == StringRef::npos ||
        !(name.substr(mark + 2).starts_with("lhs") ||
          name.substr(mark + 2).starts_with("rhs")))
      return;
    OwningOpRef<Operation *> copy = func->clone();
    auto canonical = cast<gpu::GPUFuncOp>(*copy);
    canonical.setName("f");
    if (auto launch = canonical->getAttrOfType<DictionaryAttr>("tetra.launch")) {
      NamedAttrList fields(launch);
      fields.erase("arguments");
      canonical->setAttr("tetra.launch", fields.getDictionary(func.getContext()));
    }
    std::string text;
    llvm::raw_string_ostream os(text);
    canonical->print(os, OpPrintingFlags().printGenericOpForm());
    codeName[name.str()] = first.emplace(text, name.str()).first->second;
  });
  return codeName;
}

/// Removes the launches not `kept` and returns, for each position 0..n of
/// the old launch list, the number of kept launches before it.
std::vector<int> keepLaunches(schedule::Schedule &plan,
                              const std::vector<bool> &kept) {
  std::vector<schedule::Launch> &launches = plan.launches;
  const int count = static_cast<int>(launches.size());
  std::vector<int> keptBefore(count + 1, 0);
  std::vector<schedule::Launch> remaining;
  for (int l = 0; l < count; ++l) {
    keptBefore[l + 1] = keptBefore[l] + (kept[l] ? 1 : 0);
    if (kept[l])
      remaining.push_back(std::move(launches[l]));
  }
  launches = std::move(remaining);
  return keptBefore;
}

/// Drops each GEMM operand launch (a kernel's "__lhs...", "__rhs..."
/// launches: they read the operand and write only buffers of their own)
/// that repeats an earlier one — the same code (`codeName`), grid, scalars
/// and read buffers, none of them written in between — and points the
/// later launches at the earlier one's results: the activation that feeds
/// wq, wk and wv (or gate and up) is rotated and quantized once per role,
/// not once per linear, and an output gradient rounded to BF16 once for
/// its Dgrad and Wgrad. Code that depends on the linear (a
/// stochastic-rounding stream's id) differs, so its launches are never
/// shared. Sharing a forward launch's results with the backward keeps
/// them alive until then, so a launch after the forward shares only with
/// its own phase, unless what it reads is a temporary that nothing but
/// operand launches reads (kept for a Wgrad, as under `recompute = none`:
/// its codes are kept instead, and the tensor dies in the forward — or is
/// never written, writeResultsAsBF16) or, with `keepForwardCodes`, any
/// temporary or parameter (attention's output kept for its backward and
/// its codes for wo's Wgrad; the weights' codes kept from the Fprop for
/// the Dgrad: memory for speed).
/// Returns, for each position 0..n of the old launch list, the number of
/// kept launches before it.
std::vector<int>
shareRepeatedOperandLaunches(schedule::Schedule &plan, int forwardEnd,
                             const std::map<std::string, std::string> &codeName,
                             bool keepForwardCodes) {
  std::vector<schedule::Launch> &launches = plan.launches;
  const int count = static_cast<int>(launches.size());
  auto isOperandLaunch = [](const schedule::Launch &launch) {
    size_t mark = launch.kernel.rfind("__");
    if (mark == std::string::npos)
      return false;
    StringRef part = StringRef(launch.kernel).substr(mark + 2);
    return part.starts_with("lhs") || part.starts_with("rhs");
  };
  // A buffer's producer: the first launch that names it. A read buffer
  // may only be named by GEMM launches (which read it) after its producer.
  std::vector<int> producer(plan.buffers.size(), -1);
  std::vector<int> lastForeignUse(plan.buffers.size(), -1);
  std::vector<bool> operandReadersOnly(plan.buffers.size(), true);
  for (int l = 0; l < count; ++l)
    for (int buffer : launches[l].buffers) {
      if (producer[buffer] < 0)
        producer[buffer] = l;
      else if (launches[l].kernel.find("__") == std::string::npos)
        lastForeignUse[buffer] = l;
      if (producer[buffer] != l && !isOperandLaunch(launches[l]))
        operandReadersOnly[buffer] = false;
    }
  auto producedBy = [&](int buffer, int l) {
    return producer[buffer] == l &&
           plan.buffers[buffer].role == schedule::BufferRole::Temporary;
  };
  std::map<std::string, int> firstWithKey;
  std::vector<int> substitute(plan.buffers.size());
  for (size_t b = 0; b < substitute.size(); ++b)
    substitute[b] = static_cast<int>(b);
  std::vector<bool> kept(count, true);
  for (int l = 0; l < count; ++l) {
    schedule::Launch &launch = launches[l];
    for (int &buffer : launch.buffers)
      buffer = substitute[buffer];
    if (!isOperandLaunch(launch))
      continue;
    // The key: phase, code, grid, scalars, and each read buffer by position.
    bool withForward = l < forwardEnd;
    for (int buffer : launch.buffers) {
      const bool temporary =
          plan.buffers[buffer].role == schedule::BufferRole::Temporary;
      const bool parameter =
          plan.buffers[buffer].role == schedule::BufferRole::Parameter;
      if (!producedBy(buffer, l) &&
          (keepForwardCodes ? temporary || parameter
                            : temporary && operandReadersOnly[buffer]))
        withForward = true;
    }
    auto code = codeName.find(launch.kernel);
    std::string key =
        fmt::format("{} {}", withForward ? "forward" : "after",
                    code != codeName.end() ? code->second : launch.kernel);
    for (int d = 0; d < 3; ++d)
      key +=
          fmt::format(" {}x{}", launch.config.grid[d], launch.config.block[d]);
    key += fmt::format(" {}", launch.config.sharedMemoryBytes);
    for (const backend::Scalar &scalar : launch.scalars)
      key += fmt::format(" s{}/{}", scalar.asInt(), scalar.asFloat());
    for (const auto &[position, name] : launch.boundScalars)
      key += fmt::format(" b{}{}", position, name);
    bool readsAChangedBuffer = false;
    for (size_t a = 0; a < launch.buffers.size(); ++a) {
      int buffer = launch.buffers[a];
      if (producedBy(buffer, l)) {
        key += fmt::format(" w{}", a);
        continue;
      }
      key += fmt::format(" r{}:{}", a, buffer);
      readsAChangedBuffer |=
          plan.buffers[buffer].role != schedule::BufferRole::Temporary &&
          plan.buffers[buffer].role != schedule::BufferRole::Parameter &&
          plan.buffers[buffer].role != schedule::BufferRole::Input;
    }
    auto [first, inserted] = firstWithKey.emplace(key, l);
    if (inserted || readsAChangedBuffer)
      continue;
    const schedule::Launch &earlier = launches[first->second];
    bool untouched = true;
    for (size_t a = 0; a < launch.buffers.size(); ++a) {
      int buffer = launch.buffers[a];
      if (!producedBy(buffer, l) && lastForeignUse[buffer] > first->second &&
          lastForeignUse[buffer] < l)
        untouched = false;
    }
    if (!untouched) {
      first->second = l; // later repeats may share this one
      continue;
    }
    for (size_t a = 0; a < launch.buffers.size(); ++a)
      if (producedBy(launch.buffers[a], l))
        substitute[launch.buffers[a]] = earlier.buffers[a];
    kept[l] = false;
  }
  return keepLaunches(plan, kept);
}

/// The names of `module`'s GPU functions that carry `attribute` (all of
/// them, without one).
std::set<std::string> functionNames(ModuleOp module,
                                    StringRef attribute = {}) {
  std::set<std::string> names;
  module.walk([&](gpu::GPUFuncOp func) {
    if (attribute.empty() || func->hasAttr(attribute))
      names.insert(func.getName().str());
  });
  return names;
}

/// For each buffer of `plan`, the launches that name it, in order.
std::vector<std::vector<int>> launchesNaming(const schedule::Schedule &plan) {
  std::vector<std::vector<int>> users(plan.buffers.size());
  for (int l = 0; l < static_cast<int>(plan.launches.size()); ++l)
    for (int buffer : plan.launches[l].buffers)
      if (users[buffer].empty() || users[buffer].back() != l)
        users[buffer].push_back(l);
  return users;
}

/// Where a tensor's one reader is a rounding prologue (kRoundsToBF16: the
/// codes of a BF16 operand that keeps the tensor's layout) and its writer
/// can write those codes itself — a compiled elementwise kernel with a
/// variant (kBF16ResultSuffix: all of its results, so each must have such a
/// reader), or a library kernel with one
/// (GpuLibraryBuilder::bf16ResultPosition: the cross-entropy gradient,
/// RMSNorm's output, RoPE's backward) — the writer writes the prologue's
/// codes and the prologue goes: the same codes, while the fp32 tensor is
/// neither written nor read. `firstLaunch` maps the reference's launches
/// to the plan's. Returns, as keepLaunches() does, the kept launches
/// before each.
FailureOr<std::vector<int>>
writeResultsAsBF16(schedule::Schedule &plan,
                   const schedule::Schedule &reference,
                   const std::vector<int> &firstLaunch,
                   conversion::GpuLibraryBuilder &library, ModuleOp module,
                   Location loc) {
  const std::set<std::string> roundingPrologues =
      functionNames(module, conversion::kRoundsToBF16);
  const std::set<std::string> functions = functionNames(module);
  // The number of results ("result:N" arguments) of each function.
  std::map<std::string, size_t> resultCounts;
  module.walk([&](gpu::GPUFuncOp func) {
    auto launch = func->getAttrOfType<DictionaryAttr>("tetra.launch");
    auto names = launch ? launch.getAs<ArrayAttr>("arguments") : ArrayAttr();
    if (!names)
      return;
    resultCounts[func.getName().str()] =
        llvm::count_if(names, [](Attribute name) {
          return cast<StringAttr>(name).getValue().starts_with("result:");
        });
  });
  const int count = static_cast<int>(plan.launches.size());
  std::vector<int> owner(count, -1); // the reference launch of each
  for (size_t l = 0; l + 1 < firstLaunch.size(); ++l)
    for (int g = firstLaunch[l]; g < firstLaunch[l + 1]; ++g)
      owner[g] = static_cast<int>(l);
  const std::vector<std::vector<int>> users = launchesNaming(plan);

  std::vector<bool> kept(count, true);
  for (int reader = 0; reader < count; ++reader) {
    const schedule::Launch &prologue = plan.launches[reader];
    if (!kept[reader] || !roundingPrologues.count(prologue.kernel) ||
        prologue.buffers.size() < 2)
      continue;
    const int tensor = prologue.buffers[0], codes = prologue.buffers[1];
    if (plan.buffers[tensor].role != schedule::BufferRole::Temporary ||
        users[tensor].size() != 2 || users[tensor][1] != reader)
      continue;
    const int at = users[tensor][0];
    schedule::Launch &writer = plan.launches[at];
    // A compiled kernel (its results its last buffers) each of whose
    // results has a rounding prologue as its one reader: its variant
    // writes all of their codes.
    const std::string variant =
        writer.kernel + conversion::kBF16ResultSuffix.str();
    auto results = resultCounts.find(writer.kernel);
    if (!writer.gemm && functions.count(variant) &&
        results != resultCounts.end()) {
      const size_t size = writer.buffers.size(), count = results->second;
      std::vector<std::pair<size_t, int>> replaced; // (position, prologue)
      for (size_t p = size - std::min(size, count); p < size; ++p) {
        const int result = writer.buffers[p];
        if (plan.buffers[result].role != schedule::BufferRole::Temporary ||
            llvm::count(writer.buffers, result) != 1 ||
            users[result].size() != 2 || users[result][0] != at)
          break;
        const int r = users[result][1];
        const schedule::Launch &rounding = plan.launches[r];
        if (!kept[r] || !roundingPrologues.count(rounding.kernel) ||
            rounding.buffers.size() < 2 || rounding.buffers[0] != result)
          break;
        replaced.push_back({p, r});
      }
      if (replaced.size() != count)
        continue;
      writer.kernel = variant;
      for (auto [p, r] : replaced) {
        writer.buffers[p] = plan.launches[r].buffers[1];
        kept[r] = false;
      }
      continue;
    }
    // A library launch expanded to this one launch.
    const int l = owner[at];
    if (l < 0 || firstLaunch[l + 1] != at + 1 || firstLaunch[l] != at)
      continue;
    const schedule::Launch &original = reference.launches[l];
    std::optional<size_t> position =
        conversion::GpuLibraryBuilder::bf16ResultPosition(original);
    if (!position || original.buffers[*position] != tensor ||
        llvm::count(original.buffers, tensor) != 1)
      continue;
    schedule::Launch replaced = original;
    replaced.buffers[*position] = codes;
    std::vector<schedule::Launch> expanded;
    if (failed(library.expand(replaced, plan, loc, expanded,
                              conversion::GpuLibraryBuilder::Result::BF16)))
      return failure();
    if (expanded.size() != 1)
      return emitError(loc) << "'" << original.kernel
                            << "' with a BF16 result is not one launch";
    // The launch keeps its scratch buffers (the first expansion's).
    expanded.front().buffers = writer.buffers;
    expanded.front().buffers[*position] = codes;
    writer = std::move(expanded.front());
    kept[reader] = false;
  }
  return keepLaunches(plan, kept);
}

/// Erases the GPU functions no launch of `plan` calls — those whose
/// launches the rewrites above replaced by variants — so that they are
/// not compiled.
void dropUnlaunchedFunctions(const schedule::Schedule &plan, ModuleOp module) {
  std::set<std::string> launched;
  for (const schedule::Launch &launch : plan.launches)
    launched.insert(launch.kernel);
  SmallVector<Operation *> unlaunched;
  module.walk([&](gpu::GPUFuncOp func) {
    if (func.isKernel() && !launched.count(func.getName().str()))
      unlaunched.push_back(func);
  });
  for (Operation *func : unlaunched)
    func->erase();
}

/// Where a tensor written by a compiled elementwise kernel of one result
/// is read by a rounding prologue (kRoundsToBF16) and by other launches
/// too (else writeResultsAsBF16), the kernel's variant (kBF16AlsoSuffix)
/// writes the prologue's codes beside the tensor and the prologue goes:
/// the same codes, the tensor read once less (a residual stream's
/// gradient, rounded for the next Dgrad and added to by the next layer).
/// Returns, as keepLaunches() does, the kept launches before each.
std::vector<int> writeCodesBesideResults(schedule::Schedule &plan,
                                         ModuleOp module) {
  const std::set<std::string> roundingPrologues =
      functionNames(module, conversion::kRoundsToBF16);
  const std::set<std::string> functions = functionNames(module);
  const int count = static_cast<int>(plan.launches.size());
  const std::vector<std::vector<int>> users = launchesNaming(plan);
  std::vector<bool> kept(count, true);
  for (int reader = 0; reader < count; ++reader) {
    const schedule::Launch &prologue = plan.launches[reader];
    if (!roundingPrologues.count(prologue.kernel) ||
        prologue.buffers.size() < 2)
      continue;
    const int tensor = prologue.buffers[0], codes = prologue.buffers[1];
    if (plan.buffers[tensor].role != schedule::BufferRole::Temporary ||
        users[tensor].size() < 3 || users[tensor][0] >= reader)
      continue;
    schedule::Launch &writer = plan.launches[users[tensor][0]];
    const std::string variant =
        writer.kernel + conversion::kBF16AlsoSuffix.str();
    if (writer.gemm || !functions.count(variant) ||
        writer.buffers.back() != tensor ||
        llvm::count(writer.buffers, tensor) != 1)
      continue;
    writer.kernel = variant;
    writer.buffers.push_back(codes);
    kept[reader] = false;
  }
  return keepLaunches(plan, kept);
}

/// Where the cross-entropy's backward writes the logits' gradient as BF16
/// codes (writeResultsAsBF16) and the logits die there (their memory held
/// until then: the step's largest tensor, rows x vocab fp32), the codes
/// take the logits' own memory: the launch becomes the library's
/// launches over row ranges that each declare the pair in place
/// (GpuLibraryBuilder::Result::BF16OverInput), and planMemory places the
/// codes at the logits' offset. The same codes, half the logits' bytes
/// less at the step's peak. Returns, for each position 0..n of the old
/// launch list, its position in the new one.
FailureOr<std::vector<int>>
gradientOverLogits(schedule::Schedule &plan,
                   const schedule::Schedule &reference,
                   const std::vector<int> &firstLaunch,
                   conversion::GpuLibraryBuilder &library, Location loc) {
  const std::vector<std::vector<int>> users = launchesNaming(plan);
  std::map<int, const schedule::Launch *> replaced; // plan launch -> original
  for (size_t l = 0; l + 1 < firstLaunch.size(); ++l) {
    const schedule::Launch &original = reference.launches[l];
    const int at = firstLaunch[l];
    if (original.kernel != "cross_entropy.backward" ||
        firstLaunch[l + 1] != at + 1 || original.buffers.size() != 5)
      continue;
    const schedule::Launch &gpu = plan.launches[at];
    const int logits = gpu.buffers[0], codes = gpu.buffers[4];
    auto temporary = [&](int buffer) {
      return plan.buffers[buffer].role == schedule::BufferRole::Temporary;
    };
    if (codes == original.buffers[4] || !temporary(logits) ||
        !temporary(codes) || users[logits].back() != at ||
        users[codes].front() != at || llvm::count(gpu.buffers, logits) != 1)
      continue;
    replaced[at] = &original;
  }
  std::vector<int> position(plan.launches.size() + 1);
  std::vector<schedule::Launch> launches;
  for (size_t g = 0; g < plan.launches.size(); ++g) {
    position[g] = static_cast<int>(launches.size());
    auto found = replaced.find(static_cast<int>(g));
    if (found == replaced.end()) {
      launches.push_back(std::move(plan.launches[g]));
      continue;
    }
    schedule::Launch original = *found->second;
    original.buffers = plan.launches[g].buffers;
    if (failed(library.expand(
            original, plan, loc, launches,
            conversion::GpuLibraryBuilder::Result::BF16OverInput)))
      return failure();
  }
  position.back() = static_cast<int>(launches.size());
  plan.launches = std::move(launches);
  return position;
}

/// Where an elementwise launch only sums tensors in order (kAddsItsInputs:
/// ((t0 + t1) + t2) + ...), each term's writer from the second on writes
/// the sum so far itself: the launch with a kPlusAddendSuffix variant (a
/// GEMM's last launch) that writes term i, read by nothing but the add,
/// after the partial sum of the terms before it is written, adds that sum
/// in its epilogue — into term i's own buffer, the last term's writer into
/// the add's output — and the add goes: a residual connection's x +
/// linear(a, w) is the linear's epilogue, and the sum of two or three
/// Dgrads the later ones'. IEEE addition commutes: the same bits (two
/// terms in either order). Returns, as keepLaunches() does, the kept
/// launches before each.
std::vector<int> addIntoWriters(schedule::Schedule &plan, ModuleOp module) {
  const std::set<std::string> adds =
      functionNames(module, conversion::kAddsItsInputs);
  const std::set<std::string> functions = functionNames(module);
  const int count = static_cast<int>(plan.launches.size());
  const std::vector<std::vector<int>> users = launchesNaming(plan);
  std::vector<bool> kept(count, true);
  // Whether `tensor`'s one writer (before `a`, its one reader) can add
  // `addend` (written before it) in its epilogue: that writer, or -1.
  auto plusWriter = [&](int tensor, int addend, int a) {
    if (plan.buffers[tensor].role != schedule::BufferRole::Temporary ||
        users[tensor].size() != 2 || users[tensor][1] != a ||
        users[addend].empty())
      return -1;
    const int w = users[tensor][0];
    const schedule::Launch &writer = plan.launches[w];
    if (!functions.count(writer.kernel + conversion::kPlusAddendSuffix.str()) ||
        writer.buffers.back() != tensor ||
        llvm::count(writer.buffers, tensor) != 1 || users[addend].front() >= w)
      return -1;
    return w;
  };
  auto addInto = [&](int w, int addend, int out) {
    schedule::Launch &writer = plan.launches[w];
    writer.kernel += conversion::kPlusAddendSuffix.str();
    writer.buffers.back() = out;
    writer.buffers.push_back(addend);
  };
  for (int a = 0; a < count; ++a) {
    const schedule::Launch &add = plan.launches[a];
    const int terms = static_cast<int>(add.buffers.size()) - 1;
    if (!adds.count(add.kernel) || terms < 2)
      continue;
    const int out = add.buffers.back();
    if (terms == 2) {
      for (int t = 0; t < 2; ++t) {
        const int w = plusWriter(add.buffers[t], add.buffers[1 - t], a);
        if (w < 0)
          continue;
        addInto(w, add.buffers[1 - t], out);
        kept[a] = false;
        break;
      }
      continue;
    }
    // Terms 1.. in order, each writer after the one before it.
    std::vector<int> writers;
    for (int t = 1; t < terms; ++t) {
      const int w = plusWriter(add.buffers[t], add.buffers[t - 1], a);
      if (w < 0 || (!writers.empty() && w <= writers.back()))
        break;
      writers.push_back(w);
    }
    if (static_cast<int>(writers.size()) != terms - 1)
      continue;
    for (int t = 1; t < terms; ++t)
      addInto(writers[t - 1], add.buffers[t - 1],
              t + 1 < terms ? add.buffers[t] : out);
    kept[a] = false;
  }
  return keepLaunches(plan, kept);
}

/// Tensors one launch of the library's multi-tensor clipping or AdamW takes
/// at most (its kernel arguments within CUDA's 4 KB: 32 AdamW tensors are
/// 32 x (4 addresses + 7 scalars) x 8 bytes), and the largest tensor whose
/// AdamW launch joins others (a small tensor's launch is mostly its start
/// and tail: 409,600 elements took 12.5 us on the H200, 3.8 at the
/// bandwidth; a sharded optimizer deals a launch's tensors to one rank, so
/// large ones keep their own).
constexpr size_t kClippedPerLaunch = 128, kUpdatedPerLaunch = 32;
constexpr int64_t kLargestMergedUpdate = int64_t{1} << 21;

/// How many reference launches from `l` on one GPU launch serves: a run of
/// consecutive clippings of one tensor each by the same norm and max_norm
/// (the model clips parameter by parameter), or of AdamW updates of tensors
/// up to kLargestMergedUpdate elements, none across a phase's end. 1 for
/// any other launch.
size_t optimizerRun(const schedule::Schedule &plan, size_t l,
                    const std::vector<int> &phaseEnds) {
  const schedule::Launch &first = plan.launches[l];
  auto joins = [&](const schedule::Launch &launch) {
    if (launch.kernel != first.kernel ||
        launch.boundScalars != first.boundScalars)
      return false;
    if (launch.kernel == "adamw")
      return launch.scalars.size() == 7 &&
             launch.scalars[0].asInt() <= kLargestMergedUpdate;
    return launch.kernel == "clip_by_global_norm" &&
           launch.buffers.size() == 2 && launch.scalars.size() == 2 &&
           launch.buffers[0] == first.buffers[0] &&
           launch.scalars[0].asFloat() == first.scalars[0].asFloat();
  };
  if (!joins(first))
    return 1;
  const size_t most =
      first.kernel == "adamw" ? kUpdatedPerLaunch : kClippedPerLaunch;
  size_t end = l + 1;
  while (end < plan.launches.size() && end - l < most &&
         !llvm::is_contained(phaseEnds, static_cast<int>(end)) &&
         joins(plan.launches[end]))
    ++end;
  return end - l;
}

/// A run of optimizerRun() as one launch of the library's multi-tensor
/// form: clipping's norm, its tensors, then max_norm and their counts;
/// AdamW's tensors' buffers, then their scalars (the first tensor's lr and
/// step bound, read for all).
schedule::Launch mergedOptimizerLaunch(ArrayRef<schedule::Launch> run) {
  schedule::Launch merged = run.front();
  merged.buffers.clear();
  merged.scalars.clear();
  const bool adamw = run.front().kernel == "adamw";
  if (!adamw) {
    merged.buffers.push_back(run.front().buffers[0]);
    merged.scalars.push_back(run.front().scalars[0]);
  }
  for (const schedule::Launch &launch : run) {
    if (adamw) {
      llvm::append_range(merged.buffers, launch.buffers);
      llvm::append_range(merged.scalars, launch.scalars);
      continue;
    }
    merged.buffers.push_back(launch.buffers[1]);
    merged.scalars.push_back(launch.scalars[1]);
  }
  return merged;
}

/// Where a cross-entropy forward's logits are the result of a GEMM launch
/// (the last of `launches` to name them: as its last buffer, once) with a
/// kLossPartsSuffix variant, that launch takes the variant, writing the
/// logits' loss parts too into a new temporary, and the forward reduces
/// those (GpuLibraryBuilder::LossParts) instead of sweeping the logits
/// (rows x vocab fp32, read once more): the parts of the logits' rows.
std::optional<conversion::GpuLibraryBuilder::LossParts>
takeLossParts(const schedule::Launch &loss, schedule::Schedule &plan,
              std::vector<schedule::Launch> &launches, ModuleOp module) {
  const int logits = loss.buffers.front();
  auto writer = llvm::find_if(llvm::reverse(launches), [&](const auto &gpu) {
    return llvm::is_contained(gpu.buffers, logits);
  });
  if (writer == launches.rend() || writer->buffers.back() != logits ||
      llvm::count(writer->buffers, logits) != 1)
    return std::nullopt;
  const std::string variant =
      writer->kernel + conversion::kLossPartsSuffix.str();
  ArrayAttr slabs;
  module.walk([&](gpu::GPUFuncOp func) {
    if (func.getName() == variant)
      slabs = func->getAttrOfType<ArrayAttr>(conversion::kLossPartsAttr);
  });
  if (!slabs || slabs.size() != 2)
    return std::nullopt;
  conversion::GpuLibraryBuilder::LossParts parts;
  parts.slabs = cast<IntegerAttr>(slabs[1]).getInt();
  const int64_t rows = plan.buffers[logits].numElements() /
                       (parts.slabs * cast<IntegerAttr>(slabs[0]).getInt());
  schedule::BufferDesc desc;
  desc.name = plan.buffers[logits].name + ".loss_parts";
  desc.role = schedule::BufferRole::Temporary;
  desc.type = backend::ElementType::I32;
  desc.shape = {4 * rows * parts.slabs}; // an f64 pair a part
  plan.buffers.push_back(desc);
  parts.buffer = static_cast<int>(plan.buffers.size()) - 1;
  writer->kernel = variant;
  writer->buffers.push_back(parts.buffer);
  return parts;
}

FailureOr<CompiledGpuStep> tetra::compileGpuTrainingStep(
    MLIRContext &context, const llvm::SourceMgr &sourceMgr,
    const frontend::ModelGraph &model, const frontend::ResolvedPolicy *policy,
    const CompileOptions &options, Target target, int64_t blockTile) {
  OwningOpRef<ModuleOp> module =
      formKernels(context, sourceMgr, model, policy, options);
  if (!module)
    return failure();
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  FailureOr<schedule::Schedule> plan = buildSchedule(step, options.schedule);
  if (failed(plan))
    return failure();
  Location loc = step.getLoc();
  // Which inputs of each kernel are tensors (the conversion drops the
  // kernels; their launches name inputs by position).
  std::map<std::string, std::vector<bool>> tensorInputs;
  step.walk([&](KernelOp kernel) {
    std::vector<bool> &kinds = tensorInputs[kernel.getKernelName().str()];
    for (Value input : kernel.getInputs())
      kinds.push_back(isa<RankedTensorType>(input.getType()));
  });

  // Only the step's kernels are compiled (not @forward's and @loss's).
  for (func::FuncOp function :
       llvm::make_early_inc_range(module->getOps<func::FuncOp>()))
    if (function != step)
      function.erase();
  // The kernels' gpu.modules (the conversion drops everything else), then
  // the library's functions for the schedule's other launches.
  PassManager pm(&context);
  PipelineOptions pipeline;
  pipeline.target = target;
  pipeline.blockTile = blockTile;
  buildPipeline(pm, pipeline, PipelineStage::Code, PipelineStage::Code);
  if (failed(pm.run(*module)))
    return failure();
  std::vector<GpuKernelCode> compiled = describeGpuKernels(*module);
  std::map<std::string, const GpuKernelCode *> byName;
  for (const GpuKernelCode &kernel : compiled)
    byName[kernel.name] = &kernel;

  conversion::GpuLibraryBuilder library(*module, targetName(target));
  schedule::Schedule reference = *plan;
  std::vector<int> firstLaunch;
  std::vector<schedule::Launch> launches;
  std::vector<int> phaseEnds = {plan->forwardEnd(), plan->gradientsEnd(),
                                plan->updateBegin()};
  std::vector<int> newEnds(phaseEnds.size(), -1);
  for (size_t l = 0; l < plan->launches.size(); ++l) {
    for (size_t p = 0; p < phaseEnds.size(); ++p)
      if (phaseEnds[p] == static_cast<int>(l))
        newEnds[p] = static_cast<int>(launches.size());
    firstLaunch.push_back(static_cast<int>(launches.size()));
    // A run of clippings or small updates: one GPU launch, the first
    // reference launch's (the others' are empty).
    if (const size_t run = optimizerRun(*plan, l, phaseEnds); run > 1) {
      if (failed(library.expand(
              mergedOptimizerLaunch(
                  ArrayRef(plan->launches).slice(l, run)),
              *plan, loc, launches)))
        return failure();
      for (size_t more = 1; more < run; ++more)
        firstLaunch.push_back(static_cast<int>(launches.size()));
      l += run - 1;
      continue;
    }
    const schedule::Launch launch = plan->launches[l];
    auto found = byName.find(launch.kernel);
    LogicalResult expanded =
        found != byName.end()
            ? expandCompiledLaunch(launch, *found->second,
                                   tensorInputs[launch.kernel], *plan, loc,
                                   launches)
        : launch.kernel == "cross_entropy.forward"
            ? library.expand(launch, *plan, loc, launches,
                             conversion::GpuLibraryBuilder::Result::F32,
                             takeLossParts(launch, *plan, launches, *module))
            : library.expand(launch, *plan, loc, launches);
    if (failed(expanded))
      return failure();
  }
  firstLaunch.push_back(static_cast<int>(launches.size()));
  for (size_t p = 0; p < phaseEnds.size(); ++p)
    if (newEnds[p] < 0)
      newEnds[p] = static_cast<int>(launches.size());
  plan->launches = std::move(launches);

  // Each distinct kernel's code once; the launches of its twins call it.
  std::map<std::string, std::string> renamed = dropDuplicateModules(*module);
  for (schedule::Launch &launch : plan->launches) {
    auto to = renamed.find(launch.kernel);
    if (to != renamed.end())
      launch.kernel = to->second;
  }
  plan->phases.forwardEnd = newEnds[0];
  plan->phases.gradientsEnd = newEnds[1];
  plan->phases.updateBegin = newEnds[2];
  auto renumber = [&](const std::vector<int> &keptBefore) {
    for (int &first : firstLaunch)
      first = keptBefore[first];
    plan->phases.forwardEnd = keptBefore[plan->phases.forwardEnd];
    plan->phases.gradientsEnd = keptBefore[plan->phases.gradientsEnd];
    plan->phases.updateBegin = keptBefore[plan->phases.updateBegin];
  };
  // Then an operand quantized the same way for two GEMMs, once; a rounded
  // operand written by its producer where it can; a sum by the writer of
  // one of its terms.
  renumber(shareRepeatedOperandLaunches(
      *plan, newEnds[0], operandCodeNames(*module),
      /*keepForwardCodes=*/options.schedule.recompute ==
          schedule::Recompute::None));
  FailureOr<std::vector<int>> keptBefore =
      writeResultsAsBF16(*plan, reference, firstLaunch, library, *module, loc);
  if (failed(keptBefore))
    return failure();
  renumber(*keptBefore);
  renumber(writeCodesBesideResults(*plan, *module));
  FailureOr<std::vector<int>> moved =
      gradientOverLogits(*plan, reference, firstLaunch, library, loc);
  if (failed(moved))
    return failure();
  renumber(*moved);
  renumber(addIntoWriters(*plan, *module));
  dropUnlaunchedFunctions(*plan, *module);
  schedule::planMemory(*plan);

  FailureOr<std::vector<GpuKernelCode>> code =
      target == Target::Gfx950 ? compileToHsaco(*module, targetName(target))
                               : compileToPtx(*module, targetName(target));
  if (failed(code))
    return failure();
  return CompiledGpuStep{std::move(*plan), std::move(*code),
                         std::move(reference), std::move(firstLaunch)};
}
