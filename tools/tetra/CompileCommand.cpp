//===- CompileCommand.cpp - tetra compile: a bundle for a GPU -------------===//
//
// `tetra compile --target=sm_90a RUN.tetra|MODEL POLICY -o DIR`: compiles
// every GEMM kernel of the training step for the target and writes a bundle
// directory that runs with only a GPU driver: `manifest.json` (the kernels,
// what each computes, its launches and their arguments) and one code object
// per kernel (`NAME.ptx` for sm_90a, `NAME.hsaco` for gfx950, beside
// `NAME.s`, its assembly). The bundle is written next to DIR and renamed
// into place, so a failed compile leaves nothing half-written, and an
// existing DIR is never replaced.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"
#include "tools/tetra/LoadInputs.h"

#include "driver/AmdgpuCompiler.h"
#include "driver/CompileStep.h"
#include "driver/GpuCodeCache.h"
#include "driver/NvptxCompiler.h"
#include "driver/Pipeline.h"
#include "lowering/Conversion/Passes.h"
#include "runtime/bundle/StepBundle.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/io/Json.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>

using namespace tetra;
using namespace tetra::frontend;
using namespace tetra::driver;

namespace {

int usageError(const std::string &message) {
  fmt::print(stderr, "tetra compile: error: {} (see 'tetra compile --help')\n",
             message);
  return 2;
}

int fail(const std::string &message) {
  fmt::print(stderr, "tetra compile: error: {}\n", message);
  return 1;
}

/// The code object's file extension on `target`.
std::string codeExtension(Target target) {
  return target == Target::Gfx950 ? ".hsaco" : ".ptx";
}

/// Each function's resources in a gfx950 code object, read off its
/// assembly, as a JSON array: registers, LDS and scratch, MFMAs, occupancy
/// and the kernel arguments' layout from the code object's metadata.
std::string resourcesJson(const std::string &assembly) {
  std::string json = "[";
  std::vector<AmdgpuResources> report = amdgpuResources(assembly);
  for (size_t r = 0; r < report.size(); ++r) {
    const AmdgpuResources &used = report[r];
    json += r ? "," : "";
    json += "{\"function\":";
    io::appendJsonString(json, used.function);
    json += fmt::format(",\"vgprs\":{},\"agprs\":{},\"sgprs\":{},\"lds_bytes\":"
                        "{},\"scratch_bytes\":{},\"mfmas\":{},\"scaled_mfmas\":"
                        "{},\"waves_per_simd\":{},\"kernargs\":[",
                        used.vgprs, used.agprs, used.sgprs, used.ldsBytes,
                        used.scratchBytes, used.mfmas, used.scaledMfmas,
                        used.occupancy);
    for (size_t a = 0; a < used.arguments.size(); ++a) {
      json += a ? "," : "";
      json += fmt::format("{{\"offset\":{},\"size\":{},\"kind\":",
                          used.arguments[a].offset, used.arguments[a].size);
      io::appendJsonString(json, used.arguments[a].kind);
      json += "}";
    }
    json += "]}";
  }
  return json + "]";
}

std::string manifestOf(const std::vector<GpuKernelCode> &kernels,
                       const LoadedInputs &inputs, Target target) {
  std::string json = "{\"format\":\"tetra-bundle\",\"version\":1,\"target\":";
  io::appendJsonString(json, targetName(target));
  json += ",\"model\":";
  io::appendJsonString(json, inputs.model.name);
  json += ",\"policy\":";
  io::appendJsonString(json, inputs.policy ? inputs.policy->name : "f32");
  json += ",\"kernels\":[";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const GpuKernelCode &kernel = kernels[i];
    json += i ? ",\n" : "\n";
    json += "{\"name\":";
    io::appendJsonString(json, kernel.name);
    json += ",\"code\":";
    io::appendJsonString(json, kernel.name + codeExtension(target));
    if (target == Target::Gfx950) {
      // What each function uses, from its assembly (never run here: there
      // is no MI355X).
      json += ",\"resources\":" + resourcesJson(kernel.assembly);
    }
    // The kernel's launches, in order; a variant (launched only in a
    // function's place by a step's schedule) is none of them.
    json += ",\"computes\":" + kernel.description + ",\"launches\":[";
    bool first = true;
    for (const GpuLaunch &launch : kernel.launches) {
      if (launch.variant)
        continue;
      json += first ? "" : ",";
      first = false;
      json += "{\"function\":";
      io::appendJsonString(json, launch.function);
      auto triple = [&](const char *key, const std::array<int64_t, 3> &v) {
        json += fmt::format(",\"{}\":[{},{},{}]", key, v[0], v[1], v[2]);
      };
      triple("grid", launch.grid);
      triple("block", launch.block);
      json += ",\"arguments\":[";
      for (size_t a = 0; a < launch.arguments.size(); ++a) {
        json += a ? "," : "";
        io::appendJsonString(json, launch.arguments[a]);
      }
      json += "]}";
    }
    json += "]}";
  }
  json += "\n]}\n";
  return json;
}

