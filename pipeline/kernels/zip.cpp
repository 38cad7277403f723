// zip(inputs...): one element from each input, their components concatenated in input order;
// ends with the shortest input.
#include <optional>

#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class ZipIterator : public Iterator {
public:
  explicit ZipIterator(std::vector<IteratorPtr> inputs)
    : inputs_(std::move(inputs)), parts_(inputs_.size()) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = done_;
    if (done_)
      return Status::OK();
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      if (parts_[i]) // got before an earlier call stopped at a later input
        continue;
      Element element;
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(inputs_[i]->get_next(element, end));
      if (end) {
        done_ = end_of_sequence = true;
        inputs_.clear();
        parts_.clear();
        return Status::OK();
      }
      parts_[i] = std::move(element);
    }
    std::vector<Tensor> components;
    for (auto& part : parts_) {
      for (Tensor& component : part->components)
        components.push_back(std::move(component));
      part.reset();
    }
    out = Element{std::move(components)};
    return Status::OK();
  }

private:
  std::vector<IteratorPtr> inputs_;
  std::vector<std::optional<Element>> parts_; // this round's elements so far
  bool done_ = false;
};

} // namespace

MakeResult make_zip(const NodePtr& node, const KernelContext& kctx) {
  std::vector<IteratorPtr> inputs;
  inputs.reserve(node->inputs.size());
  for (const NodePtr& input_node : node->inputs) {
    auto input = make_kernel(input_node, kctx);
    if (!input.ok())
      return input.status();
    inputs.push_back(std::move(*input));
  }
  return IteratorPtr(std::make_unique<ZipIterator>(std::move(inputs)));
}

} // namespace conveyor::kernels
