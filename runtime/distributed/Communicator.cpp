//===- Communicator.cpp - Ranks from the environment ----------------------===//

#include "runtime/distributed/Communicator.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fmt/format.h>

using namespace tetra;
using namespace tetra::distributed;

std::string_view tetra::distributed::reductionName(Reduction reduction) {
  return reduction == Reduction::FixedOrder ? "fixed_order" : "sum";
}

std::optional<Reduction>
tetra::distributed::parseReduction(std::string_view name) {
  if (name == "sum")
    return Reduction::Sum;
  if (name == "fixed_order")
    return Reduction::FixedOrder;
  return std::nullopt;
}

namespace {

/// An integer variable: absent (nullopt), or its value, or an error.
io::Expected<std::optional<int>> integerVariable(const char *name, int lo,
                                                 int hi) {
  const char *text = std::getenv(name);
  if (!text)
    return std::optional<int>();
  std::string_view view(text);
  int value = 0;
  auto [end, error] = std::from_chars(view.data(), view.data() + view.size(),
                                      value);
  if (error != std::errc() || end != view.data() + view.size() || value < lo ||
      value > hi)
    return io::Error(fmt::format(
        "environment variable {}='{}' is not an integer from {} to {}", name,
        view, lo, hi));
  return std::optional<int>(value);
}

} // namespace

io::Expected<RankInfo> RankInfo::fromEnvironment() {
  RankInfo info;
  io::Expected<std::optional<int>> rank = integerVariable("RANK", 0, 1 << 20);
  io::Expected<std::optional<int>> world =
      integerVariable("WORLD_SIZE", 1, 1 << 20);
  io::Expected<std::optional<int>> local =
      integerVariable("LOCAL_RANK", 0, 1 << 20);
  io::Expected<std::optional<int>> port =
      integerVariable("MASTER_PORT", 1, 65535);
  io::Expected<std::optional<int>> timeout =
      integerVariable("TETRA_COLLECTIVE_TIMEOUT", 1, 86400);
  for (auto *value : {&rank, &world, &local, &port, &timeout})
    if (!*value)
      return value->error();
  if (timeout->has_value())
    info.timeout = std::chrono::seconds(**timeout);
  if (rank->has_value() != world->has_value())
    return io::Error("set both RANK and WORLD_SIZE (as torchrun and SLURM "
                     "do), or neither");
  if (!world->has_value())
    return info;
  info.launched = true;
  info.rank = **rank;
  info.worldSize = **world;
  info.localRank = local->value_or(info.rank);
  if (info.rank >= info.worldSize)
    return io::Error(fmt::format("RANK={} is not below WORLD_SIZE={}",
                                 info.rank, info.worldSize));
  if (const char *addr = std::getenv("MASTER_ADDR"))
    info.masterAddr = addr;
  if (port->has_value())
    info.masterPort = **port;
  return info;
}

std::chrono::seconds RankInfo::launcherGrace() const {
  return std::clamp(timeout, std::chrono::seconds(5), std::chrono::seconds(30));
}

io::Expected<RankConnection>
tetra::distributed::connectRanks(const RankInfo &info,
                                 std::chrono::milliseconds timeout,
                                 const EngineFactory &engine) {
  RankConnection connection;
  io::Expected<std::unique_ptr<TcpStore>> store = TcpStore::connect(
      info.masterAddr, info.masterPort, info.rank == 0, timeout);
  if (!store)
    return store.error();
  connection.store = std::move(*store);
  io::Expected<std::unique_ptr<Communicator>> communicator =
      engine(*connection.store);
  if (!communicator)
    return communicator.error();
  connection.communicator = std::move(*communicator);
  return connection;
}
