//===- HipBackendTest.cpp - The HIP backend without an AMD GPU ------------===//
//
// There is no AMD GPU (and no ROCm) here, so this tests what can run
// without one: a missing runtime is a clear error, never a crash; a library
// that is not a HIP runtime is refused by name; and the parameters a launch
// passes are laid out as every compiled gfx950 kernel's metadata expects
// (the bundle named by TETRA_GFX950_BUNDLE: test/tools/compile.test), and
// every launch of a step bundle as its function's metadata expects
// (TETRA_GFX950_STEP_BUNDLE: test/tools/compile-step.test).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/HipBackend.h"
#include "runtime/bundle/StepBundle.h"
#include "runtime/io/Json.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace tetra;
using namespace tetra::backend;

TEST(HipBackend, AMissingRuntimeIsAClearError) {
  io::Expected<std::unique_ptr<HipBackend>> backend =
      HipBackend::create(0, "libamdhip64-not-here.so");
  ASSERT_FALSE(static_cast<bool>(backend));
  EXPECT_NE(backend.error().message().find(
                "the HIP runtime (libamdhip64-not-here.so) is not installed: "
                "running gfx950 code needs ROCm's runtime on this machine"),
            std::string::npos)
      << backend.error().message();
}

TEST(HipBackend, ALibraryThatIsNotHipIsRefusedByName) {
  // libc is there everywhere and has no hipInit.
  io::Expected<std::unique_ptr<HipBackend>> backend =
      HipBackend::create(0, "libc.so.6");
  ASSERT_FALSE(static_cast<bool>(backend));
  EXPECT_EQ(backend.error().message(),
            "libc.so.6 has no hipInit: not a HIP runtime Tetra can use");
}

TEST(HipBackend, ParametersAreEightByteSlotsBuffersFirst) {
  std::vector<KernelParameter> layout = HipBackend::parameterLayout(3, 2);
  ASSERT_EQ(layout.size(), 5u);
  for (size_t i = 0; i < layout.size(); ++i) {
    EXPECT_EQ(layout[i].offset, static_cast<int64_t>(8 * i));
    EXPECT_EQ(layout[i].size, 8);
    EXPECT_STREQ(layout[i].kind, i < 3 ? "global_buffer" : "by_value");
  }
}

/// Every launch of every kernel of a gfx950 bundle: its arguments (buffers
/// and scalars, as the manifest lists them) packed by parameterLayout() land
/// where the code object's metadata says the kernel reads them.
TEST(HipBackend, LaunchesMatchEveryCompiledKernelsMetadata) {
  const char *bundle = std::getenv("TETRA_GFX950_BUNDLE");
  if (!bundle)
    GTEST_SKIP() << "TETRA_GFX950_BUNDLE names no gfx950 bundle";
  std::ifstream in(std::string(bundle) + "/manifest.json");
  std::stringstream text;
  text << in.rdbuf();
  io::Expected<io::JsonValue> manifest = io::parseJson(text.str());
  ASSERT_TRUE(static_cast<bool>(manifest)) << manifest.error().message();
  int checked = 0;
  for (const io::JsonValue &kernel : manifest->find("kernels")->items()) {
    for (const io::JsonValue &launch : kernel.find("launches")->items()) {
      std::string function = launch.find("function")->asString();
      size_t buffers = 0, scalars = 0;
      for (const io::JsonValue &argument : launch.find("arguments")->items())
        ++(argument.asString().rfind("scalar:", 0) == 0 ? scalars : buffers);
      const io::JsonValue *metadata = nullptr;
      for (const io::JsonValue &used : kernel.find("resources")->items())
        if (used.find("function")->asString() == function)
          metadata = used.find("kernargs");
      ASSERT_NE(metadata, nullptr) << function;
      std::vector<KernelParameter> layout =
          HipBackend::parameterLayout(buffers, scalars);
      ASSERT_EQ(metadata->items().size(), layout.size()) << function;
      for (size_t i = 0; i < layout.size(); ++i) {
        const io::JsonValue &expected = metadata->items()[i];
        EXPECT_EQ(expected.find("offset")->asInt64(), layout[i].offset)
            << function << " argument " << i;
        EXPECT_EQ(expected.find("size")->asInt64(), layout[i].size)
            << function << " argument " << i;
        EXPECT_EQ(expected.find("kind")->asString(), layout[i].kind)
            << function << " argument " << i;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  std::printf("%d launches match their kernels' metadata\n", checked);
}

/// Every launch of a gfx950 step bundle's schedule (TETRA_GFX950_STEP_BUNDLE,
/// test/tools/compile-step.test): its buffers and scalars, packed by
/// parameterLayout(), land where the metadata of the function it calls says
/// the kernel reads them — the library's and the elementwise kernels' as
/// the GEMMs'.
TEST(HipBackend, StepLaunchesMatchTheirFunctionsMetadata) {
  const char *path = std::getenv("TETRA_GFX950_STEP_BUNDLE");
  if (!path)
    GTEST_SKIP() << "TETRA_GFX950_STEP_BUNDLE names no gfx950 step bundle";
  io::Expected<bundle::StepBundle> step = bundle::StepBundle::open(path);
  ASSERT_TRUE(static_cast<bool>(step)) << step.error().message();
  ASSERT_EQ(step->target, "gfx950");
  std::map<std::string, const io::JsonValue *> kernargs;
  for (const io::JsonValue &code : step->manifest.find("code")->items()) {
    const io::JsonValue *resources = code.find("resources");
    ASSERT_NE(resources, nullptr) << code.find("name")->asString();
    for (const io::JsonValue &used : resources->items())
      kernargs[used.find("function")->asString()] = used.find("kernargs");
  }
  int checked = 0;
  std::set<std::string> functions;
  for (const schedule::Launch &launch : step->schedule.launches) {
    auto found = kernargs.find(launch.kernel);
    ASSERT_NE(found, kernargs.end()) << launch.kernel << " has no metadata";
    std::vector<KernelParameter> layout = HipBackend::parameterLayout(
        launch.buffers.size(), launch.scalars.size());
    const io::JsonValue &metadata = *found->second;
    ASSERT_EQ(metadata.items().size(), layout.size()) << launch.kernel;
    for (size_t i = 0; i < layout.size(); ++i) {
      const io::JsonValue &expected = metadata.items()[i];
      EXPECT_EQ(expected.find("offset")->asInt64(), layout[i].offset)
          << launch.kernel << " argument " << i;
      EXPECT_EQ(expected.find("size")->asInt64(), layout[i].size)
          << launch.kernel << " argument " << i;
      EXPECT_EQ(expected.find("kind")->asString(), layout[i].kind)
          << launch.kernel << " argument " << i;
    }
    functions.insert(launch.kernel);
    ++checked;
  }
  EXPECT_GT(checked, 0);
  std::printf("%d launches of %zu functions match their metadata\n", checked,
              functions.size());
}
