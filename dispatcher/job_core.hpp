// A job's whole bookkeeping, without actors (the job actor is a thin adapter around it, and
// keeps no copy of any of this): its tasks, its consumers, and — DYNAMIC — its splits.
//
// Tasks: one per live worker (the dispatcher adds them, also for workers joining mid-job). A task
// is listed to consumers once its worker answered (assigned). A lost task (worker removed) is
// unlisted; DYNAMIC hands its unfinished splits out again.
//
// Production ended (task_list.job_finished): every listed task's pipeline ended and, DYNAMIC, no
// split waits to be handed out again; a task that ended only because its worker drained does
// not count (it took no end of splits from the job). It turns false again when a new task is
// added. Static sharding (FILE / DATA / FILE_OR_DATA over the fixed worker list): also every
// shard 0..n-1 had a task that ran to its end, so a listed worker that has not registered (yet)
// holds the job open instead of its shard going missing in silence.
//
// The job ends when its consumers are done: released at once when every consumer that joined
// read to the end (and, with expect_consumers(n), at least n joined: a later one of a shared
// repetition must find it and get end of input, not start the next repetition); when they all left without finishing, at once for a private job and after
// job_gc_timeout for a named one (the actor's timer). Never before a first consumer joined.
//
// Splits (DYNAMIC): each split of an epoch is handed out once; the job tracks per task the
// splits handed out and not finished (every element acknowledged by a consumer). A split comes
// back (returned by a draining task, or its task was lost) and is handed out again before new
// ones. A task asking when the epoch's splits are all handed out gets end_of_splits — for
// per-split pipelines only once every split of the epoch finished (until then it is held), so a
// split that comes back always finds a task to run it. For other pipelines a split is finished
// only when its task ended and its output was acknowledged; a split that comes back when every
// other task has ended cannot be re-run: the job fails loudly (task_list.error).
//
// Several splittable sources (zip, concatenate; pipeline/sharding/multi_source.hpp): one provider
// per source, as tf.data's split_provider_index. Each source has its own epochs, hand-out queue
// and re-issue queue; a task asks per source, and every rule above holds per source. Production
// ends when every task's pipeline ended: a source whose splits were not all handed out (the
// longer input of a zip) is not waited for, as in tf.data. A per-split concatenation
// (is_per_split_concatenation) holds a task asking for `a`'s splits at the end of `a`'s epoch
// until every split of it finished, as the one-source rule does: a split of `a` that comes back
// then always finds a task still reading `a` to take it.
#pragma once

#include <algorithm>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "worker/trainer_readers.hpp"
#include "messages/journal_records.hpp"
#include "messages/protocol.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// (source, epoch, index): the same type as msg::split_key (messages/job_task.hpp).
using SplitKey = std::tuple<int64_t, int64_t, int64_t>;
inline SplitKey split_key_of(const Split& s) { return {s.source, s.epoch, s.index}; }

// Whether a DYNAMIC pipeline is *per-split*: every element it outputs comes from exactly one
// split and is produced before the pipeline reads the next split, in the same order each time
// the split is read — the source followed only by sequential map (num_parallel_calls 1),
// filter, flat_map and repeat. Only these get exactly-once delivery under worker loss
// (README: fault tolerance); user functions must be deterministic.
bool is_per_split(const Dataset& dataset);
// The same rule for a dataset of several splittable sources (one split provider each,
// pipeline/sharding/multi_source.hpp): per-split when its only combining op is `concatenate`,
// each of whose inputs is itself per-split down to a splittable source. `a.concatenate(b)` reads
// each element from one split of one source, and reads a split to its end before the next, so
// its elements name (source, split, sequence). `zip` pairs elements of two splits: never.
bool is_per_split_concatenation(const Dataset& dataset);

// A split as the journal keeps it, and back.
msg::JournalSplit to_journal(const Split& s);
Split from_journal(const msg::JournalSplit& s);

class JobCore {
public:
  struct Task {
    msg::task_id_t id = 0;
    msg::worker_id_t worker = 0;
    std::string worker_address;
    int64_t shard = -1; // static sharding: the worker's place in the fixed list
    bool assigned = false;
    bool done = false;
    bool drained = false; // done because its worker drained, not because the splits ran out
    std::string error;
    std::map<SplitKey, Split> unfinished; // DYNAMIC: handed out, not finished
  };

  // provider: DYNAMIC only (null for OFF). per_split: the pipeline's output maps back to
  // single splits (see task_runner.hpp is_per_split).
  JobCore(std::unique_ptr<SplitProvider> provider, bool per_split);
  // DYNAMIC with one provider per splittable source, in multi_source.hpp's order (non-empty).
  JobCore(std::vector<std::unique_ptr<SplitProvider>> providers, bool per_split);

