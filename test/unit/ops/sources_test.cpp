// Source ops: range, from_tensors, from_tensor_slices, list_files, text_lines, tfrecord, source.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops_test_util.hpp"
#include "pipeline/io/tfrecord.hpp"

using namespace conveyor;
using conveyor::test::show;

TEST_CASE("range follows tf.data's documented examples") {
  CHECK(show(Dataset::range(5)) == "[0, 1, 2, 3, 4]");
  CHECK(show(Dataset::range(2, 5)) == "[2, 3, 4]");
  CHECK(show(Dataset::range(1, 5, 2)) == "[1, 3]");
  CHECK(show(Dataset::range(1, 5, -2)) == "[]");
  CHECK(show(Dataset::range(5, 1)) == "[]");
  CHECK(show(Dataset::range(5, 1, -2)) == "[5, 3]");
  CHECK(show(Dataset::range(-3, -9, -3)) == "[-3, -6]");
}

TEST_CASE("range near the int64 limits neither overflows nor loops") {
  const int64_t max = INT64_MAX;
  CHECK(show(Dataset::range(max - 2, max)) == "[9223372036854775805, 9223372036854775806]");
  CHECK(show(Dataset::range(max - 1, max, 5)) == "[9223372036854775806]");
  CHECK(show(Dataset::range(INT64_MIN + 1, INT64_MIN, -1)) == "[-9223372036854775807]");
  CHECK(test::run(Dataset::range(INT64_MIN, max, INT64_MAX)).size() == 3);
}

TEST_CASE("range with step 0 is an invalid_argument naming `step`") {
  Status st = test::first_error(Dataset::range(0, 5, 0));
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("`step`") != std::string::npos);
}

TEST_CASE("from_tensors yields its one element - from_tensor_slices slices the first dimension") {
  CHECK(show(Dataset::from_tensors(test::ints({1, 2, 3}))) == "[[1, 2, 3]]");
  CHECK(show(Dataset::from_tensor_slices(test::ints({1, 2, 3}))) == "[1, 2, 3]");
  auto matrix = Tensor::from_values<int64_t>({2, 2}, {1, 2, 3, 4});
  REQUIRE(matrix.ok());
  CHECK(show(Dataset::from_tensor_slices(Element{*matrix})) == "[[1, 2], [3, 4]]");
  // A tuple of tensors gives tuples: tf.data's ([1, 2], [3, 4]) -> (1, 3), (2, 4).
  Element pair{{Tensor::vector<int64_t>({1, 2}), Tensor::vector<std::string>({"a", "b"})}};
  CHECK(show(Dataset::from_tensor_slices(pair)) == "[(1, \"a\"), (2, \"b\")]");
}

TEST_CASE("from_tensor_slices rejects scalars and unequal first dimensions") {
  Status scalar =
    test::first_error(Dataset::from_tensor_slices(Element{Tensor::scalar(int64_t{3})}));
  CHECK(scalar.code() == ErrorCode::invalid_argument);
  CHECK(scalar.message().find("scalar") != std::string::npos);
  Element uneven{{Tensor::vector<int64_t>({1, 2}), Tensor::vector<int64_t>({1, 2, 3})}};
  Status st = test::first_error(Dataset::from_tensor_slices(uneven));
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("from_tensor_slices") != std::string::npos);
}

