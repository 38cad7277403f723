// enumerate(start): each element with its position prepended as an int64 scalar component:
// (start + i, original components...).
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class EnumerateIterator : public Iterator {
public:
  EnumerateIterator(IteratorPtr input, int64_t start) : input_(std::move(input)), next_(start) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    Element element;
    CONVEYOR_RETURN_IF_ERROR(input_->get_next(element, end_of_sequence));
    if (end_of_sequence)
      return Status::OK();
    std::vector<Tensor> parts;
    parts.reserve(element.size() + 1);
    parts.push_back(Tensor::scalar(next_));
    next_ = static_cast<int64_t>(static_cast<uint64_t>(next_) + 1); // wraps instead of overflowing
    for (Tensor& component : element.components)
      parts.push_back(std::move(component));
    out = Element{std::move(parts)};
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("enumerate");
    out.put_int(next_);
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("enumerate"));
    next_ = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  int64_t next_;
};

} // namespace

MakeResult make_enumerate(const NodePtr& node, const KernelContext& kctx) {
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(
    std::make_unique<EnumerateIterator>(std::move(*input), node->int_attr("start")));
}

} // namespace conveyor::kernels
