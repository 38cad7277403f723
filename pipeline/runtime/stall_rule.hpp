// When the executor's supervisor adds a thread (pipeline/runtime/executor.hpp): the decision on
// its own, fed with the threads' CPU and run-queue times, so that a test drives it with made-up
// figures.
//
// The supervisor looks at windows of about `kStall` in which items waited, no thread was idle and
// none started an item. It adds a thread when one of them is blocked: it neither ran nor waited
// for a CPU for nine tenths of the window and is not runnable at its end (it slept: a lock, slow
// I/O, a sleep in user code), unless another one waited for a core for half of it or more (the cores are what is short:
// another thread would wait too, and the runnable ones go on to the next items). A thread that
// was merely descheduled (on a loaded machine, runnable but waiting for a core) is not blocked:
// counting only its CPU time took it for one, and such windows added threads until each tenant
// had fewer items than its share of them and the weights stopped deciding who ran (issue 38).
// It also adds one when every thread computed for `long_items` of CPU time inside the stall (a
// slow user function), in CPU time for the same reason: on a loaded machine wall time runs on
// while a thread waits for a core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace conveyor {

// What a thread has used so far (ns): on a CPU, and runnable but waiting for one. The kernel adds
// a wait to `wait` only when it ends (the thread gets a core): one that waits now, on a crowded
// core, shows none yet, hence `runnable`.
struct ThreadUse {
  int64_t cpu = 0;
  int64_t wait = 0;
  bool wait_known = false; // false where the system does not tell (then only `cpu` counts)
  bool runnable = false;   // running or waiting for a core when looked at (not asleep)
};

enum class StallVerdict {
  none,       // no thread to add (yet)
  blocked,    // a thread slept through the window, and none waited long for a core
  long_items, // every thread computed for long_items inside the stall
};

class StallRule {
public:
  explicit StallRule(int64_t long_items_ns) : long_items_(long_items_ns) {}

  // A stalled window of `elapsed` ns: `before` and `after` are each thread's use at its ends (the
  // same threads in the same order; otherwise nothing is decided and the stall starts over).
  StallVerdict on_stalled(const std::vector<ThreadUse>& before, const std::vector<ThreadUse>& after,
                          int64_t elapsed) {
    if (before.size() != after.size() || after.empty()) {
      reset();
      return StallVerdict::none;
    }
    if (computed_.size() != after.size())
      computed_.assign(after.size(), 0);
    bool blocked = false;
    bool crowded = false; // a thread waited for a core half the window or more
    for (std::size_t i = 0; i < after.size(); ++i) {
      const int64_t cpu = after[i].cpu - before[i].cpu;
      const int64_t wait =
        before[i].wait_known && after[i].wait_known ? after[i].wait - before[i].wait : 0;
      // (Runnable at the end with little CPU: it waited for a core, or it just woke up.)
      blocked = blocked || (!after[i].runnable && cpu + wait < elapsed / 10);
      crowded = crowded || wait >= elapsed / 2 || (after[i].runnable && cpu < elapsed / 2);
      computed_[i] += cpu;
    }
    if (blocked && !crowded) {
      reset();
      return StallVerdict::blocked;
    }
    if (*std::min_element(computed_.begin(), computed_.end()) >= long_items_) {
      reset();
      return StallVerdict::long_items;
    }
    return StallVerdict::none;
  }

  // An item started, a thread was idle, or the threads changed: the stall (if any) is over.
  void reset() { computed_.clear(); }

private:
  const int64_t long_items_;
  std::vector<int64_t> computed_; // per thread: CPU time inside the current stall
};

} // namespace conveyor
