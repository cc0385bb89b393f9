//===- EmitCommand.cpp - tetra emit: the IR after any stage ---------------===//
//
// `tetra emit --stage=ast|tetra|train-step|quantized|kernels|cpu|schedule`:
// stop the pipeline at a stage and print what it produced, like the Toy
// tutorial's `-emit=`. Later stages (the schedule, GPU code) join as their
// passes land.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"
#include "tools/tetra/LoadInputs.h"

#include "frontend/Frontend.h"
#include "frontend/MLIRGen.h"
#include "driver/AmdgpuCompiler.h"
#include "driver/NvptxCompiler.h"
#include "driver/Pipeline.h"
#include "lowering/BuildSchedule.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cstdio>
#include <optional>
#include <string>

using namespace tetra;
using namespace tetra::frontend;
using namespace tetra::driver;

namespace {

struct EmitOptionsFromCommandLine {
  std::string stage;
  std::vector<std::string> files;
  std::string output = "-";
  bool locations = false;
  bool json = false;
  EmitOptions emit;
};

int usageError(const llvm::Twine &message) {
  llvm::errs() << "tetra emit: error: " << message
               << " (see 'tetra emit --help')\n";
  return 2;
}

/// Parses `--bind batch=4,seq=128`.
bool parseBindings(llvm::StringRef text, EmitOptions &options) {
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, false);
  for (llvm::StringRef item : items) {
    auto [name, value] = item.split('=');
    int64_t size;
    if (name.empty() || value.getAsInteger(10, size) || size <= 0)
      return false;
    options.dimensions[name.trim().str()] = size;
  }
  return !items.empty();
}

/// The stages after the training step: its matmuls quantized
/// (--tetra-materialize-quantization), then grouped into kernels
/// (--tetra-form-kernels), then the kernels' CPU code (the tetra-to-llvm
/// pipeline).
bool isQuantizationStage(llvm::StringRef stage) {
  return stage == "quantized" || stage == "kernels" || stage == "cpu" ||
         stage == "nvvm" || stage == "ptx" || stage == "amdgpu" ||
         stage == "isa" ||
         stage == "schedule";
}

std::optional<EmitOptionsFromCommandLine>
parseArguments(const std::vector<std::string_view> &args, int &status) {
  EmitOptionsFromCommandLine options;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg(args[i].data(), args[i].size());
    if (arg == "-h" || arg == "--help") {
      tetra::driver::printEmitHelp();
      status = 0;
      return std::nullopt;
    }
    if (arg.consume_front("--stage=")) {
      options.stage = arg.str();
    } else if (arg == "--stage" || arg == "-o" || arg == "--bind") {
      if (i + 1 == args.size()) {
        status = usageError("'" + arg + "' needs a value");
        return std::nullopt;
      }
      llvm::StringRef value(args[i + 1].data(), args[i + 1].size());
      ++i;
      if (arg == "--stage")
        options.stage = value.str();
      else if (arg == "-o")
        options.output = value.str();
      else if (!parseBindings(value, options.emit)) {
        status = usageError("--bind takes NAME=SIZE[,NAME=SIZE...] with "
                            "positive sizes, got '" +
                            value + "'");
        return std::nullopt;
      }
    } else if (arg.consume_front("--bind=")) {
      if (!parseBindings(arg, options.emit)) {
        status = usageError("--bind takes NAME=SIZE[,NAME=SIZE...] with "
                            "positive sizes, got '" +
                            arg + "'");
        return std::nullopt;
      }
    } else if (arg == "--locations") {
      options.locations = true;
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg.starts_with("-") && arg != "-") {
      status = usageError("unknown option '" + arg + "'");
      return std::nullopt;
    } else {
      options.files.push_back(arg.str());
    }
  }
  if (options.stage.empty()) {
    status = usageError("--stage is required (ast, tetra, train-step, "
                        "quantized, kernels, cpu, nvvm, ptx, amdgpu, isa or "
                        "schedule)");
    return std::nullopt;
  }
  if (options.stage != "ast" && options.stage != "tetra" &&
      options.stage != "train-step" && !isQuantizationStage(options.stage)) {
    status = usageError("unknown stage '" + options.stage +
                        "'; stages: ast, tetra, train-step, quantized, "
                        "kernels, cpu, nvvm, ptx, amdgpu, isa, schedule");
    return std::nullopt;
  }
  if (options.files.empty()) {
    status = usageError("no input files");
    return std::nullopt;
  }
  return options;
}