/// `tetra compile RUN`: the whole training step as a step bundle
/// (runtime/bundle/StepBundle.h), staged beside `output` and renamed into
/// place.
int writeStepBundle(mlir::MLIRContext &context,
                    const llvm::SourceMgr &sourceMgr,
                    const LoadedInputs &inputs, Target target,
                    int64_t blockTile, const std::vector<std::string> &settings,
                    const std::string &output) {
  const frontend::RunConfig &run = *inputs.run;
  std::vector<std::string> files = {run.modelPath, run.path};
  if (inputs.policy)
    files.insert(files.end(), inputs.policy->files.begin(),
                 inputs.policy->files.end());
  std::string staging = output + ".partial";

  // An unchanged step comes from the compile cache (GpuCodeCache.h), its
  // checksum and sources verified.
  const std::string cached = stepCacheDirectory(
      targetName(target),
      stepCacheKey(targetName(target),
                   fmt::format("block-tile={} set {}", blockTile,
                               fmt::join(settings, " ")),
                   files));
  if (!cached.empty() && bundle::StepBundle::open(cached)) {
    io::Expected<std::string> summary = io::readFile(cached + "/compile.txt");
    bool same = static_cast<bool>(summary);
    for (const std::string &source : files) {
      io::Expected<std::string> mine = io::readFile(source);
      io::Expected<std::string> kept = io::readFile(
          cached + "/sources/" + llvm::sys::path::filename(source).str());
      same = same && mine && kept && *mine == *kept;
    }
    llvm::sys::fs::remove_directories(staging);
    if (same && copyDirectory(cached, staging) &&
        !llvm::sys::fs::remove(staging + "/compile.txt") &&
        !llvm::sys::fs::rename(staging, output)) {
      fmt::print("{}, in {} (from the compile cache)\n", *summary, output);
      return 0;
    }
    llvm::sys::fs::remove_directories(staging);
  }

  CompileOptions options = compileOptionsFor(run);
  mlir::FailureOr<CompiledGpuStep> step = compileGpuTrainingStep(
      context, sourceMgr, inputs.model,
      inputs.policy ? &*inputs.policy : nullptr, options, target, blockTile);
  if (mlir::failed(step))
    return 1;
  const int64_t tokensPerStep = run.seqLen * run.microBatch * run.accumulation;
  const int64_t steps =
      run.steps > 0 ? run.steps : std::max<int64_t>(1, run.tokens / tokensPerStep);
  trainer::RunPlan plan =
      runPlanOf(run, inputs.model, *inputs.policy, steps);
  // The bundle may run elsewhere: its paths say where on this machine
  // (tetra-run's --data, --eval-data and --tokenizer replace them there).
  auto absolute = [](std::string &path) {
    llvm::SmallString<256> full(path);
    if (!path.empty() && !llvm::sys::fs::make_absolute(full))
      path = std::string(full);
  };
  for (std::string &glob : plan.trainData)
    absolute(glob);
  for (std::string &glob : plan.evalData)
    absolute(glob);
  absolute(plan.tokenizer.path);

  llvm::sys::fs::remove_directories(staging);
  if (std::error_code error =
          llvm::sys::fs::create_directories(staging + "/sources"))
    return fail("cannot create '" + staging + "': " + error.message());
  auto cleanUp = [&](const std::string &message) {
    llvm::sys::fs::remove_directories(staging);
    return fail(message);
  };
  auto write = [&](const std::string &file, const std::string &bytes) {
    return io::writeFileAtomically(staging + "/" + file, bytes);
  };
  io::JsonValue manifest = io::JsonValue::object();
  manifest.set("format", io::JsonValue::string("tetra-step-bundle"));
  manifest.set("runtime_version", io::JsonValue::string(kTetraVersion));
  manifest.set("target", io::JsonValue::string(targetName(target)));
  manifest.set("model", io::JsonValue::string(inputs.model.name));
  manifest.set("policy", io::JsonValue::string(inputs.policy->name));
  manifest.set("run", io::JsonValue::string(run.name));
  if (!settings.empty()) // the run file's settings it was compiled with
    manifest.set("settings", io::JsonValue::strings(settings));
  io::JsonValue code = io::JsonValue::array();
  std::vector<std::string> checked = {"manifest.json", "schedule.json",
                                      "run_plan.json", "reference.json"};
  for (const GpuKernelCode &kernel : step->code) {
    std::string file = kernel.name + codeExtension(target);
    if (io::Status written = write(file, kernel.code); !written)
      return cleanUp(written.error().message());
    if (target == Target::Gfx950)
      if (io::Status written = write(kernel.name + ".s", kernel.assembly);
          !written)
        return cleanUp(written.error().message());
    io::JsonValue entry = io::JsonValue::object();
    entry.set("name", io::JsonValue::string(kernel.name));
    entry.set("file", io::JsonValue::string(file));
    io::JsonValue functions = io::JsonValue::array();
    for (const GpuLaunch &launch : kernel.launches)
      functions.push(io::JsonValue::string(launch.function));
    entry.set("functions", std::move(functions));
    if (target == Target::Gfx950) {
      io::Expected<io::JsonValue> resources =
          io::parseJson(resourcesJson(kernel.assembly));
      if (!resources)
        return cleanUp("the resources of '" + kernel.name +
                       "': " + resources.error().message());
      entry.set("resources", std::move(*resources));
    }
    code.push(std::move(entry));
    checked.push_back(file);
  }
  manifest.set("code", std::move(code));
  io::JsonValue first = io::JsonValue::array();
  for (int launch : step->firstLaunch)
    first.push(io::JsonValue::integer(launch));
  manifest.set("first_launch", std::move(first));
  io::JsonValue sources = io::JsonValue::array();
  for (const std::string &source : files) {
    std::string name = llvm::sys::path::filename(source).str();
    llvm::sys::fs::copy_file(source, staging + "/sources/" + name);
    sources.push(io::JsonValue::string("sources/" + name));
  }
  manifest.set("sources", std::move(sources));
  io::JsonValue plannedMemory = io::JsonValue::object();
  plannedMemory.set("arena_bytes", io::JsonValue::integer(step->schedule.arenaBytes));
  plannedMemory.set("bound_bytes",
                    io::JsonValue::integer(step->schedule.boundBytes()));
  manifest.set("memory", std::move(plannedMemory));
  if (io::Status written =
          write("schedule.json", schedule::toJson(step->schedule));
      !written)
    return cleanUp(written.error().message());
  if (io::Status written =
          write("reference.json", schedule::toJson(step->reference));
      !written)
    return cleanUp(written.error().message());
  if (io::Status written = write("run_plan.json", io::writeJson(plan.toJson()));
      !written)
    return cleanUp(written.error().message());
  if (io::Status written = write("manifest.json", io::writeJson(manifest));
      !written)
    return cleanUp(written.error().message());
  io::Expected<std::string> checksum = bundle::checksumOf(staging, checked);
  if (!checksum)
    return cleanUp(checksum.error().message());
  if (io::Status written = write("checksum", "fnv1a64 " + *checksum + "\n");
      !written)
    return cleanUp(written.error().message());
  if (std::error_code error = llvm::sys::fs::rename(staging, output))
    return cleanUp("cannot move the bundle into '" + output +
                   "': " + error.message());
  const std::string summary = fmt::format(
      "tetra compile: the training step of run {} for {} ({}): {} launches of "
      "{} code objects, arena {:.2f} MiB",
      run.name, targetName(target), targetInfo(target).description,
      step->schedule.launches.size(), step->code.size(),
      static_cast<double>(step->schedule.arenaBytes) / (1 << 20));
  fmt::print("{}, in {}\n", summary, output);
  // Kept for the next compile of the same step; failing to keep it is not
  // an error.
  if (!cached.empty()) {
    std::string temporary =
        fmt::format("{}.tmp{}", cached, llvm::sys::Process::getProcessId());
    llvm::sys::fs::remove_directories(temporary);
    if (copyDirectory(output, temporary) &&
        io::writeFileAtomically(temporary + "/compile.txt", summary)) {
      llvm::sys::fs::remove_directories(cached);
      if (llvm::sys::fs::rename(temporary, cached))
        llvm::sys::fs::remove_directories(temporary);
    } else {
      llvm::sys::fs::remove_directories(temporary);
    }
  }
  return 0;
}

} // namespace

