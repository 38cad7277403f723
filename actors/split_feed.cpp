#include "actors/split_feed.hpp"

namespace conveyor::actors {

Status SplitFeed::get_next(Split& out, bool& end_of_splits) {
  active_ = true;
  if (!splits_.empty()) {
    out = std::move(splits_.front());
    splits_.pop_front();
    ++consumed_in_epoch_;
    end_of_splits = false;
    return Status::OK();
  }
  if (end_pending_) {
    end_pending_ = false;
    active_ = false;
    ++epoch_;
    consumed_in_epoch_ = 0;
    end_of_splits = true;
    return Status::OK();
  }
  if (!error_.ok())
    return error_;
  return unavailable("waiting for a split of epoch " + std::to_string(epoch_) + " from the job");
}

Status SplitFeed::restore(const SplitPosition&) {
  return unimplemented("a task's split feed cannot be restored; the job hands out splits again");
}

bool SplitFeed::wants_split() const {
  return active_ && !outstanding_ && !end_pending_ && error_.ok() && splits_.size() < prefetch_;
}

void SplitFeed::deliver(const Split& split) {
  outstanding_ = false;
  splits_.push_back(split);
}

void SplitFeed::deliver_end_of_splits() {
  outstanding_ = false;
  end_pending_ = true;
}

void SplitFeed::fail(Status error) {
  outstanding_ = false;
  error_ = std::move(error);
}

} // namespace conveyor::actors
