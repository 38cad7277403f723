// DYNAMIC sharding, task side: the SplitProvider a task's pipeline reads its splits from
// (IteratorContext::split_provider). Splits arrive asynchronously from the job, so when none
// is buffered get_next returns `unavailable` — the pipeline keeps its progress and is resumed
// once a split arrived (pipeline/runtime/iterator.hpp's resumability contract).
//
// The task actor drives it: when wants_splits() it sends get_splits{task, epoch(), request_max()}
// to the job and calls request_sent(); the answer goes to deliver() / fail(). The feed keeps a
// window of splits buffered (taken from the job, not started); it asks again once fewer are
// buffered. The window follows what the pipeline reads while an answer is on its way (rate x
// round-trip time): it doubles (up to kMaxWindow) when the pipeline had to wait for a split it
// had asked for ahead, and shrinks when an answer came while splits were still unread (by half
// of them, down to one).
// A split read ahead is one no other task can take: a worker that joins a running job (the
// autoscaler's) only gets splits nobody holds, so a slow pipeline must not keep the window that
// a start-up wait grew, nor the splits it took with it (take_surplus). After an end_of_splits the feed asks for nothing until the pipeline asks for the next
// epoch (a pipeline without `repeat` never does), so no split is taken that nobody reads.
//
// A `repeat` above several sources tells each feed when its next pass begins (next_repetition):
// a feed whose pipeline left its epoch unfinished asks for the next epoch from then on.
//
// An epoch in which this task got no split is skipped, not shown to the pipeline (a `repeat`
// above the source would end on an empty epoch): the feed asks for the next epoch instead. Only
// an epoch that was empty for the whole job reaches the pipeline as its end.
//
// A dataset with several splittable sources (zip, concatenate) has one feed per source, each
// asking for its source's splits (get_splits.source) with its own epochs. Those feeds do not
// prefetch (set_prefetch(false)): a feed asks only when the pipeline waits for a split, as
// tf.data's worker does. Splits buffered ahead would be left unread where a zip ended on another
// input, and the lock-step hand-out keeps a zip of equal-length sources reading every split.
//
// The feed also knows where each output element of a per-split pipeline came from: the split
// the pipeline read last (current()); a split the pipeline moved past is *closed* (all of its
// output was produced).
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "pipeline/sharding/repetition.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

class SplitFeed : public SplitProvider, public RepetitionAware {
public:
  static constexpr std::size_t kMaxWindow = 32;
  static constexpr std::size_t kMinWindow = 1;
  explicit SplitFeed(std::size_t window = 2) : window_(window == 0 ? 1 : window) {}

  // The splittable source this feed reads (get_splits.source).
  void set_source(int64_t source) { source_ = source; }
  int64_t source() const { return source_; }
  // false: ask only when the pipeline waits for a split, one at a time (several sources).
  void set_prefetch(bool prefetch) { prefetch_ = prefetch; }

  // --- SplitProvider (called by the pipeline)
  Status get_next(Split& out, bool& end_of_splits) override;
  SplitPosition position() const override { return {epoch_, consumed_in_epoch_}; }
  Status restore(const SplitPosition& pos) override;
  // --- RepetitionAware: a source left mid-epoch when the pass ended (a zip that ended on its
  // other input) moves to its next epoch, as tf.data resets every provider; the job then ends
  // that epoch for every task (dispatcher/job_core.hpp). Not with a request in flight or
  // splits buffered (a feed asks only when its pipeline waits for a split, so a zip that ended
  // on its other input leaves neither): those are read in the next pass.
  void next_repetition() override;

  // --- the task actor's side
  int64_t epoch() const { return epoch_; } // the epoch the pipeline is in
  bool wants_splits() const;
  uint32_t request_max() const;
  void request_sent() { outstanding_ = true; }
  // A reply: splits (maybe none: ask again), or the end of the epoch.
  void deliver(std::vector<Split> splits, bool end_of_splits, bool empty_epoch);
  void fail(Status error);
  bool request_outstanding() const { return outstanding_; }
  std::size_t window() const { return window_; }
  // Splits taken from the job and not started (what no other task can take now), and the most
  // it held at once (logged when the task ends: how far it read ahead).
  std::size_t buffered() const { return splits_.size(); }
  std::size_t peak_buffered() const { return peak_buffered_; }
  // Stop taking splits (a draining worker): the pipeline sees the end of its splits; returns
  // the splits it had not started.
  std::vector<Split> drain();
  bool draining() const { return draining_; }
  // The unstarted splits (a task that ends hands them back).
  std::vector<Split> take_unstarted();
  // The unstarted splits beyond the window (it shrank), the last taken first: a per-split task
  // hands them back, and the job hands them to the next task that asks (one that joined the
  // job, or this one again once it needs them).
  std::vector<Split> take_surplus();

  // --- origins
  bool has_current() const { return has_current_; }
  const Split& current() const { return current_; }
  int64_t next_seq() { return seq_++; }
  // Splits handed to the pipeline since the last call / closed since the last call.
  std::vector<Split> take_started() { return std::exchange(started_, {}); }
  std::vector<Split> take_closed() { return std::exchange(closed_, {}); }
  // The pipeline ended: its current split is closed too.
  void pipeline_ended() { close_current(); }

private:
  void close_current();

  std::size_t window_;
  std::deque<Split> splits_;
  std::size_t peak_buffered_ = 0;
  bool end_pending_ = false; // the job said this epoch is over
  bool empty_epoch_ = false; // ...and it was empty for the whole job
  bool outstanding_ = false; // a get_splits is on its way
  bool active_ = false;      // the pipeline has asked within the current epoch
  bool draining_ = false;
  bool starved_ = false; // the pipeline waited since the last request
  bool primed_ = false;  // splits of this epoch arrived before (a wait now: the window is short)
  bool waiting_ = false; // the pipeline's last get_next found no split (it waits for one)
  bool prefetch_ = true;
  int64_t source_ = 0;
  int64_t epoch_ = 0;
  int64_t consumed_in_epoch_ = 0;
  Status error_;
  bool has_current_ = false;
  Split current_;
  int64_t seq_ = 0;
  std::vector<Split> started_;
  std::vector<Split> closed_;
};

} // namespace conveyor::actors
