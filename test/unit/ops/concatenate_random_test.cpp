// concatenate and random, against tf.data's documented behaviour: elements, element specs
// (tf.data's "Incompatible dataset elements"), cardinality, the text form, serialization and
// the static sharding policies.
#include <doctest/doctest.h>

#include <set>

#include "ops_test_util.hpp"
#include "pipeline/graph/external_state.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/sharding/sharding.hpp"

using namespace conveyor;
using conveyor::test::show;

namespace {

std::vector<int64_t> ints_of(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const Element& e : elements)
    out.push_back(e[0].at<int64_t>(0));
  return out;
}

Dataset parsed(const std::string& text) {
  auto ds = parse_dataset(text);
  REQUIRE_MESSAGE(ds.ok(), ds.status().to_string());
  return *ds;
}

} // namespace

TEST_CASE("concatenate yields the first dataset's elements, then the second's") {
  // tf.data's example: range(1, 4).concatenate(range(4, 8)) -> [1, 2, 3, 4, 5, 6, 7]
  CHECK(show(Dataset::range(1, 4).concatenate(Dataset::range(4, 8))) == "[1, 2, 3, 4, 5, 6, 7]");
  CHECK(show(Dataset::range(0).concatenate(Dataset::range(2))) == "[0, 1]");
  CHECK(show(Dataset::range(2).concatenate(Dataset::range(0))) == "[0, 1]");
  // Chained, and repeated: each repetition starts the second input again.
  CHECK(show(Dataset::range(1)
               .concatenate(Dataset::range(5, 6))
               .concatenate(Dataset::range(9, 10))
               .repeat(2)) == "[0, 5, 9, 0, 5, 9]");
  // Tuples of the same structure.
  auto pairs = Dataset::zip({Dataset::range(2), Dataset::range(2)});
  CHECK(show(pairs.concatenate(pairs)) == "[(0, 0), (1, 1), (0, 0), (1, 1)]");
}

TEST_CASE("concatenate's element specs must be compatible, with tf.data's wording") {
  auto strings = Dataset::from_tensor_slices(Element{Tensor::vector<std::string>({"a", "b"})});
  Status st = Dataset::range(3).concatenate(strings).validate();
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message() == "concatenate: Incompatible dataset elements:\n"
                        "  TensorSpec(shape=(), dtype=int64) vs.   "
                        "TensorSpec(shape=(), dtype=string)");
  // A different number of components is incompatible too.
  auto pairs = Dataset::zip({Dataset::range(2), Dataset::range(2)});
  CHECK(Dataset::range(3).concatenate(pairs).validate().message().find(
          "Incompatible dataset elements") != std::string::npos);
  // Nested below other ops, the check still runs.
  CHECK_FALSE(Dataset::range(3).concatenate(strings).batch(2).validate().ok());
  CHECK_FALSE(Dataset::range(3).concatenate(strings).batch(2).element_spec().ok());
}

TEST_CASE("concatenate's spec is the most specific compatible one") {
  auto spec = [](const Dataset& d) {
    auto s = d.element_spec();
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    return s->to_string();
  };
  CHECK(spec(Dataset::range(3).concatenate(Dataset::range(2))) ==
        "TensorSpec(shape=(), dtype=int64)");
  // Batches of 2 and of 3 (drop_remainder keeps dimension 0 known): dimension 0 becomes None.
  CHECK(spec(Dataset::range(8).batch(2, true).concatenate(Dataset::range(9).batch(3, true))) ==
        "TensorSpec(shape=(None,), dtype=int64)");
  // Different ranks: the rank becomes unknown, as tf.data's most_specific_compatible_shape.
  CHECK(spec(Dataset::range(8).concatenate(Dataset::range(9).batch(3, true))) ==
        "TensorSpec(shape=<unknown>, dtype=int64)");
}

