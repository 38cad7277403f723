// The cross-trainer cache (the reference's CrossTrainerCache, 003_3cbebc871b174894.txt; issue 10):
// several trainers — distinct trainer ids — reading one shared job of an infinite dataset share
// the elements a task produces instead of each getting its own. CAF-free, single-threaded (the
// task actor owns it), non-blocking (the task's resumable pipeline produces when told to).
//
// The cache is a sliding window over the task's output sequence 0, 1, 2, ...: elements
// [start, end) are kept, at most max_bytes of them; adding an element evicts the oldest ones
// until it fits. Each trainer has a position:
//   - a new trainer starts at the oldest cached element;
//   - a trainer whose next element was evicted (it fell behind the window) skips ahead to the
//     oldest cached one — the reference's documented behaviour: a slow trainer skips elements
//     instead of holding the others back; the skipped count is reported, never silent;
//   - a trainer at `end` needs a new element: the task produces one and add()s it.
// Readers sharing one trainer id share one position (they split that trainer's stream).
//
// Whole-epoch sharing (beyond the reference, issue 10: a finite dataset, each trainer reads each
// element once): the cache evicts only elements every trainer has read. When the window is
// full and its oldest element is unread by some trainer, the cache takes nothing new (can_add)
// and the task holds the trainers at the end — the slowest trainer paces the others instead of
// skipping. A trainer that first reads after something was evicted would miss it: an error.
// A trainer that left (remove_trainer) holds nobody back.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// Where a produced element came from: its split (epoch, index) and its place in it. The cache
// keeps it with the element for the task (per-split pipelines tag what they send with it).
struct ElementOrigin {
  int64_t epoch = 0, index = 0, seq = 0;
  int64_t source = 0; // the splittable source of the split (msg::origin_run::source)
};

class CrossTrainerCache {
public:
  // max_bytes > 0 (invalid_argument from make() otherwise). `whole_epoch`: evict only what
  // every trainer has read (above).
  static Expected<CrossTrainerCache> make(int64_t max_bytes, bool whole_epoch = false);

  // The trainer's next element, advancing it; nullopt when it is at the end (then produce one
  // and add() it). invalid_argument for an empty trainer id (the reference's message);
  // whole-epoch sharing: failed_precondition for a new trainer once elements were evicted.
  // `index` and `origin` (optional): the element's place in the task's output sequence, and the
  // origin it was add()ed with.
  Expected<std::optional<Element>> next(const std::string& trainer_id, int64_t* index = nullptr,
                                        ElementOrigin* origin = nullptr);
  // Registers the trainer (at the oldest cached element) without reading: whole-epoch sharing
  // then keeps what it has not read. The errors of next().
  Status join(const std::string& trainer_id);
  // Whether next() would return an element now.
  bool ready(const std::string& trainer_id) const;
  // Whether add() of an element of `bytes` would succeed now: always, except under whole-epoch
  // sharing when making room would evict an element some trainer has not read.
  bool can_add(int64_t bytes) const;
  // Appends the next produced element, evicting the oldest ones until it fits.
  // invalid_argument when the element alone is larger than the cache (the reference's error);
  // failed_precondition when !can_add (the caller checks first).
  Status add(Element element, ElementOrigin origin = {});
  // The trainer's readers all left: under whole-epoch sharing it no longer holds evictions.
  void remove_trainer(const std::string& trainer_id);
  bool whole_epoch() const { return whole_epoch_; }
  // The oldest element some trainer has not read (end_index() if none).
  int64_t oldest_unread() const;
  // Every trainer has read every cached element (whole-epoch sharing: nothing waits for one).
  bool all_read() const { return oldest_unread() == end_index(); }

  int64_t max_bytes() const { return max_bytes_; }
  int64_t size_bytes() const { return size_bytes_; }
  int64_t start_index() const { return start_; }                                     // oldest kept
  int64_t end_index() const { return start_ + static_cast<int64_t>(cache_.size()); } // next to add
  int64_t hits() const { return hits_; }     // next() answered from elements another trainer made
  int64_t misses() const { return misses_; } // elements produced for the trainer asking
  int64_t evicted() const { return start_; }
  // Elements `trainer_id` skipped because they were evicted before it read them.
  int64_t skipped(const std::string& trainer_id) const;
  std::size_t trainers() const { return trainers_.size(); }

private:
  CrossTrainerCache(int64_t max_bytes, bool whole_epoch)
    : max_bytes_(max_bytes), whole_epoch_(whole_epoch) {}

  struct Trainer {
    int64_t next = -1; // -1: not read yet (starts at the oldest cached element)
    int64_t skipped = 0;
  };
  int64_t position(const Trainer& t) const { return t.next < start_ ? start_ : t.next; }

  int64_t max_bytes_;
  bool whole_epoch_ = false;
  int64_t size_bytes_ = 0;
  int64_t start_ = 0;
  struct Cached {
    Element element;
    int64_t bytes = 0;
    ElementOrigin origin;
  };
  std::deque<Cached> cache_;
  std::map<std::string, Trainer> trainers_;
  std::string last_asker_; // the trainer whose next() found the end (it made the next add())
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

// The reference's checks of a job read with the cache (its ValidateCrossTrainerCache): a named
// job, an infinite dataset (cardinality -1; -2 = unknown is refused too: the reference requires a
// known infinite one), no coordinated reads. Any processing mode: the cache shares what a task
// produces, whether from the whole dataset (OFF), its splits (DYNAMIC) or its shard (FILE, DATA,
// ...). `whole_epoch` (beyond the reference): a finite dataset instead (known or unknown
// cardinality; an infinite one is refused). The trainer id is checked by validate_trainer_id.
Status validate_cross_trainer_cache(bool has_job_name, int64_t cardinality,
                                    std::optional<int64_t> num_consumers, bool whole_epoch = false);
Status validate_trainer_id(const std::string& trainer_id);

} // namespace conveyor::actors
