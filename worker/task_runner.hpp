// What a task does, without actors: runs the job's pipeline into a bounded buffer and answers
// consumer requests with batches of encoded elements.
//
// - produce() runs the pipeline one bounded step (it stops when the buffer is full, at the
//   end, on `unavailable` — DYNAMIC waiting for a split — or on an error).
// - take(consumer, max_elements, max_bytes) cuts a batch from the buffer (at least one element,
//   at most max_elements, about max_bytes), encodes it with the dataset's compression and
//   returns it — split into chunks of at most kMaxChunkBytes when it is larger, the later chunks
//   kept for the same consumer's next requests. nullopt means "nothing now": the actor holds the
//   request until produce() made progress. Batches are packed by their ENCODED size, so a batch
//   that fits max_bytes is one message (no 4 MiB + 60 B split).
// - Large elements (>= bulk_min_bytes encoded) are each encoded into their own frame (a
//   GatherBuffer viewing their tensors' storage; the item keeps its element): when produced while fewer than bulk_encode_ahead_bytes (or 2 frames) wait encoded in the
//   buffer, else when taken. A request on a bulk channel takes a run of them as frames (take's
//   `frames`, about bulk_encode_ahead_bytes per request, at least 2 when there are); without
//   one, such an element goes inline, one per batch.
// - Elements go to whichever consumer asks first (a shared job's consumers split them).
// - DYNAMIC: the runner tracks each split it started until every element of it was
//   acknowledged by the consumer it went to (ack()); such splits are *finished*
//   (take_finished(), reported to the job). Per-split pipelines tag their elements with their
//   origin (split, sequence), sent with each batch; other pipelines' splits finish together when
//   the pipeline ended and every batch was acknowledged. A consumer that reconnected may have
//   lost what it was sent and did not acknowledge: those splits are handed back (take_lost()).
//   A run that ends with its split's last element says so (origin_run::split_end) when the
//   pipeline had moved past the split when the batch was cut; otherwise the consumer that took
//   that element gets an *end mark* (a count-0 run naming the split's size) with its next reply
//   — an empty one if nothing else is ready, or the end_of_sequence — so its deterministic
//   reorder need not wait for the job's finished-split log (issue 36).
//   A dataset with several splittable sources (zip, concatenate) reads each through its own
//   feed (split_feeds(), pipeline/sharding/multi_source.hpp's order); its splits are keyed by
//   (source, epoch, index). A concatenation of sources is per-split (its elements' origins name
//   their source); a zip is not.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <boost/container/deque.hpp>
#include <boost/container/options.hpp>

#include "worker/cross_trainer_cache.hpp"
#include "worker/split_feed.hpp"
#include "worker/trainer_readers.hpp"
#include "messages/worker_consumer.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/runtime/memory_budget.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/sharding/sharding.hpp"

