//===- CpuJitTest.cpp - Kernel compilation and the object cache -----------===//
//
// driver/CpuJit.h: a miss compiles with the ExecutionEngine and stores the
// object; a hit loads it into an LLJIT without code generation, and runs the
// same code; the key follows the IR, the target and the optimization level;
// a damaged cache entry is recompiled; errors carry the diagnostics.
//
//===----------------------------------------------------------------------===//

#include "test/unit/lowering/KernelHarness.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <fstream>

using namespace tetra;
using namespace tetra::testing;

namespace {

const char *kSource = R"mlir(
func.func @host(%x: tensor<?x32xf32>) -> (tensor<?x32xf4E2M1FN>, tensor<?x1xf8E8M0FNU>) {
  %c:2 = tetra.kernel "quantize_rows" (%a = %x) : (tensor<?x32xf32>) -> (tensor<?x32xf4E2M1FN>, tensor<?x1xf8E8M0FNU>) {
    %codes, %scales = tetra.quantize %a as #tetra.quant<mxfp4> along 1 : tensor<?x32xf32> -> tensor<?x32xf4E2M1FN>, tensor<?x1xf8E8M0FNU>
    tetra.yield %codes, %scales : tensor<?x32xf4E2M1FN>, tensor<?x1xf8E8M0FNU>
  }
  return %c#0, %c#1 : tensor<?x32xf4E2M1FN>, tensor<?x1xf8E8M0FNU>
}
)mlir";

/// A cache directory of this test's own, emptied first.
std::string freshCacheDirectory(const std::string &name) {
  llvm::SmallString<256> path;
  llvm::sys::fs::createUniqueDirectory("tetra-jit-" + name, path);
  return std::string(path);
}

/// Runs quantize_rows on 3 rows; returns codes then scales.
std::vector<uint8_t> run(const cpu::KernelLibrary &library) {
  std::vector<float> x(3 * 32);
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = std::ldexp(float(int(k % 13) - 6), int(k / 32) * 3);
  std::vector<uint8_t> codes(x.size()), scales(3);
  auto input = describe<float, 2>(x.data(), {3, 32});
  auto codesDescriptor = describe<uint8_t, 2>(codes.data(), {3, 32});
  auto scalesDescriptor = describe<uint8_t, 2>(scales.data(), {3, 1});
  auto *kernel = library.lookupAs<void(
      MemRefDescriptor<float, 2> *, MemRefDescriptor<uint8_t, 2> *,
      MemRefDescriptor<uint8_t, 2> *)>("quantize_rows");
  EXPECT_NE(kernel, nullptr);
  if (!kernel)
    return {};
  kernel(&input, &codesDescriptor, &scalesDescriptor);
  codes.insert(codes.end(), scales.begin(), scales.end());
  // The same through the packed entry point.
  std::vector<uint8_t> packedCodes(x.size()), packedScales(3);
  auto packedCodesDescriptor =
      describe<uint8_t, 2>(packedCodes.data(), {3, 32});
  auto packedScalesDescriptor =
      describe<uint8_t, 2>(packedScales.data(), {3, 1});
  void *pointers[] = {&input, &packedCodesDescriptor, &packedScalesDescriptor};
  void *arguments[] = {&pointers[0], &pointers[1], &pointers[2]};
  library.lookupPacked("quantize_rows")(arguments);
  packedCodes.insert(packedCodes.end(), packedScales.begin(),
                     packedScales.end());
  EXPECT_EQ(codes, packedCodes);
  return codes;
}

std::vector<uint8_t> expected() {
  std::vector<float> x(3 * 32);
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = std::ldexp(float(int(k % 13) - 6), int(k / 32) * 3);
  numerics::QuantizedTensor q = numerics::quantize(
      x.data(), {3, 32}, 1, *numerics::blockFormatPreset("mxfp4"));
  q.codes.insert(q.codes.end(), q.scales.begin(), q.scales.end());
  return q.codes;
}

} // namespace

