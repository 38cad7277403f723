// Transform ops with tf.data's documented example outputs: map, filter, flat_map, interleave,
// batch, unbatch, repeat, take, skip, shard, enumerate, zip, prefetch.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops_test_util.hpp"

using namespace conveyor;
using conveyor::test::show;

namespace {
Dataset slices(const std::vector<int64_t>& v) { return Dataset::from_tensor_slices(test::ints(v)); }
} // namespace

TEST_CASE("map applies the function with its parameters") {
  CHECK(show(Dataset::range(1, 6).map(FunctionRef("add", {{"k", int64_t{1}}}))) ==
        "[2, 3, 4, 5, 6]");
  CHECK(show(Dataset::range(4).map("square")) == "[0, 1, 4, 9]");
}

TEST_CASE("parallel map keeps input order when deterministic") {
  test::register_test_functions();
  auto expected = show(Dataset::range(40).map("test_sleep_desc"));
  CHECK(expected.rfind("[0, 10, 20,", 0) == 0);
  CHECK(show(Dataset::range(40).map("test_sleep_desc", 4, true)) == expected);
  CHECK(show(Dataset::range(40).map("test_sleep_desc", kAutotune, true)) == expected);
}

TEST_CASE("parallel map without determinism yields the same elements in any order") {
  auto out = test::run(Dataset::range(40).map("test_sleep_desc", 4, false));
  std::vector<int64_t> values;
  for (const auto& e : out)
    values.push_back(e[0].as_int64());
  std::sort(values.begin(), values.end());
  REQUIRE(values.size() == 40);
  for (int64_t i = 0; i < 40; ++i)
    CHECK(values[i] == i * 10);
}

TEST_CASE("a map function error names the function, and iteration goes on after it") {
  for (int64_t parallel : {int64_t{1}, int64_t{3}}) {
    test::register_test_functions();
    auto it = Dataset::range(4)
                .map(FunctionRef("test_fail_on", {{"value", int64_t{1}}}), parallel)
                .make_iterator();
    REQUIRE(it.ok());
    std::vector<std::string> seen;
    for (int i = 0; i < 5; ++i) {
      Element e;
      bool end = false;
      Status st = (*it)->get_next(e, end);
      seen.push_back(!st.ok() ? to_string(st.code()) : end ? "end" : e.to_string());
      if (!st.ok())
        CHECK(st.message().find("test_fail_on") != std::string::npos);
    }
    CHECK(seen == std::vector<std::string>{"0", "invalid_argument", "2", "3", "end"});
  }
}

TEST_CASE("map with an unknown function or a bad num_parallel_calls fails to start") {
  Status unknown = test::first_error(Dataset::range(3).map("no_such_fn"));
  CHECK(!unknown.ok());
  CHECK(unknown.message().find("no_such_fn") != std::string::npos);
  Status zero = test::first_error(Dataset::range(3).map("square", 0));
  CHECK(zero.code() == ErrorCode::invalid_argument);
  CHECK(zero.message().find("num_parallel_calls") != std::string::npos);
}

TEST_CASE("filter keeps the elements the predicate accepts") {
  CHECK(show(Dataset::range(10).filter("is_even")) == "[0, 2, 4, 6, 8]");
  CHECK(show(Dataset::range(10).filter(
          FunctionRef("mod_eq", {{"m", int64_t{3}}, {"r", int64_t{1}}}))) == "[1, 4, 7]");
  CHECK(show(Dataset::range(0).filter("is_even")) == "[]");
}

TEST_CASE("flat_map concatenates the returned datasets") {
  CHECK(show(slices({1, 2, 3}).flat_map("range_fn")) == "[0, 0, 1, 0, 1, 2]");
  CHECK(show(slices({0, 2, 0}).flat_map("range_fn")) == "[0, 1]");
}

TEST_CASE("interleave: tf.data's documented example") {
  auto ds =
    slices({1, 2, 3, 4, 5}).interleave(FunctionRef("repeat_fn", {{"count", int64_t{6}}}), 2, 4);
  CHECK(
    show(ds) ==
    "[1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]");
}

TEST_CASE("interleave: block_length 1, and cycle_length AUTOTUNE means 4") {
  CHECK(show(slices({3, 1, 2}).interleave("range_fn", 2, 1)) == "[0, 0, 1, 2, 0, 1]");
  auto autotuned =
    slices({1, 2, 3, 4, 5}).interleave(FunctionRef("repeat_fn", {{"count", int64_t{2}}}));
  CHECK(show(autotuned) == "[1, 2, 3, 4, 1, 2, 3, 4, 5, 5]");
  Status bad = test::first_error(slices({1}).interleave("range_fn", 0));
  CHECK(bad.code() == ErrorCode::invalid_argument);
  CHECK(bad.message().find("cycle_length") != std::string::npos);
}

