//===- StepBundle.cpp - A whole training step, compiled for a GPU ---------===//

#include "runtime/bundle/StepBundle.h"

#include "runtime/backend/CudaBackend.h"
#include "runtime/backend/HipBackend.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/io/Json.h"

#include <cinttypes>
#include <cstdio>
#include <fmt/format.h>

using namespace tetra;
using namespace tetra::bundle;

io::Expected<std::string>
bundle::checksumOf(const std::string &directory,
                   const std::vector<std::string> &files) {
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&](const std::string &bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 0x100000001b3ull;
    }
  };
  for (const std::string &file : files) {
    io::Expected<std::string> bytes = io::readFile(directory + "/" + file);
    if (!bytes)
      return bytes.error();
    mix(file);
    mix(*bytes);
  }
  return fmt::format("{:016x}", hash);
}

io::Expected<StepBundle> StepBundle::open(const std::string &directory) {
  const std::string where = "bundle '" + directory + "'";
  io::Expected<std::string> manifestText = io::readFile(directory + "/manifest.json");
  if (!manifestText)
    return io::Error(where + ": no manifest.json (not a step bundle?)");
  io::Expected<io::JsonValue> manifest = io::parseJson(*manifestText);
  if (!manifest)
    return io::Error(where + ": manifest.json: " + manifest.error().message());
  auto text = [&](const char *key) -> std::string {
    const io::JsonValue *value = manifest->find(key);
    return value && value->isString() ? value->asString() : "";
  };
  if (text("format") != "tetra-step-bundle")
    return io::Error(where + ": manifest.json is not a step bundle's (format '" +
                     text("format") +
                     "'; a kernels-only bundle runs in the GPU tests)");
  if (text("runtime_version") != kRuntimeVersion)
    return io::Error(where + ": compiled for Tetra runtime " +
                     text("runtime_version") + ", this is runtime " +
                     kRuntimeVersion + ": recompile it with this Tetra");

  StepBundle bundle;
  bundle.directory = directory;
  bundle.target = text("target");
  bundle.model = text("model");
  bundle.policy = text("policy");
  bundle.run = text("run");
  const io::JsonValue *code = manifest->find("code");
  if (!code || !code->isArray() || code->items().empty())
    return io::Error(where + ": manifest.json lists no code objects");
  std::vector<std::string> checked = {"manifest.json", "schedule.json",
                                      "run_plan.json", "reference.json"};
  for (const io::JsonValue &entry : code->items()) {
    const io::JsonValue *name = entry.find("name");
    const io::JsonValue *file = entry.find("file");
    if (!name || !name->isString() || !file || !file->isString() ||
        file->asString().find('/') != std::string::npos)
      return io::Error(where + ": a code object needs a name and a file in "
                               "the bundle");
    StepCode object;
    object.name = name->asString();
    object.file = file->asString();
    object.format = bundle.target == "gfx950" ? backend::CodeObjectFormat::Hsaco
                                              : backend::CodeObjectFormat::Ptx;
    checked.push_back(object.file);
    bundle.code.push_back(std::move(object));
  }

  io::Expected<std::string> stored = io::readFile(directory + "/checksum");
  if (!stored)
    return io::Error(where + ": no checksum file");
  io::Expected<std::string> actual = checksumOf(directory, checked);
  if (!actual)
    return io::Error(where + ": " + actual.error().message());
  std::string expected = *stored;
  while (!expected.empty() && (expected.back() == '\n' || expected.back() == ' '))
    expected.pop_back();
  if (expected != "fnv1a64 " + *actual)
    return io::Error(where + ": checksum mismatch (stored '" + expected +
                     "', the files give 'fnv1a64 " + *actual +
                     "'): the bundle is corrupt or was edited");

  for (StepCode &object : bundle.code) {
    io::Expected<std::string> bytes = io::readFile(directory + "/" + object.file);
    if (!bytes)
      return io::Error(where + ": " + bytes.error().message());
    object.bytes = std::move(*bytes);
  }
  io::Expected<std::string> scheduleText =
      io::readFile(directory + "/schedule.json");
  if (!scheduleText)
    return io::Error(where + ": " + scheduleText.error().message());
  io::Expected<schedule::Schedule> plan = schedule::fromJson(*scheduleText);
  if (!plan)
    return io::Error(where + ": schedule.json: " + plan.error().message());
  bundle.schedule = std::move(*plan);
  io::Expected<std::string> referenceText =
      io::readFile(directory + "/reference.json");
  if (!referenceText)
    return io::Error(where + ": " + referenceText.error().message());
  io::Expected<schedule::Schedule> reference =
      schedule::fromJson(*referenceText);
  if (!reference)
    return io::Error(where + ": reference.json: " +
                     reference.error().message());
  bundle.reference = std::move(*reference);
  const io::JsonValue *first = manifest->find("first_launch");
  if (!first || !first->isArray() ||
      first->items().size() != bundle.reference.launches.size() + 1)
    return io::Error(where + ": manifest.json: 'first_launch' must give one "
                             "launch per reference launch, and the end");
  for (const io::JsonValue &at : first->items()) {
    int64_t value = at.isNumber() ? static_cast<int64_t>(at.asDouble()) : -1;
    if (value < 0 || value > static_cast<int64_t>(bundle.schedule.launches.size()) ||
        (!bundle.firstLaunch.empty() && value < bundle.firstLaunch.back()))
      return io::Error(where + ": manifest.json: 'first_launch' is not an "
                               "ascending list of launches");
    bundle.firstLaunch.push_back(static_cast<int>(value));
  }
  if (bundle.firstLaunch.back() !=
      static_cast<int>(bundle.schedule.launches.size()))
    return io::Error(where + ": manifest.json: 'first_launch' must end at the "
                             "schedule's end");
  io::Expected<std::string> runText = io::readFile(directory + "/run_plan.json");
  if (!runText)
    return io::Error(where + ": " + runText.error().message());
  io::Expected<io::JsonValue> runJson = io::parseJson(*runText);
  if (!runJson)
    return io::Error(where + ": run_plan.json: " + runJson.error().message());
  io::Expected<trainer::RunPlan> runPlan = trainer::RunPlan::fromJson(*runJson);
  if (!runPlan)
    return io::Error(where + ": run_plan.json: " + runPlan.error().message());
  bundle.plan = std::move(*runPlan);
  bundle.manifest = std::move(*manifest);
  return bundle;
}

