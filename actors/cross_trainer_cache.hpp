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
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "pipeline/dataset.hpp"
#include "pipeline/element.hpp"
#include "pipeline/sharding.hpp"
#include "pipeline/status.hpp"

namespace conveyor::actors {

class CrossTrainerCache {
public:
  // max_bytes > 0 (invalid_argument from make() otherwise).
  static Expected<CrossTrainerCache> make(int64_t max_bytes);

  // The trainer's next element, advancing it; nullopt when it is at the end (then produce one
  // and add() it). invalid_argument for an empty trainer id (the reference's message).
  Expected<std::optional<Element>> next(const std::string& trainer_id);
  // Whether next() would return an element now.
  bool ready(const std::string& trainer_id) const;
  // Appends the next produced element, evicting the oldest ones until it fits.
  // invalid_argument when the element alone is larger than the cache (the reference's error).
  Status add(Element element);

  int64_t max_bytes() const { return max_bytes_; }
  int64_t size_bytes() const { return size_bytes_; }
  int64_t start_index() const { return start_; }                              // oldest kept
  int64_t end_index() const { return start_ + static_cast<int64_t>(cache_.size()); } // next to add
  int64_t hits() const { return hits_; }     // next() answered from elements another trainer made
  int64_t misses() const { return misses_; } // elements produced for the trainer asking
  int64_t evicted() const { return start_; }
  // Elements `trainer_id` skipped because they were evicted before it read them.
  int64_t skipped(const std::string& trainer_id) const;
  std::size_t trainers() const { return trainers_.size(); }

private:
  explicit CrossTrainerCache(int64_t max_bytes) : max_bytes_(max_bytes) {}
  struct Trainer {
    int64_t next = -1; // -1: not read yet (starts at the oldest cached element)
    int64_t skipped = 0;
  };
  int64_t position(const Trainer& t) const { return t.next < start_ ? start_ : t.next; }

  int64_t max_bytes_;
  int64_t size_bytes_ = 0;
  int64_t start_ = 0;
  std::deque<std::pair<Element, int64_t>> cache_; // element, its byte size
  std::map<std::string, Trainer> trainers_;
  std::string last_asker_; // the trainer whose next() found the end (it made the next add())
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

// The reference's checks of a job read with the cache (its ValidateCrossTrainerCache): a named
// job, an infinite dataset (cardinality -1; -2 = unknown is refused too: the reference requires a
// known infinite one), no coordinated reads; and, beyond the reference, processing mode OFF (each
// trainer reads the task's whole sequence; DYNAMIC's split accounting assumes one reader per
// element). The trainer id is checked by validate_trainer_id.
Status validate_cross_trainer_cache(bool has_job_name, int64_t cardinality,
                                    std::optional<int64_t> num_consumers, ShardingPolicy policy);
Status validate_trainer_id(const std::string& trainer_id);

} // namespace conveyor::actors