TEST_CASE("concatenate's cardinality is the sum") {
  CHECK(Dataset::range(3).concatenate(Dataset::range(4)).cardinality() == 7);
  CHECK(Dataset::range(3).concatenate(Dataset::range(4).repeat()).cardinality() ==
        kInfiniteCardinality);
  CHECK(Dataset::range(3).repeat().concatenate(Dataset::range(4)).cardinality() ==
        kInfiniteCardinality);
  CHECK(Dataset::range(3).concatenate(Dataset::range(4).filter("is_even")).cardinality() ==
        kUnknownCardinality);
}

TEST_CASE("concatenate in the text form and in serialization") {
  auto built = Dataset::range(50).concatenate(Dataset::range(50, 100).map("square")).batch(4);
  const std::string text = "range(50).concatenate(range(50, 100).map(square)).batch(4)";
  CHECK(to_text(built) == text);
  CHECK(parsed(text) == built);
  auto binary = from_binary(to_binary(built));
  REQUIRE(binary.ok());
  CHECK(*binary == built);
  auto json = from_json(to_json(built));
  REQUIRE(json.ok());
  CHECK(*json == built);
  CHECK(
    built.fingerprint() !=
    Dataset::range(50, 100).map("square").concatenate(Dataset::range(50)).batch(4).fingerprint());

  auto error = [](const std::string& t) { return parse_dataset(t).status().message(); };
  CHECK(error("concatenate(range(3), range(4))") ==
        "column 1: `concatenate` follows its first dataset and takes the second, as in "
        "range(3).concatenate(range(3, 6))");
  CHECK(
    error("range(3).concatenate()") ==
    "column 10: `concatenate` takes exactly one dataset, as in range(3).concatenate(range(3, 6))");
  CHECK(error("range(3).concatenate(range(1), range(2))").find("takes exactly one dataset") !=
        std::string::npos);
  CHECK(error("range(3).concatenate(3)").find("expected a dataset") != std::string::npos);
}

TEST_CASE("concatenate under the static sharding policies") {
  // DATA: every worker keeps its share of the whole sequence.
  std::multiset<int64_t> all;
  const Dataset ds = Dataset::range(5).concatenate(Dataset::range(100, 105));
  for (int64_t i = 0; i < 3; ++i) {
    auto shard = apply_sharding(ds, ShardingPolicy::data, 3, i);
    REQUIRE(shard.ok());
    for (int64_t v : ints_of(test::run(*shard)))
      all.insert(v);
  }
  CHECK(all == std::multiset<int64_t>{0, 1, 2, 3, 4, 100, 101, 102, 103, 104});
  // FILE: each file source of the two is sharded.
  auto files = Dataset::text_lines({"a", "b"}).concatenate(Dataset::text_lines({"c", "d"}));
  auto shard = apply_sharding(files, ShardingPolicy::file, 2, 1);
  REQUIRE_MESSAGE(shard.ok(), shard.status().to_string());
  CHECK(to_text(*shard) == "text_lines([\"b\"]).concatenate(text_lines([\"d\"]))");
}

TEST_CASE("random yields int64 scalars, the same sequence for the same seed") {
  auto spec = Dataset::random(7).element_spec();
  REQUIRE(spec.ok());
  CHECK(spec->to_string() == "TensorSpec(shape=(), dtype=int64)");
  CHECK(Dataset::random().cardinality() == kInfiniteCardinality);
  CHECK(Dataset::random(7).take(3).cardinality() == 3);

  const auto a = ints_of(test::run(Dataset::random(42).take(100)));
  const auto b = ints_of(test::run(Dataset::random(42).take(100)));
  const auto c = ints_of(test::run(Dataset::random(43).take(100)));
  REQUIRE(a.size() == 100);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(std::set<int64_t>(a.begin(), a.end()).size() == 100);
  // Both signs occur: the whole int64 range.
  CHECK(std::any_of(a.begin(), a.end(), [](int64_t v) { return v < 0; }));
  CHECK(std::any_of(a.begin(), a.end(), [](int64_t v) { return v > 0; }));
  // Unseeded: a fresh sequence per iterator.
  CHECK(ints_of(test::run(Dataset::random().take(8))) !=
        ints_of(test::run(Dataset::random().take(8))));
}

