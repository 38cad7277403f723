// graphs_equal and the builder's promise: every schema attribute is present, defaults included.
#include <algorithm>

#include <doctest/doctest.h>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/text_form.hpp"

using namespace conveyor;

namespace {

// One dataset per op, each built with as few arguments as the builder allows.
std::vector<Dataset> one_of_each_op() {
  Dataset r = Dataset::range(10);
  return {
    r,
    Dataset::from_tensors(Element{Tensor::scalar(int64_t{1})}),
    Dataset::from_tensor_slices(Element{Tensor::vector<int64_t>({1, 2})}),
    Dataset::list_files("/tmp/*.txt"),
    Dataset::text_lines({"a.txt"}),
    Dataset::tfrecord({"a.tfrecord"}),
    Dataset::source("counter"),
    Dataset::zip({r, r}),
    r.map("square"),
    r.filter("is_even"),
    r.flat_map("range_fn"),
    r.interleave("range_fn"),
    r.batch(2),
    r.batch(2).unbatch(),
    r.shuffle(4),
    r.repeat(),
    r.take(3),
    r.skip(3),
    r.shard(2, 0),
    r.enumerate(),
    r.prefetch(),
    r.cache(),
    r.batch(2).padded_batch(2),
    Dataset::tfrecord({"a.tfrecord"}).parse_example("a: int64"),
    Dataset::csv({"a.csv"}, {"int64"}),
    Dataset::webdataset({"a.tar"}, {"jpg"}),
    Dataset::random(),
    r.concatenate(r),
    Dataset::load("/no/snapshot/here"),
    r.ignore_errors(),
  };
}

} // namespace

TEST_CASE("the builder covers every op and fills every schema attribute") {
  std::vector<std::string> built;
  for (const Dataset& d : one_of_each_op()) {
    const Node& n = *d.node();
    CAPTURE(n.op);
    CHECK(check_node_schema(n).ok());
    const OpSchema* schema = find_op_schema(n.op);
    REQUIRE(schema != nullptr);
    CHECK(n.attrs.size() == schema->attrs.size());
    built.push_back(n.op);
  }
  for (const OpSchema& s : all_op_schemas())
    CHECK_MESSAGE(std::find(built.begin(), built.end(), s.name) != built.end(),
                  "no builder test for ", s.name);
}

TEST_CASE("builder defaults are the schema defaults") {
  // Each attribute of the dataset's output node (the Dataset keeps the node alive).
  auto attr = [](const Dataset& d, const char* name) { return d.node()->attrs.at(name); };
  CHECK(attr(Dataset::range(5), "start") == AttrValue{int64_t{0}});
  CHECK(attr(Dataset::range(5), "stop") == AttrValue{int64_t{5}});
  CHECK(attr(Dataset::range(5), "step") == AttrValue{int64_t{1}});
  Dataset m = Dataset::range(5).map("square");
  CHECK(attr(m, "fn") == AttrValue{FunctionRef{"square"}});
  CHECK(attr(m, "num_parallel_calls") == AttrValue{int64_t{1}});
  CHECK(attr(m, "deterministic") == AttrValue{true});
  Dataset s = Dataset::range(5).shuffle(8);
  CHECK(attr(s, "seed") == AttrValue{kNoSeed});
  CHECK(attr(s, "reshuffle_each_iteration") == AttrValue{true});
  CHECK(attr(Dataset::range(5).repeat(), "count") == AttrValue{kRepeatForever});
  CHECK(attr(Dataset::range(5).prefetch(), "buffer_size") == AttrValue{kAutotune});
  CHECK(attr(Dataset::range(5).interleave("range_fn"), "cycle_length") == AttrValue{kAutotune});
  CHECK(attr(Dataset::range(5).interleave("range_fn"), "block_length") == AttrValue{int64_t{1}});
  CHECK(attr(Dataset::range(5).cache(), "filename") == AttrValue{std::string{}});
  CHECK(attr(Dataset::list_files("*.txt"), "shuffle") == AttrValue{true});
  CHECK(attr(Dataset::list_files("*.txt"), "seed") == AttrValue{kNoSeed});
  CHECK(attr(Dataset::range(5).batch(2), "drop_remainder") == AttrValue{false});
  CHECK(attr(Dataset::range(5).enumerate(), "start") == AttrValue{int64_t{0}});
}

TEST_CASE("builder graphs equal the parsed text form") {
  auto parsed = parse_dataset("range(100).map(square).shuffle(16, seed=3).batch(8)");
  REQUIRE(parsed.ok());
  CHECK(*parsed == Dataset::range(100).map("square").shuffle(16, 3).batch(8));
  CHECK(*parsed != Dataset::range(100).map("square").shuffle(16, 4).batch(8));
}

TEST_CASE("graphs_equal compares ops, attributes and inputs deeply") {
  Dataset a = Dataset::range(10).map(FunctionRef{"add", {{"k", int64_t{2}}}}).batch(3);
  Dataset same = Dataset::range(10).map(FunctionRef{"add", {{"k", int64_t{2}}}}).batch(3);
  const bool distinct_nodes = a.node() != same.node();
  CHECK(distinct_nodes);
  CHECK(graphs_equal(*a.node(), *same.node()));
  CHECK(a == a);

  // A difference deep in the inputs, in a function parameter, in an attribute, or in the op.
  CHECK(a != Dataset::range(11).map(FunctionRef{"add", {{"k", int64_t{2}}}}).batch(3));
  CHECK(a != Dataset::range(10).map(FunctionRef{"add", {{"k", int64_t{3}}}}).batch(3));
  CHECK(a != Dataset::range(10).map(FunctionRef{"add", {{"k", int64_t{2}}}}).batch(3, true));
  CHECK(a != Dataset::range(10).map(FunctionRef{"add", {{"k", int64_t{2}}}}).take(3));

  // Input order matters for zip.
  Dataset x = Dataset::range(1), y = Dataset::range(2);
  CHECK(Dataset::zip({x, y}) == Dataset::zip({Dataset::range(1), Dataset::range(2)}));
  CHECK(Dataset::zip({x, y}) != Dataset::zip({y, x}));
  CHECK(Dataset::zip({x, y}) != Dataset::zip({x, y, x}));

  // Elements compare by value, dtype included.
  CHECK(Dataset::from_tensors(Element{Tensor::scalar(int64_t{1})}) ==
        Dataset::from_tensors(Element{Tensor::scalar(int64_t{1})}));
  CHECK(Dataset::from_tensors(Element{Tensor::scalar(int64_t{1})}) !=
        Dataset::from_tensors(Element{Tensor::scalar(int32_t{1})}));
}
