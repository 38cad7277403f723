// range(start, stop, step): start, start+step, ... up to (excluding) stop, as Python's range.
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

// Number of elements of range(start, stop, step); exact for the whole int64 domain.
int64_t range_size(int64_t start, int64_t stop, int64_t step) {
  if (step > 0 && stop > start)
    return static_cast<int64_t>((static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) /
                                  static_cast<uint64_t>(step) +
                                1);
  if (step < 0 && stop < start)
    return static_cast<int64_t>((static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) /
                                  (0 - static_cast<uint64_t>(step)) +
                                1);
  return 0;
}

class RangeIterator : public Iterator {
public:
  RangeIterator(int64_t start, int64_t stop, int64_t step, SplitProvider* provider,
                StopCheck stopped)
    : start_(start), step_(step),
      indices_("range", range_size(start, stop, step), provider, stopped) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    int64_t index = 0;
    CONVEYOR_RETURN_IF_ERROR(indices_.next(index, end_of_sequence));
    if (
      !end_of_sequence) // modular arithmetic: the true value is in range, intermediates may not be
      out = Element{Tensor::scalar(
        static_cast<int64_t>(static_cast<uint64_t>(start_) +
                             static_cast<uint64_t>(index) * static_cast<uint64_t>(step_)))};
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    indices_.save(out);
    return Status::OK();
  }
  Status restore(IteratorStateReader& in) override { return indices_.restore(in); }

private:
  int64_t start_;
  int64_t step_;
  IndexSequence indices_;
};

} // namespace

MakeResult make_range(const NodePtr& node, const KernelContext& kctx) {
  const int64_t step = node->int_attr("step");
  if (step == 0)
    return invalid_argument("`range` argument `step` must not be zero");
  return IteratorPtr(std::make_unique<RangeIterator>(
    node->int_attr("start"), node->int_attr("stop"), step, kctx.split_provider(), kctx.stop()));
}

} // namespace conveyor::kernels
