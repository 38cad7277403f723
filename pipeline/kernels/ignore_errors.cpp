// ignore_errors(log_warning): tf.data's ignore_errors — an element whose production failed is
// dropped and the next one is asked for. `unavailable` (the resumability signal, iterator.hpp) is
// not an error of an element and passes through unchanged, nor does `cancelled` (the pipeline was
// stopped, stop_flag.hpp: no element failed, and asking again would only fail again). Nothing is dropped quietly: the count
// (and the first error) is always reported as a pipeline warning (warnings.hpp) when the
// sequence ends or the iterator goes away, and with log_warning=true every error is too.
// An input that fails kMaxConsecutiveErrors times in a row without producing anything is taken
// to be stuck (it would fail forever) and ends the sequence with an error instead.
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/runtime/warnings.hpp"

namespace conveyor::kernels {

namespace {

constexpr int64_t kMaxConsecutiveErrors = 1000000;

class IgnoreErrorsIterator : public Iterator {
public:
  IgnoreErrorsIterator(IteratorPtr input, bool log_warning)
    : input_(std::move(input)), log_warning_(log_warning) {}
  ~IgnoreErrorsIterator() override { report(); }

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    int64_t in_a_row = 0;
    for (;;) {
      Status st = input_->get_next(out, end_of_sequence);
      if (st.ok()) {
        if (end_of_sequence)
          report();
        return st;
      }
      if (st.code() == ErrorCode::unavailable || st.code() == ErrorCode::cancelled)
        return st;
      ++dropped_;
      if (first_error_.empty())
        first_error_ = st.to_string();
      if (log_warning_)
        pipeline_warning("ignore_errors: dropped an element: " + st.to_string());
      if (++in_a_row >= kMaxConsecutiveErrors) {
        report();
        return st.with_context(
          "ignore_errors: the input failed " + std::to_string(in_a_row) +
          " times in a row without producing an element; giving up, last error");
      }
    }
  }

  // The drop count is reported, not state: a restored iterator counts its own drops.
  Status save(IteratorStateWriter& out) override {
    out.put_tag("ignore_errors");
    return input_->save(out);
  }
  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("ignore_errors"));
    return input_->restore(in);
  }

private:
  void report() {
    if (dropped_ == reported_)
      return;
    pipeline_warning("ignore_errors: dropped " + std::to_string(dropped_ - reported_) +
                     " element(s) whose production failed (" + std::to_string(dropped_) +
                     " in all); first error: " + first_error_);
    reported_ = dropped_;
  }

  IteratorPtr input_;
  bool log_warning_;
  int64_t dropped_ = 0;
  int64_t reported_ = 0;
  std::string first_error_;
};

} // namespace

MakeResult make_ignore_errors(const NodePtr& node, const KernelContext& kctx) {
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(
    std::make_unique<IgnoreErrorsIterator>(std::move(*input), node->bool_attr("log_warning")));
}

} // namespace conveyor::kernels
