// padded_batch (tf.data's documented examples and more) and ignore_errors.
#include <doctest/doctest.h>

#include <mutex>

#include "pipeline/io/example.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/tfrecord.hpp"
#include "pipeline/runtime/warnings.hpp"
#include "test/unit/formats/formats_util.hpp"

using namespace conveyor;
using namespace conveyor::formats_test;

namespace {

// fill: x -> tf.fill([x], x); grid: x -> an x-by-(4 - x) int64 matrix of x.
const FunctionRegistry& test_functions() {
  static FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    FunctionDef fill;
    fill.name = "fill";
    fill.kind = FunctionKind::map;
    fill.map = [](const Element& e, const Params&) -> Expected<Element> {
      const int64_t x = e[0].as_int64();
      return Element{Tensor::vector<int64_t>(std::vector<int64_t>(static_cast<std::size_t>(x), x))};
    };
    REQUIRE(r->add(fill).ok());
    FunctionDef grid;
    grid.name = "grid";
    grid.kind = FunctionKind::map;
    grid.map = [](const Element& e, const Params&) -> Expected<Element> {
      const int64_t x = e[0].as_int64();
      return Element{
        std::move(Tensor::from_values<int64_t>(
                    {x, 4 - x}, std::vector<int64_t>(static_cast<std::size_t>(x * (4 - x)), x)))
          .value()};
    };
    REQUIRE(r->add(grid).ok());
    // fail_odd: x -> x, or an error for odd x.
    FunctionDef fail_odd;
    fail_odd.name = "fail_odd";
    fail_odd.kind = FunctionKind::map;
    fail_odd.map = [](const Element& e, const Params&) -> Expected<Element> {
      if (e[0].as_int64() % 2 != 0)
        return invalid_argument("odd " + std::to_string(e[0].as_int64()));
      return e;
    };
    REQUIRE(r->add(fail_odd).ok());
    // scripted: yields 1, fails, is `unavailable` once, yields 2, fails, ends.
    FunctionDef scripted;
    scripted.name = "scripted";
    scripted.kind = FunctionKind::source;
    scripted.source = [](const Params&) -> Expected<std::unique_ptr<Iterator>> {
      struct It : Iterator {
        int step = 0;
        Status get_next(Element& out, bool& end) override {
          end = false;
          switch (step++) {
            case 0: out = Element{Tensor::scalar(int64_t{1})}; return Status::OK();
            case 1: return data_loss("bad record A");
            case 2: return Status{ErrorCode::unavailable, "split not here yet"};
            case 3: out = Element{Tensor::scalar(int64_t{2})}; return Status::OK();
            case 4: return data_loss("bad record B");
            default: end = true; return Status::OK();
          }
        }
      };
      return std::unique_ptr<Iterator>(new It);
    };
    REQUIRE(r->add(scripted).ok());
    return r;
  }();
  return *registry;
}

std::string run(const Dataset& ds) { return show(ds, &test_functions()); }

// Captures pipeline warnings while alive.
struct Warnings {
  std::mutex mu;
  std::vector<std::string> lines;
  Warnings() {
    set_pipeline_warning_handler([this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(m);
    });
  }
  ~Warnings() { set_pipeline_warning_handler({}); }
};

} // namespace

