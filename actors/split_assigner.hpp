// DYNAMIC sharding, job side: hands out the splits of the job's one split provider, each once
// per epoch across all tasks, with the per-task epoch logic of TF's GetSplit(repetition):
//
//   task epoch <  job epoch  -> end_of_splits (that epoch is exhausted; the task moves on)
//   task epoch == job epoch  -> the provider's next split, or end_of_splits when the epoch is
//                               exhausted (and the job moves to the next epoch)
//   task epoch >  job epoch  -> failed_precondition (a task cannot be ahead of the job)
//
// So every task sees exactly one end_of_splits per epoch, and a `repeat` above the source on the
// worker starts the next epoch by asking again. Past the provider's last epoch every answer is
// end_of_splits. No CAF: the job actor forwards get_split requests here.
#pragma once

#include <cstdint>
#include <memory>

#include "pipeline/split_provider.hpp"
#include "pipeline/status.hpp"

namespace conveyor::actors {

class SplitAssigner {
public:
  explicit SplitAssigner(std::unique_ptr<SplitProvider> provider);

  Status next(int64_t task_epoch, Split& out, bool& end_of_splits);

  int64_t epoch() const { return epoch_; }
  int64_t splits_handed_out() const { return handed_out_; }
  // Where the provider stands (journaled as msg::SplitPositionRecord).
  SplitPosition position() const { return provider_->position(); }
  // Continues from a journaled position (a restarted dispatcher's job).
  Status restore(int64_t epoch, int64_t handed_out, const SplitPosition& position);

private:
  std::unique_ptr<SplitProvider> provider_;
  int64_t epoch_ = 0;
  int64_t handed_out_ = 0;
};

} // namespace conveyor::actors
