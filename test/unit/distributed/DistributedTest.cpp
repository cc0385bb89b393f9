//===- DistributedTest.cpp - The rendezvous store and Gloo's collectives ---===//
//
// In one process, one thread per rank: the TcpStore's set/get/add/barrier
// and its timeouts, the launcher variables, and the Gloo communicator's
// sums — the fixed-order one in rank order, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/distributed/GlooCommunicator.h"
#include "runtime/distributed/Launcher.h"
#include "runtime/distributed/NcclCommunicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

using namespace tetra;
using namespace tetra::distributed;
using namespace std::chrono_literals;

namespace {


/// Runs `body(rank, store)` on `ranks` threads sharing one store server.
template <typename F> void onRanks(int ranks, F body) {
  const int port = freePort();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank)
    threads.emplace_back([=] {
      auto store = TcpStore::connect("127.0.0.1", port, rank == 0, 5000ms);
      ASSERT_TRUE(store) << store.error().message();
      body(rank, **store);
      // Rank 0 serves: it stays until every rank is done with the store.
      ASSERT_TRUE((*store)->barrier("done", ranks));
    });
  for (std::thread &t : threads)
    t.join();
}

} // namespace

TEST(TcpStoreTest, SetGetAddBarrier) {
  onRanks(3, [](int rank, TcpStore &store) {
    if (rank == 1)
      ASSERT_TRUE(store.set("id", {'a', 'b', 'c'}));
    auto id = store.get("id"); // waits for rank 1
    ASSERT_TRUE(id) << id.error().message();
    EXPECT_EQ(std::string(id->begin(), id->end()), "abc");
    auto count = store.add("arrivals", 2);
    ASSERT_TRUE(count);
    EXPECT_TRUE(*count == 2 || *count == 4 || *count == 6);
    ASSERT_TRUE(store.barrier("b", 3));
    EXPECT_EQ(*store.add("arrivals", 0), 6); // after the barrier: all three
  });
}

TEST(TcpStoreTest, TimeoutsNameWhatWasAwaited) {
  const int port = freePort();
  auto store = TcpStore::connect("127.0.0.1", port, true, 300ms);
  ASSERT_TRUE(store);
  auto missing = (*store)->get("nobody/sets/this");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("'nobody/sets/this'"),
            std::string::npos)
      << missing.error().message();
  // Nobody serves this port: connecting gives up after the timeout.
  auto lonely = TcpStore::connect("127.0.0.1", freePort(), false, 300ms);
  ASSERT_FALSE(lonely);
  EXPECT_NE(lonely.error().message().find("cannot reach rank 0"),
            std::string::npos)
      << lonely.error().message();
}

TEST(RankInfoTest, LauncherVariables) {
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  auto single = RankInfo::fromEnvironment();
  ASSERT_TRUE(single);
  EXPECT_EQ(single->worldSize, 1);
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("MASTER_ADDR", "node7", 1);
  ::setenv("MASTER_PORT", "1234", 1);
  auto four = RankInfo::fromEnvironment();
  ASSERT_TRUE(four);
  EXPECT_EQ(four->rank, 3);
  EXPECT_EQ(four->localRank, 3); // LOCAL_RANK unset: the rank
  EXPECT_EQ(four->masterAddr, "node7");
  EXPECT_EQ(four->masterPort, 1234);
  ::setenv("MASTER_PORT", "70000", 1);
  auto badPort = RankInfo::fromEnvironment();
  ASSERT_FALSE(badPort);
  EXPECT_NE(badPort.error().message().find("MASTER_PORT='70000'"),
            std::string::npos);
  ::setenv("MASTER_PORT", "1234", 1);
  EXPECT_EQ(RankInfo::fromEnvironment()->timeout, std::chrono::seconds(300));
  EXPECT_EQ(RankInfo::fromEnvironment()->launcherGrace(),
            std::chrono::seconds(30));
  ::setenv("TETRA_COLLECTIVE_TIMEOUT", "2", 1);
  EXPECT_EQ(RankInfo::fromEnvironment()->timeout, std::chrono::seconds(2));
  EXPECT_EQ(RankInfo::fromEnvironment()->launcherGrace(),
            std::chrono::seconds(5));
  ::setenv("TETRA_COLLECTIVE_TIMEOUT", "0", 1);
  EXPECT_FALSE(RankInfo::fromEnvironment());
  for (const char *name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "TETRA_COLLECTIVE_TIMEOUT"})
    ::unsetenv(name);
}

