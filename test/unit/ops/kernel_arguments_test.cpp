// The kernels check their own arguments too, for graphs that never went through
// Dataset::validate() (make_node_iterator is also called directly).
#include <doctest/doctest.h>

#include "ops_test_util.hpp"
#include "pipeline/kernels/make_iterator.hpp"

using namespace conveyor;

namespace {

Status make_error(const Dataset& ds) {
  IteratorContext ctx;
  auto it = make_node_iterator(ds.node(), ctx);
  return it.ok() ? Status::OK() : it.status();
}

void check_rejected(const Dataset& ds, const std::string& mentions) {
  CAPTURE(mentions);
  Status st = make_error(ds);
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find(mentions) != std::string::npos);
}

} // namespace

TEST_CASE("every kernel rejects out-of-range arguments with a message naming them") {
  check_rejected(Dataset::range(0, 3, 0), "`step`");
  check_rejected(Dataset::from_tensor_slices(Element{Tensor::scalar(int64_t{1})}), "scalar");
  check_rejected(Dataset::from_tensor_slices(
                   Element{{Tensor::vector<int64_t>({1}), Tensor::vector<int64_t>({1, 2})}}),
                 "[1] and [2]");
  check_rejected(Dataset::range(3).map("square", -5), "`num_parallel_calls`");
  check_rejected(Dataset::range(3).interleave("range_fn", 4, 0), "`block_length`");
  check_rejected(Dataset::range(3).interleave("range_fn", -3), "`cycle_length`");
  check_rejected(Dataset::range(3).batch(-1), "`batch_size`");
  check_rejected(Dataset::range(3).shuffle(0), "`buffer_size`");
  check_rejected(Dataset::range(3).repeat(-4), "`count`");
  check_rejected(Dataset::range(3).take(-4), "`count`");
  check_rejected(Dataset::range(3).skip(-4), "`count`");
  check_rejected(Dataset::range(3).shard(0, 0), "`num_shards`");
  check_rejected(Dataset::range(3).shard(2, -1), "HINT");
  check_rejected(Dataset::range(3).shard(2, 2), "`index`");
  check_rejected(Dataset::range(3).prefetch(-2), "`buffer_size`");
}

TEST_CASE("unknown or wrongly-kinded functions are errors naming the function") {
  const std::vector<std::pair<Dataset, std::string>> cases = {
    {Dataset::range(3).map("nope_fn"), "nope_fn"},
    {Dataset::range(3).filter("square"), "square"},
    {Dataset::range(3).flat_map("is_even"), "is_even"},
    {Dataset::source("range_fn"), "range_fn"},
  };
  for (const auto& [ds, name] : cases) {
    CAPTURE(name);
    Status st = make_error(ds);
    CHECK(!st.ok());
    CHECK(st.message().find(name) != std::string::npos);
  }
}

TEST_CASE("a graph that breaks its schema is an error, not a crash") {
  auto node = std::make_shared<Node>();
  node->op = "batch"; // no input, no batch_size
  IteratorContext ctx;
  CHECK(make_node_iterator(node, ctx).status().code() == ErrorCode::invalid_argument);
  node->op = "no_such_op";
  CHECK(make_node_iterator(node, ctx).status().code() == ErrorCode::invalid_argument);
  CHECK(make_node_iterator(nullptr, ctx).status().code() == ErrorCode::invalid_argument);
}
