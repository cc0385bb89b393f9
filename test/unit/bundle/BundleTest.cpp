//===- BundleTest.cpp - Reading a bundle's manifest back ------------------===//
//
// A bundle comes from outside (another machine, a copy, an edit): every way
// its manifest can be wrong is an error naming the file and the kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/bundle/Bundle.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace tetra;

namespace {

std::string bundleWith(const std::string &manifest, const char *name) {
  std::string dir =
      testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  std::ofstream(dir + "/manifest.json") << manifest;
  std::ofstream(dir + "/k.ptx") << "// code";
  return dir;
}

const char *kGood =
    R"({"format":"tetra-bundle","version":1,"target":"sm_90a","model":"m",)"
    R"("policy":"p","kernels":[{"name":"k","code":"k.ptx",)"
    R"("computes":{"m":16,"scratch":{"lhs.codes":512}},"launches":[)"
    R"({"function":"k__lhs","grid":[2,1,1],"block":[128,1,1],)"
    R"("arguments":["input:0","scratch:lhs.codes","scalar:seed","scalar:step"]}]}]})";

std::string errorOf(const std::string &manifest, const char *name) {
  io::Expected<bundle::Bundle> opened =
      bundle::Bundle::open(bundleWith(manifest, name));
  return opened ? std::string("(opened)") : opened.error().message();
}

} // namespace

TEST(Bundle, ReadsKernelsLaunchesAndCode) {
  io::Expected<bundle::Bundle> opened =
      bundle::Bundle::open(bundleWith(kGood, "good"));
  ASSERT_TRUE(static_cast<bool>(opened)) << opened.error().message();
  ASSERT_EQ(opened->kernels.size(), 1u);
  const bundle::Kernel &kernel = opened->kernels[0];
  EXPECT_EQ(opened->target, "sm_90a");
  EXPECT_EQ(kernel.scratch.at("scratch:lhs.codes"), 512);
  ASSERT_EQ(kernel.launches.size(), 1u);
  EXPECT_EQ(kernel.launches[0].config.grid[0], 2u);
  EXPECT_EQ(kernel.launches[0].config.block[0], 128u);
  EXPECT_EQ(*opened->code(kernel), "// code");

  std::map<std::string, backend::Buffer> buffers = {
      {"input:0", backend::Buffer(0x1000, 64)},
      {"scratch:lhs.codes", backend::Buffer(0x2000, 512)}};
  std::vector<backend::Buffer> args;
  std::vector<backend::Scalar> scalars;
  ASSERT_TRUE(static_cast<bool>(
      kernel.launches[0].bind(buffers, 7, 3, args, scalars)));
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[1].address(), 0x2000u);
  ASSERT_EQ(scalars.size(), 2u);
  EXPECT_EQ(scalars[0].asInt(), 7);
  EXPECT_EQ(scalars[1].asInt(), 3);
  buffers.erase("input:0");
  io::Status unbound = kernel.launches[0].bind(buffers, 7, 3, args, scalars);
  ASSERT_FALSE(static_cast<bool>(unbound));
  EXPECT_EQ(unbound.error().message(),
            "k__lhs: no buffer for argument 'input:0'");
}

TEST(Bundle, EveryBrokenManifestIsNamed) {
  io::Expected<bundle::Bundle> missing =
      bundle::Bundle::open(testing::TempDir() + "/no-such-bundle");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(missing.error().message().find("no-such-bundle/manifest.json"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"format\": ", "json").find("manifest.json: line 1"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"format":"other"})", "format")
                .find("manifest.json: not a Tetra bundle manifest"),
            std::string::npos);
  std::string noLaunches = kGood;
  noLaunches.replace(noLaunches.find("\"launches\""), 10, "\"launchez\"");
  EXPECT_NE(errorOf(noLaunches, "launches")
                .find("manifest.json: kernel 'k': no array \"launches\""),
            std::string::npos);
  std::string escape = kGood;
  escape.replace(escape.find("\"k.ptx\""), 7, "\"../k.ptx\"");
  EXPECT_NE(errorOf(escape, "escape")
                .find("kernel 'k': \"code\" must name a file of the bundle"),
            std::string::npos);
  std::string grid = kGood;
  grid.replace(grid.find("[2,1,1]"), 7, "[2,0,1]");
  EXPECT_NE(errorOf(grid, "grid").find(
                "kernel 'k', launch 'k__lhs': \"grid\" is not three sizes"),
            std::string::npos);
}
