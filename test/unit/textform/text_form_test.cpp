// The dataset text form: every op parses to exactly the builder's graph, prints canonically, and
// parses back from what it prints; alternative spellings give the same graph.
#include <doctest/doctest.h>

#include <algorithm>

#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/unit/textform/samples.hpp"

using namespace conveyor;
using conveyor::textform_test::samples;

namespace {

Dataset parse_ok(const std::string& text) {
  auto d = parse_dataset(text);
  REQUIRE_MESSAGE(d.ok(), text, " -> ", d.status().to_string());
  return std::move(d).value();
}

void collect_ops(const Node& n, std::vector<std::string>& out) {
  out.push_back(n.op);
  for (const auto& in : n.inputs)
    collect_ops(*in, out);
}

} // namespace

TEST_CASE("the samples cover every op") {
  std::vector<std::string> seen;
  for (const auto& s : samples())
    collect_ops(*s.built.node(), seen);
  for (const OpSchema& schema : all_op_schemas())
    CHECK_MESSAGE(std::find(seen.begin(), seen.end(), schema.name) != seen.end(), "no sample uses ",
                  schema.name);
}

TEST_CASE("parsing gives exactly the builder's graph and to_text gives the canonical text") {
  for (const auto& s : samples()) {
    CAPTURE(s.text);
    Dataset parsed = parse_ok(s.text);
    CHECK(parsed == s.built);
    CHECK(graphs_equal(*parsed.node(), *s.built.node()));
    CHECK(to_text(s.built) == s.text);
    CHECK(s.built.to_text() == s.text);
    CHECK(to_text(parsed) == s.text);
  }
}

TEST_CASE("parse(to_text(d)) == d, and the parsed graph fills every schema attribute") {
  for (const auto& s : samples()) {
    CAPTURE(s.text);
    Dataset again = parse_ok(to_text(s.built));
    CHECK(again == s.built);
    for (const Node* n = again.node().get(); n != nullptr;
         n = n->inputs.empty() ? nullptr : n->inputs[0].get()) {
      CHECK(check_node_schema(*n).ok());
      CHECK(n->attrs.size() == find_op_schema(n->op)->attrs.size());
    }
  }
}

TEST_CASE("different graphs print differently") {
  for (std::size_t i = 0; i < samples().size(); ++i)
    for (std::size_t j = i + 1; j < samples().size(); ++j) {
      CAPTURE(samples()[i].text);
      CAPTURE(samples()[j].text);
      CHECK(samples()[i].built != samples()[j].built);
    }
}