/// `--stage=train-step`: the training step added to `module`, with the run's
/// optimizer settings when there is a run (driver/Pipeline.h).
bool addTrainingStep(mlir::MLIRContext &context, mlir::ModuleOp module,
                     const std::optional<RunConfig> &run,
                     llvm::SourceMgr &sourceMgr) {
  PipelineOptions options;
  if (run) {
    options.beta1 = run->beta1;
    options.beta2 = run->beta2;
    options.eps = run->eps;
    options.weightDecay = run->weightDecay;
    options.clip = run->clip;
  }
  // Errors point into the model's source, shown with its line.
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::PassManager pm(&context);
  buildPipeline(pm, options, PipelineStage::TrainingStep);
  return mlir::succeeded(pm.run(module));
}

/// `--stage=quantized|kernels|cpu`: the pipeline after the training step,
/// for `cpu` down to the kernels' code in the LLVM dialect.
bool lowerQuantization(mlir::MLIRContext &context, mlir::ModuleOp module,
                       llvm::StringRef stage, llvm::SourceMgr &sourceMgr) {
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::PassManager pm(&context);
  // cpu, nvvm and ptx are the targets' code; schedule needs the kernels.
  PipelineStage until = stage == "quantized" ? PipelineStage::Quantized
                        : stage == "cpu" || stage == "nvvm" ||
                                stage == "ptx" || stage == "amdgpu" ||
                                stage == "isa"
                            ? PipelineStage::Code
                            : PipelineStage::Kernels;
  PipelineOptions options;
  options.target = stage == "nvvm" || stage == "ptx"      ? Target::Sm90a
                   : stage == "amdgpu" || stage == "isa" ? Target::Gfx950
                                                         : Target::Cpu;
  buildPipeline(pm, options, until, PipelineStage::Quantized);
  return mlir::succeeded(pm.run(module));
}

/// "12.50 MiB".
std::string mib(int64_t bytes) {
  return llvm::formatv("{0:F2} MiB", bytes / 1048576.0).str();
}

/// "arena peak at launch N (kernel, origin): the largest live temporaries",
/// the five largest, then how many more and their bytes.
std::string memoryPeakLine(const schedule::Schedule &plan) {
  schedule::MemoryPeak peak = schedule::memoryPeak(plan);
  if (peak.launch < 0)
    return "";
  const schedule::Launch &launch = plan.launches[peak.launch];
  std::string line = llvm::formatv("arena peak at launch {0} ({1}, {2}): ",
                                   peak.launch, launch.kernel, launch.origin);
  constexpr size_t kShown = 5;
  int64_t rest = 0;
  for (auto [i, b] : llvm::enumerate(peak.live)) {
    if (i < kShown)
      line += (i ? ", " : "") + plan.buffers[b].name + " " +
              mib(plan.buffers[b].bytes());
    else
      rest += plan.buffers[b].bytes();
  }
  if (peak.live.size() > kShown)
    line += llvm::formatv(", and {0} more: {1}", peak.live.size() - kShown,
                          mib(rest));
  return line + "\n";
}

