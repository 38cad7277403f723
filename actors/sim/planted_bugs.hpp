// Test-only protocol bugs that the simulator must be able to find: a simulator that cannot
// fail tests nothing. Each is a real-looking mistake that fires only under some interleavings,
// switched on at run time (tests, `conveyor sim --plant-bug NAME`) and off by default — in
// production nobody switches them on, and the check is one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/split_provider.hpp"

namespace conveyor::sim {

enum class PlantedBug : uint8_t {
  none,
  // The job, at the end of an epoch, hands the epoch's last split out again to the next
  // *other* task that asks (instead of end_of_splits): an off-by-one that shows only when
  // another task reaches the end of the epoch first. DYNAMIC then delivers elements twice.
  duplicate_split,
  // The job, handing a lost task's unfinished splits out again, forgets the last one (an
  // off-by-one in the loop): elements go missing, but only in runs where a worker is lost
  // while it holds an unfinished split.
  forget_lost_split,
};

const char* to_string(PlantedBug bug);
std::optional<PlantedBug> planted_bug_from_string(std::string_view name);

namespace detail {
inline std::atomic<PlantedBug>& planted_bug_switch() {
  static std::atomic<PlantedBug> active{PlantedBug::none};
  return active;
}
} // namespace detail

inline bool planted(PlantedBug bug) {
  return detail::planted_bug_switch().load(std::memory_order_relaxed) == bug;
}

// Switches `bug` on for the lifetime of the guard (process-wide; simulations are single-threaded).
class PlantBug {
public:
  explicit PlantBug(PlantedBug bug) : previous_(detail::planted_bug_switch().exchange(bug)) {}
  ~PlantBug() { detail::planted_bug_switch().store(previous_); }
  PlantBug(const PlantBug&) = delete;
  PlantBug& operator=(const PlantBug&) = delete;

private:
  PlantedBug previous_;
};

// The job's side of PlantedBug::duplicate_split; the job actor keeps one per job and passes
// every split answer through it. Does nothing unless the bug is planted.
class DuplicateSplitBug {
public:
  void apply(uint64_t task, Split& split, bool& end_of_splits) {
    if (!planted(PlantedBug::duplicate_split))
      return;
    if (!end_of_splits) {
      last_ = split;
      last_task_ = task;
      return;
    }
    if (!last_)
      return; // only the first end_of_splits after a split counts
    Split again = *last_;
    last_.reset();
    if (task != last_task_) {
      split = again;
      end_of_splits = false;
    }
  }

private:
  std::optional<Split> last_;
  uint64_t last_task_ = 0;
};

} // namespace conveyor::sim
