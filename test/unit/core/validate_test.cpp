// Dataset::validate: bad argument values and unknown functions fail with tf.data-like messages.
#include <doctest/doctest.h>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"

using namespace conveyor;

namespace {

// The validation message, or "ok".
std::string problem(const Dataset& d) {
  Status st = d.validate();
  return st.ok() ? std::string{"ok"} : st.message();
}

ErrorCode code_of(const Dataset& d) { return d.validate().code(); }

} // namespace

TEST_CASE("valid datasets pass") {
  Dataset r = Dataset::range(10);
  CHECK(problem(r.map("square", kAutotune).filter("is_even").batch(2, true).unbatch()) == "ok");
  CHECK(problem(r.interleave("range_fn", 2, 3).shuffle(1).repeat(0).take(-1).skip(-1)) == "ok");
  CHECK(problem(r.shard(kShardHint, kShardHint).prefetch(0).enumerate(-5).cache("/tmp/c")) == "ok");
  CHECK(problem(Dataset::source(FunctionRef{"counter", {{"stop", int64_t{3}}}})) == "ok");
  CHECK(problem(Dataset::zip({r, r.map(FunctionRef{"scale", {{"factor", int64_t{3}}}})})) == "ok");
}

TEST_CASE("argument values are checked like tf.data's") {
  Dataset r = Dataset::range(10);
  CHECK(problem(r.batch(0)) == "batch: `batch_size` must be > 0, got 0");
  CHECK(problem(r.batch(-3)) == "batch: `batch_size` must be > 0, got -3");
  CHECK(code_of(r.batch(0)) == ErrorCode::invalid_argument);
  CHECK(problem(r.shuffle(0)) == "shuffle: `buffer_size` must be > 0, got 0");
  CHECK(problem(r.repeat(-2)) == "repeat: `count` must be >= -1 (-1 means all), got -2");
  CHECK(problem(r.take(-2)) == "take: `count` must be >= -1 (-1 means all), got -2");
  CHECK(problem(r.skip(-7)) == "skip: `count` must be >= -1 (-1 means all), got -7");
  CHECK(problem(r.shard(0, 0)) == "shard: `num_shards` must be > 0 or SHARD_HINT, got 0");
  CHECK(problem(r.shard(3, 3)) == "shard: `index` must be in [0, 3) or SHARD_HINT, got 3");
  CHECK(problem(r.shard(3, -2)) == "shard: `index` must be in [0, 3) or SHARD_HINT, got -2");
  CHECK(problem(r.map("square", 0)) == "map: `num_parallel_calls` must be >= 1 or AUTOTUNE, got 0");
  CHECK(problem(r.interleave("range_fn", 0)) ==
        "interleave: `cycle_length` must be >= 1 or AUTOTUNE, got 0");
  CHECK(problem(r.interleave("range_fn", 2, 0)) == "interleave: `block_length` must be > 0, got 0");
  CHECK(problem(r.prefetch(-2)) == "prefetch: `buffer_size` must be >= 0 or AUTOTUNE, got -2");
  CHECK(problem(Dataset::range(0, 10, 0)) == "range: `step` must be non-zero, got 0");
  CHECK(problem(Dataset::list_files("")) == "list_files: `pattern` must be a file glob, got \"\"");
  CHECK(problem(Dataset::text_lines({"a.txt", ""})) ==
        "text_lines: `files` entry 1 must be a file name, got \"\"");
}

TEST_CASE("the problem is found anywhere in the graph") {
  Dataset bad = Dataset::range(10).batch(0);
  CHECK(problem(bad.map("square").prefetch()) == "batch: `batch_size` must be > 0, got 0");
  CHECK(problem(Dataset::zip({Dataset::range(3), bad})) ==
        "batch: `batch_size` must be > 0, got 0");
}

TEST_CASE("element arguments of sources are checked") {
  CHECK(problem(Dataset::from_tensors(Element{})) ==
        "from_tensors: `element` needs at least one component, got ()");
  CHECK(problem(Dataset::from_tensor_slices(Element{})) ==
        "from_tensor_slices: `element` needs at least one component, got ()");
  CHECK(
    problem(Dataset::from_tensor_slices(Element{Tensor::scalar(int64_t{3})})) ==
    "from_tensor_slices: component 0 of `element` must have rank >= 1 to be sliced, got a scalar");
  CHECK(problem(Dataset::from_tensor_slices(Element{
          {Tensor::vector<int64_t>({1, 2, 3}), Tensor::vector<std::string>({"a", "b"})}})) ==
        "from_tensor_slices: all components of `element` must have the same size in dimension 0; "
        "component 1 has 2, component 0 has 3");
  CHECK(problem(Dataset::from_tensor_slices(Element{
          {Tensor::vector<int64_t>({1, 2}), Tensor::vector<std::string>({"a", "b"})}})) == "ok");
}

TEST_CASE("function references are checked against the registry") {
  Dataset r = Dataset::range(10);
  CHECK(problem(r.map("no_such_fn"))
          .rfind("map: unknown function `no_such_fn` (registered map functions: add, ", 0) == 0);
  CHECK(code_of(r.map("no_such_fn")) == ErrorCode::not_found);
  CHECK(problem(r.filter("square")) ==
        "filter: function `square` is a map function, expected a predicate function");
  CHECK(problem(r.flat_map("square")) ==
        "flat_map: function `square` is a map function, expected a dataset function");
  CHECK(problem(r.interleave("is_even")) ==
        "interleave: function `is_even` is a predicate function, expected a dataset function");
  CHECK(problem(Dataset::source("square")) ==
        "source: function `square` is a map function, expected a source function");
  CHECK(problem(r.map(FunctionRef{"add", {{"q", int64_t{1}}}})) ==
        "map: function `add` has no parameter `q` (parameters: k)");
  CHECK(problem(r.map(FunctionRef{"square", {{"q", int64_t{1}}}})) ==
        "map: function `square` has no parameter `q` (parameters: none)");
  CHECK(problem(r.map(FunctionRef{"add", {{"k", std::string{"x"}}}})) ==
        "map: function `add` parameter `k` must be an int, got a string");
  CHECK(problem(r.map(FunctionRef{"add", {{"k", 1.5}}})) ==
        "map: function `add` parameter `k` must be an int, got a float");
}

TEST_CASE("validate uses the registry it is given") {
  FunctionRegistry empty;
  Dataset d = Dataset::range(3).map("square");
  CHECK(d.validate().ok());
  Status st = d.validate(&empty);
  CHECK(st.code() == ErrorCode::not_found);
  // Ops without functions need no registry entries.
  CHECK(Dataset::range(3).batch(2).validate(&empty).ok());
}