int tetra::driver::compileMain(const std::vector<std::string_view> &args) {
  std::vector<std::string> files, settings;
  std::string output, targetText;
  int64_t blockTile = 128;
  bool kernelsOnly = false;
  frontend::EmitOptions emit;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      printCompileHelp();
      return 0;
    }
    if (arg.substr(0, 9) == "--target=") {
      targetText = std::string(arg.substr(9));
    } else if (arg == "--kernels") {
      kernelsOnly = true;
    } else if (arg.substr(0, 13) == "--block-tile=") {
      std::string_view value = arg.substr(13);
      if (value != "32" && value != "64" && value != "128")
        return usageError("--block-tile takes 32, 64 or 128");
      blockTile = std::stoll(std::string(value));
    } else if (arg == "--target" || arg == "-o") {
      if (i + 1 == args.size())
        return usageError(std::string(arg) + " takes a value");
      (arg == "-o" ? output : targetText) = std::string(args[++i]);
    } else if (arg == "--set") {
      if (i + 1 == args.size() ||
          args[i + 1].find('=') == std::string_view::npos)
        return usageError("--set takes KEY=VALUE (--set recompute=layers)");
      settings.emplace_back(args[++i]);
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + std::string(arg) + "'");
    } else {
      files.emplace_back(arg);
    }
  }
  std::optional<Target> target = parseTarget(targetText);
  if (targetText.empty() || !target)
    return usageError("--target takes " + targetNameList());
  if (!targetInfo(*target).gpu)
    return fail(std::string("target '") + targetName(*target) +
                "': bundles are for GPUs (sm_90a, gfx950); the CPU trains "
                "with 'tetra train'");
  if (output.empty())
    return usageError("no output bundle (-o DIR)");
  if (files.empty())
    return usageError("no input files (a run file, or a model and a policy)");
  if (llvm::sys::fs::exists(output))
    return fail("'" + output + "' exists; a bundle is never written over "
                "another (remove it or choose a new -o)");

  llvm::SourceMgr sourceMgr;
  DiagnosticEngine diags(sourceMgr);
  std::optional<LoadedInputs> inputs = loadInputs(
      diags, files, emit, "tetra compile", "--target=" + targetText, settings);
  if (!inputs)
    return 1;
  mlir::MLIRContext context;
  context.printOpOnDiagnostic(false);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  if (inputs->run && !kernelsOnly)
    return writeStepBundle(context, sourceMgr, *inputs, *target, blockTile,
                           settings, output);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      emitModule(context, sourceMgr, inputs->model,
                 inputs->policy ? &*inputs->policy : nullptr, inputs->emit);
  if (!module)
    return 1;
  mlir::PassManager pm(&context);
  PipelineOptions pipeline;
  pipeline.target = *target;
  pipeline.blockTile = blockTile;
  if (inputs->run) {
    pipeline.beta1 = inputs->run->beta1;
    pipeline.beta2 = inputs->run->beta2;
    pipeline.eps = inputs->run->eps;
    pipeline.weightDecay = inputs->run->weightDecay;
    pipeline.clip = inputs->run->clip;
  }
  buildPipeline(pm, pipeline, PipelineStage::Code);
  if (mlir::failed(pm.run(*module)))
    return 1;
  mlir::FailureOr<std::vector<GpuKernelCode>> kernels =
      *target == Target::Gfx950 ? compileToHsaco(*module, targetName(*target))
                                : compileToPtx(*module, targetName(*target));
  if (mlir::failed(kernels))
    return 1;
  // The elementwise kernels' modules belong to step bundles.
  llvm::erase_if(*kernels,
                 [](const GpuKernelCode &kernel) { return kernel.gemm.empty(); });

  // Written beside the destination, then renamed into place.
  std::string staging = output + ".partial";
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code error = llvm::sys::fs::create_directories(staging))
    return fail("cannot create '" + staging + "': " + error.message());
  auto cleanUp = [&](const std::string &message) {
    llvm::sys::fs::remove_directories(staging);
    return fail(message);
  };
  for (const GpuKernelCode &kernel : *kernels) {
    if (io::Status written = io::writeFileAtomically(
            staging + "/" + kernel.name + codeExtension(*target), kernel.code);
        !written)
      return cleanUp(written.error().message());
    if (*target == Target::Gfx950)
      if (io::Status written = io::writeFileAtomically(
              staging + "/" + kernel.name + ".s", kernel.assembly);
          !written)
        return cleanUp(written.error().message());
  }
  if (io::Status written = io::writeFileAtomically(
          staging + "/manifest.json", manifestOf(*kernels, *inputs, *target));
      !written)
    return cleanUp(written.error().message());
  if (std::error_code error = llvm::sys::fs::rename(staging, output))
    return cleanUp("cannot move the bundle into '" + output +
                   "': " + error.message());
  fmt::print("tetra compile: {} GEMM kernel{} for {} ({}) in {}\n",
             kernels->size(), kernels->size() == 1 ? "" : "s",
             targetName(*target), targetInfo(*target).description, output);
  return 0;
}

