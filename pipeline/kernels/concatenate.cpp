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

private:
  IteratorPtr current_;
  NodePtr second_; // the input still to start; null once started
  KernelContext kctx_;
};

} // namespace

MakeResult make_concatenate(const NodePtr& node, const KernelContext& kctx) {
  auto first = make_kernel(node->inputs[0], kctx);
  if (!first.ok())
    return first.status();
  return IteratorPtr(
    std::make_unique<ConcatenateIterator>(std::move(*first), node->inputs[1], kctx));
}

} // namespace conveyor::kernels
