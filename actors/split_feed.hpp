// DYNAMIC sharding, task side: the SplitProvider a task's pipeline reads its splits from
// (IteratorContext::split_provider). Splits arrive asynchronously from the job, so when none
// is buffered get_next returns `unavailable` — the pipeline keeps its progress and is resumed
// once a split arrived (pipeline/iterator.hpp's resumability contract).
//
// The task actor drives it: when wants_split() it sends get_split{task, epoch()} to the job and
// calls request_sent(); the answer goes to deliver() / deliver_end_of_splits() / fail(). Up to
// `prefetch` splits are requested ahead while the pipeline is inside an epoch, to hide the
// round trip. After an end_of_splits the feed asks for nothing until the pipeline asks for the
// next epoch (a pipeline without `repeat` never does), so no split is taken that nobody reads.
#pragma once

#include <cstdint>
#include <deque>

#include "pipeline/split_provider.hpp"
#include "pipeline/status.hpp"

namespace conveyor::actors {

class SplitFeed : public SplitProvider {
public:
  explicit SplitFeed(std::size_t prefetch = 2) : prefetch_(prefetch == 0 ? 1 : prefetch) {}

  // --- SplitProvider (called by the pipeline)
  Status get_next(Split& out, bool& end_of_splits) override;
  SplitPosition position() const override { return {epoch_, consumed_in_epoch_}; }
  Status restore(const SplitPosition& pos) override;

  // --- the task actor's side
  // The epoch the pipeline is in (what get_split asks for).
  int64_t epoch() const { return epoch_; }
  bool wants_split() const;
  void request_sent() { outstanding_ = true; }
  void deliver(const Split& split);
  void deliver_end_of_splits();
  void fail(Status error);
  bool request_outstanding() const { return outstanding_; }

private:
  std::size_t prefetch_;
  std::deque<Split> splits_;
  bool end_pending_ = false; // the job said this epoch is exhausted
  bool outstanding_ = false; // a get_split is on its way
  bool active_ = false;      // the pipeline has asked within the current epoch
  int64_t epoch_ = 0;
  int64_t consumed_in_epoch_ = 0;
  Status error_;
};

} // namespace conveyor::actors
