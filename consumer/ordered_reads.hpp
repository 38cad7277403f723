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
// CAF-free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "consumer/ready_elements.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/sharding/split_reorder.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

struct OrderedElement {
  Element element;
  DeliveredOrigin origin;
};

class OrderedReads {
public:
  // `resumed`: the cursor a resumed read continues from (null: from the start).
  OrderedReads(int64_t window, std::shared_ptr<const ReadCursor> resumed);

  // An element taken in. True: it is the next in order, hand it out now (`element` is left as
  // it was). False: it is held (moved from `element`). failed_precondition for an element
  // without its split (a deterministic job tags every element).
  Expected<bool> arrived(Element& element, const DeliveredOrigin& origin);
  // Splits the job saw finished, in the order it did; only once every element taken in before
  // them went through arrived().
  void finished(const std::vector<std::pair<int64_t, int64_t>>& splits);
  // A worker's end mark: the split had `count` elements (they may still be on their way).
  void split_ended(const std::pair<int64_t, int64_t>& split, int64_t count) {
    reorder_.split_done(split, count);
  }
  // The next held element in order, if it arrived.
  std::optional<OrderedElement> pop();
  // The read ended (every element was taken in): what is held goes out, in order.
  std::vector<OrderedElement> drain();

  int64_t held() const { return reorder_.held(); }
  int64_t held_bytes() const { return reorder_.held_bytes(); }
  // The most it held at once (StreamStats::order_held_peak*).
  int64_t peak_held() const { return peak_held_; }
  int64_t peak_held_bytes() const { return peak_bytes_; }
  std::pair<int64_t, int64_t> next_split() const { return reorder_.next_split(); }

private:
  SplitReorder<OrderedElement> reorder_;
  std::shared_ptr<const ReadCursor> resumed_;
  int64_t log_epoch_ = 0;                 // the epoch of the last finish
  std::map<int64_t, int64_t> last_index_; // epoch -> highest finished split index
  int64_t peak_held_ = 0;
  int64_t peak_bytes_ = 0;
};

} // namespace conveyor::actors