TEST_CASE("random in the text form") {
  CHECK(to_text(Dataset::random()) == "random()");
  CHECK(to_text(Dataset::random(5).take(2)) == "random(seed=5).take(2)");
  CHECK(parsed("random(seed=5).take(2)") == Dataset::random(5).take(2));
  CHECK(parsed("random()") == Dataset::random());
  CHECK(ints_of(test::run(parsed("random(5).take(4)"))) ==
        ints_of(test::run(Dataset::random(5).take(4))));
}

TEST_CASE("external_state_policy: random is the op with external state, WARN, IGNORE, FAIL") {
  CHECK(external_state_policy_from_string("warn").value() == ExternalStatePolicy::warn);
  CHECK(external_state_policy_from_string("IGNORE").value() == ExternalStatePolicy::ignore);
  CHECK(external_state_policy_from_string("Fail").value() == ExternalStatePolicy::fail);
  auto bad = external_state_policy_from_string("STRICT");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "Invalid `external_state_policy` argument: \"STRICT\". Must be "
                                  "one of [\"WARN\", \"IGNORE\", \"FAIL\"].");

  const Dataset stateless = Dataset::range(5).map("square");
  const Dataset stateful = Dataset::zip({Dataset::range(5), Dataset::random(3)}).batch(2);
  CHECK(first_stateful_op(stateless).empty());
  CHECK(first_stateful_op(stateful) == "random(seed=3)");
  for (auto policy :
       {ExternalStatePolicy::warn, ExternalStatePolicy::ignore, ExternalStatePolicy::fail}) {
    std::string warning;
    CHECK(check_external_state(stateless, policy, &warning).ok());
    CHECK(warning.empty());
  }
  std::string warning;
  CHECK(check_external_state(stateful, ExternalStatePolicy::ignore, &warning).ok());
  CHECK(warning.empty());
  CHECK(check_external_state(stateful, ExternalStatePolicy::warn, &warning).ok());
  CHECK(warning.rfind("random(seed=3) depends on random seed generator resource.", 0) == 0);
  Status fail = check_external_state(stateful, ExternalStatePolicy::fail, nullptr);
  CHECK(fail.code() == ErrorCode::failed_precondition);
  CHECK(fail.message().rfind("random(seed=3) depends on random seed generator resource.", 0) == 0);
}

TEST_CASE("external_state_policy: an op calling a Python function has external state") {
  // Python code is opaque to the service: tf.data counts py_function as stateful.
  const Params lambda{{"pickle", std::string("gASV")}, {"qualname", std::string("<lambda>")}};
  const Dataset mapped = Dataset::range(5).map(FunctionRef("python", lambda)).batch(2);
  CHECK(first_stateful_op(mapped) == "`map` with the Python function `<lambda>`");
  const Dataset filtered = Dataset::range(5).filter(
    FunctionRef("python_filter", {{"import", std::string("pkg.mod:keep")},
                                  {"qualname", std::string("pkg.mod.keep")}}));
  CHECK(first_stateful_op(filtered) == "`filter` with the Python function `pkg.mod.keep`");
  // A C++ function is not.
  CHECK(first_stateful_op(Dataset::range(5).map("square").filter("is_even")).empty());

  std::string warning;
  CHECK(check_external_state(mapped, ExternalStatePolicy::warn, &warning).ok());
  CHECK(warning.rfind("`map` with the Python function `<lambda>` is stateful: a Python function "
                      "is opaque to the service",
                      0) == 0);
  CHECK(warning.find("IGNORE silences this") != std::string::npos);
  warning.clear();
  CHECK(check_external_state(mapped, ExternalStatePolicy::ignore, &warning).ok());
  CHECK(warning.empty());
  Status fail = check_external_state(filtered, ExternalStatePolicy::fail, nullptr);
  CHECK(fail.code() == ErrorCode::failed_precondition);
  CHECK(fail.message().find("The dataset has external state") != std::string::npos);
}