TEST(GlooCommunicatorTest, SumsAndBroadcastsAcrossRanks) {
  const int ranks = 3;
  // Values whose fp32 sum depends on the order: 1, 2^-24 and 2^-24 summed
  // in rank order give 1 (each addition rounds back to 1); other orders
  // may give 1 + 2^-23.
  const float values[ranks] = {1.0f, 0x1p-24f, 0x1p-24f};
  onRanks(ranks, [&](int rank, TcpStore &store) {
    RankInfo info;
    info.rank = rank;
    info.worldSize = ranks;
    auto comm = createGlooCommunicator(info, store, 5000ms);
    ASSERT_TRUE(comm) << comm.error().message();
    std::vector<float> data(1000, values[rank]);
    data[999] = static_cast<float>(rank);
    ASSERT_TRUE((*comm)->allReduceSum(data.data(), data.size(),
                                      Reduction::FixedOrder));
    EXPECT_EQ(data[0], 1.0f); // ((1 + 2^-24) + 2^-24), each rounding to 1
    EXPECT_EQ(data[999], 3.0f);
    std::vector<float> ring(1000, static_cast<float>(rank + 1));
    ASSERT_TRUE((*comm)->allReduceSum(ring.data(), ring.size(), Reduction::Sum));
    EXPECT_EQ(ring[500], 6.0f);
    double loss = rank * 0.5;
    ASSERT_TRUE((*comm)->allReduceHost(&loss, 1));
    EXPECT_EQ(loss, 1.5);
    // A broadcast from each rank in turn: everyone gets the root's bits
    // (a NaN payload and a negative zero included).
    for (int root = 0; root < ranks; ++root) {
      std::vector<float> sent = {static_cast<float>(rank), -0.0f,
                                 std::nanf("7"), 0x1p-149f};
      if (rank == root)
        sent[0] = 100.0f + static_cast<float>(root);
      ASSERT_TRUE((*comm)->broadcast(sent.data(), sent.size(), root));
      EXPECT_EQ(sent[0], 100.0f + static_cast<float>(root));
      EXPECT_TRUE(std::signbit(sent[1]));
      uint32_t bits;
      std::memcpy(&bits, &sent[2], sizeof bits);
      uint32_t expected;
      const float nan7 = std::nanf("7");
      std::memcpy(&expected, &nan7, sizeof expected);
      EXPECT_EQ(bits, expected);
      EXPECT_EQ(sent[3], 0x1p-149f);
    }
    ASSERT_TRUE((*comm)->barrier());
  });
}

TEST(NcclCommunicatorTest, MissingLibrariesAreNamed) {
  // CI has neither NCCL nor RCCL: each is named with the variable that
  // points at it, never a crash. (On the H200, tools/ runs NCCL itself.)
  const int port = freePort();
  auto store = TcpStore::connect("127.0.0.1", port, true, 1000ms);
  ASSERT_TRUE(store);
  RankInfo info;
  auto neverIdle = []() -> io::Expected<bool> { return false; };
  ::setenv("TETRA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  auto nccl = createNcclCommunicator(GpuCollectives::Nccl, info, **store,
                                     neverIdle, 1000ms);
  ::unsetenv("TETRA_NCCL_LIBRARY");
  ASSERT_FALSE(nccl);
  EXPECT_NE(nccl.error().message().find(
                "cannot load /nonexistent/libnccl.so.2"),
            std::string::npos)
      << nccl.error().message();
  EXPECT_NE(nccl.error().message().find("TETRA_NCCL_LIBRARY"),
            std::string::npos);
  ::setenv("TETRA_RCCL_LIBRARY", "/nonexistent/librccl.so.1", 1);
  auto rccl = createNcclCommunicator(GpuCollectives::Rccl, info, **store,
                                     neverIdle, 1000ms);
  ::unsetenv("TETRA_RCCL_LIBRARY");
  ASSERT_FALSE(rccl);
  EXPECT_NE(rccl.error().message().find("AMD GPU ranks need it"),
            std::string::npos)
      << rccl.error().message();
  // A library that is not NCCL's: its missing entry points are listed.
  ::setenv("TETRA_NCCL_LIBRARY", "libz.so.1", 1);
  auto notNccl = createNcclCommunicator(GpuCollectives::Nccl, info, **store,
                                        neverIdle, 1000ms);
  ::unsetenv("TETRA_NCCL_LIBRARY");
  ASSERT_FALSE(notNccl);
  EXPECT_NE(notNccl.error().message().find("lacks ncclGetVersion"),
            std::string::npos)
      << notNccl.error().message();
}