TEST_CASE("batch stacks, keeps or drops the remainder") {
  CHECK(show(Dataset::range(5).batch(3)) == "[[0, 1, 2], [3, 4]]");
  CHECK(show(Dataset::range(8).batch(3)) == "[[0, 1, 2], [3, 4, 5], [6, 7]]");
  CHECK(show(Dataset::range(8).batch(3, true)) == "[[0, 1, 2], [3, 4, 5]]");
  CHECK(show(Dataset::range(2).batch(3, true)) == "[]");
  CHECK(show(Dataset::zip({Dataset::range(3), Dataset::range(3).map("to_string")}).batch(2)) ==
        "[([0, 1], [\"0\", \"1\"]), ([2], [\"2\"])]");
  auto matrix_rows = Dataset::from_tensors(test::ints({1, 2})).repeat(2).batch(2);
  CHECK(show(matrix_rows) == "[[[1, 2], [1, 2]]]");
}

TEST_CASE("batch of mismatched shapes is invalid_argument naming the shapes") {
  test::register_test_functions();
  Status st = test::first_error(Dataset::range(1, 4).map("test_iota").batch(2));
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("[1]") != std::string::npos);
  CHECK(st.message().find("[2]") != std::string::npos);
  CHECK(test::first_error(Dataset::range(3).batch(0)).code() == ErrorCode::invalid_argument);
}

TEST_CASE("unbatch splits the first dimension, the inverse of batch") {
  CHECK(show(Dataset::range(7).batch(3).unbatch()) == "[0, 1, 2, 3, 4, 5, 6]");
  auto matrix = Tensor::from_values<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  REQUIRE(matrix.ok());
  CHECK(show(Dataset::from_tensors(Element{*matrix}).unbatch()) == "[[1, 2, 3], [4, 5, 6]]");
  CHECK(show(Dataset::zip({Dataset::range(4), Dataset::range(10, 14)}).batch(3).unbatch()) ==
        "[(0, 10), (1, 11), (2, 12), (3, 13)]");
  Status st = test::first_error(Dataset::range(2).unbatch());
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("scalar") != std::string::npos);
}

TEST_CASE("repeat: count times, forever, zero, and an empty input ends") {
  CHECK(show(slices({1, 2, 3}).repeat(3)) == "[1, 2, 3, 1, 2, 3, 1, 2, 3]");
  CHECK(show(slices({1, 2}).repeat(0)) == "[]");
  CHECK(show(slices({1, 2}).repeat().take(5)) == "[1, 2, 1, 2, 1]");
  CHECK(show(Dataset::range(0).repeat()) == "[]");
  CHECK(show(Dataset::range(5)
               .filter(FunctionRef("mod_eq", {{"m", int64_t{7}}, {"r", int64_t{6}}}))
               .repeat()) == "[]");
}

TEST_CASE("take and skip, including -1") {
  CHECK(show(Dataset::range(10).take(3)) == "[0, 1, 2]");
  CHECK(show(Dataset::range(10).skip(7)) == "[7, 8, 9]");
  CHECK(show(Dataset::range(3).take(-1)) == "[0, 1, 2]");
  CHECK(show(Dataset::range(3).skip(-1)) == "[]");
  CHECK(show(Dataset::range(3).take(0)) == "[]");
  CHECK(show(Dataset::range(3).skip(5)) == "[]");
  CHECK(test::first_error(Dataset::range(3).take(-2)).code() == ErrorCode::invalid_argument);
}

TEST_CASE("shard keeps element i when i % num_shards == index") {
  CHECK(show(Dataset::range(10).shard(3, 0)) == "[0, 3, 6, 9]");
  CHECK(show(Dataset::range(10).shard(3, 1)) == "[1, 4, 7]");
  CHECK(show(Dataset::range(10).shard(3, 2)) == "[2, 5, 8]");
  Status out_of_range = test::first_error(Dataset::range(10).shard(3, 3));
  CHECK(out_of_range.code() == ErrorCode::invalid_argument);
  CHECK(out_of_range.message().find("`index`") != std::string::npos);
  Status hint = test::first_error(Dataset::range(10).shard(kShardHint, kShardHint));
  CHECK(hint.code() == ErrorCode::invalid_argument);
  CHECK(hint.message().find("HINT") != std::string::npos);
}

