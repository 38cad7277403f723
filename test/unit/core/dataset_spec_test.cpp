// Dataset::element_spec op by op; where the kernels exist, produced elements match the spec.
#include <doctest/doctest.h>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"

using namespace conveyor;

namespace {

std::string spec(const Dataset& d) {
  auto s = d.element_spec();
  return s.ok() ? s->to_string() : "error: " + s.status().message();
}

} // namespace

TEST_CASE("tf.data's documented batch specs") {
  // range(10).batch(4).element_spec -> TensorSpec(shape=(None,), dtype=tf.int64)
  CHECK(spec(Dataset::range(10).batch(4)) == "TensorSpec(shape=(None,), dtype=int64)");
  CHECK(spec(Dataset::range(10).batch(4, true)) == "TensorSpec(shape=(4,), dtype=int64)");
  CHECK(spec(Dataset::range(10).batch(4).batch(2)) ==
        "TensorSpec(shape=(None, None), dtype=int64)");
}

TEST_CASE("sources") {
  CHECK(spec(Dataset::range(3)) == "TensorSpec(shape=(), dtype=int64)");
  Tensor m = Tensor::from_values<float>({2, 3}, std::vector<float>(6, 1.0f)).value();
  CHECK(spec(Dataset::from_tensors(Element{m})) == "TensorSpec(shape=(2, 3), dtype=float32)");
  CHECK(spec(Dataset::from_tensor_slices(Element{m})) == "TensorSpec(shape=(3,), dtype=float32)");
  CHECK(spec(Dataset::from_tensor_slices(Element{
          {Tensor::vector<int64_t>({1, 2, 3}), Tensor::vector<std::string>({"a", "b", "c"})}})) ==
        "(TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(), dtype=string))");
  CHECK(spec(Dataset::list_files("/tmp/*.txt")) == "TensorSpec(shape=(), dtype=string)");
  CHECK(spec(Dataset::text_lines({"a.txt"})) == "TensorSpec(shape=(), dtype=string)");
  CHECK(spec(Dataset::tfrecord({"a.tfrecord"})) == "TensorSpec(shape=(), dtype=string)");
  CHECK(spec(Dataset::source("counter")) == "TensorSpec(shape=(), dtype=int64)");
}

TEST_CASE("transforms") {
  Dataset r = Dataset::range(10);
  const std::string scalar = "TensorSpec(shape=(), dtype=int64)";
  for (const Dataset& same :
       {r.filter("is_even"), r.shuffle(3), r.repeat(), r.take(2), r.skip(2), r.shard(2, 1),
        r.prefetch(), r.cache(), r.map("square"), r.map("identity")})
    CHECK(spec(same) == scalar);
  CHECK(spec(r.map("scale")) == "TensorSpec(shape=(), dtype=float32)");
  CHECK(spec(r.map("to_string")) == "TensorSpec(shape=(), dtype=string)");
  CHECK(spec(r.map("bytes")) == "TensorSpec(shape=(), dtype=string)");
  CHECK(spec(r.batch(3).unbatch()) == scalar);
  CHECK(spec(r.enumerate()) ==
        "(TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(), dtype=int64))");
  CHECK(spec(Dataset::zip({r, r.map("to_string").batch(2, true)})) ==
        "(TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(2,), dtype=string))");
  CHECK(spec(r.flat_map("range_fn")) == scalar);
  CHECK(spec(r.map("to_string").interleave("text_lines_fn")) ==
        "TensorSpec(shape=(), dtype=string)");
  CHECK(spec(r.batch(2).flat_map("repeat_fn")) == "TensorSpec(shape=(None,), dtype=int64)");
}

TEST_CASE("spec errors") {
  CHECK(
    spec(Dataset::range(3).unbatch()) ==
    "error: unbatch: component 0 is a scalar; it needs rank >= 1 to be split along dimension 0");
  CHECK(spec(Dataset::range(3).map("no_such_fn"))
          .rfind("error: map: unknown function `no_such_fn`", 0) == 0);
  CHECK(spec(Dataset::range(3).batch(0)) == "error: batch: `batch_size` must be > 0, got 0");
  CHECK(spec(Dataset::range(3).map("to_string").map("square")) ==
        "error: map(square): square: component 0 has dtype string, expected a numeric dtype (an "
        "integer, float or complex)");
}

TEST_CASE("functions without declared specs") {
  FunctionRegistry registry;
  FunctionDef negate;
  negate.name = "negate_no_spec";
  negate.kind = FunctionKind::map;
  negate.map = [](const Element& e, const Params&) -> Expected<Element> { return e; };
  REQUIRE(registry.add(negate).ok());
  FunctionDef twice;
  twice.name = "twice_no_spec";
  twice.kind = FunctionKind::dataset;
  twice.dataset = [](const Element& e, const Params&) -> Expected<Dataset> {
    return Dataset::from_tensors(e).repeat(2);
  };
  REQUIRE(registry.add(twice).ok());

  // A map keeps count and dtypes but loses the shapes.
  auto m = Dataset::range(4).batch(2).map("negate_no_spec").element_spec(&registry);
  REQUIRE(m.ok());
  CHECK(m->to_string() == "TensorSpec(shape=<unknown>, dtype=int64)");
  // A dataset function says nothing: the spec is unknown (no components), and stays so above.
  auto f = Dataset::range(4).flat_map("twice_no_spec").batch(2).element_spec(&registry);
  REQUIRE(f.ok());
  CHECK(f->components.empty());
}

TEST_CASE("produced elements match the declared spec") {
  Tensor words = Tensor::vector<std::string>({"a", "bb", "ccc", "d", "e"});
  std::vector<Dataset> datasets = {
    Dataset::range(7).batch(3),
    Dataset::range(7).batch(3, true),
    Dataset::range(7).map("scale").enumerate(3),
    Dataset::zip({Dataset::range(5), Dataset::from_tensor_slices(Element{words})})
      .batch(2)
      .unbatch(),
    Dataset::range(4).flat_map("range_fn").map("to_string"),
    Dataset::range(3).map("bytes").shuffle(2, 7),
    Dataset::source(FunctionRef{"counter", {{"stop", int64_t{4}}}})
      .map(FunctionRef{"add", {{"k", int64_t{5}}}}),
  };
  for (const Dataset& d : datasets) {
    CAPTURE(d.to_text());
    auto s = d.element_spec();
    REQUIRE(s.ok());
    auto elements = d.collect(100);
    REQUIRE_MESSAGE(elements.ok(), elements.status().to_string());
    CHECK_FALSE(elements->empty());
    for (const Element& e : *elements)
      CHECK_MESSAGE(s->is_compatible(e), e.to_string(), " does not match ", s->to_string());
  }
}