TEST_CASE("padded_batch: tf.data's documented examples") {
  Dataset a = Dataset::range(1, 5).map("fill");
  // Pad to the smallest per-batch size that fits all elements.
  CHECK(run(a.padded_batch(2)) == "[[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]");
  // Pad to a fixed size.
  CHECK(run(a.padded_batch(2, {{5}})) ==
        "[[[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]], [[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]]]");
  // Pad with a custom value.
  CHECK(run(a.padded_batch(2, {{5}}, {Tensor::scalar(int64_t{-1})})) ==
        "[[[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]], [[3, 3, 3, -1, -1], [4, 4, 4, 4, -1]]]");
  // Components of nested elements padded independently, in the text form too.
  auto parsed = parse_dataset("zip(range(1, 4).map(fill), range(1, 4).map(grid)).padded_batch(2, "
                              "padded_shapes=([-1], [3, -1]), padding_values=(-1, 9))");
  REQUIRE(parsed.ok());
  CHECK(
    run(*parsed) ==
    "[([[1, -1], [2, 2]], [[[1, 1, 1], [9, 9, 9], [9, 9, 9]], [[2, 2, 9], [2, 2, 9], [9, 9, 9]]]), "
    "([[3, 3, 3]], [[[3], [3], [3]]])]");
  CHECK(*parsed ==
        Dataset::zip({Dataset::range(1, 4).map("fill"), Dataset::range(1, 4).map("grid")})
          .padded_batch(2, {{kUnknownDim}, {3, kUnknownDim}},
                        {Tensor::scalar(int64_t{-1}), Tensor::scalar(int64_t{9})}));
}

TEST_CASE("padded_batch: drop_remainder, dtypes, strings, scalars, spec and cardinality") {
  Dataset a = Dataset::range(1, 6).map("fill");
  CHECK(run(a.padded_batch(2, {}, {}, true)) == "[[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]");
  CHECK(a.padded_batch(2, {}, {}, true).cardinality(&test_functions()) == 2);
  CHECK(a.padded_batch(2).cardinality(&test_functions()) == 3);
  // A float padding value for int64 converts; strings pad strings; scalars just stack.
  CHECK(run(Dataset::range(1, 3).map("fill").padded_batch(2, {}, {Tensor::scalar(7.0f)})) ==
        "[[[1, 7], [2, 2]]]");
  Dataset strings =
    Dataset::from_tensor_slices(Element{Tensor::vector<std::string>({"a", "b"})}).batch(1);
  CHECK(run(Dataset::zip({strings, Dataset::range(2)})
              .padded_batch(2, {{3}, {}}, {Tensor::scalar("-"), Tensor::scalar(int64_t{0})})) ==
        "[([[\"a\", \"-\", \"-\"], [\"b\", \"-\", \"-\"]], [0, 1])]");
  // element_spec: padded dims, None where -1 or not given, batch dim by drop_remainder.
  Dataset spec_ds = Dataset::zip({Dataset::range(3).batch(2), Dataset::range(3)});
  auto spec = spec_ds.padded_batch(4, {{5}, {}}, {}, true).element_spec();
  REQUIRE(spec.ok());
  CHECK(spec->to_string() ==
        "(TensorSpec(shape=(4, 5), dtype=int64), TensorSpec(shape=(4,), dtype=int64))");
  spec = spec_ds.padded_batch(4).element_spec();
  REQUIRE(spec.ok());
  CHECK(spec->to_string() ==
        "(TensorSpec(shape=(None, None), dtype=int64), TensorSpec(shape=(None,), dtype=int64))");
}

TEST_CASE("padded_batch errors name the component and dimension") {
  Dataset a = Dataset::range(1, 5).map("fill");
  auto too_big = collect(a.padded_batch(2, {{3}}), &test_functions());
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.status().message() ==
        "padded_batch: component 0: dimension 0 is 4 in this batch, larger than its padded size 3");
  Status st = Dataset::range(3).padded_batch(2, {{2}}).validate();
  CHECK(st.ok()); // the shape check needs the input's spec: element_spec() and iteration report it
  auto spec = Dataset::range(3).padded_batch(2, {{2}}).element_spec();
  CHECK(spec.status().message() ==
        "padded_batch: component 0 has rank 0 but its padded shape has rank 1");
  spec = Dataset::range(3).padded_batch(2, {}, {Tensor::scalar("x")}).element_spec();
  CHECK(spec.status().message() ==
        "padded_batch: component 0 of dtype int64 cannot be padded with a string value");
  st = Dataset::range(3).padded_batch(2, {{-2}}).validate();
  CHECK(st.message() == "padded_batch: `padded_shapes` component 0 has dimension -2; dimensions "
                        "are >= 0, or -1 to pad to the longest in the batch");
  st = Dataset::range(3).padded_batch(0).validate();
  CHECK(st.message() == "padded_batch: `batch_size` must be > 0, got 0");
  auto parsed = parse_dataset("range(3).padded_batch(2, padding_values=[1, 2])");
  REQUIRE(parsed.ok());
  CHECK(parsed->validate().message() ==
        "padded_batch: `padding_values` component 0 must be a scalar, got [1, 2]");
}

