//===- Backend.cpp - Recorded launches, replayed one by one ---------------===//
//
// The base class's recorded lists (Backend.h): a backend without a cheaper
// way to submit a list replays it through launch(), one launch at a time.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"

#include <fmt/format.h>

using namespace tetra;
using namespace tetra::backend;

namespace tetra::backend {

io::Status applyScalarChanges(std::vector<ListedLaunch> &launches,
                              ArrayView<ScalarChange> changes) {
  for (const ScalarChange &change : changes) {
    if (change.launch < 0 ||
        static_cast<size_t>(change.launch) >= launches.size() ||
        change.scalar < 0 ||
        static_cast<size_t>(change.scalar) >=
            launches[change.launch].scalars.size())
      return io::Error(fmt::format(
          "replay: the list has no scalar {} in launch {} ({} launches)",
          change.scalar, change.launch, launches.size()));
    launches[change.launch].scalars[change.scalar] = change.value;
  }
  return io::success();
}

} // namespace tetra::backend

io::Expected<LaunchList>
Backend::recordLaunches(std::vector<ListedLaunch> launches) {
  LaunchList list{nextLaunchList_++};
  launchLists_[list.handle] = std::move(launches);
  return list;
}

io::Status Backend::replay(LaunchList list, ArrayView<ScalarChange> changes,
                           Stream stream, int *refused) {
  if (refused)
    *refused = -1;
  auto found = launchLists_.find(list.handle);
  if (found == launchLists_.end())
    return io::Error("replay: not a recorded list of this backend");
  std::vector<ListedLaunch> &launches = found->second;
  if (io::Status applied = applyScalarChanges(launches, changes); !applied)
    return applied;
  for (size_t l = 0; l < launches.size(); ++l) {
    const ListedLaunch &launch = launches[l];
    if (io::Status launched =
            this->launch(launch.kernel, launch.config,
                         ArrayView<Buffer>(launch.buffers),
                         ArrayView<Scalar>(launch.scalars), stream);
        !launched) {
      if (refused)
        *refused = static_cast<int>(l);
      return launched;
    }
  }
  return io::success();
}

io::Status Backend::releaseLaunches(LaunchList list) {
  if (launchLists_.erase(list.handle) == 0)
    return io::Error("releaseLaunches: not a recorded list of this backend");
  return io::success();
}
