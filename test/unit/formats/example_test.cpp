// parse_example: feature specs, the reference writer's fixtures (exact contents), and errors that
// name the feature and what was expected.
#include <doctest/doctest.h>

#include <fstream>

#include "pipeline/io/example.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/unit/formats/formats_util.hpp"

using namespace conveyor;
using namespace conveyor::formats_test;

namespace {

// The spec test/data/examples.expected was written for (see make_tfrecord_fixtures.py).
const char* kExamplesSpec =
  "label: int64; id: int64; pixels: float32[2, 2]; name: string; opt: int64 = -1; "
  "tags: var(string); scores: var(float32)";

std::vector<Element> expected_examples() {
  std::ifstream in(fixture("examples.expected"));
  std::vector<Element> out;
  std::string line;
  while (std::getline(in, line)) {
    auto e = parse_element(line);
    REQUIRE_MESSAGE(e.ok(), line, ": ", e.status().to_string());
    out.push_back(std::move(*e));
  }
  REQUIRE(out.size() == 5);
  return out;
}

std::string one_example(const std::vector<std::pair<std::string, Tensor>>& features) {
  auto bytes = serialize_example(features);
  REQUIRE(bytes.ok());
  return *bytes;
}

Status parse_error(const std::string& record, const char* spec) {
  auto s = FeatureSpec::parse(spec);
  REQUIRE(s.ok());
  auto parsed = parse_example(record, *s);
  return parsed.ok() ? Status::OK() : parsed.status();
}

} // namespace

TEST_CASE("records written by the reference writer parse to exactly the known contents") {
  const std::vector<Element> expected = expected_examples();
  for (const char* file : {"examples.tfrecord", "examples.tfrecord.zlib", "examples.tfrecord.gz"}) {
    CAPTURE(file);
    const std::string compression = std::string(file).find(".zlib") != std::string::npos ? "ZLIB"
                                    : std::string(file).find(".gz") != std::string::npos ? "GZIP"
                                                                                         : "";
    Dataset ds = Dataset::tfrecord({fixture(file)}, compression).parse_example(kExamplesSpec);
    auto got = collect(ds);
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    REQUIRE(got->size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      CHECK((*got)[i].to_string() == expected[i].to_string());
      CHECK((*got)[i] == expected[i]); // bitwise, -0.0 and float32(0.1) included
    }
    // Every element matches the dataset's declared spec.
    auto spec = ds.element_spec();
    REQUIRE(spec.ok());
    for (const Element& e : *got)
      CHECK(spec->is_compatible(e));
  }
}

TEST_CASE("the text form and the builder give the same parse_example graph") {
  FeatureSpec spec;
  spec.fixed("label", DType::int64)
    .fixed("id", DType::int64)
    .fixed("pixels", DType::float32, {2, 2})
    .fixed("name", DType::string)
    .fixed("opt", DType::int64, {}, Tensor::scalar(int64_t{-1}))
    .var_len("tags", DType::string)
    .var_len("scores", DType::float32);
  const std::string file = fixture("examples.tfrecord");
  Dataset built = Dataset::tfrecord({file}).parse_example(spec);
  auto parsed =
    parse_dataset("tfrecord(\"" + file + "\").parse_example(\"" + kExamplesSpec + "\")");
  REQUIRE(parsed.ok());
  CHECK(*parsed == built);
  CHECK(parsed->fingerprint() == built.fingerprint());
  auto back = from_binary(to_binary(built));
  REQUIRE(back.ok());
  CHECK(*back == built);
  CHECK(show(built) == show(*parsed));
  // A different spec is a different dataset.
  CHECK(Dataset::tfrecord({file}).parse_example("label: int64").fingerprint() !=
        built.fingerprint());
}

TEST_CASE("element_spec and cardinality of parse_example") {
  Dataset ds = Dataset::from_tensors(Element{Tensor::scalar("x")})
                 .parse_example("a: int64; b: float[3]; c: bytes = \"\"; d: var(int64)");
  auto spec = ds.element_spec();
  REQUIRE(spec.ok());
  // A dict keyed by feature name (the names are in sorted order), as tf.io.parse_example.
  CHECK(spec->to_string() ==
        "{'a': TensorSpec(shape=(), dtype=int64), 'b': TensorSpec(shape=(3,), dtype=float32), "
        "'c': TensorSpec(shape=(), dtype=string), 'd': TensorSpec(shape=(None,), dtype=int64)}");
  CHECK(ds.cardinality() == 1);
  // Synonyms are canonicalised by the builder's FeatureSpec path.
  auto fs = FeatureSpec::parse("a: int64; b: float[3]; c: bytes = \"\"; d: var(int64)");
  REQUIRE(fs.ok());
  CHECK(fs->to_string() == "a: int64; b: float32[3]; c: string = \"\"; d: var(int64)");
}

