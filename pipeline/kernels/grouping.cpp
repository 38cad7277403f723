#include "pipeline/kernels/grouping.hpp"

namespace conveyor::kernels {

Status GroupingIterator::get_next(Element& out, bool& end_of_sequence) {
  end_of_sequence = false;
  while (!input_done_ && static_cast<int64_t>(pending_.size()) < batch_size_) {
    Element element;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(input_->get_next(element, end)); // pending_ waits for the retry
    if (end) {
      input_done_ = true;
    } else {
      CONVEYOR_RETURN_IF_ERROR(charge_.add(static_cast<int64_t>(element.byte_size())));
      pending_.push_back(std::move(element));
    }
  }
  if (pending_.empty() || (drop_remainder_ && static_cast<int64_t>(pending_.size()) < batch_size_)) {
    pending_.clear();
    charge_.reset();
    end_of_sequence = true;
    return Status::OK();
  }
  std::vector<Element> elements;
  elements.swap(pending_);
  // Combining holds the parts and the batch at once: the batch counts too while it is built.
  Status room = charge_.add(charge_.held());
  if (!room.ok()) {
    pending_.swap(elements); // kept: the error is final for the job anyway
    return room;
  }
  auto batch = combine_(elements);
  charge_.reset();
  if (!batch.ok())
    return batch.status();
  out = std::move(*batch);
  return Status::OK();
}

} // namespace conveyor::kernels
