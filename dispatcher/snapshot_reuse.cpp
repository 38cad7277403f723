#include "dispatcher/snapshot_reuse.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "conveyor/dataset.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/io/snapshot_files.hpp"

namespace conveyor::actors {

namespace {

namespace fs = std::filesystem;

// DIR itself, then its subdirectories in name order (so the choice does not depend on the
// file system's listing order).
std::vector<std::string> candidates(const std::string& root, std::vector<std::string>& notes) {
  std::vector<std::string> out{root};
  std::error_code ec;
  std::vector<std::string> subdirs;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec))
      subdirs.push_back(it->path().string());
  if (ec)
    notes.push_back(root + ": cannot list it (" + ec.message() + ")");
  std::sort(subdirs.begin(), subdirs.end());
  out.insert(out.end(), subdirs.begin(), subdirs.end());
  return out;
}

} // namespace

SnapshotReuse find_reusable_snapshot(const std::vector<std::string>& roots,
                                     const std::string& fingerprint) {
  SnapshotReuse found;
  for (const auto& root : roots) {
    for (const auto& dir : candidates(root, found.passed_over)) {
      std::error_code ec;
      if (!fs::exists(fs::path(dir) / "snapshot.metadata", ec))
        continue;
      auto metadata = snapshot::read_metadata(dir);
      if (!metadata.ok()) {
        found.passed_over.push_back(dir + ": " + metadata.status().to_string());
        continue;
      }
      if (metadata->fingerprint != fingerprint)
        continue;
      auto progress = snapshot::progress(dir);
      if (!progress.ok()) {
        found.passed_over.push_back(dir + ": " + progress.status().to_string());
        continue;
      }
      if (progress->state == snapshot::State::writing) {
        found.passed_over.push_back(dir + ": still being written (no DONE marker)");
        continue;
      }
      if (progress->state == snapshot::State::failed) {
        found.passed_over.push_back(dir + ": the save failed (" + progress->error + ")");
        continue;
      }
      found.path = dir;
      found.definition = to_binary(Dataset::load(dir));
      return found;
    }
  }
  return found;
}

} // namespace conveyor::actors