io::Expected<std::unique_ptr<backend::Backend>>
bundle::openDevice(const std::string &target, int ordinal) {
  if (target == "sm_90a") {
    io::Expected<std::unique_ptr<backend::CudaBackend>> cuda =
        backend::CudaBackend::create(ordinal);
    if (!cuda)
      return cuda.error();
    if ((*cuda)->computeCapability() != 90)
      return io::Error("sm_90a code runs on Hopper (compute capability 9.0); "
                       "this GPU is " + (*cuda)->description());
    return std::unique_ptr<backend::Backend>(std::move(*cuda));
  }
  if (target == "gfx950") {
    io::Expected<std::unique_ptr<backend::HipBackend>> hip =
        backend::HipBackend::create(ordinal);
    if (!hip)
      return hip.error();
    return std::unique_ptr<backend::Backend>(std::move(*hip));
  }
  return io::Error("no GPU runs target '" + target + "' (sm_90a, gfx950)");
}

io::Expected<std::vector<backend::Module>>
bundle::loadCode(backend::Backend &device, const std::vector<StepCode> &code) {
  std::vector<backend::Module> modules;
  for (const StepCode &object : code) {
    io::Expected<backend::Module> module =
        device.loadModule(backend::CodeObject::binary(
            object.format,
            backend::ArrayView<uint8_t>(
                reinterpret_cast<const uint8_t *>(object.bytes.data()),
                object.bytes.size()),
            object.name));
    if (!module)
      return io::Error("loading '" + object.name + "': " +
                       module.error().message());
    modules.push_back(*module);
  }
  return modules;
}