TEST_CASE(
  "ignore_errors drops failed elements, reports the count, and passes `unavailable` through") {
  {
    Warnings warnings;
    CHECK(run(Dataset::range(7).map("fail_odd").ignore_errors()) == "[0, 2, 4, 6]");
    REQUIRE(warnings.lines.size() == 1);
    CHECK(warnings.lines[0] ==
          "ignore_errors: dropped 3 element(s) whose production failed (3 in all); first error: "
          "invalid_argument: map function `fail_odd` on element 1: odd 1");
  }
  {
    Warnings warnings;
    CHECK(run(Dataset::range(4).map("fail_odd").ignore_errors(true)) == "[0, 2]");
    CHECK(warnings.lines.size() == 3); // each error, then the count
  }
  {
    // The resumability contract: `unavailable` is returned, and the next call goes on.
    Warnings warnings;
    IteratorContext ctx;
    ctx.functions = &test_functions();
    auto it = Dataset::source("scripted").ignore_errors().make_iterator(ctx);
    REQUIRE(it.ok());
    Element e;
    bool end = false;
    REQUIRE((*it)->get_next(e, end).ok());
    CHECK(e.to_string() == "1");
    Status st = (*it)->get_next(e, end);
    CHECK(st.code() == ErrorCode::unavailable);
    REQUIRE((*it)->get_next(e, end).ok());
    CHECK(e.to_string() == "2");
    REQUIRE((*it)->get_next(e, end).ok());
    CHECK(end);
    REQUIRE(warnings.lines.size() == 1);
    CHECK(warnings.lines[0].find("ignore_errors: dropped 2 element(s)") == 0);
  }
  CHECK(Dataset::range(5).ignore_errors().cardinality() == kUnknownCardinality);
  CHECK(Dataset::range(5).repeat().ignore_errors().cardinality() == kInfiniteCardinality);
}

TEST_CASE("ignore_errors skips bad records and a corrupt file in real TFRecord input") {
  ScratchDir dir;
  const std::string good = read_bytes(fixture("raw-0.tfrecord"));
  std::string corrupt = read_bytes(fixture("raw-1.tfrecord"));
  corrupt[21 + 12 + 2] ^= 0x20; // payload of record 1 ("f1-r1"; record 0 is 12 + 5 + 4 bytes)
  write_bytes(dir.file("a.tfrecord"), good);
  write_bytes(dir.file("b.tfrecord"), corrupt);
  write_bytes(dir.file("c.tfrecord"), read_bytes(fixture("raw-2.tfrecord")));
  Dataset ds = Dataset::tfrecord({dir.file("*.tfrecord")});
  auto failed = collect(ds);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == ErrorCode::data_loss);
  Warnings warnings;
  // The corrupt file ends at its bad record (f1-r0 read, f1-r1 and f1-r2 lost): one error.
  CHECK(show(ds.ignore_errors()) == "[\"f0-r0\", \"f0-r1\", \"f1-r0\", \"f2-r0\"]");
  REQUIRE(warnings.lines.size() == 1);
  CHECK(warnings.lines[0].find("dropped 1 element(s)") != std::string::npos);
  CHECK(warnings.lines[0].find("data crc mismatch") != std::string::npos);

  // Records that are not Examples are dropped after parse_example.
  auto ok = serialize_example({{"x", Tensor::scalar(int64_t{5})}});
  REQUIRE(ok.ok());
  Dataset mixed =
    Dataset::from_tensor_slices(Element{Tensor::vector<std::string>({*ok, "\xff\xff", *ok})})
      .parse_example("x: int64")
      .ignore_errors();
  CHECK(show(mixed) == "[5, 5]");
}
