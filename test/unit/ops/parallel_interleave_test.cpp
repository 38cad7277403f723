// interleave(num_parallel_calls > 1): the sequential interleave's order, errors in the same
// places, deterministic=false yielding the same elements, and early destruction mid-read.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops_test_util.hpp"

using namespace conveyor;
using conveyor::test::show;

namespace {

Dataset slices(const std::vector<int64_t>& v) { return Dataset::from_tensor_slices(test::ints(v)); }

// x -> range(x) whose element 2 fails (test_fail_on), with a short sleep per element so that
// blocks finish out of order on the executor's threads.
void register_failing_range() {
  test::register_test_functions();
  static const bool registered = [] {
    FunctionDef d;
    d.name = "test_range_failing_at_2";
    d.kind = FunctionKind::dataset;
    d.doc = "int scalar x -> range(x) with element 2 failing";
    d.dataset = [](const Element& e, const Params&) -> Expected<Dataset> {
      return Dataset::range(e[0].as_int64())
        .map("test_sleep_desc")
        .map(FunctionRef("test_fail_on", {{"value", int64_t{20}}}));
    };
    REQUIRE(FunctionRegistry::global().add(std::move(d)).ok());
    return true;
  }();
  (void)registered;
}

// Every outcome of iterating `ds`: elements as their text, errors as "ERR"; at most 500 pulls.
std::vector<std::string> outcomes(const Dataset& ds) {
  auto it = ds.make_iterator();
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  std::vector<std::string> out;
  for (int i = 0; i < 500; ++i) {
    Element e;
    bool end = false;
    Status st = (*it)->get_next(e, end);
    if (!st.ok()) {
      out.push_back("ERR");
      continue;
    }
    if (end)
      return out;
    out.push_back(e.to_string());
  }
  FAIL("no end after 500 pulls");
  return out;
}

} // namespace

TEST_CASE("parallel interleave: the sequential order for every cycle, block and parallelism") {
  test::register_test_functions();
  const std::vector<int64_t> sizes{5, 0, 3, 9, 1, 7, 2, 0, 4, 6, 8};
  for (int64_t cycle : {1, 2, 3, 5}) {
    for (int64_t block : {1, 2, 4}) {
      const Dataset seq = slices(sizes).interleave("range_fn", cycle, block);
      const std::string want = show(seq);
      for (int64_t parallel : {int64_t{2}, int64_t{3}, int64_t{8}, kAutotune}) {
        CAPTURE(cycle);
        CAPTURE(block);
        CAPTURE(parallel);
        CHECK(show(slices(sizes).interleave("range_fn", cycle, block, parallel)) == want);
      }
    }
  }
  // tf.data's documented example, read in parallel.
  auto doc =
    slices({1, 2, 3, 4, 5}).interleave(FunctionRef("repeat_fn", {{"count", int64_t{6}}}), 2, 4, 3);
  CHECK(
    show(doc) ==
    "[1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]");
}

TEST_CASE("parallel interleave: inner errors come where the sequential interleave gives them") {
  register_failing_range();
  // test_sleep_desc makes element 2 the value 20, which fails; the inner dataset goes on after it.
  for (int64_t block : {1, 3}) {
    const auto seq = outcomes(slices({4, 1, 5, 3}).interleave("test_range_failing_at_2", 2, block));
    REQUIRE(std::count(seq.begin(), seq.end(), "ERR") == 3);
    for (int64_t parallel : {2, 4}) {
      CAPTURE(block);
      CAPTURE(parallel);
      CHECK(
        outcomes(slices({4, 1, 5, 3}).interleave("test_range_failing_at_2", 2, block, parallel)) ==
        seq);
    }
  }
}

TEST_CASE("parallel interleave: deterministic=false yields the same elements") {
  test::register_test_functions();
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < 24; ++i)
    sizes.push_back(i % 7);
  auto sorted_values = [](const std::vector<Element>& elements) {
    std::vector<int64_t> v;
    for (const auto& e : elements)
      v.push_back(e[0].as_int64());
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto want = sorted_values(test::run(slices(sizes).interleave("range_fn", 4, 2)));
  CHECK(sorted_values(test::run(slices(sizes).interleave("range_fn", 4, 2, 3, false))) == want);
}

TEST_CASE("parallel interleave: destroyed mid-read with blocks in flight, and bad arguments") {
  test::register_test_functions();
  for (int round = 0; round < 20; ++round) {
    auto it = slices({50, 50, 50, 50})
                .map("test_sleep_desc")
                .interleave("range_fn", 4, 8, 4)
                .make_iterator();
    REQUIRE(it.ok());
    Element e;
    bool end = false;
    for (int i = 0; i < round; ++i)
      REQUIRE((*it)->get_next(e, end).ok());
  } // each iterator goes away while its fetches may still run
  Status bad = test::first_error(slices({1}).interleave("range_fn", 2, 1, 0));
  CHECK(bad.code() == ErrorCode::invalid_argument);
  CHECK(bad.message().find("`num_parallel_calls`") != std::string::npos);
}