/// `--stage=schedule`: @train_step as the runtime's flat list of launches
/// over a planned arena; a summary with the memory plan, then one line per
/// launch (or the JSON form with --json).
bool printSchedule(mlir::MLIRContext &context, mlir::ModuleOp module,
                   llvm::SourceMgr &sourceMgr, bool json,
                   const std::optional<RunConfig> &run, llvm::raw_ostream &os) {
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  auto step = module.lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!step)
    return false;
  // As `tetra train` builds it: a run with accumulation sums gradients.
  ScheduleOptions scheduleOptions;
  scheduleOptions.accumulateGradients = run && run->accumulation > 1;
  if (run)
    scheduleOptions.recompute = run->recompute;
  mlir::FailureOr<schedule::Schedule> plan =
      buildSchedule(step, scheduleOptions);
  if (mlir::failed(plan))
    return false;
  if (json) {
    os << schedule::toJson(*plan) << "\n";
    return true;
  }
  int compiled = 0;
  for (const schedule::Launch &launch : plan->launches)
    compiled += llvm::StringRef(launch.origin).starts_with("kernel ");
  os << "schedule " << plan->name << ": " << plan->launches.size()
     << " launches (" << plan->launches.size() - compiled << " library, "
     << compiled << " compiled), " << plan->buffers.size() << " buffers\n"
     << "memory: bound " << mib(plan->boundBytes()) << " (parameters, "
     << "moments, inputs, outputs) + arena " << mib(plan->arenaBytes)
     << " (temporaries; " << mib(plan->unplannedBytes())
     << " without reuse) = peak " << mib(plan->boundBytes() + plan->arenaBytes)
     << "\n"
     << memoryPeakLine(*plan)
     << "phases: loss [0, " << plan->forwardEnd() << "), gradients [0, "
     << plan->gradientsEnd() << ")"
     << (plan->accumulatesGradients() ? " summed over micro-batches" : "")
     << ", norm [" << plan->gradientsEnd() << ", " << plan->updateBegin()
     << "), update [" << plan->updateBegin() << ", " << plan->launches.size()
     << ")\n";
  for (auto [index, launch] : llvm::enumerate(plan->launches)) {
    os << llvm::formatv("{0,5}  {1,-24} ", index, launch.kernel);
    llvm::interleave(
        launch.buffers, os,
        [&](int buffer) { os << plan->buffers[buffer].name; }, ", ");
    os << "  [" << launch.origin << "]\n";
  }
  return true;
}

/// `--stage=tetra` and `--stage=train-step`: one model, at most one policy
/// and one run; a run names the model and policy itself and fixes
/// batch = micro_batch, seq = seq_len.
int emitTetra(const EmitOptionsFromCommandLine &options,
              DiagnosticEngine &diags, llvm::raw_ostream &os) {
  std::optional<LoadedInputs> inputs =
      loadInputs(diags, options.files, options.emit, "tetra emit",
                 "--stage=" + options.stage);
  if (!inputs)
    return 1;
  const std::optional<RunConfig> &run = inputs->run;
  std::optional<ResolvedPolicy> &policy = inputs->policy;
  EmitOptions &emit = inputs->emit;
  ModelGraph *model = &inputs->model;
  mlir::MLIRContext context;
  // Diagnostics point into the user's files; an IR dump would bury them.
  context.printOpOnDiagnostic(false);
  mlir::OwningOpRef<mlir::ModuleOp> module = emitModule(
      context, diags.getSourceMgr(), *model, policy ? &*policy : nullptr, emit);
  if (!module)
    return 1;
  if ((options.stage == "train-step" || isQuantizationStage(options.stage)) &&
      !addTrainingStep(context, *module, run, diags.getSourceMgr()))
    return 1;
  if (isQuantizationStage(options.stage) &&
      !lowerQuantization(context, *module, options.stage, diags.getSourceMgr()))
    return 1;
  if (options.stage == "ptx") {
    mlir::SourceMgrDiagnosticHandler handler(diags.getSourceMgr(), &context);
    mlir::FailureOr<std::vector<GpuKernelCode>> kernels =
        compileToPtx(*module);
    if (mlir::failed(kernels))
      return 1;
    for (const GpuKernelCode &kernel : *kernels)
      os << "// ===== " << kernel.name << " (" << kernel.gemm
         << "): sm_90a PTX\n"
         << kernel.code << "\n";
    return 0;
  }
  if (options.stage == "isa") {
    mlir::SourceMgrDiagnosticHandler handler(diags.getSourceMgr(), &context);
    mlir::FailureOr<std::vector<GpuKernelCode>> kernels =
        compileToHsaco(*module);
    if (mlir::failed(kernels))
      return 1;
    for (const GpuKernelCode &kernel : *kernels) {
      os << "// ===== " << kernel.name << " (" << kernel.gemm
         << "): gfx950 assembly (not executed here: there is no MI355X)\n";
      for (const AmdgpuResources &used : amdgpuResources(kernel.assembly))
        os << llvm::formatv("// {0}: {1} VGPRs, {2} AGPRs, {3} SGPRs, {4} "
                            "bytes LDS, {5} bytes scratch, {6} MFMAs ({7} "
                            "scaled), {8} waves per SIMD\n",
                            used.function, used.vgprs, used.agprs, used.sgprs,
                            used.ldsBytes, used.scratchBytes, used.mfmas,
                            used.scaledMfmas, used.occupancy);
      os << kernel.assembly << "\n";
    }
    return 0;
  }
  if (options.stage == "schedule")
    return printSchedule(context, *module, diags.getSourceMgr(), options.json,
                         run, os)
               ? 0
               : 1;
  mlir::OpPrintingFlags flags;
  if (options.locations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(os, flags);
  return 0;
}

} // namespace