namespace conveyor::actors {

struct TaskLimits {
  int64_t buffer_elements = 65536;
  int64_t buffer_bytes = 32 << 20;
  // One produce() step runs at most this many elements / bytes, so the actor answers requests
  // in between.
  int64_t step_elements = 1024;
  int64_t step_bytes = 4 << 20;
  std::size_t chunk_bytes = msg::kMaxChunkBytes;
  // Files the pipeline may touch (pipeline/io/path_policy.hpp); nullptr = any. WorkerServer always
  // sets one (no --allow-path = none).
  std::shared_ptr<const PathPolicy> paths;
  // Memory budget of the task's pipeline (0 = none): see WorkerConfig::job_memory_limit.
  int64_t memory_limit = 0;
  // Elements whose encoding is at least this large travel as bulk frames (net/bulk_frame.hpp),
  // each encoded once: a GatherBuffer whose large tensors are views of their storage, which the
  // bulk writer sends with no copy.
  std::size_t bulk_min_bytes = 64 << 10;
  // Frames encoded ahead of requests (and taken per request) are bounded by this many bytes
  // (but at least 2 frames); the rest of the buffer is encoded when taken. A request on a bulk
  // channel takes about this much, so that the worker's writer queue stays short and a frame
  // is written soon after it was taken (while its tensors are still in the CPU's caches).
  std::size_t bulk_encode_ahead_bytes = 4 << 20;
  // Bytes a task of a job read with the cross-trainer cache keeps for its trainers
  // (WorkerConfig::cross_trainer_cache_size_bytes; worker/cross_trainer_cache.hpp).
  int64_t cross_trainer_cache_bytes = int64_t{1} << 30;
  // The job's share of the process's Executor that the pipeline's parallel maps and prefetches
  // queue in (the task actor's own resumes too: worker/executor_scheduled.hpp); null = none.
  std::shared_ptr<ExecutorGroup> executor_group;
  // The task's stop flag (IteratorContext::stop): the worker sets it when it stops the task, from
  // its own thread, while this task's thread may be deep in a pipeline that returns no element
  // (range(2**63-1).batch(2**63-1)); the pipeline then returns `cancelled`. Null: never set.
  std::shared_ptr<std::atomic<bool>> stop;
  // The worker's budget for all its jobs together (`conveyor worker --memory-limit`), the parent
  // of each job's budget; null = none.
  std::shared_ptr<MemoryBudget> process_memory;
};

// Static sharding: which shard of how many this task's worker reads (num_workers = 0: none).
struct WorkerShard {
  int64_t num_workers = 0;
  int64_t worker_index = 0;
};

class TaskRunner {
public:
  // Batches are numbered from `first_batch_seq` (TaskStart::first_batch_seq says why).
  TaskRunner(ShardingPolicy policy, Compression compression, TaskLimits limits = {},
             uint64_t first_batch_seq = 1);
  // Frees the pipeline and the buffer, then returns freed memory to the OS (malloc_trim) when
  // the job held much: a failed or released job's memory would otherwise stay in the worker's
  // RSS.
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // Builds the iterator (DYNAMIC: over a SplitFeed; FILE/DATA/FILE_OR_DATA/HINT: over the
  // dataset rewritten for `shard`). invalid_argument / not_found when the dataset does not
  // validate against `functions` (e.g. a function no plugin provides) or cannot be sharded.
  Status start(const Dataset& dataset, const FunctionRegistry* functions,
               const WorkerShard& shard = {});

  enum class Step { progress, buffer_full, waiting_for_split, ended, failed };
  // `stop_early` (optional) is asked after every element; the actor uses it to bound a step's
  // time by its clock, so a slow pipeline still answers requests in between.
  Step produce(const std::function<bool()>& stop_early = {});

  // `frames` (optional): the request came on a bulk channel; a batch of pre-encoded elements is
  // then returned as frames (headers filled for `task`), and the batch says bulk_frames.
  // `trainer`: with the cross-trainer cache on, the consumer's trainer id (empty: the consumer
  // reads as a trainer of its own).
  std::optional<msg::element_batch> take(msg::consumer_id_t consumer, uint32_t max_elements,
                                         uint64_t max_bytes,
                                         std::vector<GatherBuffer>* frames = nullptr,
                                         uint64_t task = 0, const std::string& trainer = {});

  // The job is read with the cross-trainer cache (an infinite dataset): elements go from the
  // buffer into a cache of limits.cross_trainer_cache_bytes that every trainer reads on its own
  // (take's `trainer`); nothing is pre-encoded (each trainer's batch is encoded for it). Call
  // before the first produce(). `whole_epoch`: a finite dataset whose every element each
  // trainer reads (the cache evicts only what all have read; a trainer at the end waits while
  // it is full of elements another has not read).
  Status enable_cross_trainer_cache(bool whole_epoch = false);
  // Why take() gave `consumer` nothing and never will (OK if it may still get something): its
  // trainer arrived at a whole-epoch cache after it first evicted. The reader's error only.
  Status refusal(msg::consumer_id_t consumer) const {
    auto r = refused_.find(consumer);
    return r == refused_.end() ? Status::OK() : r->second;
  }
  // Whole-epoch sharing: trainers the job registered (before their first request reaches this
  // task, so that the cache keeps what they have not read) and trainers whose last consumer
  // left the job. A trainer that joins after the cache first evicted is refused at its first
  // request (refusal). Returns whether a trainer left (held requests may go on).
  bool cache_trainers(const std::vector<std::string>& joined, const std::vector<std::string>& left);
  // A consumer left (or is gone): with whole-epoch sharing, a trainer none of whose readers
  // remain no longer holds the others back. Returns whether that freed a trainer (the actor
  // then answers the held requests again). `may_return`: only its connection broke, and it may
  // come back as the same trainer; the sliding window then keeps the trainer's place (forgotten,
  // it would read again from the oldest cached element), which holds nobody back there.
  bool reader_left(msg::consumer_id_t consumer, bool may_return = false);
  const CrossTrainerCache* cross_trainer_cache() const { return cache_ ? &*cache_ : nullptr; }
  // Read with the cross-trainer cache's whole-epoch sharing.
  bool shares_whole_epoch() const { return cache_ && cache_->whole_epoch(); }

