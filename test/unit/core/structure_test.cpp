// Structure (how flat components nest) and the nested element specs that Dataset::element_spec
// carries through the ops.
#include <doctest/doctest.h>

#include "conveyor/structure.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/example.hpp"
#include "pipeline/io/snapshot_files.hpp"

using namespace conveyor;

namespace {

Structure parsed(const std::string& text) {
  auto s = Structure::parse(text);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  return *s;
}

std::string spec(const Dataset& d) {
  auto s = d.element_spec();
  return s.ok() ? s->to_string() : "error: " + s.status().message();
}

Dataset text(const std::string& t) {
  auto d = parse_dataset(t);
  REQUIRE_MESSAGE(d.ok(), d.status().message());
  return *d;
}

} // namespace

TEST_CASE("structure text form round-trips") {
  for (const char* t :
       {"_", "(_, _)", "(_,)", "()", "{}", "{\"image\": _, \"label\": (_, _)}",
        "((_, (_, _)), {\"a\": {\"b\": _}})", "{\"q\\\"uote\": _, \"x\\\\y\": _}"}) {
    Structure s = parsed(t);
    CHECK(s.to_string() == t);
    CHECK(parsed(s.to_string()) == s);
  }
  CHECK(parsed("(_)").to_string() == "_"); // parentheses alone do not make a tuple, as in Python
  CHECK(parsed(" { 'b' : _ , 'a' : ( _ , _ ) , } ").to_string() == "{\"a\": (_, _), \"b\": _}");
}

TEST_CASE("dict keys are sorted like tf.nest and leaves numbered in flatten order") {
  Structure s = parsed("{\"label\": _, \"image\": _, \"meta\": {\"id\": _, \"extra\": (_, _)}}");
  CHECK(s.keys() == std::vector<std::string>{"image", "label", "meta"});
  CHECK(s.flat_size() == 5);
  CHECK(s.index_of("image").value() == 0);
  CHECK(s.index_of("label").value() == 1);
  CHECK(s.range_of("meta").value() == std::make_pair(std::size_t{2}, std::size_t{3}));
  CHECK(s.format({"0", "1", "2", "3", "4"}) ==
        "{\"image\": 0, \"label\": 1, \"meta\": {\"extra\": (2, 3), \"id\": 4}}");
}

TEST_CASE("flat structures are the default") {
  CHECK(Structure::flat(1) == Structure::leaf());
  CHECK(Structure::flat(3).to_string() == "(_, _, _)");
  CHECK(Structure::flat(3).is_flat());
  CHECK(parsed("(_,)").is_flat());
  CHECK_FALSE(parsed("((_, _), _)").is_flat());
  CHECK_FALSE(parsed("{\"a\": _}").is_flat());
}

TEST_CASE("structure errors name what was expected") {
  CHECK(Structure::parse("{\"a\": _, \"a\": _}").status().message() ==
        "structure: the dict key \"a\" appears twice; keys must be unique");
  CHECK(Structure::parse("{a: _}").status().message() ==
        "structure, column 2: expected a quoted string key in a dict, found `a`");
  CHECK(Structure::parse("(_, x)").status().message() ==
        "structure, column 5: expected `_` (a tensor), `(` (a tuple) or `{` (a dict), found `x`");
  CHECK(Structure::parse("(_ _)").status().message() ==
        "structure, column 4: expected `,` or `)` in a tuple, found `_`");
  CHECK(Structure::parse("_ _").status().message() ==
        "structure, column 3: expected the end of the structure, found `_`");
  CHECK(parsed("{\"a\": _}").index_of("b").status().message() ==
        "key \"b\" is not in the element; its keys are \"a\"");
  CHECK(parsed("{\"a\": (_, _)}").index_of("a").status().message() ==
        "key \"a\" holds (_, _), not one tensor (`_`)");
  CHECK(parsed("(_, _)").index_of("a").status().message() ==
        "key \"a\": the element is not a dict (its structure is (_, _)); a key needs elements "
        "such as {\"a\": ...}");
}

TEST_CASE("nested literals in the text form: from_tensors and from_tensor_slices") {
  Dataset d = text("from_tensors({\"b\": (2, \"x\"), \"a\": 1})");
  CHECK(d.to_text() == "from_tensors({\"a\": 1, \"b\": (2, \"x\")})");
  CHECK(text(d.to_text()) == d);
  CHECK(spec(d) == "{'a': TensorSpec(shape=(), dtype=int64), 'b': (TensorSpec(shape=(), "
                   "dtype=int64), TensorSpec(shape=(), dtype=string))}");
  auto elements = d.collect();
  REQUIRE(elements.ok());
  REQUIRE(elements->size() == 1);
  CHECK(to_string((*elements)[0], d.element_spec()->structure_or_flat()) ==
        "{\"a\": 1, \"b\": (2, \"x\")}");

  Dataset s = text("from_tensor_slices(([1, 2], ([3, 4], [\"p\", \"q\"])))");
  CHECK(s.to_text() == "from_tensor_slices(([1, 2], ([3, 4], [\"p\", \"q\"])))");
  CHECK(spec(s) == "(TensorSpec(shape=(), dtype=int64), (TensorSpec(shape=(), dtype=int64), "
                   "TensorSpec(shape=(), dtype=string)))");
  auto rows = s.collect();
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 2);
  CHECK(to_string((*rows)[1], s.element_spec()->structure_or_flat()) == "(2, (4, \"q\"))");

  // A flat literal records no structure: the graph is the one it always was.
  CHECK(text("from_tensors((1, 2))").to_text() == "from_tensors((1, 2))");
  CHECK(text("from_tensors((1, 2))") ==
        Dataset::from_tensors(Element{{Tensor::scalar(int64_t{1}), Tensor::scalar(int64_t{2})}}));
}