TEST_CASE("alternative spellings parse to the canonical graph") {
  const std::vector<std::pair<std::string, std::string>> same = {
    {"range(stop=10)", "range(10)"},
    {"range(0, 10)", "range(10)"},
    {"range(0, 10, 1)", "range(10)"},
    {"range(start=2, stop=10, step=1)", "range(2, 10)"},
    {"range(0, 10, 3)", "range(0, 10, step=3)"},
    {"  range ( 10 )\n .batch( 8 , )\t", "range(10).batch(8)"},
    {"range(10).batch(batch_size=8, drop_remainder=false)", "range(10).batch(8)"},
    {"range(10).batch(drop_remainder=true, batch_size=8)",
     "range(10).batch(8, drop_remainder=true)"},
    {"range(10).repeat(3)", "range(10).repeat(count=3)"},
    {"range(10).repeat(-1)", "range(10).repeat()"},
    {"range(10).prefetch(AUTOTUNE)", "range(10).prefetch()"},
    {"range(10).prefetch(-1)", "range(10).prefetch()"},
    {"range(10).map(square())", "range(10).map(square)"},
    {"range(10).map(square, 1, true)", "range(10).map(square)"},
    {"range(10).map(square, AUTOTUNE)", "range(10).map(square, num_parallel_calls=AUTOTUNE)"},
    {"range(10).shard(-1, -1)", "range(10).shard(SHARD_HINT, SHARD_HINT)"},
    {"range(10).shuffle(16, 3)", "range(10).shuffle(16, seed=3)"},
    {"range(10).shuffle(16, -1, true)", "range(10).shuffle(16)"},
    {"text_lines('a.txt')", "text_lines([\"a.txt\"])"},
    {"text_lines([\"a.txt\",])", "text_lines([\"a.txt\"])"},
    {"list_files('/d/*', true, -1)", "list_files(\"/d/*\")"},
    {"from_tensors((1))", "from_tensors(1)"},
    {"from_tensors([1, 2.5])", "from_tensors([1.0, 2.5])"},
    {"from_tensors(float64([1, 2]))", "from_tensors(float64([1.0, 2.0]))"},
    {"from_tensors(int64([1, 2, 3, 4], shape=[2, 2]))", "from_tensors([[1, 2], [3, 4]])"},
    {"range(5).map(scale(factor=2.50))", "range(5).map(scale(factor=2.5))"},
    {"range(5).map(f(z=1, a=2))", "range(5).map(f(a=2, z=1))"},
    {"zip(range(3),)", "zip(range(3))"},
  };
  for (const auto& [alt, canonical] : same) {
    CAPTURE(alt);
    Dataset a = parse_ok(alt);
    CHECK(to_text(a) == canonical);
    CHECK(a == parse_ok(canonical));
  }
}

TEST_CASE("range(n) means stop = n, as in Python") {
  Dataset d = parse_ok("range(7)");
  const Node& n = *d.node();
  CHECK(n.int_attr("start") == 0);
  CHECK(n.int_attr("stop") == 7);
  CHECK(n.int_attr("step") == 1);
  Dataset d2 = parse_ok("range(2, 7, -1)");
  const Node& m = *d2.node();
  CHECK(m.int_attr("start") == 2);
  CHECK(m.int_attr("stop") == 7);
  CHECK(m.int_attr("step") == -1);
}

TEST_CASE("named constants and parameter kinds land in the graph as documented") {
  Dataset d1 = parse_ok("range(4).shard(SHARD_HINT, SHARD_HINT)");
  const Node& shard = *d1.node();
  CHECK(shard.int_attr("num_shards") == kShardHint);
  CHECK(shard.int_attr("index") == kShardHint);
  Dataset d2 =
    parse_ok("range(4).map(f(i=2, x=2.0, b=false, s=\"t\"), num_parallel_calls=AUTOTUNE)");
  const Node& map = *d2.node();
  CHECK(map.int_attr("num_parallel_calls") == kAutotune);
  const Params& p = map.function_attr("fn").params;
  CHECK(std::get<int64_t>(p.at("i")) == 2);
  CHECK(std::get<double>(p.at("x")) == 2.0); // floats in parameters are doubles
  CHECK(std::get<bool>(p.at("b")) == false);
  CHECK(std::get<std::string>(p.at("s")) == "t");
}

TEST_CASE(
  "element literals: a list of equal-length lists is a rank-2 tensor, a tuple several components") {
  Dataset d = parse_ok("from_tensor_slices(([[1, 2, 3], [4, 5, 6]], [\"a\", \"b\"]))");
  const Element& e = d.node()->element_attr("element");
  REQUIRE(e.size() == 2);
  CHECK(e[0].dtype() == DType::int64);
  CHECK(e[0].shape() == Shape{2, 3});
  CHECK(e[0].at<int64_t>(5) == 6);
  CHECK(e[1] == Tensor::vector<std::string>({"a", "b"}));
}

TEST_CASE("shared inputs print once per use and parse back to an equal graph") {
  Dataset r = Dataset::range(3);
  Dataset z = Dataset::zip({r, r.map("square"), r});
  CHECK(to_text(z) == "zip(range(3), range(3).map(square), range(3))");
  CHECK(parse_ok(to_text(z)) == z);
}
