// DYNAMIC sharding: sources read the splits a SplitProvider hands out, and every iterator resumes
// exactly where it stopped after the provider says `unavailable`.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops_test_util.hpp"

using namespace conveyor;

namespace {

struct Run {
  std::vector<Element> elements;
  int64_t unavailable_seen = 0;
};

// Drains `ds` with `provider`, retrying after every `unavailable` (bounded).
Run run_with(const Dataset& ds, SplitProvider& provider) {
  test::register_test_functions();
  IteratorContext ctx;
  ctx.split_provider = &provider;
  auto it = ds.make_iterator(ctx);
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  Run run;
  for (int calls = 0; calls < 100000; ++calls) {
    Element e;
    bool end = false;
    Status st = (*it)->get_next(e, end);
    if (st.code() == ErrorCode::unavailable) {
      CHECK(st.message() == test::FakeSplitProvider::unavailable_message()); // passed up unchanged
      ++run.unavailable_seen;
      continue;
    }
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      return run;
    run.elements.push_back(std::move(e));
  }
  FAIL("the iterator did not end");
  return run;
}

const FunctionRef kOneInThree("mod_eq", {{"m", int64_t{3}}, {"r", int64_t{1}}});

} // namespace

TEST_CASE("range produces exactly the elements of its splits, then ends") {
  test::FakeSplitProvider provider({{Split{0, 0, 0, 3, ""}, Split{0, 1, 5, 7, ""}}});
  CHECK(test::str(run_with(Dataset::range(10, 30, 2), provider).elements) ==
        "[10, 12, 14, 20, 22]");
}

TEST_CASE("from_tensor_slices produces its splits' slices - a split out of range is out_of_range") {
  test::FakeSplitProvider provider({{Split{0, 0, 2, 4, ""}}});
  CHECK(test::str(
          run_with(Dataset::from_tensor_slices(test::ints({5, 6, 7, 8, 9})), provider).elements) ==
        "[7, 8]");
  test::FakeSplitProvider bad({{Split{0, 0, 3, 9, ""}}});
  IteratorContext ctx;
  ctx.split_provider = &bad;
  auto it = Dataset::from_tensor_slices(test::ints({5, 6, 7})).make_iterator(ctx);
  REQUIRE(it.ok());
  Element e;
  bool end = false;
  Status st = (*it)->get_next(e, end);
  CHECK(st.code() == ErrorCode::out_of_range);
  CHECK(st.message().find("[3, 9)") != std::string::npos);
}

TEST_CASE("repeat above the source asks the provider for the next epoch") {
  test::FakeSplitProvider provider(test::FakeSplitProvider::range_splits(5, 2, 2));
  CHECK(test::str(run_with(Dataset::range(5).repeat(), provider).elements) ==
        "[0, 1, 2, 3, 4, 0, 1, 2, 3, 4]");
}

TEST_CASE("file sources read the files of their splits") {
  test::TempDir dir;
  test::write_file(dir.file("a"), "a1\na2\n");
  test::write_file(dir.file("b"), "b1\n");
  test::FakeSplitProvider provider(
    {{Split{0, 0, 0, 0, dir.file("b")}, Split{0, 1, 0, 0, dir.file("a")}}});
  // The dataset's own file list is ignored: the provider decides.
  CHECK(test::str(run_with(Dataset::text_lines({dir.file("a")}), provider).elements) ==
        "[\"b1\", \"a1\", \"a2\"]");

  test::FakeSplitProvider files({{Split{0, 0, 0, 0, "x"}, Split{0, 1, 0, 0, "y"}}});
  CHECK(test::str(run_with(Dataset::list_files(dir.path() + "/*"), files).elements) ==
        "[\"x\", \"y\"]");
}

