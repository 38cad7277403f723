// a.concatenate(b): every element of a, then every element of b (b's iterator is made only
// when a ends, so an unused b costs nothing, and errors of b surface when it is reached).
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class ConcatenateIterator : public Iterator {
public:
  ConcatenateIterator(IteratorPtr first, NodePtr second, KernelContext kctx)
    : current_(std::move(first)), second_(std::move(second)), kctx_(std::move(kctx)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    while (current_) {
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(current_->get_next(out, end));
      if (!end) {
        end_of_sequence = false;
        return Status::OK();
      }
      current_.reset();
      if (second_) {
        auto next = make_kernel(second_, kctx_);
        if (!next.ok())
          return next.status();
        current_ = std::move(*next);
        second_.reset();
      }
    }
    end_of_sequence = true;
    return Status::OK();
  }

  // Which input it reads (0: the first, 1: the second, 2: neither: both ended), then that input.
  Status save(IteratorStateWriter& out) override {
    out.put_tag("concatenate");
    const int64_t at = current_ ? (second_ ? 0 : 1) : 2;
    out.put_int(at);
    return current_ ? current_->save(out) : Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("concatenate"));
    const int64_t at = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (at < 0 || at > 2)
      return data_loss("pipeline state: `concatenate` input " + std::to_string(at) +
                       " (expected 0, 1 or 2)");
    if (at == 2) {
      current_.reset();
      second_.reset();
      return Status::OK();
    }
    if (at == 1 && second_) {
      auto next = make_kernel(second_, kctx_);
      if (!next.ok())
        return next.status();
      current_ = std::move(*next);
      second_.reset();
    }
    if (!current_)
      return failed_precondition("`concatenate`: restore needs a fresh iterator");
    return current_->restore(in);
  }

private:
  IteratorPtr current_;
  NodePtr second_; // the input still to start; null once started
  KernelContext kctx_;
};

} // namespace

MakeResult make_concatenate(const NodePtr& node, const KernelContext& kctx) {
  auto first = make_kernel(node->inputs[0], kctx.for_input(*node, 0));
  if (!first.ok())
    return first.status();
  return IteratorPtr(std::make_unique<ConcatenateIterator>(std::move(*first), node->inputs[1],
                                                           kctx.for_input(*node, 1)));
}

} // namespace conveyor::kernels
