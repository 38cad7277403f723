// filter(predicate): the elements for which the predicate is true.
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class FilterIterator : public Iterator {
public:
  FilterIterator(IteratorPtr input, PredicateFn predicate, Params params, std::string name,
                 StopCheck stop)
    : input_(std::move(input)), predicate_(std::move(predicate)), params_(std::move(params)),
      name_(std::move(name)), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    for (;;) { // ends with the input, or when stopped (a predicate that drops everything)
      CONVEYOR_RETURN_IF_ERROR(stop_.check("filter"));
      CONVEYOR_RETURN_IF_ERROR(input_->get_next(out, end_of_sequence));
      if (end_of_sequence)
        return Status::OK();
      const int64_t index = next_index_++;
      auto keep = predicate_(out, params_);
      if (!keep.ok()) // the index counts the filter's input elements, as map's does
        return keep.status().with_context("filter predicate `" + name_ + "` on element " +
                                          std::to_string(index));
      if (*keep)
        return Status::OK();
    }
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("filter");
    out.put_int(next_index_);
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("filter"));
    next_index_ = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  PredicateFn predicate_;
  Params params_;
  std::string name_;
  StopCheck stop_;
  int64_t next_index_ = 0;
};

} // namespace

MakeResult make_filter(const NodePtr& node, const KernelContext& kctx) {
  const FunctionRef& ref = node->function_attr("fn");
  auto def = find_function("filter", ref, FunctionKind::predicate, kctx);
  if (!def.ok())
    return def.status();
  if (!(*def)->predicate)
    return internal_error("predicate `" + ref.name + "` has no implementation");
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<FilterIterator>(std::move(*input), (*def)->predicate,
                                                      kctx.functions().resolve_params(ref),
                                                      ref.name, kctx.stop()));
}

} // namespace conveyor::kernels
