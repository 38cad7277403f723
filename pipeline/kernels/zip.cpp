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

  Status save(IteratorStateWriter& out) override {
    out.put_tag("zip");
    out.put_bool(done_);
    if (done_)
      return Status::OK();
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      out.put_bool(parts_[i].has_value());
      if (parts_[i])
        out.put_element(*parts_[i]);
      CONVEYOR_RETURN_IF_ERROR(inputs_[i]->save(out));
    }
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("zip"));
    done_ = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (done_) {
      inputs_.clear();
      parts_.clear();
      return Status::OK();
    }
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      parts_[i].reset();
      if (in.get_bool())
        parts_[i] = in.get_element();
      CONVEYOR_RETURN_IF_ERROR(in.status());
      CONVEYOR_RETURN_IF_ERROR(inputs_[i]->restore(in));
    }
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
  for (std::size_t i = 0; i < node->inputs.size(); ++i) {
    auto input = make_kernel(node->inputs[i], kctx.for_input(*node, i));
    if (!input.ok())
      return input.status();
    inputs.push_back(std::move(*input));
  }
  return IteratorPtr(std::make_unique<ZipIterator>(std::move(inputs)));
}

} // namespace conveyor::kernels
