// interleave(fn, cycle_length, block_length): keeps up to cycle_length datasets fn(x) open and takes
// block_length elements from each in turn; a finished one is replaced by fn of the next input
// element in its slot. Same algorithm (and so the same order) as tf.data's InterleaveDataset.
// num_parallel_calls > 1 reads blocks ahead on the executor (parallel_interleave.hpp).
#include <thread>

#include "pipeline/kernels/dataset_function.hpp"
#include "pipeline/kernels/parallel_interleave.hpp"

namespace conveyor::kernels {

namespace {

// cycle_length = AUTOTUNE: fixed, so the output order is the same on every machine.
constexpr int64_t kAutotuneCycleLength = 4;
// Each slot may hold an open dataset; more than this is surely a mistake, not a plan.
constexpr int64_t kMaxCycleLength = 1 << 16;

class InterleaveIterator : public Iterator {
public:
  InterleaveIterator(IteratorPtr input, DatasetFunction fn, int64_t cycle_length,
                     int64_t block_length, StopCheck stop)
    : input_(std::move(input)), fn_(std::move(fn)), cycle_(static_cast<std::size_t>(cycle_length)),
      args_(cycle_.size()), block_length_(block_length), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    // Each pass either returns, consumes an input element, closes an inner dataset or moves one
    // slot on, so this ends with the input and the open datasets.
    while (!end_of_input_ || num_open_ > 0) {
      CONVEYOR_RETURN_IF_ERROR(stop_.check("interleave"));
      IteratorPtr& slot = cycle_[cycle_index_];
      if (slot) {
        bool inner_end = false;
        CONVEYOR_RETURN_IF_ERROR(slot->get_next(out, inner_end));
        if (!inner_end) {
          if (++block_index_ == block_length_)
            advance();
          return Status::OK();
        }
        slot.reset();
        --num_open_;
        advance();
      } else if (!end_of_input_) {
        Element in;
        bool input_end = false;
        CONVEYOR_RETURN_IF_ERROR(input_->get_next(in, input_end));
        if (input_end) {
          end_of_input_ = true;
          continue;
        }
        auto inner = fn_.make_iterator(in);
        if (!inner.ok())
          return inner.status();
        slot = std::move(*inner);
        args_[cycle_index_] = std::move(in);
        ++num_open_;
      } else {
        advance();
      }
    }
    end_of_sequence = true;
    return Status::OK();
  }

  // The cycle: each open slot's input element (to make its dataset again) and state.
  Status save(IteratorStateWriter& out) override {
    out.put_tag("interleave");
    out.put_int(static_cast<int64_t>(cycle_index_));
    out.put_int(block_index_);
    out.put_bool(end_of_input_);
    for (std::size_t i = 0; i < cycle_.size(); ++i) {
      out.put_bool(cycle_[i] != nullptr);
      if (cycle_[i]) {
        out.put_element(args_[i]);
        CONVEYOR_RETURN_IF_ERROR(cycle_[i]->save(out));
      }
    }
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("interleave"));
    const int64_t cycle_index = in.get_int();
    block_index_ = in.get_int();
    end_of_input_ = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    CONVEYOR_RETURN_IF_ERROR(check_cycle_slot(cycle_index, cycle_.size()));
    cycle_index_ = static_cast<std::size_t>(cycle_index);
    num_open_ = 0;
    for (std::size_t i = 0; i < cycle_.size(); ++i) {
      cycle_[i].reset();
      if (!in.get_bool())
        continue;
      args_[i] = in.get_element();
      CONVEYOR_RETURN_IF_ERROR(in.status());
      auto inner = fn_.make_iterator(args_[i]);
      if (!inner.ok())
        return inner.status();
      cycle_[i] = std::move(*inner);
      ++num_open_;
      CONVEYOR_RETURN_IF_ERROR(cycle_[i]->restore(in));
    }
    CONVEYOR_RETURN_IF_ERROR(in.status());
    return input_->restore(in);
  }

private:
  void advance() {
    block_index_ = 0;
    cycle_index_ = (cycle_index_ + 1) % cycle_.size();
  }

  IteratorPtr input_;
  DatasetFunction fn_;
  std::vector<IteratorPtr> cycle_;
  std::vector<Element> args_; // the input element each open slot's dataset was made from
  int64_t block_length_;
  std::size_t cycle_index_ = 0;
  int64_t block_index_ = 0;
  int64_t num_open_ = 0;
  bool end_of_input_ = false;
  StopCheck stop_;
};

} // namespace

MakeResult make_interleave(const NodePtr& node, const KernelContext& kctx) {
  int64_t cycle_length = node->int_attr("cycle_length");
  if (cycle_length == kAutotune)
    cycle_length = kAutotuneCycleLength;
  if (cycle_length < 1 || cycle_length > kMaxCycleLength)
    return invalid_argument("`interleave` argument `cycle_length` must be in [1, " +
                            std::to_string(kMaxCycleLength) + "] or AUTOTUNE, got " +
                            std::to_string(cycle_length));
  const int64_t block_length = node->int_attr("block_length");
  if (block_length < 1)
    return invalid_argument("`interleave` argument `block_length` must be positive, got " +
                            std::to_string(block_length));
  int64_t parallelism = node->int_attr("num_parallel_calls");
  if (parallelism == kAutotune)
    parallelism = std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (parallelism < 1)
    return invalid_argument(
      "`interleave` argument `num_parallel_calls` must be positive or AUTOTUNE, got " +
      std::to_string(parallelism));
  auto fn = DatasetFunction::find("interleave", node->function_attr("fn"), kctx);
  if (!fn.ok())
    return fn.status();
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  if (parallelism > 1)
    return make_parallel_interleave(std::move(*input), std::move(*fn), cycle_length, block_length,
                                    parallelism, node->bool_attr("deterministic"),
                                    kctx.executor_group(), kctx.stop());
  return IteratorPtr(std::make_unique<InterleaveIterator>(std::move(*input), std::move(*fn),
                                                          cycle_length, block_length, kctx.stop()));
}

} // namespace conveyor::kernels