  // Coordinated reads (coordinated/round_robin.hpp): the next `n` elements when the buffer holds at
  // least `n` (else none). Run with bulk_min_bytes at its maximum, so that no element was
  // pre-encoded; one that was still has its element (its frame is dropped).
  // `sizes` (optional): each element's byte size, as the buffer counted it, appended.
  std::vector<Element> take_elements(std::size_t n, std::vector<std::size_t>* sizes = nullptr);

  // The split feed of a DYNAMIC task (nullptr for OFF): source 0's.
  SplitFeed* split_feed() { return feed_; }
  // One feed per splittable source (empty for OFF).
  const std::vector<std::unique_ptr<SplitFeed>>& split_feeds() const { return feeds_; }
  bool per_split() const { return per_split_; }

  // Delivery tracking: every batch until its consumer acknowledges it (DYNAMIC: its splits
  // finish then; OFF and DYNAMIC: a draining worker waits for it, see all_acknowledged).
  void ack(msg::consumer_id_t consumer, const std::vector<uint64_t>& batch_seqs);
  // The consumer reconnected: its unacknowledged batches may be lost.
  void consumer_reconnected(msg::consumer_id_t consumer);
  std::vector<std::tuple<int64_t, int64_t, int64_t>> take_finished(); // (source, epoch, index)
  std::vector<Split> take_lost();
  // Nothing produced is waiting: buffer empty and every batch acknowledged (a batch taken but
  // not yet received would be lost with the worker: a drain waits for this).
  bool all_acknowledged() const;
  // Whether `consumer` holds batches numbered `from_seq` or later that it did not acknowledge.
  bool awaits_ack(msg::consumer_id_t consumer, uint64_t from_seq = 0) const;
  uint64_t next_batch_seq() const { return next_batch_seq_; }
  // The consumer left the job: what it did not acknowledge is its loss, not the job's.
  void consumer_gone(msg::consumer_id_t consumer);
  // OFF: nothing waits for the acknowledgements of a consumer that left (it is still served).
  void forget_unacknowledged(msg::consumer_id_t consumer) { unacked_.erase(consumer); }
  bool gone(msg::consumer_id_t consumer) const { return gone_.count(consumer) > 0; }

  // The dataset is infinite (its cardinality says so): an OFF task of it never ends.
  bool endless() const { return endless_; }
  // Retires an endless OFF task of a draining worker, which could never drain by reaching its
  // end: it produces and hands out nothing more (take() gives only the rest of a chunked batch
  // already started) and drops its buffer. An endless stream promises no epoch, so dropping
  // what no consumer was sent loses nothing; what was sent is drained as usual (all_acknowledged).
  void retire();
  bool retired() const { return retired_; }

