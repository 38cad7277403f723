#include "actors/split_assigner.hpp"

namespace conveyor::actors {

SplitAssigner::SplitAssigner(std::unique_ptr<SplitProvider> provider)
  : provider_(std::move(provider)) {}

Status SplitAssigner::next(int64_t task_epoch, Split& out, bool& end_of_splits) {
  if (task_epoch < epoch_) {
    end_of_splits = true;
    return Status::OK();
  }
  if (task_epoch > epoch_)
    return failed_precondition("a task asked for a split of epoch " + std::to_string(task_epoch) +
                               " but the job is only in epoch " + std::to_string(epoch_));
  CONVEYOR_RETURN_IF_ERROR(provider_->get_next(out, end_of_splits));
  if (end_of_splits)
    ++epoch_;
  else
    ++handed_out_;
  return Status::OK();
}

Status SplitAssigner::restore(int64_t epoch, int64_t handed_out, const SplitPosition& position) {
  if (epoch < 0 || handed_out < 0)
    return invalid_argument("a split position with a negative epoch or count");
  CONVEYOR_RETURN_IF_ERROR(provider_->restore(position));
  epoch_ = epoch;
  handed_out_ = handed_out;
  return Status::OK();
}

} // namespace conveyor::actors