void tetra::driver::printCompileHelp() {
  std::printf(
      "USAGE: tetra compile --target=T RUN.tetra [POLICY.tetra] -o DIR\n"
      "       tetra compile --kernels --target=T RUN.tetra [POLICY.tetra] -o DIR\n"
      "       tetra compile --target=T MODEL.tetra POLICY.tetra -o DIR\n"
      "\n"
      "Compiles for target T and writes a bundle directory DIR that runs\n"
      "with only the GPU driver. From a run file: the whole training step (a\n"
      "step bundle: schedule.json, run_plan.json, the code objects, a\n"
      "checksum), which 'tetra-run DIR' trains on the GPU. With --kernels,\n"
      "or from a model and a policy: the step's GEMM kernels alone\n"
      "(manifest.json lists every kernel, what it computes, its launches),\n"
      "what the GPU tests and the GEMM benchmark run. A run file gives the\n"
      "batch and sequence sizes and the policy (a policy file given too\n"
      "overrides it). DIR must not exist. docs/tools/compile.md.\n"
      "\n"
      "TARGETS\n"
      "  sm_90a   NVIDIA Hopper (H100/H200): PTX for the CUDA driver\n"
      "  gfx950   AMD MI355X: HSACO (code object v5) for the HIP runtime,\n"
      "           with each kernel's assembly and its resources in the\n"
      "           manifest; compiled and inspected here, never executed\n"
      "\n"
      "OPTIONS\n"
      "  --kernels       the GEMM kernels only (a kernel bundle)\n"
      "  --block-tile=N  the largest side of a GEMM block's result tile:\n"
      "                  32, 64 or 128 (default; a smaller one where the\n"
      "                  shape needs it)\n"
      "  --set KEY=VALUE changes a setting of the run file, as 'tetra train\n"
      "                  --set' does (--set recompute=layers, --set\n"
      "                  micro_batch=8); the bundle's manifest lists them\n");
}
