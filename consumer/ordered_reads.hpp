// The consumer side of a deterministic read (DistributeOptions::deterministic, issue 36): the
// elements a stream takes in, in whatever order its workers sent them, go out in their splits'
// order (epoch, index) and each split's in order (seq) — the order one worker gives.
//
// It learns that a split is over from the job: every split whose elements the consumer
// acknowledged is *finished* (task_list::finished_splits); since elements travel ahead of the
// finish that follows their acknowledgement, once the reader took every element pushed before a
// finish, the split's elements are all in hand (a split `filter` emptied has none). A worker's
// mark on a split's last element (origin_run::split_end), or its end mark when that element
// went out before its pipeline moved past the split (split_ended), says it sooner — without
// them the reorder held ~70% of an 8-byte read waiting for the log. An epoch is over at
// the first finish of a later one: the job ends an epoch of a per-split pipeline only once each
// of its splits finished.
//
// What it holds is what arrived ahead of the element it waits for: the job hands out no split
// more than its window past the lowest unfinished one (dispatcher/job_core.hpp), so about that
// many splits. An element that is next in order goes straight out (no copy into the reorder).
//
// It takes elements as runs of one split (consumer/split_run.hpp: the elements a batch brought
// for one split, consecutive in seq, still encoded): a run whose first element is next in order
// goes out whole, any other is held as one entry until the order reaches it. A split's elements
// come in order from the task reading it, so the reorder's work is per run (per batch), and a
// held element is decoded once, when it goes out. held_bytes() counts a held run's share of its
// batch buffer (the encoded bytes it keeps alive) or a bulk frame's element bytes. CAF-free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "consumer/split_run.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/sharding/split_reorder.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

class OrderedReads {
public:
  // `resumed`: the cursor a resumed read continues from (null: from the start).
  OrderedReads(int64_t window, std::shared_ptr<const ReadCursor> resumed);

  // A run of elements taken in. True: its first is the next in order, hand it out now, all of
  // it (`run` is left as it was). False: it is held (moved from `run`). failed_precondition for
  // elements without their split (a deterministic job tags every element).
  Expected<bool> arrived(SplitRun& run);
  // Splits the job saw finished, in the order it did; only once every element taken in before
  // them went through arrived().
  void finished(const std::vector<std::pair<int64_t, int64_t>>& splits);
  // A worker's end mark: the split had `count` elements (they may still be on their way).
  void split_ended(const std::pair<int64_t, int64_t>& split, int64_t count) {
    reorder_.split_done(split, count);
  }
  // The next held run in order, if it arrived (its elements are next, all of them).
  std::optional<SplitRun> pop();
  // The read ended (every element was taken in): what is held goes out, in order.
  std::vector<SplitRun> drain();

  int64_t held() const { return reorder_.held(); }
  int64_t held_bytes() const { return reorder_.held_bytes(); }
  // The most it held at once (StreamStats::order_held_peak*).
  int64_t peak_held() const { return peak_held_; }
  int64_t peak_held_bytes() const { return peak_bytes_; }
  std::pair<int64_t, int64_t> next_split() const { return reorder_.next_split(); }

private:
  SplitReorder<SplitRun> reorder_;
  std::shared_ptr<const ReadCursor> resumed_;
  int64_t log_epoch_ = 0;                 // the epoch of the last finish
  std::map<int64_t, int64_t> last_index_; // epoch -> highest finished split index
  int64_t peak_held_ = 0;
  int64_t peak_bytes_ = 0;
};

} // namespace conveyor::actors