TEST_CASE("enumerate prepends the int64 position") {
  CHECK(show(slices({1, 2, 3}).enumerate(5)) == "[(5, 1), (6, 2), (7, 3)]");
  CHECK(show(Dataset::zip({Dataset::range(2), Dataset::range(2).map("to_string")}).enumerate()) ==
        "[(0, 0, \"0\"), (1, 1, \"1\")]");
}

TEST_CASE("zip pairs elements and ends with the shortest input") {
  CHECK(show(Dataset::zip({Dataset::range(1, 4), Dataset::range(4, 7)})) ==
        "[(1, 4), (2, 5), (3, 6)]");
  CHECK(show(Dataset::zip({Dataset::range(1, 4), Dataset::range(13, 15)})) == "[(1, 13), (2, 14)]");
  CHECK(show(Dataset::zip({Dataset::range(3), Dataset::range(3).batch(2), Dataset::range(5, 9)})) ==
        "[(0, [0, 1], 5), (1, [2], 6)]");
}

TEST_CASE("prefetch passes everything through in order, errors included") {
  CHECK(show(Dataset::range(3).prefetch(2)) == "[0, 1, 2]");
  CHECK(show(Dataset::range(100).prefetch().batch(50).map("identity").unbatch().take(3)) ==
        "[0, 1, 2]");
  CHECK(show(Dataset::range(5).prefetch(0)) == "[0, 1, 2, 3, 4]");
  test::register_test_functions();
  auto it = Dataset::range(3)
              .map(FunctionRef("test_fail_on", {{"value", int64_t{1}}}))
              .prefetch(1)
              .make_iterator();
  REQUIRE(it.ok());
  std::vector<std::string> seen;
  for (int i = 0; i < 5; ++i) {
    Element e;
    bool end = false;
    Status st = (*it)->get_next(e, end);
    seen.push_back(!st.ok() ? to_string(st.code()) : end ? "end" : e.to_string());
  }
  CHECK(seen == std::vector<std::string>{"0", "invalid_argument", "2", "end", "end"});
}

TEST_CASE("an abandoned prefetch or parallel map shuts its threads down") {
  for (int i = 0; i < 5; ++i) {
    auto it = Dataset::range(1000000).map("sleep_us", 4).prefetch(4).make_iterator();
    REQUIRE(it.ok());
    Element e;
    bool end = false;
    REQUIRE((*it)->get_next(e, end).ok());
    CHECK(e.to_string() == "0");
  } // destroyed mid-stream: must join, not hang or crash
}

TEST_CASE("after the end, every op keeps answering end_of_sequence") {
  test::TempDir dir;
  test::write_file(dir.file("lines"), "a\nb\n");
  const std::vector<Dataset> datasets = {
    Dataset::range(3),
    Dataset::from_tensors(test::ints({1})),
    slices({1, 2}),
    Dataset::list_files(dir.path() + "/*"),
    Dataset::text_lines({dir.file("lines")}),
    Dataset::source("counter"),
    Dataset::range(3).map("square"),
    Dataset::range(9).map("square", 3),
    Dataset::range(3).filter("is_even"),
    slices({2, 1}).flat_map("range_fn"),
    slices({2, 1}).interleave("range_fn", 2),
    Dataset::range(5).batch(2),
    Dataset::range(4).batch(2).unbatch(),
    Dataset::range(5).shuffle(3, 1),
    Dataset::range(2).repeat(2),
    Dataset::range(0).repeat(),
    Dataset::range(5).take(2),
    Dataset::range(5).skip(2),
    Dataset::range(5).shard(2, 1),
    Dataset::range(2).enumerate(),
    Dataset::zip({Dataset::range(2), Dataset::range(3)}),
    Dataset::range(3).prefetch(1),
    Dataset::range(3).cache(),
    Dataset::range(3).cache(dir.file("cache")),
  };
  for (const Dataset& ds : datasets) {
    CAPTURE(ds.node()->op);
    auto it = ds.make_iterator();
    REQUIRE_MESSAGE(it.ok(), it.status().to_string());
    std::vector<Element> out;
    REQUIRE(test::drain(**it, out, 1000).ok());
    CHECK(out.size() < 1000);
    for (int i = 0; i < 3; ++i) {
      Element e;
      bool end = false;
      REQUIRE((*it)->get_next(e, end).ok());
      CHECK(end);
    }
  }
}
