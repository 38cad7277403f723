// flat_map(fn): the elements of fn(x) for every input element x, one dataset after another.
#include "pipeline/kernels/dataset_function.hpp"

namespace conveyor::kernels {

namespace {

class FlatMapIterator : public Iterator {
public:
  FlatMapIterator(IteratorPtr input, DatasetFunction fn, StopCheck stop)
    : input_(std::move(input)), fn_(std::move(fn)), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    for (;;) { // ends with the input, or when stopped (many empty inner datasets)
      CONVEYOR_RETURN_IF_ERROR(stop_.check("flat_map"));
      if (current_) {
        CONVEYOR_RETURN_IF_ERROR(current_->get_next(out, end_of_sequence));
        if (!end_of_sequence)
          return Status::OK();
        current_.reset();
      }
      Element in;
      CONVEYOR_RETURN_IF_ERROR(input_->get_next(in, end_of_sequence));
      if (end_of_sequence)
        return Status::OK();
      auto inner = fn_.make_iterator(in, next_index_++);
      if (!inner.ok())
        return inner.status();
      current_ = std::move(*inner);
      current_arg_ = std::move(in);
    }
  }

  // The open inner dataset is made again from the element that made it, then restored.
  Status save(IteratorStateWriter& out) override {
    out.put_tag("flat_map");
    out.put_int(next_index_);
    out.put_bool(current_ != nullptr);
    if (current_) {
      out.put_element(current_arg_);
      CONVEYOR_RETURN_IF_ERROR(current_->save(out));
    }
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("flat_map"));
    next_index_ = in.get_int();
    const bool open = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    current_.reset();
    if (open) {
      current_arg_ = in.get_element();
      CONVEYOR_RETURN_IF_ERROR(in.status());
      auto inner = fn_.make_iterator(current_arg_, next_index_ - 1);
      if (!inner.ok())
        return inner.status();
      current_ = std::move(*inner);
      CONVEYOR_RETURN_IF_ERROR(current_->restore(in));
    }
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  DatasetFunction fn_;
  IteratorPtr current_;
  Element current_arg_; // the input element current_ was made from
  StopCheck stop_;
  int64_t next_index_ = 0;
};

} // namespace

MakeResult make_flat_map(const NodePtr& node, const KernelContext& kctx) {
  auto fn = DatasetFunction::find("flat_map", node->function_attr("fn"), kctx);
  if (!fn.ok())
    return fn.status();
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(
    std::make_unique<FlatMapIterator>(std::move(*input), std::move(*fn), kctx.stop()));
}

} // namespace conveyor::kernels
