#include "consumer/ordered_reads.hpp"

#include <algorithm>

namespace conveyor::actors {

OrderedReads::OrderedReads(int64_t window, std::shared_ptr<const ReadCursor> resumed)
  : reorder_(window, [](const SplitRun& run) { return run.bytes; }), resumed_(std::move(resumed)) {
  if (resumed_) {
    const ReadCursor* cursor = resumed_.get(); // (kept alive by resumed_)
    reorder_.resume_from(
      [cursor](const std::pair<int64_t, int64_t>& s) {
        return cursor->complete(s.first, s.second);
      },
      [cursor](const std::pair<int64_t, int64_t>& s, int64_t seq) {
        return cursor->covers(s.first, s.second, seq);
      });
  }
}

Expected<bool> OrderedReads::arrived(SplitRun& run) {
  const DeliveredOrigin& origin = run.first;
  if (!origin.tagged())
    return failed_precondition("a deterministic read got an element without its split: its job "
                               "does not tag elements (`deterministic` needs a per-split "
                               "DYNAMIC pipeline)");
  const std::pair<int64_t, int64_t> split{origin.epoch, origin.index};
  const int64_t seq = origin.seq, span = run.count;
  const bool split_end = origin.split_end;
  if (reorder_.take_if_next(split, seq, split_end, span))
    return true;
  if (!reorder_.add(split, seq, std::move(run), split_end, span))
    return data_loss("a deterministic read got elements " + std::to_string(seq) + ".." +
                     std::to_string(seq + span - 1) + " of split " + std::to_string(split.second) +
                     " (epoch " + std::to_string(split.first) +
                     ") as one run, but only some of them were handed out already: the rest "
                     "cannot be reordered apart from them");
  peak_held_ = std::max(peak_held_, reorder_.held());
  peak_bytes_ = std::max(peak_bytes_, reorder_.held_bytes());
  return false;
}

void OrderedReads::finished(const std::vector<std::pair<int64_t, int64_t>>& splits) {
  for (const auto& split : splits) {
    if (split.first < log_epoch_)
      continue; // a restarted job's log repeats what came before (its epoch is over)
    // The first finish of a later epoch: every split of the earlier ones finished before it.
    for (; log_epoch_ < split.first; ++log_epoch_) {
      auto last = last_index_.find(log_epoch_);
      reorder_.epoch_done(log_epoch_, last == last_index_.end() ? 0 : last->second + 1);
      last_index_.erase(log_epoch_);
    }
    auto& last = last_index_.try_emplace(split.first, split.second).first->second;
    last = std::max(last, split.second);
    reorder_.all_arrived(split);
  }
}

std::optional<SplitRun> OrderedReads::pop() { return reorder_.pop(); }

std::vector<SplitRun> OrderedReads::drain() {
  std::vector<SplitRun> out;
  reorder_.drain([&](SplitRun&& run) { out.push_back(std::move(run)); });
  return out;
}

} // namespace conveyor::actors