TEST_CASE("nested literal errors name the path") {
  auto bad = parse_dataset("from_tensors({\"a\": (1, [1, \"x\"])})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("element[\"a\"][1]") != std::string::npos);
  auto twice = parse_dataset("from_tensors({\"a\": 1, \"a\": 2})");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.status().message().find("\"a\" appears twice") != std::string::npos);
  auto key = parse_dataset("from_tensors({1: 2})");
  REQUIRE_FALSE(key.ok());
  CHECK(key.status().message().find("expected a string key in the dict") != std::string::npos);
  auto lengths = parse_dataset("from_tensor_slices({\"a\": [1, 2], \"b\": [1, 2, 3]})");
  REQUIRE(lengths.ok());
  CHECK(lengths->element_spec().status().message().find("same size in dimension 0") !=
        std::string::npos);
}

TEST_CASE("the builder: from_tensors(element, structure) and its checks") {
  Element e{{Tensor::scalar(int64_t{1}), Tensor::scalar(int64_t{2})}};
  Dataset d = Dataset::from_tensors(e, parsed("{\"x\": _, \"y\": _}"));
  CHECK(d.to_text() == "from_tensors({\"x\": 1, \"y\": 2})");
  CHECK(Dataset::from_tensors(e, Structure::flat(2)) == Dataset::from_tensors(e));
  CHECK(Dataset::from_tensors(e, parsed("{\"x\": _}")).element_spec().status().message() ==
        "from_tensors: `structure` {\"x\": _} has 1 leaves, `element` has 2 component(s)");
}

TEST_CASE("structure through the ops") {
  Dataset d = text("from_tensor_slices({\"image\": [[1, 2], [3, 4]], \"label\": [\"a\", \"b\"]})");
  const std::string row =
    "{'image': TensorSpec(shape=(2,), dtype=int64), 'label': TensorSpec(shape=(), dtype=string)}";
  for (const Dataset& kept :
       {d.shuffle(4), d.repeat(2), d.take(1), d.skip(1), d.prefetch(1), d.cache(), d.shard(2, 0),
        d.filter("is_even"), d.ignore_errors(), d.map("identity")})
    CHECK(spec(kept) == row);
  CHECK(spec(d.batch(2)) == "{'image': TensorSpec(shape=(None, 2), dtype=int64), "
                            "'label': TensorSpec(shape=(None,), dtype=string)}");
  CHECK(spec(d.batch(2, true).unbatch()) == row);
  CHECK(spec(d.padded_batch(2)) == "{'image': TensorSpec(shape=(None, None), dtype=int64), "
                                   "'label': TensorSpec(shape=(None,), dtype=string)}");
  CHECK(spec(d.enumerate()) == "(TensorSpec(shape=(), dtype=int64), " + row + ")");
  CHECK(spec(Dataset::zip({d, Dataset::range(3)})) ==
        "(" + row + ", TensorSpec(shape=(), dtype=int64))");
  // zip of flat inputs stays flat; of tuples, a tuple of tuples (as tf.data, not concatenated)
  CHECK(spec(Dataset::zip({Dataset::range(2), Dataset::range(2)})) ==
        "(TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(), dtype=int64))");
  Dataset pair = Dataset::zip({Dataset::range(2), Dataset::range(2)});
  CHECK(spec(Dataset::zip({pair, Dataset::range(2)})) ==
        "((TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(), dtype=int64)), "
        "TensorSpec(shape=(), dtype=int64))");
}

TEST_CASE("parse_example's element is a dict keyed by feature name") {
  Dataset d = Dataset::tfrecord({"a.tfrecord"})
                .parse_example("image: string; label: int64; tags: var(string)");
  CHECK(spec(d) == "{'image': TensorSpec(shape=(), dtype=string), 'label': TensorSpec(shape=(), "
                   "dtype=int64), 'tags': TensorSpec(shape=(None,), dtype=string)}");
  CHECK(spec(d.padded_batch(2)) ==
        "{'image': TensorSpec(shape=(None,), dtype=string), 'label': TensorSpec(shape=(None,), "
        "dtype=int64), 'tags': TensorSpec(shape=(None, None), dtype=string)}");
  // Listed out of name order, the features keep that order as a tuple.
  CHECK(spec(Dataset::tfrecord({"a.tfrecord"}).parse_example("label: int64; image: string")) ==
        "(TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(), dtype=string))");
}

TEST_CASE("snapshot metadata records the structure") {
  ElementSpec s;
  s.components = {TensorSpec{DType::int64, {}, false}, TensorSpec{DType::string, {2}, false}};
  s.structure = parsed("{\"id\": _, \"w\\nx\": _}");
  const std::string text = snapshot::format_spec_components(s);
  CHECK(text == "int64:[];string:[2]|{\"id\": _, \"w\\x0ax\": _}");
  CHECK(text.find('\n') == std::string::npos);
  auto back = snapshot::parse_spec_components(text);
  REQUIRE(back.ok());
  CHECK(*back == s);
  ElementSpec flat;
  flat.components = s.components;
  CHECK(snapshot::format_spec_components(flat) == "int64:[];string:[2]");
  CHECK(snapshot::parse_spec_components("int64:[]|{\"a\": _, \"b\": _}").status().message() ==
        "element spec: the structure {\"a\": _, \"b\": _} has 2 leaves for 1 component(s)");
}