TEST_CASE("fixed-length defaults: scalar repeated, full value, missing or empty feature") {
  auto spec =
    FeatureSpec::parse("a: int64[3] = 7; b: float32[2] = [0.5, 1.5]; c: string[2] = \"z\"");
  REQUIRE(spec.ok());
  // Absent features, and an empty list for `a`, all take their defaults.
  std::string record = one_example({{"a", Tensor{DType::int64, {0}}}});
  auto e = parse_example(record, *spec);
  REQUIRE(e.ok());
  CHECK(e->to_string() == "([7, 7, 7], [0.5, 1.5], [\"z\", \"z\"])");
  record = one_example(
    {{"a", Tensor::vector<int64_t>({1, 2, 3})}, {"c", Tensor::vector<std::string>({"p", "q"})}});
  e = parse_example(record, *spec);
  REQUIRE(e.ok());
  CHECK(e->to_string() == "([1, 2, 3], [0.5, 1.5], [\"p\", \"q\"])");
  // An int literal is a fine default for a float feature.
  auto f = FeatureSpec::parse("x: float32 = 2");
  REQUIRE(f.ok());
  CHECK(f->to_string() == "x: float32 = 2.0");
}

TEST_CASE("errors name the feature and what was expected") {
  const std::string record = one_example({{"ints", Tensor::vector<int64_t>({1, 2, 3})},
                                          {"floats", Tensor::vector<float>({0.5f})},
                                          {"strs", Tensor::vector<std::string>({"a"})}});
  Status st = parse_error(record, "missing: int64");
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message() == "parse_example: feature `missing` (int64) is required (it has no default) "
                        "but the record does not have it");
  st = parse_error(record, "ints: float32[3]");
  CHECK(st.message() == "parse_example: feature `ints` (float32[3]) expects a float_list, the "
                        "record has an int64_list");
  st = parse_error(record, "strs: var(int64)");
  CHECK(st.message() == "parse_example: feature `strs` (var(int64)) expects an int64_list, the "
                        "record has a bytes_list");
  st = parse_error(record, "ints: int64[2]");
  CHECK(
    st.message() ==
    "parse_example: feature `ints` (int64[2]) needs 2 value(s) for shape [2], the record has 3");
  st = parse_error(record, "floats: float32[2, 2] = 0");
  CHECK(st.message() == "parse_example: feature `floats` (float32[2, 2]) needs 4 value(s) for "
                        "shape [2, 2], the record has 1");
  st = parse_error("\x0a\x05garbage", "ints: int64[3]");
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message() == "parse_example: a record of 9 bytes is not a serialized tf.train.Example");

  // Spec errors are definition errors: validate() reports them.
  struct Bad {
    const char* spec;
    const char* message;
  };
  for (const Bad& bad : std::vector<Bad>{
         {"a: int64; a: float32", "parse_example: feature `a` is listed twice"},
         {"a: int32",
          "parse_example: feature `a`: expected a dtype (int64, float32 or string), found `int32`"},
         {"a int64", "parse_example: feature spec, character 1: expected `NAME: DTYPE...`, found "
                     "`a int64` (no `:`)"},
         {"a: int64[2] = [1, 2, 3]", "parse_example: feature `a`: default_value has 3 value(s) of "
                                     "shape [3]; the feature's shape [2] needs 2 (or one scalar)"},
         {"a: string = 1", "parse_example: feature `a`: default_value must be a string for a "
                           "string feature, got int64"},
         {"a: int64[-1]", "parse_example: feature `a`: shape dimensions must be non-negative ints, "
                          "found `-1` in `[-1]`"},
         {"", "parse_example: the feature spec lists no features"},
       }) {
    CAPTURE(bad.spec);
    Status v =
      Dataset::from_tensors(Element{Tensor::scalar("x")}).parse_example(bad.spec).validate();
    CHECK(v.code() == ErrorCode::invalid_argument);
    CHECK(v.message() == bad.message);
  }
  // An input that is not a scalar string.
  auto got = collect(Dataset::range(2).parse_example("a: int64"));
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().message() == "parse_example: expects elements that are one scalar string (a "
                                  "serialized tf.train.Example), got "
                                  "TensorSpec(shape=(), dtype=int64)");
}

TEST_CASE("serialize_example and parse_example round trip - variable-length features") {
  const std::string r1 =
    one_example({{"v", Tensor::vector<float>({1.5f, -2.0f})}, {"s", Tensor::scalar("hello")}});
  const std::string r2 = one_example({{"s", Tensor::scalar(std::string("\0x", 2))}});
  Dataset ds = Dataset::from_tensor_slices(Element{Tensor::vector<std::string>({r1, r2})})
                 .parse_example("s: string; v: var(float32)");
  CHECK(show(ds) == "[(\"hello\", [1.5, -2.0]), (\"\\x00x\", float32([]))]");
  // A var-length batch is dense once padded.
  CHECK(show(ds.padded_batch(2, {}, {Tensor::scalar("?"), Tensor::scalar(-1.0f)})) ==
        "[([\"hello\", \"\\x00x\"], [[1.5, -2.0], [-1.0, -1.0]])]");
  auto bad = serialize_example({{"x", Tensor::scalar(int32_t{1})}});
  CHECK(bad.status().message() == "serialize_example: feature `x` has dtype int32; "
                                  "tf.train.Example holds int64, float32 or string");
}
