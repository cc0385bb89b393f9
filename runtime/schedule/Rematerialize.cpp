//===- Rematerialize.cpp - Recompute cheap activations in the backward ----===//
//
// A forward launch whose large output is kept only for the backward, and
// which is cheap to run again from inputs the backward keeps anyway, runs
// again right before the output's first backward use instead: the output
// then lives through the forward alone. The kernels are deterministic, so
// the recomputed values are the same bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/schedule/Schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace tetra::schedule {

namespace {

/// Outputs smaller than this stay: their bytes are not worth a launch.
constexpr int64_t kRematerializeBytes = 1 << 20;

/// Whether `launch` may run twice with the same result at a low cost: an
/// RMSNorm, or a compiled elementwise kernel with no run-time scalars.
/// Both write only buffers they are the first to use (fresh results: of
/// the schedule's launches only AdamW and clipping write a buffer in
/// place), so a copy that reads the same inputs computes the same values.
bool cheapAndPure(const Launch &launch) {
  if (launch.kernel == "rmsnorm.forward")
    return true;
  return launch.kernel.rfind("elementwise_", 0) == 0 && !launch.gemm &&
         launch.boundScalars.empty();
}

} // namespace

int rematerializeCheapLaunches(Schedule &schedule) {
  const int forwardEnd = schedule.phases.forwardEnd;
  const int gradientsEnd = schedule.phases.gradientsEnd;
  if (forwardEnd < 0 || gradientsEnd < 0 || forwardEnd >= gradientsEnd)
    return 0;
  std::vector<Launch> &launches = schedule.launches;
  const int count = static_cast<int>(launches.size());
  // Each temporary's producer (its first launch) and its uses.
  std::vector<int> producer(schedule.buffers.size(), -1);
  std::vector<std::vector<int>> uses(schedule.buffers.size());
  for (int l = 0; l < count; ++l)
    for (int b : launches[l].buffers) {
      if (producer[b] < 0)
        producer[b] = l;
      if (uses[b].empty() || uses[b].back() != l)
        uses[b].push_back(l);
    }
  auto temporary = [&](int b) {
    return schedule.buffers[b].role == BufferRole::Temporary;
  };
  auto usedFrom = [&](int b, int from) {
    return std::any_of(uses[b].begin(), uses[b].end(),
                       [&](int l) { return l >= from; });
  };
  auto outputsOf = [&](int l) {
    std::vector<int> outputs;
    for (int b : launches[l].buffers)
      if (temporary(b) && producer[b] == l)
        outputs.push_back(b);
    return outputs;
  };

  // The outputs to recompute: large, produced by a cheap forward launch,
  // used in the backward and not after the gradients' end.
  std::set<int> chosen;
  for (int l = 0; l < forwardEnd; ++l) {
    if (!cheapAndPure(launches[l]))
      continue;
    for (int b : outputsOf(l))
      if (schedule.buffers[b].numElements() * 4 >= kRematerializeBytes &&
          usedFrom(b, forwardEnd) && uses[b].back() < gradientsEnd)
        chosen.insert(b);
  }
  // Every input of a recomputed launch must be there in the backward: kept
  // anyway (used there, or not a temporary), or recomputed itself.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = chosen.begin(); it != chosen.end();) {
      const Launch &launch = launches[producer[*it]];
      bool available = true;
      for (int b : launch.buffers)
        if (temporary(b) && producer[b] != producer[*it] && !chosen.count(b) &&
            !usedFrom(b, forwardEnd))
          available = false;
      if (available) {
        ++it;
      } else {
        it = chosen.erase(it);
        changed = true;
      }
    }
  }
  if (chosen.empty())
    return 0;

  // Rebuild the list: before a backward launch that reads a chosen output,
  // its producer again (its own chosen inputs first), writing fresh
  // temporaries that the backward reads from then on.
  std::vector<Launch> rebuilt;
  rebuilt.reserve(count + chosen.size());
  std::map<int, int> again; // chosen output -> its recomputed buffer
  int added = 0;
  std::function<void(int)> recompute = [&](int l) {
    for (int b : launches[l].buffers)
      if (chosen.count(b) && producer[b] != l && !again.count(b))
        recompute(producer[b]);
    Launch copy = launches[l];
    for (int &b : copy.buffers) {
      if (producer[b] == l && temporary(b)) {
        BufferDesc fresh = schedule.buffers[b];
        fresh.name += ".again";
        schedule.buffers.push_back(fresh);
        const int index = static_cast<int>(schedule.buffers.size()) - 1;
        if (chosen.count(b))
          again[b] = index;
        b = index;
      } else if (auto found = again.find(b); found != again.end()) {
        b = found->second;
      }
    }
    copy.origin += " (recomputed for the backward)";
    rebuilt.push_back(std::move(copy));
    ++added;
  };
  for (int l = 0; l < count; ++l) {
    Launch launch = launches[l];
    if (l >= forwardEnd && l < gradientsEnd) {
      for (int b : launch.buffers)
        if (chosen.count(b) && !again.count(b))
          recompute(producer[b]);
      for (int &b : launch.buffers)
        if (auto found = again.find(b); found != again.end())
          b = found->second;
    }
    rebuilt.push_back(std::move(launch));
  }
  launches = std::move(rebuilt);
  schedule.phases.gradientsEnd += added;
  if (schedule.phases.updateBegin >= 0)
    schedule.phases.updateBegin += added;
  return added;
}

} // namespace tetra::schedule