TEST_CASE(
  "interrupted by `unavailable` at random points, the output equals the uninterrupted one") {
  auto main = Dataset::range(100)
                .shuffle(8, 3)
                .repeat(2)
                .filter(kOneInThree)
                .interleave(FunctionRef("repeat_fn", {{"count", int64_t{2}}}), 3, 2)
                .batch(4)
                .shuffle(5, 9);
  auto ds =
    Dataset::zip({main, Dataset::source(FunctionRef(
                          "counter", {{"start", int64_t{1000}}, {"stop", int64_t{100000}}}))})
      .enumerate()
      .take(30);
  // With one consumer taking every split in order, DYNAMIC gives the plain dataset's output.
  const std::string expected = test::show(ds);
  REQUIRE(test::run(ds).size() == 30);

  test::FakeSplitProvider steady(test::FakeSplitProvider::range_splits(100, 7, 2));
  CHECK(test::str(run_with(ds, steady).elements) == expected);

  for (uint64_t seed : {1, 2, 3, 4}) {
    CAPTURE(seed);
    test::FakeSplitProvider flaky(test::FakeSplitProvider::range_splits(100, 7, 2), 0.4, seed);
    Run run = run_with(ds, flaky);
    CHECK(test::str(run.elements) == expected);
    CHECK(run.unavailable_seen > 0);
    CHECK(run.unavailable_seen == flaky.unavailable_count()); // none swallowed or invented
  }
}

TEST_CASE("parallel map, prefetch and cache hand `unavailable` up in stream order and keep going") {
  auto ds = Dataset::range(60)
              .map("test_sleep_desc", 3)
              .prefetch(4)
              .batch(5)
              .map("identity", 2)
              .unbatch()
              .cache()
              .enumerate(100);
  const std::string expected = test::show(ds);
  for (uint64_t seed : {5, 6}) {
    CAPTURE(seed);
    test::FakeSplitProvider flaky(test::FakeSplitProvider::range_splits(60, 4, 1), 0.5, seed);
    Run run = run_with(ds, flaky);
    CHECK(test::str(run.elements) == expected);
    CHECK(run.unavailable_seen > 0);
    CHECK(run.unavailable_seen == flaky.unavailable_count());
  }
}

TEST_CASE("skip, shard and unbatch resume mid-way too") {
  auto ds = Dataset::range(50).batch(3).unbatch().skip(4).shard(3, 1).take(12).batch(5);
  const std::string expected = test::show(ds);
  test::FakeSplitProvider flaky(test::FakeSplitProvider::range_splits(50, 2, 1), 0.5, 7);
  CHECK(test::str(run_with(ds, flaky).elements) == expected);
}

TEST_CASE(
  "two workers sharing the real split provider produce every element exactly once per epoch") {
  auto ds = Dataset::range(100).map("square").repeat(2);
  SplitOptions options;
  options.range_split_size = 8;
  auto provider = make_split_provider(ds, options);
  REQUIRE_MESSAGE(provider.ok(), provider.status().to_string());
  IteratorContext ctx;
  ctx.split_provider = provider->get();
  auto a = ds.make_iterator(ctx);
  auto b = ds.make_iterator(ctx);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<int64_t> counts(100, 0);
  int64_t from_a = 0;
  int64_t from_b = 0;
  bool a_done = false;
  bool b_done = false;
  for (int step = 0; step < 1000 && !(a_done && b_done); ++step) {
    const bool use_a = (step % 2 == 0 && !a_done) || b_done;
    Iterator& it = use_a ? **a : **b;
    Element e;
    bool end = false;
    REQUIRE(it.get_next(e, end).ok());
    if (end) {
      (use_a ? a_done : b_done) = true;
      continue;
    }
    const int64_t v = e[0].as_int64();
    int64_t root = 0;
    while (root * root < v)
      ++root;
    REQUIRE(root * root == v);
    ++counts.at(root);
    ++(use_a ? from_a : from_b);
  }
  CHECK(a_done);
  CHECK(b_done);
  CHECK(std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c == 2; }));
  CHECK(from_a > 0);
  CHECK(from_b > 0);
}
