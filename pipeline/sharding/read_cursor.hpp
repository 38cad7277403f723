// A resumable position in a DYNAMIC read (issue 36): which elements a trainer has *consumed*
// (handed out by ElementStream::next), so that a restarted trainer continues with exactly the
// rest of the epoch.
//
// Elements are named by their split and their sequence number within the split's output:
// (epoch, index, seq). Splits are numbered by the job's split provider in its own order
// (SplitProvider: `epoch` = repetition of the source, `index` = position in that epoch), which
// is a function of the dataset and the split size only (range/from_tensor_slices: index ranges of
// `split_size` elements; file sources: the files in listing order) — so a new job, on a new
// cluster, cuts the same splits when it is given the same split size. The cursor records it.
// Not deterministic: list_files(shuffle=true) without a seed (another file order per job).
//
// Per split the cursor keeps how many elements from the start were consumed (`prefix`), any
// consumed beyond a gap (a re-issued split's repeats arrive out of order), and the split's size
// once a worker said which element was its last (origin_run.split_end). A split whose every
// element was consumed is *complete*; complete splits are kept as index intervals per epoch, so
// the blob stays small: a prefix of the epoch plus the few splits in flight.
//
// OFF reads (parallel_epochs) have *slots* instead: every task produces the whole dataset, so
// the cursor keeps, per task the read had (its slot), how many of that task's elements were
// consumed, counted from the slot's start over every attempt, and whether the task ended. A
// resumed OFF read runs one task per slot that skips its consumed prefix (docs/SEMANTICS.md).
//
// Coordinated reads (num_consumers) have slots too, counted in *rounds*: a coordinated task
// serves its local round l as its elements l*N .. l*N+N-1 (N = num_consumers), so a slot's count
// is the local rounds whose element this consumer_index consumed; the cursor also names N, the
// index, and the job it was saved in (the N trainers' resumes meet in one new job keyed by it,
// which starts at the earliest of their cursors: dispatcher/coordinated_resume.hpp). `consumed`
// is then the rounds this consumer consumed: the global step.
//
// The blob (encode/decode) is versioned text; a trainer stores it as opaque bytes. Version 2
// adds the mode line and the slots; version 3 the coordinated mode. Versions 1 (DYNAMIC only)
// and 2 still decode.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "conveyor/sharding.hpp"
#include "pipeline/runtime/status.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor {

class ReadCursor {
public:
  static constexpr int kVersion = 3;
  // A Split::skip that drops the split's whole output (kept only so its epoch is not empty).
  static constexpr int64_t kSkipAll = std::numeric_limits<int64_t>::max();

  ReadCursor() = default;
  // file_seed: the job's order of list_files(shuffle=True) sources given no seed (-1: none).
  ReadCursor(std::string fingerprint, int64_t split_size, int64_t file_seed = -1)
    : fingerprint_(std::move(fingerprint)), split_size_(split_size), file_seed_(file_seed) {}
  // The cursor of an OFF read of the dataset with this fingerprint.
  static ReadCursor off(std::string fingerprint);
  // The cursor of consumer `consumer_index` of a coordinated read by `num_consumers` (OFF).
  static ReadCursor coordinated(std::string fingerprint, int64_t num_consumers,
                                int64_t consumer_index);

  // DYNAMIC (splits) or OFF (slots).
  ShardingPolicy mode() const { return mode_; }
  const std::string& fingerprint() const { return fingerprint_; }
  int64_t split_size() const { return split_size_; }
  int64_t file_seed() const { return file_seed_; }
  // Elements consumed over the whole read, every resumed attempt included (coordinated: rounds).
  int64_t consumed() const { return consumed_; }
  // Coordinated reads (mode OFF): num_consumers (0: not coordinated), this trainer's index, and
  // the job the cursor was saved in (0: none yet).
  bool coordinated() const { return num_consumers_ > 0; }
  int64_t num_consumers() const { return num_consumers_; }
  int64_t consumer_index() const { return consumer_index_; }
  int64_t job() const { return job_; }
  void set_job(int64_t job) { job_ = job; }

