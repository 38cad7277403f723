// take(count): the first `count` elements (all when count is -1).
// skip(count): all but the first `count` elements (none when count is -1).
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class TakeIterator : public Iterator {
public:
  TakeIterator(IteratorPtr input, int64_t count) : input_(std::move(input)), count_(count) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    if (count_ >= 0 && taken_ >= count_) {
      input_.reset(); // done with it: release its resources (threads, files) now
      end_of_sequence = true;
      return Status::OK();
    }
    CONVEYOR_RETURN_IF_ERROR(input_->get_next(out, end_of_sequence));
    if (!end_of_sequence)
      ++taken_;
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("take");
    out.put_int(taken_);
    out.put_bool(input_ != nullptr);
    return input_ ? input_->save(out) : Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("take"));
    taken_ = in.get_int();
    const bool has_input = in.get_bool();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (!has_input) { // it had taken all: the input's state was not saved
      input_.reset();
      return Status::OK();
    }
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  int64_t count_;
  int64_t taken_ = 0;
};

class SkipIterator : public Iterator {
public:
  SkipIterator(IteratorPtr input, int64_t count, StopCheck stop)
    : input_(std::move(input)), count_(count), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    for (;;) { // ends with the input, or when stopped (skipping a huge count)
      CONVEYOR_RETURN_IF_ERROR(stop_.check("skip"));
      CONVEYOR_RETURN_IF_ERROR(input_->get_next(out, end_of_sequence));
      if (end_of_sequence)
        return Status::OK();
      if (count_ >= 0 && skipped_ >= count_)
        return Status::OK();
      ++skipped_;
    }
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("skip");
    out.put_int(skipped_);
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("skip"));
    skipped_ = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  int64_t count_;
  int64_t skipped_ = 0;
  StopCheck stop_;
};

Status check_count(const char* op, int64_t count) {
  if (count < -1)
    return invalid_argument(std::string("`") + op +
                            "` argument `count` must be non-negative or -1 (all), got " +
                            std::to_string(count));
  return Status::OK();
}

} // namespace

MakeResult make_take(const NodePtr& node, const KernelContext& kctx) {
  const int64_t count = node->int_attr("count");
  CONVEYOR_RETURN_IF_ERROR(check_count("take", count));
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<TakeIterator>(std::move(*input), count));
}

MakeResult make_skip(const NodePtr& node, const KernelContext& kctx) {
  const int64_t count = node->int_attr("count");
  CONVEYOR_RETURN_IF_ERROR(check_count("skip", count));
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<SkipIterator>(std::move(*input), count, kctx.stop()));
}

} // namespace conveyor::kernels
