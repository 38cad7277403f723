// Test-only protocol bugs that the simulator must be able to find: a simulator that cannot
// fail tests nothing. Each is a real-looking mistake that fires only under some interleavings,
// switched on at run time (tests, `conveyor-sim --plant-bug NAME`) and off by default. They exist
// only in the simulator library (conveyor_sim): switching one on installs hooks into the
// simulator's build of the production files that call them (conveyor_hooked, node/hooks.hpp);
// the production libraries contain no hook call at all.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "node/hooks.hpp"
#include "pipeline/sharding/split_provider.hpp"

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
  // A job restored by a restarted dispatcher (from the simulated disk) forgets the last of the
  // splits its tasks held at the crash: elements go missing, but only in runs where the
  // dispatcher crashed while a split was handed out and not yet finished.
  forget_held_split,
  // A consumer plans its requests with one credit more than max_outstanding: it may hold one
  // delivered but untaken element more than its credits, when its reader falls behind (the
  // simulator's invariant on consumer memory sees it in a minority of seeds).
  credit_off_by_one,
  // Coordinated reads: consumer_index 1 counts round 97 as planned but assigns it to no task
  // (a round-skipping off-by-one): from there on its rounds are out of step with the others'.
  skip_round,
  // A trainer-side mistake, in the simulator's trainer (not the production code): its checkpoint
  // covers the elements it received instead of those it finished its step on. A trainer
  // restarted from it never gets back what it had received but not trained on: elements go
  // missing, but only in runs where it dies between receiving and finishing a step.
  checkpoint_early,
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

// Switches `bug` on for the lifetime of the guard (process-wide; simulations are single-threaded):
// sets the switch and installs the planted-bug hooks into the production code.
class PlantBug {
public:
  explicit PlantBug(PlantedBug bug);
  ~PlantBug();
  PlantBug(const PlantBug&) = delete;
  PlantBug& operator=(const PlantBug&) = delete;

private:
  PlantedBug previous_;
  actors::hooks::Hooks* previous_hooks_;
};

// The job's side of PlantedBug::duplicate_split: one per job (installed as the job's split answer
// filter), every split answer passes through it. Does nothing unless the bug is planted.
class DuplicateSplitBug : public actors::hooks::SplitAnswerFilter {
public:
  void apply(uint64_t task, Split& split, bool& end_of_splits) override {
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
