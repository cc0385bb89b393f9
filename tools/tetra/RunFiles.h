//===- RunFiles.h - Where runs' metrics are, and whose seeds they are -*- C++ -*-===//
//
// The commands that read runs (tetra plot, tetra compare) take a RUN as a
// metrics file, a run folder holding metrics.jsonl, or a folder of run
// folders (a policy's seeds: `tetra-run --seed N` writes seed=N/ folders);
// and they tell a policy's seeds by their run names ("POLICY/seed=N").
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_TOOLS_TETRA_RUNFILES_H
#define TETRA_TOOLS_TETRA_RUNFILES_H

#include "runtime/io/Error.h"

#include <string>
#include <vector>

namespace tetra::driver {

/// The metrics files RUN names: the file itself, the folder's
/// metrics.jsonl, or (a folder without one) its subfolders', in name order.
/// An error where there are none.
io::Expected<std::vector<std::string>> metricsFiles(const std::string &run);

/// The policy a run belongs to: its name without a trailing "/seed=N"
/// ("c4/fp4_all/seed=3" -> "c4/fp4_all"; other names are their own).
std::string policyOf(const std::string &runName);

} // namespace tetra::driver

#endif // TETRA_TOOLS_TETRA_RUNFILES_H