int tetra::driver::emitMain(const std::vector<std::string_view> &args) {
  int status = 0;
  std::optional<EmitOptionsFromCommandLine> options =
      parseArguments(args, status);
  if (!options)
    return status;

  std::error_code error;
  llvm::ToolOutputFile output(options->output, error, llvm::sys::fs::OF_Text);
  if (error) {
    llvm::errs() << "tetra emit: error: cannot write '" << options->output
                 << "': " << error.message() << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  DiagnosticEngine diags(sourceMgr);
  int result = 0;
  if (options->stage == "ast") {
    for (const std::string &file : options->files)
      if (!dumpAST(diags, file, output.os()))
        result = 1;
  } else {
    result = emitTetra(*options, diags, output.os());
  }
  if (result == 0)
    output.keep();
  return result;
}

void tetra::driver::printEmitHelp() {
  std::printf(
      "USAGE: tetra emit --stage=STAGE FILES... [options]\n"
      "\n"
      "Runs the compiler up to STAGE and prints what that stage produced.\n"
      "\n"
      "STAGES\n"
      "  ast     the syntax tree of each file (model, policy or run)\n"
      "  tetra   the model in the tetra dialect: func.func @forward and\n"
      "          @loss over the parameters (tetra.param) and inputs\n"
      "          (tetra.input), every linear with its resolved #tetra.policy.\n"
      "          FILES: a model, optionally a policy (none: f32 everywhere),\n"
      "          or a run file, which names both and fixes batch and seq\n"
      "  train-step\n"
      "          tetra, plus func.func @train_step: the forward pass, its\n"
      "          gradients (every linear's fprop, dgrad and wgrad as\n"
      "          tetra.matmul), the global gradient norm, clipping and\n"
      "          AdamW (docs/passes.md, --tetra-training-step); a run\n"
      "          file's optimizer and clip settings apply\n"
      "  quantized\n"
      "          train-step with every quantized tetra.matmul replaced by\n"
      "          tetra.rotate -> tetra.quantize on each operand along its\n"
      "          reduction dimension and a tetra.scaled_matmul\n"
      "          (--tetra-materialize-quantization)\n"
      "  kernels\n"
      "          quantized, with each scaled matmul and the ops preparing\n"
      "          its operands (and each elementwise chain) in a tetra.kernel\n"
      "          (--tetra-form-kernels)\n"
      "  cpu     the kernels' CPU code in the LLVM dialect, one function\n"
      "          per kernel (--tetra-to-llvm; the host side is dropped)\n"
      "  nvvm    the GEMM kernels for sm_90a: one gpu.module each, its\n"
      "          operand and MMA launches (--convert-tetra-to-nvvm)\n"
      "  ptx     their PTX for sm_90a, as `tetra compile` bundles it\n"
      "  amdgpu  the GEMM kernels for gfx950 (MI355X), from the same plan\n"
      "          (--convert-tetra-to-amdgpu)\n"
      "  isa     their gfx950 assembly with a resource report per kernel\n"
      "          (VGPR/AGPR/SGPR, LDS, scratch, scaled MFMAs, waves per\n"
      "          SIMD); compiled here, never executed (no MI355X)\n"
      "  schedule\n"
      "          kernels, with @train_step as the runtime runs it: one launch\n"
      "          per op (library kernels by name, compiled kernels by\n"
      "          symbol) over bound buffers and one arena; prints the memory\n"
      "          plan, the launch where the arena peaks with the largest\n"
      "          buffers live there, and the launches (--json: the\n"
      "          schedule's JSON form); a run's `recompute` applies.\n"
      "          Needs static shapes: --bind batch and seq, or a run file\n"
      "\n"
      "OPTIONS\n"
      "  --bind NAME=N,...  sizes for symbolic dimensions (batch, seq);\n"
      "                     unbound ones stay dynamic (?)\n"
      "  --locations        print each op's file:line:col\n"
      "  --json             with --stage=schedule, print the JSON form\n"
      "  -o FILE            write to FILE (only if the stage succeeds)\n"
      "  -h, --help         print this help\n");
}
