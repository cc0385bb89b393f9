//===- Rematerialize.cpp - Recompute activations in the backward ----------===//
//
// A forward launch whose output is kept only for the backward, and which
// can run again from inputs the backward keeps anyway (or recomputes), runs
// again right before the output's first backward use instead: the output
// then lives through the forward alone. Which outputs: a run's `recompute`
// (Recompute.h). The kernels are deterministic, so the recomputed values
// are the same bits.
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

/// Whether `launch` may run twice with the same result: it takes no
/// run-time scalar (the step, a stochastic-rounding seed, the learning
/// rate), and like every forward launch it writes only buffers it is the
/// first to use (of the schedule's launches only AdamW and clipping write
/// a buffer in place), so a copy that reads the same inputs computes the
/// same values.
bool pure(const Launch &launch) { return launch.boundScalars.empty(); }

/// Whether `launch` is also cheap to run twice: an RMSNorm, or a compiled
/// elementwise kernel.
bool cheap(const Launch &launch) {
  return launch.kernel == "rmsnorm.forward" ||
         (launch.kernel.rfind("elementwise_", 0) == 0 && !launch.gemm);
}

} // namespace

int rematerialize(Schedule &schedule, Recompute mode) {
  const int forwardEnd = schedule.phases.forwardEnd;
  const int gradientsEnd = schedule.phases.gradientsEnd;
  if (mode == Recompute::None || forwardEnd < 0 || gradientsEnd < 0 ||
      forwardEnd >= gradientsEnd)
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

  // Layers and Products: the residual stream — every RMSNorm's input — is
  // checkpointed (under Products a GEMM's output plus the stream: to
  // recompute it would be to recompute every layer before it). Layers
  // recomputes what the forward computes before its last RMSNorm from it.
  // (What comes after, the final norm's output and the logits, the backward
  // reads first: recomputing it would free nothing.)
  std::set<int> checkpoints;
  int lastNorm = 0;
  if (mode == Recompute::Layers || mode == Recompute::Products)
    for (int l = 0; l < forwardEnd; ++l)
      if (launches[l].kernel == "rmsnorm.forward") {
        checkpoints.insert(launches[l].buffers[0]);
        lastNorm = l;
      }

  // The outputs that may be recomputed, produced by a pure forward launch,
  // never a checkpoint: large ones of a cheap launch, read in the backward;
  // with Products, any of a GEMM or RoPE before the last norm (the logits
  // and what comes after, the backward reads first); with Layers, any of a
  // launch before the last norm. Those the backward does not read but a
  // recomputed launch does are recomputed too (intermediates: a query's
  // projection before its RoPE).
  // None read after the gradients' end (kept anyway).
  std::set<int> recomputable;
  for (int l = 0; l < forwardEnd; ++l) {
    if (!pure(launches[l]))
      continue;
    for (int b : outputsOf(l)) {
      const bool read = usedFrom(b, forwardEnd);
      if (read && uses[b].back() >= gradientsEnd)
        continue;
      const bool large =
          schedule.buffers[b].numElements() * 4 >= kRematerializeBytes;
      const bool product =
          mode == Recompute::Products && l < lastNorm &&
          (launches[l].gemm || launches[l].kernel == "rope.forward");
      const bool layer = mode == Recompute::Layers && l < lastNorm;
      if (!checkpoints.count(b) &&
          ((cheap(launches[l]) && large && read) || product || layer))
        recomputable.insert(b);
    }
  }
  // Every input of a recomputed launch must be there in the backward: kept
  // anyway (read there, or not a temporary), or recomputed itself.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = recomputable.begin(); it != recomputable.end();) {
      const Launch &launch = launches[producer[*it]];
      bool available = true;
      for (int b : launch.buffers)
        if (temporary(b) && producer[b] != producer[*it] &&
            !recomputable.count(b) && !usedFrom(b, forwardEnd))
          available = false;
      if (available) {
        ++it;
      } else {
        it = recomputable.erase(it);
        changed = true;
      }
    }
  }
  // Those the backward reads: each recomputed before its first read there.
  std::set<int> chosen;
  for (int b : recomputable)
    if (usedFrom(b, forwardEnd))
      chosen.insert(b);
  if (chosen.empty())
    return 0;

  // Rebuild the list: before a backward launch that reads a chosen output,
  // its producer again (its own recomputed inputs first), writing fresh
  // temporaries that the backward reads from then on.
  std::vector<Launch> rebuilt;
  rebuilt.reserve(count + chosen.size());
  std::map<int, int> again; // recomputed output -> its fresh buffer
  int added = 0;
  std::function<void(int)> recompute = [&](int l) {
    for (int b : launches[l].buffers)
      if (recomputable.count(b) && producer[b] != l && !again.count(b))
        recompute(producer[b]);
    Launch copy = launches[l];
    for (int &b : copy.buffers) {
      if (producer[b] == l && temporary(b)) {
        BufferDesc fresh = schedule.buffers[b];
        fresh.name += ".again";
        schedule.buffers.push_back(fresh);
        const int index = static_cast<int>(schedule.buffers.size()) - 1;
        if (recomputable.count(b))
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