TEST_CASE("list_files: sorted glob matches, shuffled deterministically with a seed") {
  test::TempDir dir;
  for (const char* name : {"c.txt", "a.txt", "b.txt", "d.txt", "e.txt", "f.txt", "skip.csv"})
    test::write_file(dir.file(name), "x");
  const std::string pattern = dir.path() + "/*.txt";
  std::vector<std::string> sorted;
  for (const char* name : {"a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt"})
    sorted.push_back(dir.file(name));
  auto names = [](const std::vector<Element>& elements) {
    std::vector<std::string> out;
    for (const auto& e : elements)
      out.push_back(e[0].strings().at(0));
    return out;
  };

  CHECK(names(test::run(Dataset::list_files(pattern, /*shuffle=*/false))) == sorted);

  auto seeded = Dataset::list_files(pattern, true, 42);
  auto first = names(test::run(seeded));
  CHECK(first == names(test::run(seeded))); // a new top-level iterator starts the same way
  CHECK(std::is_permutation(first.begin(), first.end(), sorted.begin(), sorted.end()));
  // Reshuffled on each iteration: the 3 passes of repeat are permutations, not all the same.
  auto repeated = names(test::run(seeded.repeat(3)));
  REQUIRE(repeated.size() == 18);
  std::vector<std::vector<std::string>> passes;
  for (int p = 0; p < 3; ++p) {
    passes.emplace_back(repeated.begin() + 6 * p, repeated.begin() + 6 * (p + 1));
    CHECK(std::is_permutation(passes[p].begin(), passes[p].end(), sorted.begin(), sorted.end()));
  }
  CHECK(passes[0] == first);
  CHECK(!(passes[0] == passes[1] && passes[1] == passes[2]));
}

TEST_CASE("list_files with no match is not_found naming the pattern") {
  test::TempDir dir;
  Status st = test::first_error(Dataset::list_files(dir.path() + "/*.none"));
  CHECK(st.code() == ErrorCode::not_found);
  CHECK(st.message().find("*.none") != std::string::npos);
}

TEST_CASE("text_lines: one element per line, without \\n or \\r\\n, across files") {
  test::TempDir dir;
  test::write_file(dir.file("a"), "first\r\nsecond\n\nlast without newline");
  test::write_file(dir.file("b"), "");
  test::write_file(dir.file("c"), "only\n");
  CHECK(show(Dataset::text_lines({dir.file("a"), dir.file("b"), dir.file("c")})) ==
        "[\"first\", \"second\", \"\", \"last without newline\", \"only\"]");
}

TEST_CASE("text_lines on a missing file is not_found naming it, then goes on") {
  test::TempDir dir;
  test::write_file(dir.file("ok"), "x\n");
  auto it = Dataset::text_lines({dir.file("missing"), dir.file("ok")}).make_iterator();
  REQUIRE(it.ok());
  Element e;
  bool end = false;
  Status st = (*it)->get_next(e, end);
  CHECK(st.code() == ErrorCode::not_found);
  CHECK(st.message().find(dir.file("missing")) != std::string::npos);
  REQUIRE((*it)->get_next(e, end).ok());
  CHECK(!end);
  CHECK(e.to_string() == "\"x\"");
}

TEST_CASE("tfrecord yields the raw record bytes") {
  test::TempDir dir;
  const std::string binary("b\0in\xff", 5);
  for (const auto& [name, records] : std::vector<std::pair<std::string, std::vector<std::string>>>{
         {"one", {"alpha", binary}}, {"two", {"", "omega"}}}) {
    auto writer = TFRecordWriter::open(dir.file(name));
    REQUIRE(writer.ok());
    for (const auto& r : records)
      REQUIRE((*writer)->write(r).ok());
    REQUIRE((*writer)->close().ok());
  }
  auto out = test::run(Dataset::tfrecord({dir.file("one"), dir.file("two")}));
  REQUIRE(out.size() == 4);
  CHECK(out[0][0].strings().at(0) == "alpha");
  CHECK(out[1][0].strings().at(0) == binary);
  CHECK(out[2][0].strings().at(0).empty());
  CHECK(out[3][0].strings().at(0) == "omega");
  CHECK(out[1][0].rank() == 0);
}

TEST_CASE("tfrecord on a missing file is an error naming the file") {
  test::TempDir dir;
  Status st = test::first_error(Dataset::tfrecord({dir.file("absent.tfrecord")}));
  CHECK(!st.ok());
  CHECK(st.message().find("absent.tfrecord") != std::string::npos);
}

TEST_CASE("source runs the registered source function with its parameters") {
  CHECK(show(Dataset::source(
          FunctionRef("counter", {{"start", int64_t{3}}, {"stop", int64_t{6}}}))) == "[3, 4, 5]");
  CHECK(test::first_error(Dataset::source("no_such_source")).code() != ErrorCode::ok);
}
