//===- HipBackendTest.cpp - The HIP backend without an AMD GPU ------------===//
//
// There is no AMD GPU (and no ROCm) here, so this tests what can run
// without one: a missing runtime is a clear error, never a crash; a library
// that is not a HIP runtime is refused by name; and the parameters a launch
// passes are laid out as every compiled gfx950 kernel's metadata expects
// (the bundle named by TETRA_GFX950_BUNDLE: test/tools/compile.test).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/HipBackend.h"
#include "runtime/io/Json.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
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
