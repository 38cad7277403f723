// parse_example(features): each input element, one scalar string holding a serialized
// tf.train.Example, becomes one tensor per feature of the spec (example.hpp), in spec order.
#include "pipeline/io/example.hpp"
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class ParseExampleIterator : public Iterator {
public:
  ParseExampleIterator(IteratorPtr input, FeatureSpec spec)
    : input_(std::move(input)), spec_(std::move(spec)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    Element in;
    CONVEYOR_RETURN_IF_ERROR(input_->get_next(in, end_of_sequence));
    if (end_of_sequence)
      return Status::OK();
    if (in.size() != 1 || in[0].dtype() != DType::string || in[0].rank() != 0)
      return invalid_argument(
        "parse_example: expects elements that are one scalar string (a serialized "
        "tf.train.Example), got " +
        spec_of(in).to_string());
    auto parsed = parse_example(in[0].strings()[0], spec_);
    if (!parsed.ok())
      return parsed.status();
    out = std::move(*parsed);
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("parse_example");
    return input_->save(out);
  }
  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("parse_example"));
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  FeatureSpec spec_;
};

} // namespace

MakeResult make_parse_example(const NodePtr& node, const KernelContext& kctx) {
  auto spec = FeatureSpec::parse(node->string_attr("features"));
  if (!spec.ok())
    return spec.status();
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<ParseExampleIterator>(std::move(*input), std::move(*spec)));
}

} // namespace conveyor::kernels
