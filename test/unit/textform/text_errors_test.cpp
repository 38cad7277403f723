// Errors of the text form: every one is invalid_argument, starts with the 1-based column of the
// offending text, and names what was wrong and what was expected.
#include <doctest/doctest.h>

#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"

using namespace conveyor;

namespace {

std::string dataset_error(const std::string& text) {
  auto d = parse_dataset(text);
  REQUIRE_MESSAGE(!d.ok(), text, " parsed as ", d.ok() ? to_text(*d) : "");
  CHECK(d.status().code() == ErrorCode::invalid_argument);
  return d.status().message();
}

std::string element_error(const std::string& text) {
  auto e = parse_element(text);
  REQUIRE_MESSAGE(!e.ok(), text, " parsed");
  CHECK(e.status().code() == ErrorCode::invalid_argument);
  return e.status().message();
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

TEST_CASE("syntax errors name the column and what was expected") {
  CHECK(dataset_error("range(10).batch(3 4)") ==
        "column 19: expected `)` after the arguments of `batch`, found `4`");
  CHECK(dataset_error("range(10).batch(8") ==
        "column 18: expected `)` after the arguments of `batch`, found the end of the text");
  CHECK(dataset_error("range(10) range(3)") ==
        "column 11: unexpected `range` after the end of the expression");
  CHECK(dataset_error("range(10) % 2") == "column 11: unexpected character `%`");
  CHECK(dataset_error("range(10).batch(8).") ==
        "column 20: expected a transform name after `.`, found the end of the text");
  CHECK(dataset_error("range(10).batch") ==
        "column 16: expected `(` after `.batch`, found the end of the text");
  CHECK(dataset_error("range(-)") == "column 8: expected a number after `-`, found `)`");
  CHECK(dataset_error("text_lines(\"a.txt)") ==
        "column 12: the string that starts here is never closed");
  CHECK(starts_with(dataset_error(R"(from_tensors("a\qb"))"),
                    "column 16: unknown escape `\\q` in a string"));
  CHECK(dataset_error(R"(from_tensors("\x4"))") ==
        "column 15: `\\x` must be followed by two hex digits");
  CHECK(dataset_error("from_tensors(1.5.2)") == "column 14: malformed number `1.5.2`");
  CHECK(dataset_error("from_tensors(12abc)") == "column 14: malformed number `12abc`");
  CHECK(element_error("[1, 2") ==
        "column 6: expected `,` or `]` in the list opened at column 1, found the end of the text");
  CHECK(element_error("(1 2)") ==
        "column 4: expected `,` or `)` in the tuple opened at column 1, found `2`");
}

TEST_CASE("unknown ops, misplaced ops and non-datasets are named") {
  CHECK(starts_with(dataset_error("range(10).bach(3)"),
                    "column 11: unknown dataset op `bach` (did you mean `batch`?); known ops: "
                    "range, from_tensors,"));
  CHECK(
    dataset_error("map(square)") ==
    "column 1: `map` is a transform: write it after its input dataset, as in range(10).map(...)");
  CHECK(dataset_error("range(3).zip(range(3))") ==
        "column 10: `zip` is not a transform, so it cannot follow `.`; write it as a call, as in "
        "zip(...)");
  CHECK(dataset_error("3") ==
        "column 1: expected a dataset (a source such as range(10), or zip(...)), found an int `3`");
  CHECK(
    dataset_error("zip(range(3), 5)") ==
    "column 15: expected a dataset (a source such as range(10), or zip(...)), found an int `5`");
  CHECK(dataset_error("zip()") ==
        "column 1: `zip` needs at least one dataset, as in zip(range(3), range(3))");
  CHECK(dataset_error("zip(range(3), a=range(3))") ==
        "column 15: `zip` takes only datasets, found keyword `a`");
}

TEST_CASE("argument errors: unknown keyword, duplicate, missing, too many, wrong kind") {
  CHECK(dataset_error("range(10).batch(8, drop=true)") ==
        "column 20: `batch` has no argument `drop`; its arguments are batch_size, drop_remainder");
  CHECK(dataset_error("range(10).batch(8, drop_remaindr=true)") ==
        "column 20: `batch` has no argument `drop_remaindr` (did you mean `drop_remainder`?); its "
        "arguments are "
        "batch_size, drop_remainder");
  CHECK(dataset_error("range(x=1)") ==
        "column 7: `range` has no argument `x`; its arguments are start, stop, step");
  CHECK(dataset_error("range(10).shuffle(16, seed=1, seed=2)") ==
        "column 31: argument `seed` of `shuffle` is given twice");
  CHECK(dataset_error("range(10).shuffle(16, buffer_size=2)") ==
        "column 23: argument `buffer_size` of `shuffle` is given twice");
  CHECK(dataset_error("range(10).batch()") ==
        "column 11: `batch` is missing its required argument `batch_size`");
  CHECK(dataset_error("range(start=1)") ==
        "column 1: `range` is missing its required argument `stop`");
  CHECK(dataset_error("range(10).take(1, 2)") ==
        "column 19: `take` takes at most 1 positional argument(s): count");
  CHECK(dataset_error("range(10).batch(8, true, 3)") ==
        "column 26: `batch` takes at most 2 positional argument(s): batch_size, drop_remainder");
  CHECK(dataset_error("range(10).unbatch(1)") == "column 19: `unbatch` takes no arguments");
  CHECK(dataset_error("range(10).shuffle(seed=3, 16)") ==
        "column 27: positional argument after keyword arguments in `shuffle`");
  CHECK(dataset_error("range(10).batch(\"8\")") ==
        "column 17: argument `batch_size` of `batch` expects an int, found a string");
  CHECK(
    dataset_error("range(10).batch(8, drop_remainder=1)") ==
    "column 35: argument `drop_remainder` of `batch` expects `true` or `false`, found an int `1`");
  CHECK(dataset_error("range(10).repeat(count=1.5)") ==
        "column 24: argument `count` of `repeat` expects an int, found a float `1.5`");
  CHECK(dataset_error("range(10).cache(filename=x)") ==
        "column 26: argument `filename` of `cache` expects a string, found the name `x`");
  CHECK(dataset_error("text_lines([\"a\", 1])") ==
        "column 18: argument `files` of `text_lines` expects a list of strings, found an int `1` "
        "in it");
  CHECK(dataset_error("range(10).shard(AUTOTUNE, 0)") ==
        "column 17: `AUTOTUNE` is not a valid value for argument `num_shards` of `shard`");
  CHECK(dataset_error("range(99999999999999999999)") ==
        "column 7: int literal `99999999999999999999` does not fit in int64");
}

TEST_CASE("function reference errors") {
  CHECK(dataset_error("range(5).map(3)") ==
        "column 14: argument `fn` of `map` expects a function such as `square` or "
        "`scale(factor=2.5)`, found an int `3`");
  CHECK(dataset_error("range(5).map(scale(2.5))") ==
        "column 20: parameters of `scale` must be given as name=value");
  CHECK(
    dataset_error("range(5).map(scale(factor=[1]))") ==
    "column 27: parameter `factor` of `scale` must be an int, float, bool or string, found a list");
  CHECK(dataset_error("range(5).map(scale(factor=1, factor=2))") ==
        "column 30: parameter `factor` of `scale` is given twice");
}

TEST_CASE("element literal errors: ragged, mixed kinds, bad casts") {
  CHECK(dataset_error("from_tensor_slices([[1, 2], [3]])") ==
        "column 29: ragged list: this list has length 1, the first one at this depth has length 2");
  CHECK(dataset_error("from_tensors([1, [2]])") ==
        "column 18: ragged list: expected a scalar here, like the first entry at this depth, found "
        "a list");
  CHECK(dataset_error("from_tensors([[1], 2])") ==
        "column 20: ragged list: expected a list of 1 entries here, like the first one at this "
        "depth, found an int `2`");
  CHECK(dataset_error("from_tensors([1, \"a\"])") ==
        "column 18: a tensor literal needs entries of one kind: the first entry is an int, this "
        "one is a string");
  CHECK(dataset_error("from_tensors(int32(3000000000))") ==
        "column 20: int literal `3000000000` does not fit in int32");
  CHECK(dataset_error("from_tensors(int32(2.5))") ==
        "column 20: `int32(...)` cannot hold a float `2.5`");
  CHECK(dataset_error("from_tensors(bool(1))") == "column 19: `bool(...)` cannot hold an int `1`");
  CHECK(dataset_error("from_tensors(float32(1e39))") ==
        "column 22: float literal `1e39` is out of range for float32");
  CHECK(dataset_error("from_tensors([int32(1)])") ==
        "column 15: a dtype cast must wrap the whole tensor literal, as in int32([1, 2])");
  CHECK(dataset_error("from_tensors(int32([1], shape=[2]))") ==
        "column 14: the shape given to `int32(...)` does not hold the literal's 1 entries");
  CHECK(dataset_error("from_tensors(int32([1], shape=[-1]))") ==
        "column 32: `shape` dimensions must be non-negative, found -1");
  CHECK(dataset_error("from_tensors(int32([1], dtype=1))") ==
        "column 25: `int32(...)` has no argument `dtype` (it takes a tensor literal and an "
        "optional shape=[...])");
  CHECK(dataset_error("from_tensors(int32())") ==
        "column 14: `int32(...)` needs a tensor literal, as in int32([1, 2])");
  // from_tensors nests (structure_test.cpp); the other element arguments are flat tuples.
  CHECK(dataset_error("range(1).padded_batch(1, padding_values=((1, 2), 3))") ==
        "column 42: tuples cannot be nested: each component of an element is one tensor literal");
  CHECK(
    dataset_error("from_tensors(square)") ==
    "column 14: expected a number, bool or string in a tensor literal, found the name `square`");
}

TEST_CASE("nesting is bounded, so no input can exhaust the stack") {
  CHECK(element_error(std::string(5000, '[')) ==
        "column 101: brackets, parentheses and calls nested deeper than 100 levels");
  CHECK(dataset_error(std::string(100, '(') + "range(1)" + std::string(100, ')')) ==
        "column 101: brackets, parentheses and calls nested deeper than 100 levels");
  CHECK(parse_dataset(std::string(98, '(') + "range(1)" + std::string(98, ')')).ok());
}

TEST_CASE("method chains may be 1000 levels deep, and everything handles the deepest") {
  // range(1) is two levels (the call and its argument); each transform adds one.
  std::string chain = "range(1)";
  for (int i = 0; i < 998; ++i)
    chain += ".repeat()";
  auto deepest = parse_dataset(chain);
  REQUIRE(deepest.ok());
  CHECK(to_text(*deepest) == chain);
  CHECK(fingerprint(*deepest).size() == 16);
  auto from_bin = from_binary(to_binary(*deepest));
  REQUIRE_MESSAGE(from_bin.ok(), from_bin.status().to_string());
  CHECK(*from_bin == *deepest);
  auto from_js = from_json(to_json(*deepest));
  REQUIRE_MESSAGE(from_js.ok(), from_js.status().to_string());
  CHECK(*from_js == *deepest);

  chain += ".repeat()";
  CHECK(dataset_error(chain) ==
        "column " + std::to_string(chain.size() - 7) +
          ": expression deeper than 1000 levels (each transform counts one)");
}
