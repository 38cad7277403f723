// repeat(count): the input `count` times (forever when count is kRepeatForever), each time through a
// new input iterator. A pass that yields nothing ends the repetition, as in tf.data, so repeating an
// empty dataset ends instead of spinning. Under DYNAMIC sharding each new pass asks the split
// provider for the next epoch; with several sources below it, each pass also tells their providers
// that a new repetition began (pipeline/sharding/repetition.hpp).
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/sharding/repetition.hpp"

namespace conveyor::kernels {

namespace {

class RepeatIterator : public Iterator {
public:
  RepeatIterator(NodePtr input_node, KernelContext kctx, int64_t count, IteratorPtr first)
    : input_node_(std::move(input_node)), kctx_(std::move(kctx)), count_(count),
      input_(std::move(first)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    // Each pass either returns or finishes one repetition; a repetition without elements ends all.
    while (!finished_) {
      CONVEYOR_RETURN_IF_ERROR(kctx_.stop().check("repeat")); // many short passes
      if (!input_) {
        auto next = make_kernel(input_node_, kctx_);
        if (!next.ok()) // the next call tries again to start this pass
          return next.status();
        input_ = std::move(*next);
      }
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(input_->get_next(out, end));
      if (!end) {
        produced_in_pass_ = true;
        return Status::OK();
      }
      input_.reset();
      if (kctx_.split_providers.size() > 1)
        for (SplitProvider* provider : kctx_.split_providers)
          if (auto* aware = dynamic_cast<RepetitionAware*>(provider))
            aware->next_repetition();
      ++passes_done_;
      finished_ = !produced_in_pass_ || (count_ != kRepeatForever && passes_done_ >= count_);
      produced_in_pass_ = false;
    }
    end_of_sequence = true;
    return Status::OK();
  }

  // The passes done and the current pass's input (made again on restore: under DYNAMIC sharding
  // the split provider's position is its owner's to restore).
  Status save(IteratorStateWriter& out) override {
    out.put_tag("repeat");
    out.put_int(passes_done_);
    out.put_bool(produced_in_pass_);
    out.put_bool(finished_);
    out.put_bool(input_ != nullptr);
    return input_ ? input_->save(out) : Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("repeat"));
    passes_done_ = in.get_int();
    produced_in_pass_ = in.get_bool();
    finished_ = in.get_bool();
    const bool has_input = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (!has_input) {
      input_.reset();
      return Status::OK();
    }
    if (!input_) {
      auto made = make_kernel(input_node_, kctx_);
      if (!made.ok())
        return made.status();
      input_ = std::move(*made);
    }
    return input_->restore(in);
  }

private:
  NodePtr input_node_;
  KernelContext kctx_;
  int64_t count_;
  IteratorPtr input_;
  int64_t passes_done_ = 0;
  bool produced_in_pass_ = false;
  bool finished_ = count_ == 0;
};

} // namespace

MakeResult make_repeat(const NodePtr& node, const KernelContext& kctx) {
  const int64_t count = node->int_attr("count");
  if (count < 0 && count != kRepeatForever)
    return invalid_argument("`repeat` argument `count` must be non-negative or -1 (forever), got " +
                            std::to_string(count));
  if (count == 0)
    return IteratorPtr(std::make_unique<RepeatIterator>(node->inputs.at(0), kctx, count, nullptr));
  auto first = make_input(node, kctx);
  if (!first.ok())
    return first.status();
  return IteratorPtr(
    std::make_unique<RepeatIterator>(node->inputs.at(0), kctx, count, std::move(*first)));
}

} // namespace conveyor::kernels