  bool ended() const { return ended_; } // the pipeline reached its end
  bool failed() const { return !error_.ok(); }
  const Status& error() const { return error_; }
  bool buffer_full() const;
  // Large elements in the buffer already encoded into frames (bounded: bulk_encode_ahead_bytes).
  std::size_t frames_encoded_ahead() const { return frame_count_; }
  std::size_t buffered_elements() const { return buffer_.size(); }
  int64_t buffered_bytes() const { return buffer_bytes_; }
  int64_t produced() const { return produced_; }
  // Bytes charged to the job's memory budget now / at most (0 without a budget).
  int64_t memory_used() const { return budget_ ? budget_->used() : 0; }
  int64_t memory_peak() const { return budget_ ? budget_->peak() : 0; }
  // Whether later chunks of a batch started for `consumer` wait to be taken.
  bool has_pending(msg::consumer_id_t consumer) const { return pending_.count(consumer) > 0; }
  // Drops what a consumer that left had pending.
  void forget_consumer(msg::consumer_id_t consumer) { pending_.erase(consumer); }

private:
  struct Pending { // later chunks of a batch already started for one consumer
    uint64_t batch_seq = 0;
    uint32_t num_elements = 0;
    uint32_t num_chunks = 0;
    uint32_t next_chunk = 0;
    std::string payload;
  };
  msg::element_batch next_chunk(Pending& p);

  ShardingPolicy policy_;
  Compression compression_;
  TaskLimits limits_;
  std::vector<std::unique_ptr<SplitFeed>> feeds_; // DYNAMIC: one per splittable source
  SplitFeed* feed_ = nullptr;                     // feeds_[0]
  std::unique_ptr<MemoryBudget> budget_;          // before everything that charges it
  std::unique_ptr<MemoryCharge> buffer_charge_;   // buffer_ against budget_
  IteratorContext ctx_;
  std::unique_ptr<Iterator> iterator_;
  using Origin = ElementOrigin; // (cross_trainer_cache.hpp)
  struct SplitState {
    Split split;
    bool closed = false;
    int64_t produced = 0;
    int64_t last_seq = -1; // of the last element produced (origin_run::split_end)
    // Its output so far, elements a resumed job skipped included (an end mark's count), and
    // how far into it batches went out, to whom last, and whether one carried its end.
    int64_t end_seq = 0;
    int64_t sent_to = 0;
    msg::consumer_id_t taker = 0;
    bool end_sent = false;
    int64_t acked = 0;
    // Whole-epoch sharing: elements sent to trainers (acked counts their acknowledgements),
    // elements moved into the cache, and the cache index of the last one (-1: none yet).
    int64_t sent = 0;
    int64_t cached = 0;
    int64_t last_index = -1;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t>; // (source, epoch, index)
  struct Item {
    Element element;              // kept once encoded: `frame` views its large tensors' storage
    GatherBuffer frame;           // pre-encoded: frame header room + a one-element batch buffer
    bool bulk = false;            // travels as a frame (encoded >= bulk_min_bytes); `frame` empty
                                  // until encoded (encode_frame)
    std::size_t element_size = 0; // its encoding (encoded_element_size); with its length
                                  // prefix it adds encoded_batch_entry_size() to a batch buffer
    std::size_t bytes = 0;        // what it counts in the buffer's byte bound
    int64_t charged = 0;          // what it holds against the memory budget (its footprint)
    Origin origin;                // per-split pipelines: the split and sequence it came from
    // Per-split: counted in its split's state (SplitState::produced). Not when that state was
    // dropped (its split handed back while still in the buffer or in production): the split may
    // run again under the same key, and this copy must not count for the new run.
    bool counted = false;
  };
  // take() without the end marks.
  std::optional<msg::element_batch> take_batch(msg::consumer_id_t consumer, uint32_t max_elements,
                                               uint64_t max_bytes,
                                               std::vector<GatherBuffer>* frames, uint64_t task,
                                               const std::string& trainer);
  std::optional<msg::element_batch> take_cached(msg::consumer_id_t consumer, uint32_t max_elements,
                                                uint64_t max_bytes, const std::string& trainer);
  std::optional<msg::element_batch> take_frames(msg::consumer_id_t consumer, uint32_t max_elements,
                                                uint64_t max_bytes,
                                                std::vector<GatherBuffer>& frames, uint64_t task);
  msg::element_batch start_batch(msg::consumer_id_t consumer, std::string payload, uint32_t n,
                                 std::vector<msg::origin_run> origins);
  // A new batch for `consumer`: its number, and (DYNAMIC) its split runs await the ack.
  // Marks the runs that end their split (origin_run::split_end).
  uint64_t register_batch(msg::consumer_id_t consumer, std::vector<msg::origin_run>& origins);
  // DYNAMIC: `origins` count for their splits once `consumer` acknowledges batch `batch_seq`.
  void count_for_splits(msg::consumer_id_t consumer, uint64_t batch_seq,
                        const std::vector<msg::origin_run>& origins);
  void add_origin(std::vector<msg::origin_run>& runs, const Origin& origin) const;
  // A split closed after the batch with its last element went out (unmarked: the pipeline had
  // not moved past it then): its end mark waits for that consumer's next reply.
  void mark_end_later(const SplitState& s);
  // The end marks waiting for `consumer` go onto its reply (after the batch's runs).
  void attach_end_marks(msg::consumer_id_t consumer, std::vector<msg::origin_run>& origins);
  bool has_end_marks(msg::consumer_id_t consumer) const;
  // Encodes a bulk item's element into its frame (no-op when it has one).
  void encode_frame(Item& item);
  // Encodes the buffer's first bulk items ahead of requests, up to bulk_encode_ahead_bytes.
  void encode_ahead();
  void track_feed();
  // Per-split: the feed whose split the pipeline is reading (a concatenation reads one source
  // at a time: the others' splits are closed), or null.
  SplitFeed* current_feed() const;
  void check_finished(const Key& key);
  // Whole-epoch sharing: a split finishes once closed, read by every trainer (the cache's
  // oldest unread element is past its last one) and every batch that carried it acknowledged;
  // checked for all open splits when trainers advance.
  void check_all_finished();
  void finish_all_if_done();

