// shuffle(buffer_size, seed, reshuffle_each_iteration): tf.data's buffer shuffle. The buffer is
// filled with the first buffer_size elements; each output is a uniformly chosen buffer entry, whose
// place the next input element takes. A seed gives the same order in every run; with
// reshuffle_each_iteration each new iterator (e.g. the next pass of a `repeat`) derives a new order
// from seed and iteration number.
#include <sstream>

#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class ShuffleIterator : public Iterator {
public:
  ShuffleIterator(IteratorPtr input, int64_t buffer_size, uint64_t seed, MemoryBudget* budget,
                  StopCheck stop)
    : input_(std::move(input)), buffer_size_(buffer_size), rng_(seed), charge_(budget, "shuffle"),
      stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    while (!input_done_ && static_cast<int64_t>(buffer_.size()) < buffer_size_) {
      CONVEYOR_RETURN_IF_ERROR(stop_.check("shuffle"));
      Element element;
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(input_->get_next(element, end)); // the buffer waits for the retry
      if (end) {
        input_done_ = true;
      } else {
        CONVEYOR_RETURN_IF_ERROR(reserve_one_more(buffer_, charge_));
        CONVEYOR_RETURN_IF_ERROR(charge_.add(element_heap_bytes(element)));
        buffer_.push_back(std::move(element));
      }
    }
    if (buffer_.empty()) {
      end_of_sequence = true;
      return Status::OK();
    }
    const std::size_t pick = uniform_below(rng_, buffer_.size());
    out = std::move(buffer_[pick]);
    charge_.remove(element_heap_bytes(out)); // its slot stays (and stays charged)
    if (pick + 1 != buffer_.size())
      buffer_[pick] = std::move(buffer_.back());
    buffer_.pop_back();
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("shuffle");
    out.put_bool(input_done_);
    std::ostringstream rng; // the standard's text form of the engine's whole state
    rng << rng_;
    out.put_bytes(rng.str());
    out.put_elements(buffer_);
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("shuffle"));
    input_done_ = in.get_bool();
    std::istringstream rng(in.get_bytes());
    std::vector<Element> buffer = in.get_elements();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (!(rng >> rng_))
      return data_loss("pipeline state: `shuffle` holds no valid random generator state");
    for (Element& element : buffer) {
      CONVEYOR_RETURN_IF_ERROR(reserve_one_more(buffer_, charge_));
      CONVEYOR_RETURN_IF_ERROR(charge_.add(element_heap_bytes(element)));
      buffer_.push_back(std::move(element));
    }
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  int64_t buffer_size_;
  std::mt19937_64 rng_; // std::mt19937_64 is specified exactly, so orders match across platforms
  std::vector<Element> buffer_;
  bool input_done_ = false;
  MemoryCharge charge_; // the buffer (elements and slots), against the job's budget
  StopCheck stop_;
};

} // namespace

MakeResult make_shuffle(const NodePtr& node, const KernelContext& kctx) {
  const int64_t buffer_size = node->int_attr("buffer_size");
  if (buffer_size < 1)
    return invalid_argument("`shuffle` argument `buffer_size` must be positive, got " +
                            std::to_string(buffer_size));
  const int64_t seed = node->int_attr("seed");
  if (seed < 0 && seed != kNoSeed)
    return invalid_argument("`shuffle` argument `seed` must be non-negative (or omitted), got " +
                            std::to_string(seed));
  const uint64_t iteration_seed_value =
    iteration_seed(node.get(), seed, node->bool_attr("reshuffle_each_iteration"), kctx);
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<ShuffleIterator>(
    std::move(*input), buffer_size, iteration_seed_value, kctx.memory(), kctx.stop()));
}

} // namespace conveyor::kernels
