#include "pipeline/kernels/grouping.hpp"

namespace conveyor::kernels {

Status GroupingIterator::get_next(Element& out, bool& end_of_sequence) {
  end_of_sequence = false;
  while (!input_done_ && static_cast<int64_t>(pending_.size()) < batch_size_) {
    CONVEYOR_RETURN_IF_ERROR(stop_.check(charge_.op().c_str()));
    Element element;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(input_->get_next(element, end)); // pending_ waits for the retry
    if (end) {
      input_done_ = true;
    } else {
      CONVEYOR_RETURN_IF_ERROR(reserve_one_more(pending_, charge_));
      CONVEYOR_RETURN_IF_ERROR(charge_.add(element_heap_bytes(element)));
      pending_.push_back(std::move(element));
    }
  }
  if (pending_.empty() ||
      (drop_remainder_ && static_cast<int64_t>(pending_.size()) < batch_size_)) {
    pending_ = {};
    charge_.reset();
    end_of_sequence = true;
    return Status::OK();
  }
  std::vector<Element> elements;
  elements.swap(pending_);
  Expected<Element> batch = internal_error("not combined");
  {
    // The parts stay charged while the batch is built; combine checks the batch's size first.
    FunctionMemoryScope scope(charge_.budget());
    batch = combine_(elements);
  }
  elements = {};
  charge_.reset();
  if (!batch.ok())
    return batch.status();
  out = std::move(*batch);
  return Status::OK();
}

// The group being filled is state only while an input `unavailable` waits (get_next empties it
// otherwise).
Status GroupingIterator::save(IteratorStateWriter& out) {
  out.put_tag(charge_.op());
  out.put_bool(input_done_);
  out.put_elements(pending_);
  return input_->save(out);
}

Status GroupingIterator::restore(IteratorStateReader& in) {
  CONVEYOR_RETURN_IF_ERROR(in.expect_tag(charge_.op()));
  input_done_ = in.get_bool();
  std::vector<Element> pending = in.get_elements();
  CONVEYOR_RETURN_IF_ERROR(in.status());
  for (Element& element : pending) {
    CONVEYOR_RETURN_IF_ERROR(reserve_one_more(pending_, charge_));
    CONVEYOR_RETURN_IF_ERROR(charge_.add(element_heap_bytes(element)));
    pending_.push_back(std::move(element));
  }
  return input_->restore(in);
}

} // namespace conveyor::kernels