  bool per_split_ = false;
  // A deque of 256-item blocks: std::deque's 512-byte nodes held 3 of these ~150-byte items, so
  // it allocated and freed a node every 3 elements, a cost 8-byte elements felt. (A ring grown
  // by doubling cost the same memory as this at its largest but kept it: ~14 MiB more RSS.)
  using ItemQueue =
    boost::container::deque<Item, void,
                            boost::container::deque_options_t<boost::container::block_size<256u>>>;
  ItemQueue buffer_;
  std::map<Key, SplitState> splits_;
  // Unacknowledged batches per consumer: batch_seq -> (split, elements) runs (none in OFF).
  std::map<msg::consumer_id_t, std::map<uint64_t, std::vector<std::pair<Key, int64_t>>>> unacked_;
  std::vector<Key> finished_;
  // End marks not sent yet (origin_run of count 0 with split_end): to the consumer that took
  // the split's last element, or to whoever asks first (`anyone`: the split sent nothing).
  struct EndMark {
    bool anyone = false;
    msg::consumer_id_t consumer = 0;
    msg::origin_run run;
  };
  std::vector<EndMark> end_marks_;
  // Splits handed back while the pipeline was still producing them (consumer_reconnected): the
  // pipeline's later close of that run is not the close of a new run of the same split.
  std::set<Key> closing_lost_;
  std::set<msg::consumer_id_t> gone_; // left the job: its late requests get nothing
  std::vector<Split> lost_;
  int64_t buffer_bytes_ = 0;
  std::size_t frame_bytes_ = 0; // bytes of the encoded frames in buffer_
  std::size_t frame_count_ = 0; // and their number
  // Encoded ahead / taken per request: at least this many frames, whatever their size (16 MiB
  // elements still overlap encoding one with sending the one before).
  static constexpr std::size_t kMinFramesAhead = 2;
  bool ahead_full() const;
  bool ended_ = false;
  bool endless_ = false;
  bool retired_ = false;
  Status error_;
  int64_t produced_ = 0;
  uint64_t next_batch_seq_ = 1;
  std::map<msg::consumer_id_t, Pending> pending_;
  std::optional<CrossTrainerCache> cache_;
  // Whole-epoch sharing: `trainer` holds the cache's evictions no more; splits it alone kept
  // open may finish.
  void forget_trainer(const std::string& trainer);
  TrainerReaders readers_;                       // cache reads: each reader's trainer
  std::map<msg::consumer_id_t, Status> refused_; // (refusal)
};

} // namespace conveyor::actors
