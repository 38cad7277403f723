#include "test/unit/textform/samples.hpp"

#include "pipeline/io/example.hpp"

namespace conveyor::textform_test {

namespace {

Tensor int64_matrix() {
  return std::move(Tensor::from_values<int64_t>({2, 2}, {1, 2, 3, 4})).value();
}

std::vector<Sample> make_samples() {
  Dataset r5 = Dataset::range(5);
  return {
    // sources
    {"range(10)", Dataset::range(10)},
    {"range(2, 10)", Dataset::range(2, 10)},
    {"range(0, 10, step=3)", Dataset::range(0, 10, 3)},
    {"range(5, -5, step=-2)", Dataset::range(5, -5, -2)},
    {"from_tensors((7, \"a\"))",
     Dataset::from_tensors(Element{{Tensor::scalar(int64_t{7}), Tensor::scalar("a")}})},
    {"from_tensors(float64(0.1))", Dataset::from_tensors(Element{Tensor::scalar(0.1)})},
    {"from_tensor_slices([[1, 2], [3, 4]])", Dataset::from_tensor_slices(Element{int64_matrix()})},
    {"from_tensor_slices((int32([1, 2, 3]), [\"x\", \"y\", \"z\"]))",
     Dataset::from_tensor_slices(Element{
       {Tensor::vector<int32_t>({1, 2, 3}), Tensor::vector<std::string>({"x", "y", "z"})}})},
    {"from_tensor_slices([0.5, -1.0, 1e+20])",
     Dataset::from_tensor_slices(Element{Tensor::vector<float>({0.5f, -1.0f, 1e20f})})},
    {"from_tensor_slices([true, false])",
     Dataset::from_tensor_slices(Element{Tensor::vector<bool>({true, false})})},
    {"from_tensor_slices(int64([]))",
     Dataset::from_tensor_slices(Element{Tensor{DType::int64, {0}}})},
    {"from_tensors(float32([], shape=[0, 3]))",
     Dataset::from_tensors(Element{Tensor{DType::float32, {0, 3}}})},
    {"list_files(\"/data/*.txt\")", Dataset::list_files("/data/*.txt")},
    {"list_files(\"/d/*\", shuffle=false, seed=7)", Dataset::list_files("/d/*", false, 7)},
    {"text_lines([\"a.txt\", \"b \\\"q\\\".txt\"])", Dataset::text_lines({"a.txt", "b \"q\".txt"})},
    {"tfrecord([\"x.tfrecord\"])", Dataset::tfrecord({"x.tfrecord"})},
    {"load(\"/no/snapshot/here\", wait=true)", Dataset::load("/no/snapshot/here", true)},
    {"csv([\"x.csv\"], [\"int64\", \"string\"], header=true, field_delim=\";\", select_cols=[0, "
     "2])",
     Dataset::csv({"x.csv"}, {"int64", "string"}, true, ";", "", {0, 2})},
    {"tfrecord([\"/d/*.tfrecord.gz\"], compression_type=\"GZIP\")",
     Dataset::tfrecord({"/d/*.tfrecord.gz"}, "GZIP")},
    {"text_lines([\"a.txt.z\"], compression_type=\"ZLIB\")",
     Dataset::text_lines({"a.txt.z"}, "ZLIB")},
    {"source(counter(stop=5))", Dataset::source(FunctionRef{"counter", {{"stop", int64_t{5}}}})},
    {"random()", Dataset::random()},
    {"webdataset([\"/d/*.tar\"], [\"jpg\", \"cls\"])",
     Dataset::webdataset({"/d/*.tar"}, {"jpg", "cls"})},
    {"random(seed=7).take(3)", Dataset::random(7).take(3)},
    {"range(2).concatenate(range(5, 7).map(square)).batch(2)",
     Dataset::range(2).concatenate(Dataset::range(5, 7).map("square")).batch(2)},
    {"zip(range(3), from_tensor_slices([\"a\", \"b\", \"c\"]))",
     Dataset::zip({Dataset::range(3), Dataset::from_tensor_slices(
                                        Element{Tensor::vector<std::string>({"a", "b", "c"})})})},
    // transforms, each with defaults and with every optional argument set
    {"range(5).map(square)", r5.map("square")},
    {"range(5).map(scale(factor=2.5), num_parallel_calls=AUTOTUNE, deterministic=false)",
     r5.map(FunctionRef{"scale", {{"factor", 2.5}}}, kAutotune, false)},
    {"range(5).map(f(b=true, i=-3, s=\"x\\ny\", x=1.0), num_parallel_calls=4)",
     r5.map(
       FunctionRef{"f", {{"b", true}, {"i", int64_t{-3}}, {"s", std::string{"x\ny"}}, {"x", 1.0}}},
       4)},
    {"range(5).filter(mod_eq(m=3, r=1))",
     r5.filter(FunctionRef{"mod_eq", {{"m", int64_t{3}}, {"r", int64_t{1}}}})},
    {"range(5).flat_map(range_fn)", r5.flat_map("range_fn")},
    {"range(5).interleave(range_fn)", r5.interleave("range_fn")},
    {"range(5).interleave(range_fn, cycle_length=2, block_length=3)",
     r5.interleave("range_fn", 2, 3)},
    {"range(5).batch(8)", r5.batch(8)},
    {"range(5).batch(8, drop_remainder=true)", r5.batch(8, true)},
    {"range(5).batch(2).unbatch()", r5.batch(2).unbatch()},
    {"range(5).padded_batch(2)", r5.padded_batch(2)},
    {"range(5).padded_batch(2, padded_shapes=[], padding_values=-1, drop_remainder=true)",
     r5.padded_batch(2, {{}}, {Tensor::scalar(int64_t{-1})}, true)},
    {"zip(range(5), range(5)).padded_batch(4, padded_shapes=([], [-1, 3]), padding_values=(0, "
     "2.5))",
     Dataset::zip({r5, r5}).padded_batch(4, {{}, {kUnknownDim, 3}},
                                         {Tensor::scalar(int64_t{0}), Tensor::scalar(2.5f)})},
    {"tfrecord([\"x.tfrecord\"]).parse_example(\"a: int64 = -1; b: float32[2, 3]; c: "
     "var(string)\")",
     Dataset::tfrecord({"x.tfrecord"})
       .parse_example(FeatureSpec{}
                        .fixed("a", DType::int64, {}, Tensor::scalar(int64_t{-1}))
                        .fixed("b", DType::float32, {2, 3})
                        .var_len("c", DType::string))},
    {"range(5).ignore_errors()", r5.ignore_errors()},
    {"range(5).ignore_errors(log_warning=true)", r5.ignore_errors(true)},
    {"list_files(\"/d/*\", shuffle=false).interleave(tfrecord, cycle_length=2)",
     Dataset::list_files("/d/*", false).interleave("tfrecord", 2)},
    {"list_files(\"/d/*\").interleave(text_lines(compression_type=\"GZIP\"))",
     Dataset::list_files("/d/*").interleave(
       FunctionRef{"text_lines", {{"compression_type", std::string{"GZIP"}}}})},
    {"range(5).shuffle(16)", r5.shuffle(16)},
    {"range(5).shuffle(16, seed=3, reshuffle_each_iteration=false)", r5.shuffle(16, 3, false)},
    {"range(5).repeat()", r5.repeat()},
    {"range(5).repeat(count=3)", r5.repeat(3)},
    {"range(5).take(5)", r5.take(5)},
    {"range(5).skip(2)", r5.skip(2)},
    {"range(5).shard(SHARD_HINT, SHARD_HINT)", r5.shard(kShardHint, kShardHint)},
    {"range(5).shard(4, 1)", r5.shard(4, 1)},
    {"range(5).enumerate()", r5.enumerate()},
    {"range(5).enumerate(start=10)", r5.enumerate(10)},
    {"range(5).prefetch()", r5.prefetch()},
    {"range(5).prefetch(buffer_size=4)", r5.prefetch(4)},
    {"range(5).cache()", r5.cache()},
    {"range(5).cache(filename=\"/tmp/c\")", r5.cache("/tmp/c")},
    // longer pipelines, including the examples of text_form.hpp
    {"range(100).map(square).shuffle(16, seed=3).batch(8)",
     Dataset::range(100).map("square").shuffle(16, 3).batch(8)},
    {"zip(range(3), from_tensor_slices([\"a\", \"b\", \"c\"])).map(scale(factor=2.5))",
     Dataset::zip({Dataset::range(3), Dataset::from_tensor_slices(
                                        Element{Tensor::vector<std::string>({"a", "b", "c"})})})
       .map(FunctionRef{"scale", {{"factor", 2.5}}})},
    {"zip(range(3).batch(2), zip(range(1), range(2))).prefetch()",
     Dataset::zip(
       {Dataset::range(3).batch(2), Dataset::zip({Dataset::range(1), Dataset::range(2)})})
       .prefetch()},
  };
}

} // namespace

const std::vector<Sample>& samples() {
  static const std::vector<Sample> all = make_samples();
  return all;
}

} // namespace conveyor::textform_test