TEST(CpuJit, MissCompilesAndStoresThenHitLoads) {
  cpu::JitOptions options;
  options.cacheDirectory = freshCacheDirectory("hit");
  auto first = cpu::compileKernels(kSource, options);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  EXPECT_FALSE((*first)->loadedFromCache());
  const std::string path = (*first)->cachePath().str();
  EXPECT_TRUE(llvm::StringRef(path).starts_with(options.cacheDirectory));
  EXPECT_TRUE(llvm::StringRef(path).ends_with(".o"));
  EXPECT_TRUE(llvm::sys::fs::exists(path));
  EXPECT_EQ((*first)->kernelNames().size(), 1u);
  EXPECT_EQ((*first)->signature("quantize_rows"),
            "(tensor<?x32xf32>) -> (tensor<?x32xf4E2M1FN>, "
            "tensor<?x1xf8E8M0FNU>)");

  auto second = cpu::compileKernels(kSource, options);
  ASSERT_TRUE(bool(second)) << llvm::toString(second.takeError());
  EXPECT_TRUE((*second)->loadedFromCache());
  EXPECT_EQ((*second)->cachePath(), path);

  // Both run, and agree with numerics.
  EXPECT_EQ(run(**first), expected());
  EXPECT_EQ(run(**second), expected());
  llvm::sys::fs::remove_directories(options.cacheDirectory);
}

TEST(CpuJit, WithoutTheCacheNothingIsWritten) {
  cpu::JitOptions options;
  options.cacheDirectory = freshCacheDirectory("off");
  options.useCache = false;
  auto library = cpu::compileKernels(kSource, options);
  ASSERT_TRUE(bool(library)) << llvm::toString(library.takeError());
  EXPECT_FALSE((*library)->loadedFromCache());
  EXPECT_TRUE((*library)->cachePath().empty());
  std::error_code error;
  EXPECT_EQ(llvm::sys::fs::directory_iterator(options.cacheDirectory, error),
            llvm::sys::fs::directory_iterator());
  EXPECT_EQ(run(**library), expected());
  llvm::sys::fs::remove_directories(options.cacheDirectory);
}

TEST(CpuJit, DamagedEntryIsRecompiled) {
  cpu::JitOptions options;
  options.cacheDirectory = freshCacheDirectory("damaged");
  auto first = cpu::compileKernels(kSource, options);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  const std::string path = (*first)->cachePath().str();
  {
    std::ofstream(path, std::ios::trunc) << "not an object file";
  }
  auto second = cpu::compileKernels(kSource, options);
  ASSERT_TRUE(bool(second)) << llvm::toString(second.takeError());
  EXPECT_FALSE((*second)->loadedFromCache());
  EXPECT_EQ(run(**second), expected());
  // ... and the entry is whole again.
  auto third = cpu::compileKernels(kSource, options);
  ASSERT_TRUE(bool(third)) << llvm::toString(third.takeError());
  EXPECT_TRUE((*third)->loadedFromCache());
  llvm::sys::fs::remove_directories(options.cacheDirectory);
}

TEST(CpuJit, KeyFollowsIRTargetAndLevel) {
  const std::string key = cpu::cacheKey("ir", "x86_64 znver3", 2);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, cpu::cacheKey("ir", "x86_64 znver3", 2));
  EXPECT_NE(key, cpu::cacheKey("ir2", "x86_64 znver3", 2));
  EXPECT_NE(key, cpu::cacheKey("ir", "x86_64 skylake", 2));
  EXPECT_NE(key, cpu::cacheKey("ir", "x86_64 znver3", 3));
  // The parts are delimited: moving a character between them changes it.
  EXPECT_NE(cpu::cacheKey("ab", "c", 2), cpu::cacheKey("a", "bc", 2));
}

TEST(CpuJit, ErrorsCarryTheDiagnostics) {
  cpu::JitOptions options;
  options.useCache = false;
  auto unparsable = cpu::compileKernels("func.func @f(", options);
  ASSERT_FALSE(bool(unparsable));
  EXPECT_NE(llvm::toString(unparsable.takeError())
                .find("cannot parse the kernel module"),
            std::string::npos);

  auto unsupported = cpu::compileKernels(R"mlir(
func.func @f() -> tensor<4xf32> {
  %y = tetra.kernel "empty" () : () -> tensor<4xf32> {
    %e = tensor.empty() : tensor<4xf32>
    tetra.yield %e : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}
)mlir",
                                         options);
  ASSERT_FALSE(bool(unsupported));
  const std::string message = llvm::toString(unsupported.takeError());
  EXPECT_NE(message.find("cannot be compiled for the CPU"), std::string::npos)
      << message;
}
