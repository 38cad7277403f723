// from_tensors(element): that one element. from_tensor_slices(element): its slices along the
// first dimension (every component must have the same leading size).
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

class FromTensorsIterator : public Iterator {
public:
  explicit FromTensorsIterator(Element element) : element_(std::move(element)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = done_;
    if (!done_) {
      out = element_;
      done_ = true;
    }
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("from_tensors");
    out.put_bool(done_);
    return Status::OK();
  }
  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("from_tensors"));
    done_ = in.get_bool();
    return in.status();
  }

private:
  Element element_;
  bool done_ = false;
};

class FromTensorSlicesIterator : public Iterator {
public:
  FromTensorSlicesIterator(Element element, int64_t num_slices, SplitProvider* provider,
                           StopCheck stop)
    : element_(std::move(element)), indices_("from_tensor_slices", num_slices, provider, stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    int64_t index = 0;
    CONVEYOR_RETURN_IF_ERROR(indices_.next(index, end_of_sequence));
    if (end_of_sequence)
      return Status::OK();
    std::vector<Tensor> parts;
    parts.reserve(element_.size());
    for (const Tensor& component : element_.components)
      parts.push_back(component.slice(index));
    out = Element{std::move(parts)};
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    indices_.save(out);
    return Status::OK();
  }
  Status restore(IteratorStateReader& in) override { return indices_.restore(in); }

private:
  Element element_;
  IndexSequence indices_;
};

} // namespace

MakeResult make_from_tensors(const NodePtr& node, const KernelContext&) {
  return IteratorPtr(std::make_unique<FromTensorsIterator>(node->element_attr("element")));
}

MakeResult make_from_tensor_slices(const NodePtr& node, const KernelContext& kctx) {
  const Element& element = node->element_attr("element");
  if (element.size() == 0)
    return invalid_argument("`from_tensor_slices` needs an element with at least one component");
  int64_t num_slices = -1;
  for (std::size_t i = 0; i < element.size(); ++i) {
    const Shape& shape = element[i].shape();
    if (shape.empty())
      return invalid_argument(
        "`from_tensor_slices`: component " + std::to_string(i) +
        " is a scalar; every component needs at least one dimension to slice");
    if (num_slices >= 0 && shape[0] != num_slices)
      return invalid_argument("`from_tensor_slices`: all components must have the same first "
                              "dimension, got shapes " +
                              shape_string(element[0].shape()) + " and " + shape_string(shape) +
                              " (component " + std::to_string(i) + ")");
    num_slices = shape[0];
  }
  return IteratorPtr(std::make_unique<FromTensorSlicesIterator>(
    element, num_slices, kctx.split_provider(), kctx.stop()));
}

} // namespace conveyor::kernels
