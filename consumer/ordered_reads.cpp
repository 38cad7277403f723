#include "consumer/ordered_reads.hpp"

#include <algorithm>

namespace conveyor::actors {

OrderedReads::OrderedReads(int64_t window, std::shared_ptr<const ReadCursor> resumed)
  : reorder_(window,
             [](const OrderedElement& e) { return static_cast<int64_t>(e.element.byte_size()); }),
    resumed_(std::move(resumed)) {
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

Expected<bool> OrderedReads::arrived(Element& element, const DeliveredOrigin& origin) {
  if (!origin.tagged())
    return failed_precondition("a deterministic read got an element without its split: its job "
                               "does not tag elements (`deterministic` needs a per-split "
                               "DYNAMIC pipeline)");
  const std::pair<int64_t, int64_t> split{origin.epoch, origin.index};
  if (reorder_.take_if_next(split, origin.seq, origin.split_end))
    return true;
  reorder_.add(split, origin.seq, OrderedElement{std::move(element), origin}, origin.split_end);
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

std::optional<OrderedElement> OrderedReads::pop() { return reorder_.pop(); }

std::vector<OrderedElement> OrderedReads::drain() {
  std::vector<OrderedElement> out;
  reorder_.drain([&](OrderedElement&& e) { out.push_back(std::move(e)); });
  return out;
}

} // namespace conveyor::actors
