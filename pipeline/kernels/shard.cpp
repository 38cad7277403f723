// shard(num_shards, index): the elements whose position i in the input has i % num_shards == index.
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class ShardIterator : public Iterator {
public:
  ShardIterator(IteratorPtr input, int64_t num_shards, int64_t index, StopCheck stop)
    : input_(std::move(input)), num_shards_(num_shards), index_(index), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    for (;;) { // ends with the input, or when stopped (a shard of many skips many)
      CONVEYOR_RETURN_IF_ERROR(stop_.check("shard"));
      CONVEYOR_RETURN_IF_ERROR(input_->get_next(out, end_of_sequence));
      if (end_of_sequence)
        return Status::OK();
      const int64_t position = position_;
      position_ = (position_ + 1) % num_shards_;
      if (position == index_)
        return Status::OK();
    }
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("shard");
    out.put_int(position_);
    return input_->save(out);
  }
  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("shard"));
    const int64_t position = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (position < 0 || position >= num_shards_)
      return data_loss("pipeline state: `shard` position " + std::to_string(position) +
                       " is not below num_shards " + std::to_string(num_shards_));
    position_ = position;
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  int64_t num_shards_;
  int64_t index_;
  int64_t position_ = 0; // input position modulo num_shards_
  StopCheck stop_;
};

} // namespace

MakeResult make_shard(const NodePtr& node, const KernelContext& kctx) {
  const int64_t num_shards = node->int_attr("num_shards");
  const int64_t index = node->int_attr("index");
  if (num_shards == kShardHint || index == kShardHint)
    return invalid_argument(
      "`shard(SHARD_HINT, SHARD_HINT)` is a placeholder: run the dataset under "
      "the HINT sharding policy, which fills in the worker count and index");
  if (num_shards < 1)
    return invalid_argument("`shard` argument `num_shards` must be positive, got " +
                            std::to_string(num_shards));
  if (index < 0 || index >= num_shards)
    return invalid_argument("`shard` argument `index` must be in [0, " +
                            std::to_string(num_shards) + "), got " + std::to_string(index));
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(
    std::make_unique<ShardIterator>(std::move(*input), num_shards, index, kctx.stop()));
}

} // namespace conveyor::kernels