  bool dynamic() const { return !sources_.empty(); }
  std::size_t num_sources() const { return sources_.size(); }
  bool per_split() const { return per_split_; }

  // --- tasks. Each returns whether consumers must see a change (the version moved).
  bool add_task(msg::task_id_t id, msg::worker_id_t worker, std::string worker_address,
                int64_t shard = -1);
  // Static sharding over the fixed worker list (shard i = workers[i]): production ends only
  // once each shard's task did.
  void require_shards(std::vector<std::string> workers) { shard_workers_ = std::move(workers); }
  // The shards that no task has produced to its end (static sharding; empty otherwise).
  std::vector<int64_t> shards_pending() const;
  // What production waits for besides running tasks, for people: "shard 2 of 3 (worker
  // 10.0.0.3:6000) has no task: its worker has not registered", or empty.
  std::string waiting_for() const;
  bool task_assigned(msg::task_id_t id);
  // `drained`: DYNAMIC, the task stopped early because its worker drained (its unstarted
  // splits came back); it does not count towards the end of production.
  bool task_done(msg::task_id_t id, std::string error, bool drained = false);
  // The task's worker was removed (or the task could not be assigned). DYNAMIC: its
  // unfinished splits are handed out again.
  bool task_lost(msg::task_id_t id, const std::string& reason);

  const Task* task(msg::task_id_t id) const;
  const std::map<msg::task_id_t, Task>& tasks() const { return tasks_; }
  std::vector<const Task*> listed() const; // assigned tasks
  bool production_ended() const;
  const std::string& error() const { return error_; }
  // The code of error(): a failed task's own code (e.g. resource_exhausted from a memory
  // budget), data_loss for elements that cannot be read again.
  ErrorCode error_code() const { return error_code_; }
  uint64_t version() const { return version_; }

  // --- readers (DYNAMIC). A task that some consumers may not read (target_workers LOCAL: only
  // the consumers of its worker's process; AUTO: a COLOCATED worker, only its own trainer's)
  // takes splits only once a consumer said it reads it (get_tasks.reading): splits handed to a
  // task nobody reads would never be read, and the epoch would wait for them forever.
  void require_reader(msg::task_id_t id) { need_reader_.insert(id); }
  // The tasks consumer `id` reads (its placement's choice). True when a task that waited for a
  // reader got its first one (its held get_splits may be answered now).
  bool set_reading(msg::consumer_id_t id, const std::vector<msg::task_id_t>& tasks);
  bool has_reader(msg::task_id_t id) const;

  // --- splits (DYNAMIC)
  struct SplitAnswer {
    bool hold = false; // nothing now, but the epoch is not over: answer later
    std::vector<Split> splits;
    bool end_of_splits = false;
    bool empty_epoch = false;
  };
  // Splits of source `source` (invalid_argument for a source the job does not have).
  Expected<SplitAnswer> get_splits(msg::task_id_t task, int64_t epoch, uint32_t max,
                                   int64_t source = 0);
  // Returns whether anything changed for held requests or consumers. `accepted` (optional)
  // gets the finished splits the task still owned: what the journal may count as finished.
  bool splits_update(msg::task_id_t task, const std::vector<SplitKey>& finished,
                     const std::vector<Split>& returned, std::vector<SplitKey>* accepted = nullptr);
  int64_t epoch(int64_t source = 0) const;
  // --- deterministic reads (DistributeOptions::deterministic; the consumer reorders into split
  // order, consumer/ordered_stream.hpp). The job hands out no new split more than `window`
  // splits past the lowest unfinished split of the epoch (a split handed out again is always
  // behind it, so it is never held back): the consumer then holds at most about that many
  // splits ahead of the one it waits for. Finished splits go to a log the consumer reads with
  // its task list, which is how it learns a split is over (also one `filter` left empty).
  void set_deterministic(int64_t window) { window_ = window; }
  int64_t deterministic_window() const { return window_; }
  // The log's entries from `known` on (earlier ones are forgotten), and the entry after the last:
  // (epoch, index) of its one source.
  std::vector<std::pair<int64_t, int64_t>> finished_since(int64_t known) const;
  int64_t finished_next() const { return finished_base_ + static_cast<int64_t>(finished_.size()); }
  // The consumer has the entries before `known`.
  void forget_finished(int64_t known);
  int64_t finished_base() const { return finished_base_; }
  // A restarted dispatcher's job: the journaled log (JobEntry::finished_log). Its consumer
  // rejoins reading the log from its start, so the entries are numbered from 0 again.
  void restore_finished(const std::vector<SplitKey>& log);
  // The tasks that hold the lowest unfinished split of the current epoch (what a deterministic
  // read's consumer waits for first); empty when it is waiting to be handed out (again).
  std::vector<msg::task_id_t> lowest_split_owners() const;
  std::size_t unfinished_splits() const { return owner_.size(); }
  std::size_t pending_reissue() const;
  int64_t splits_reissued() const { return reissued_; }
  int64_t splits_handed_out() const { return handed_out_; }
  SplitPosition position(int64_t source = 0) const;
  // A restarted dispatcher's job continues from its journaled hand-out position
  // (msg::SplitPositionRecord) of source 0. `outstanding`: the splits (of any source) handed out
  // before the restart and not finished; their tasks went down with the dispatcher, so they are
  // handed out again first.
  Status restore_splits(int64_t epoch, int64_t handed_out, const SplitPosition& position,
                        std::vector<Split> outstanding = {});
  // The journaled position of another source (restore_splits restores source 0's).
  Status restore_source(int64_t source, int64_t epoch, const SplitPosition& position);

