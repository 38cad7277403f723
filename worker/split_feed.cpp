#include "worker/split_feed.hpp"

#include <algorithm>

namespace conveyor::actors {

void SplitFeed::close_current() {
  if (!has_current_)
    return;
  has_current_ = false;
  closed_.push_back(current_);
}

Status SplitFeed::get_next(Split& out, bool& end_of_splits) {
  active_ = true;
  waiting_ = false;
  close_current(); // the pipeline moved past it: all of its output was produced
  if (draining_) {
    end_of_splits = true;
    return Status::OK();
  }
  if (!splits_.empty()) {
    out = std::move(splits_.front());
    splits_.pop_front();
    ++consumed_in_epoch_;
    current_ = out;
    has_current_ = true;
    seq_ = 0;
    started_.push_back(out);
    end_of_splits = false;
    return Status::OK();
  }
  if (end_pending_) {
    end_pending_ = false;
    bool skip = consumed_in_epoch_ == 0 && !empty_epoch_;
    ++epoch_;
    consumed_in_epoch_ = 0;
    primed_ = false;
    if (skip) { // nothing for this task in that epoch, but the job had splits: wait for the next
      waiting_ = true;
      return unavailable("waiting for a split of epoch " + std::to_string(epoch_));
    }
    active_ = false;
    end_of_splits = true;
    return Status::OK();
  }
  if (!error_.ok())
    return error_;
  starved_ = true;
  waiting_ = true;
  return unavailable("waiting for a split of epoch " + std::to_string(epoch_) + " from the job");
}

void SplitFeed::next_repetition() {
  // A feed not active in its epoch saw the epoch's end (or was never asked in it): nothing to
  // move past.
  if (!active_ || draining_ || outstanding_ || !splits_.empty())
    return;
  close_current(); // the pass left it: none of its output comes any more
  end_pending_ = false;
  empty_epoch_ = false;
  waiting_ = false;
  active_ = false;
  ++epoch_;
  consumed_in_epoch_ = 0;
  primed_ = false;
}

Status SplitFeed::restore(const SplitPosition&) {
  return unimplemented("a task's split feed cannot be restored; the job hands out splits again");
}

bool SplitFeed::wants_splits() const {
  if (!prefetch_)
    return active_ && waiting_ && !outstanding_ && !end_pending_ && !draining_ && error_.ok() &&
           splits_.empty();
  return active_ && !outstanding_ && !end_pending_ && !draining_ && error_.ok() &&
         splits_.size() < window_;
}

uint32_t SplitFeed::request_max() const {
  if (!prefetch_)
    return 1;
  return static_cast<uint32_t>(window_ > splits_.size() ? window_ - splits_.size() : 1);
}

void SplitFeed::deliver(std::vector<Split> splits, bool end_of_splits, bool empty_epoch) {
  outstanding_ = false;
  const std::size_t unread = splits_.size(); // what the pipeline had left when the answer came
  // The pipeline waited for an answer while it had been asked ahead: keep more in flight. (Not
  // for an epoch's first answer, which every pipeline waits for: doubling there made a slow
  // task hold 4 splits from the start, half of a job's 8.)
  if (starved_ && primed_ && !splits.empty())
    window_ = std::min(kMaxWindow, window_ * 2);
  else if (unread > 0 && !splits.empty()) // asked too early: those splits covered the round trip
    window_ = std::max(kMinWindow, window_ - std::min(window_, (unread + 1) / 2));
  starved_ = false;
  if (draining_) { // arrived after the drain began: hand them back too
    for (auto& s : splits)
      splits_.push_back(std::move(s));
    return;
  }
  primed_ = primed_ || !splits.empty();
  for (auto& s : splits)
    splits_.push_back(std::move(s));
  peak_buffered_ = std::max(peak_buffered_, splits_.size());
  if (end_of_splits) {
    end_pending_ = true;
    empty_epoch_ = empty_epoch;
  }
}

void SplitFeed::fail(Status error) {
  outstanding_ = false;
  error_ = std::move(error);
}

std::vector<Split> SplitFeed::drain() {
  draining_ = true;
  return take_unstarted();
}

std::vector<Split> SplitFeed::take_unstarted() {
  std::vector<Split> out(std::make_move_iterator(splits_.begin()),
                         std::make_move_iterator(splits_.end()));
  splits_.clear();
  return out;
}

std::vector<Split> SplitFeed::take_surplus() {
  std::vector<Split> out;
  // (not after the epoch's end: the job ends an epoch only once none of its splits is owned)
  if (!prefetch_ || draining_ || end_pending_)
    return out;
  while (splits_.size() > window_) {
    out.push_back(std::move(splits_.back()));
    splits_.pop_back();
  }
  std::reverse(out.begin(), out.end()); // in split order: the job re-issues them in that order
  return out;
}

} // namespace conveyor::actors