  // The trainer took element `seq` of split (epoch, index); `split_end`: it is the split's last.
  // False when the cursor already held it (a repeat: the caller handed out an element twice).
  // OFF: `index` is the slot, `seq` the element's number in the slot's output, `split_end` the
  // task's last element (`epoch` is not used).
  bool consume(int64_t epoch, int64_t index, int64_t seq, bool split_end);
  // DYNAMIC: a worker said the split had `count` elements (an end mark, sent apart from its
  // last element): it is complete once those were all consumed (now, or by later consume()s).
  void split_ended(int64_t epoch, int64_t index, int64_t count);

  // OFF: one task's share of the read. `consumed` counts from the slot's start.
  struct Slot {
    int64_t consumed = 0;
    bool ended = false;
  };
  const std::map<int64_t, Slot>& slots() const { return slots_; }
  // A task of the read serves `slot` from its element `base` on (kept if the slot is known).
  void add_slot(int64_t slot, int64_t base);
  // The slot's task ended and every element it sent was consumed.
  void end_slot(int64_t slot);
  // Whether the element was consumed.
  bool covers(int64_t epoch, int64_t index, int64_t seq) const;
  // Every element of the split was consumed.
  bool complete(int64_t epoch, int64_t index) const;
  // How many elements from the split's start were consumed (what a worker may skip); kSkipAll
  // for a complete split.
  int64_t skip(int64_t epoch, int64_t index) const;

  std::size_t complete_splits() const;
  std::size_t partial_splits() const { return partial_.size(); }

  std::string encode() const;
  // `what` names the argument in errors (e.g. "`resume_from`").
  static Expected<ReadCursor> decode(std::string_view blob, const std::string& what);

private:
  struct Progress {
    int64_t prefix = 0;
    std::set<int64_t> beyond;
    int64_t end = -1; // elements in the split; -1 = not known yet
  };
  using Key = std::pair<int64_t, int64_t>;
  void mark_complete(const Key& key);

  ShardingPolicy mode_ = ShardingPolicy::dynamic;
  std::string fingerprint_;
  int64_t split_size_ = 0;
  int64_t file_seed_ = -1;
  int64_t consumed_ = 0;
  std::map<Key, Progress> partial_;
  // epoch -> complete split indices as intervals [begin, end) keyed by begin.
  std::map<int64_t, std::map<int64_t, int64_t>> complete_;
  // The split the last consume() went to (elements come in runs of one split). Forgotten when
  // the cursor is copied or moved: it points into this object's map.
  struct LastSplit {
    bool valid = false;
    std::map<Key, Progress>::iterator it;
    LastSplit() = default;
    LastSplit(const LastSplit&) {}
    LastSplit& operator=(const LastSplit&) {
      valid = false;
      return *this;
    }
  };
  LastSplit last_;
  std::map<int64_t, Slot> slots_; // OFF and coordinated
  int64_t num_consumers_ = 0;     // coordinated
  int64_t consumer_index_ = 0;
  int64_t job_ = 0;
};

// Why an OFF read of `dataset` cannot be resumed ("" when it can): a resumed slot skips its
// consumed prefix of a new task's output, so that output must be a function of the dataset
// (no unseeded randomness, no order that depends on timing). Python functions are taken to be
// pure (the service cannot look into them).
std::string off_resume_refusal(const Dataset& dataset);

// Why a cursor of `cursor_mode` cannot resume a read in processing mode `policy` ("" when it
// can): only DYNAMIC and OFF reads resume, each from a cursor of its own mode. Names
// `resume_from`.
std::string resume_mode_refusal(ShardingPolicy cursor_mode, ShardingPolicy policy);

// Why a read with these coordinated options (num_consumers 0: not coordinated) cannot resume
// from `cursor` ("" when it can): a coordinated cursor resumes only its own consumer_index among
// the same number of consumers, and a cursor of another read only a read that is not
// coordinated. Names `resume_from` and both numbers.
std::string coordinated_resume_refusal(const ReadCursor& cursor, int64_t num_consumers,
                                       int64_t consumer_index);

// Wraps a job's split provider for a job resumed from `cursor`: complete splits are not handed
// out, partial ones carry Split::skip = their consumed prefix. An epoch whose every split is
// complete still hands out one split (with skip = kSkipAll, which produces nothing), since a
// task that saw an empty epoch would take it for the end of the dataset.
std::unique_ptr<SplitProvider> resuming_split_provider(std::unique_ptr<SplitProvider> inner,
                                                       std::shared_ptr<const ReadCursor> cursor);

} // namespace conveyor
