// --snapshot-reuse (issue: Cachew-style reuse of saved output): a dataset registered with the
// fingerprint of a finished snapshot under one of the configured directories is read from that
// snapshot (the source load(DIR)) instead of running its pipeline again. CAF-free; the
// dispatcher calls it when it registers a dataset and logs what it chose.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace conveyor::actors {

struct SnapshotReuse {
  std::optional<std::string> path;      // the finished snapshot to read, if one matches
  std::string definition;               // then: the binary definition of load(path)
  std::vector<std::string> passed_over; // snapshots of this fingerprint that were not usable, why
};

// Looks at each root directory and its immediate subdirectories for a snapshot whose metadata
// names `fingerprint`. Only a finished one (DONE) is used; one still being written, failed or
// unreadable is named in passed_over. Roots that do not exist are passed over too.
SnapshotReuse find_reusable_snapshot(const std::vector<std::string>& roots,
                                     const std::string& fingerprint);

} // namespace conveyor::actors