  // --- consumers
  msg::consumer_id_t join(int64_t now_ns);
  // The ids join() gives start at `first` (a restored job: above every id its previous
  // incarnation gave, so that a consumer re-joining with its old id is never taken for another).
  void first_consumer_id(msg::consumer_id_t first) {
    next_consumer_ = std::max(next_consumer_, first);
  }
  void touch(msg::consumer_id_t id, int64_t now_ns);
  // Returns false when the consumer was unknown.
  bool leave(msg::consumer_id_t id, bool finished);
  // Consumers not seen for `timeout_ns` leave (not finished); returns them.
  std::vector<msg::consumer_id_t> expire(int64_t now_ns, int64_t timeout_ns);
  bool any_joined() const { return joined_ > 0; }
  std::size_t live_consumers() const { return consumers_.size(); }
  bool knows_consumer(msg::consumer_id_t id) const { return consumers_.count(id) > 0; }
  // Every consumer that joined has left; `all_finished`: each read to the end.
  bool consumers_done() const { return joined_ > 0 && consumers_.empty(); }
  bool all_finished() const {
    return consumers_done() && left_unfinished_ == 0 && joined_ >= expected_consumers_;
  }
  // A named job's repetition is shared by `n` consumers: it is not all read before n joined
  // (the GC timeout releases it when fewer come).
  void expect_consumers(int64_t n) { expected_consumers_ = std::max<int64_t>(1, n); }
  // Whole-epoch cross-trainer sharing: the consumer's trainer id; true when the trainer is new
  // to the job (its first consumer), so that the tasks must hear of it.
  bool set_trainer(msg::consumer_id_t id, const std::string& trainer) {
    return trainers_.add(id, trainer);
  }
  // After the consumer left: its trainer id when it was that trainer's last consumer (the
  // tasks must forget the trainer), else empty.
  std::string trainer_gone(msg::consumer_id_t id) { return trainers_.remove(id); }
  std::vector<std::string> trainers() const { return trainers_.trainers(); } // distinct, sorted

private:
  // One splittable source's hand-out state.
  struct Source {
    std::unique_ptr<SplitProvider> provider;
    int64_t epoch = 0;
    bool exhausted = false; // the provider said end_of_splits for epoch
    std::map<int64_t, int64_t> handed_in_epoch;
    std::deque<Split> requeue;
  };
  void requeue(Split split);
  void fail_with(const Task& t);
  void check_stranded();
  // Deterministic reads: the next split of the provider lies beyond the window (`taking`: the
  // splits this answer hands out already).
  bool beyond_window(const std::vector<Split>& taking) const;
  bool any_requeued() const;
  bool source_owns_any(int64_t source) const;

  std::vector<Source> sources_; // DYNAMIC: one per splittable source; empty for OFF
  bool per_split_ = false;
  std::map<msg::task_id_t, Task> tasks_;
  std::vector<std::string> shard_workers_; // static sharding: the fixed worker list
  uint64_t version_ = 1;
  std::string error_;
  ErrorCode error_code_ = ErrorCode::data_loss;
  // splits
  std::map<SplitKey, msg::task_id_t> owner_;
  int64_t reissued_ = 0;
  int64_t handed_out_ = 0;        // all epochs, re-issues included
  int64_t window_ = 0;            // deterministic reads: see set_deterministic (0 = off)
  std::deque<SplitKey> finished_; // the log from entry finished_base_ on
  int64_t finished_base_ = 0;
  // consumers
  std::map<msg::consumer_id_t, int64_t> consumers_; // -> last seen (ns)
  msg::consumer_id_t next_consumer_ = 1;
  int64_t joined_ = 0;
  int64_t expected_consumers_ = 1;
  int64_t left_unfinished_ = 0;
  TrainerReaders trainers_;                                        // whole-epoch cache sharing
  std::set<msg::task_id_t> need_reader_;                           // (require_reader)
  std::map<msg::consumer_id_t, std::set<msg::task_id_t>> reading_; // consumer -> tasks it reads
};

} // namespace conveyor::actors
