// FunctionRegistry checks and the behaviour of every built-in function.
#include <algorithm>
#include <chrono>

#include <doctest/doctest.h>

#include <cstring>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/functions/plugin_info.hpp"
#include "pipeline/functions/python_functions.hpp"

using namespace conveyor;

namespace {

const FunctionDef& builtin(const char* name) {
  const FunctionDef* def = FunctionRegistry::global().find(name);
  REQUIRE_MESSAGE(def != nullptr, "missing built-in ", name);
  return *def;
}

Element call_map(const char* name, const Element& e, Params params = {}) {
  FunctionRef ref{name, std::move(params)};
  auto out = builtin(name).map(e, FunctionRegistry::global().resolve_params(ref));
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return std::move(out).value();
}

Status map_error(const char* name, const Element& e, Params params = {}) {
  FunctionRef ref{name, std::move(params)};
  return builtin(name).map(e, FunctionRegistry::global().resolve_params(ref)).status();
}

bool call_predicate(const char* name, int64_t x, Params params = {}) {
  FunctionRef ref{name, std::move(params)};
  auto out = builtin(name).predicate(Element{Tensor::scalar(x)},
                                     FunctionRegistry::global().resolve_params(ref));
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return *out;
}

std::vector<int64_t> ints(const Dataset& d) {
  auto elements = d.collect(1000);
  REQUIRE_MESSAGE(elements.ok(), elements.status().to_string());
  std::vector<int64_t> out;
  for (const Element& e : *elements)
    out.push_back(e[0].as_int64());
  return out;
}

} // namespace

TEST_CASE("the global registry holds the built-ins, each documented") {
  const std::vector<std::string> expected = {
    "add",    "burn",          "bytes",       "counter",   "identity", "is_even",
    "mod_eq", "pixels",        "range_fn",    "repeat_fn", "scale",    "sleep_us",
    "square", "text_lines_fn", "tfrecord_fn", "to_string"};
  auto names = FunctionRegistry::global().names();
  for (const auto& n : expected) {
    CAPTURE(n);
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
    CHECK_FALSE(builtin(n.c_str()).doc.empty());
  }
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(builtin("square").kind == FunctionKind::map);
  CHECK(builtin("is_even").kind == FunctionKind::predicate);
  CHECK(builtin("range_fn").kind == FunctionKind::dataset);
  CHECK(builtin("counter").kind == FunctionKind::source);
}

TEST_CASE("add rejects duplicates and empty names") {
  FunctionRegistry r;
  FunctionDef d;
  d.name = "f";
  d.kind = FunctionKind::map;
  CHECK(r.add(d).ok());
  Status dup = r.add(d);
  CHECK(dup.code() == ErrorCode::already_exists);
  CHECK(dup.message() == "function `f` is already registered");
  d.name = "";
  CHECK(r.add(d).code() == ErrorCode::invalid_argument);
  CHECK(r.names() == std::vector<std::string>{"f"});
  CHECK(r.find("g") == nullptr);
}

TEST_CASE("check names the function, the kind and the parameter") {
  const FunctionRegistry& g = FunctionRegistry::global();
  CHECK(g.check("square", FunctionKind::map).ok());
  CHECK(g.check(FunctionRef{"scale", {{"factor", 0.5}}}, FunctionKind::map).ok());
  // An int is accepted for a float parameter, as in Python.
  CHECK(g.check(FunctionRef{"scale", {{"factor", int64_t{3}}}}, FunctionKind::map).ok());
  Status kind = g.check("counter", FunctionKind::map);
  CHECK(kind.code() == ErrorCode::invalid_argument);
  CHECK(kind.message() == "function `counter` is a source function, expected a map function");
  Status param = g.check(FunctionRef{"scale", {{"factor", true}}}, FunctionKind::map);
  CHECK(param.message() == "function `scale` parameter `factor` must be a float, got a bool");
  Status unknown = g.check("nope", FunctionKind::predicate);
  CHECK(unknown.code() == ErrorCode::not_found);
  // (the Python entries are registered in every build: their runtime may be missing, not the name)
  CHECK(unknown.message().rfind("unknown function `nope` (registered predicate functions: "
                                "is_even, mod_eq, python_filter). Functions beyond the built-in "
                                "ones come from plugins, loaded on every worker and the "
                                "dispatcher with `--plugin LIB.so`; plugins loaded here: ",
                                0) == 0);
  CHECK(FunctionRegistry{}
          .check("nope", FunctionKind::source)
          .message()
          .rfind("unknown function `nope` (registered source functions: none). ", 0) == 0);
}

TEST_CASE("describe_function names every parameter with its kind and default") {
  CHECK(describe_function(builtin("scale")) == "scale(factor: float = 2.0)");
  CHECK(describe_function(builtin("square")) == "square()");
  CHECK(describe_function(builtin("python")) ==
        "python(pickle: string = \"\", import: string = \"\", qualname: string = \"\", processes: "
        "int = 0, spec: string = \"\")");
}

TEST_CASE("a Python function without an installed runtime says the build has none") {
  if (python_runtime() != nullptr)
    return; // a binary with the embedded interpreter installed (not this one)
  auto mapped = builtin("python").map(Element{Tensor::scalar(int64_t{1})},
                                      Params{{"qualname", std::string{"double"}}});
  REQUIRE_FALSE(mapped.ok());
  CHECK(mapped.status().code() == ErrorCode::unimplemented);
  CHECK(mapped.status().message() ==
        "cannot run Python function `double`: this worker was built without Python functions "
        "(configure it with python3-dev and pybind11-dev installed)");
}

TEST_CASE("resolve_params fills defaults and widens ints to declared floats") {
  const FunctionRegistry& g = FunctionRegistry::global();
  CHECK(g.resolve_params("mod_eq") == Params{{"m", int64_t{2}}, {"r", int64_t{0}}});
  CHECK(g.resolve_params(FunctionRef{"mod_eq", {{"r", int64_t{1}}}}) ==
        Params{{"m", int64_t{2}}, {"r", int64_t{1}}});
  CHECK(g.resolve_params(FunctionRef{"scale", {{"factor", int64_t{3}}}}) ==
        Params{{"factor", 3.0}});
  CHECK(g.resolve_params("square").empty());
}

TEST_CASE("numeric maps work component-wise and wrap like TensorFlow") {
  Element e{{Tensor::vector<int32_t>({-3, 4}), Tensor::scalar(1.5)}};
  CHECK(call_map("square", e) == Element{{Tensor::vector<int32_t>({9, 16}), Tensor::scalar(2.25)}});
  CHECK(call_map("add", e, {{"k", int64_t{10}}}) ==
        Element{{Tensor::vector<int32_t>({7, 14}), Tensor::scalar(11.5)}});
  CHECK(call_map("add", e) == Element{{Tensor::vector<int32_t>({-2, 5}), Tensor::scalar(2.5)}});
  CHECK(call_map("identity", e) == e);
  // int64 overflow wraps instead of being undefined behaviour.
  CHECK(call_map("square", Element{Tensor::scalar(int64_t{1} << 32)}) ==
        Element{Tensor::scalar(int64_t{0})});
  CHECK(call_map("add", Element{Tensor::scalar(INT64_MAX)}) == Element{Tensor::scalar(INT64_MIN)});
  Status st = map_error("square", Element{{Tensor::scalar(int64_t{1}), Tensor::scalar("x")}});
  CHECK(st.message() ==
        "square: component 1 has dtype string, expected a numeric dtype (an integer, float or "
        "complex)");
  CHECK(map_error("add", Element{Tensor::scalar(true)}).code() == ErrorCode::invalid_argument);
}

TEST_CASE("scale makes floats - integers become float32") {
  CHECK(call_map("scale", Element{Tensor::vector<int64_t>({1, 2})}) ==
        Element{Tensor::vector<float>({2.0f, 4.0f})});
  CHECK(call_map("scale", Element{Tensor::scalar(0.25)}, {{"factor", 4.0}}) ==
        Element{Tensor::scalar(1.0)});
  CHECK(call_map("scale", Element{Tensor::scalar(3.0f)}, {{"factor", int64_t{-1}}}) ==
        Element{Tensor::scalar(-3.0f)});
}

TEST_CASE("to_string prints numbers in decimal") {
  Element e{{Tensor::scalar(int64_t{-42}), Tensor::scalar(0.1), Tensor::scalar(2.5f),
             Tensor::scalar(true), Tensor::vector<int32_t>({7, 8})}};
  Element s = call_map("to_string", e);
  CHECK(s == Element{{Tensor::scalar("-42"), Tensor::scalar("0.1"), Tensor::scalar("2.5"),
                      Tensor::scalar("true"), Tensor::vector<std::string>({"7", "8"})}});
  CHECK(map_error("to_string", Element{Tensor::scalar("x")}).message() ==
        "to_string: component 0 is already a string, expected a numeric or bool dtype");
}

TEST_CASE("bytes is deterministic and sized") {
  Element a = call_map("bytes", Element{Tensor::scalar(int64_t{7})}, {{"size", int64_t{37}}});
  Element b = call_map("bytes", Element{Tensor::scalar(int64_t{7})}, {{"size", int64_t{37}}});
  Element c = call_map("bytes", Element{Tensor::scalar(int64_t{8})}, {{"size", int64_t{37}}});
  REQUIRE(a.size() == 1);
  CHECK(a[0].dtype() == DType::string);
  CHECK(a[0].rank() == 0);
  CHECK(a[0].strings()[0].size() == 37);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(call_map("bytes", Element{Tensor::scalar(int32_t{1})})[0].byte_size() == 1024);
  CHECK(
    call_map("bytes", Element{Tensor::scalar(int64_t{1})}, {{"size", int64_t{0}}})[0].byte_size() ==
    0);
  CHECK(
    map_error("bytes", Element{Tensor::scalar(int64_t{1})}, {{"size", int64_t{-1}}}).message() ==
    "bytes: `size` must be >= 0, got -1");
  CHECK(map_error("bytes", Element{Tensor::scalar(1.0)}).message() ==
        "bytes: component 0 must be an integer scalar, got float64 of rank 0");
}

TEST_CASE("pixels is bytes as a uint8 tensor of shape (size,), which its spec says") {
  Element a = call_map("pixels", Element{Tensor::scalar(int64_t{7})}, {{"size", int64_t{37}}});
  Element s = call_map("bytes", Element{Tensor::scalar(int64_t{7})}, {{"size", int64_t{37}}});
  REQUIRE(a.size() == 1);
  CHECK(a[0].dtype() == DType::uint8);
  CHECK(a[0].shape() == Shape{37});
  CHECK(a[0].byte_size() == 37);
  CHECK(std::memcmp(a[0].data<uint8_t>(), s[0].strings()[0].data(), 37) == 0); // the same bytes
  CHECK(
    map_error("pixels", Element{Tensor::scalar(int64_t{1})}, {{"size", int64_t{-1}}}).message() ==
    "pixels: `size` must be >= 0, got -1");
  auto spec = Dataset::range(3).map(FunctionRef("pixels", {{"size", int64_t{37}}})).element_spec();
  REQUIRE(spec.ok());
  CHECK(spec->to_string() == "TensorSpec(shape=(37,), dtype=uint8)");
}

TEST_CASE("sleep_us returns its element after sleeping") {
  Element e{Tensor::scalar(int64_t{5})};
  auto start = std::chrono::steady_clock::now();
  CHECK(call_map("sleep_us", e, {{"us", int64_t{3000}}}) == e);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::microseconds{3000});
  CHECK(map_error("sleep_us", e, {{"us", int64_t{-1}}}).code() == ErrorCode::invalid_argument);
}

TEST_CASE("burn returns its element after a fixed amount of work, more rounds taking longer") {
  Element e{Tensor::scalar(int64_t{5})};
  CHECK(call_map("burn", e, {{"rounds", int64_t{0}}}) == e);
  const auto time_of = [&](int64_t rounds) {
    auto start = std::chrono::steady_clock::now();
    CHECK(call_map("burn", e, {{"rounds", rounds}}) == e);
    return std::chrono::steady_clock::now() - start;
  };
  // The loop is not optimized away: 100x the rounds takes longer (by far; 10x leaves room for noise).
  const auto small = time_of(20000);
  const auto large = time_of(2000000);
  CHECK(large > 10 * small);
  CHECK(map_error("burn", e, {{"rounds", int64_t{-1}}}).message() ==
        "burn: `rounds` must be >= 0, got -1");
}

TEST_CASE("predicates use Python's modulo") {
  CHECK(call_predicate("is_even", 4));
  CHECK_FALSE(call_predicate("is_even", 7));
  CHECK(call_predicate("is_even", -2));
  CHECK(call_predicate("mod_eq", 7, {{"m", int64_t{3}}, {"r", int64_t{1}}}));
  CHECK(
    call_predicate("mod_eq", -3, {{"m", int64_t{2}}, {"r", int64_t{1}}})); // -3 % 2 == 1 in Python
  CHECK(call_predicate("mod_eq", INT64_MIN, {{"m", int64_t{-1}}, {"r", int64_t{0}}}));
  auto zero = builtin("mod_eq").predicate(Element{Tensor::scalar(int64_t{1})},
                                          Params{{"m", int64_t{0}}, {"r", int64_t{0}}});
  CHECK(zero.status().message() == "mod_eq: `m` must not be 0");
  auto vec = builtin("is_even").predicate(Element{Tensor::vector<int64_t>({1})}, Params{});
  CHECK(vec.status().message() ==
        "is_even: component 0 must be an integer scalar, got int64 of rank 1");
}

TEST_CASE("built-ins run inside pipelines") {
  CHECK(ints(Dataset::range(5).map("square")) == std::vector<int64_t>{0, 1, 4, 9, 16});
  CHECK(ints(Dataset::range(10).filter("is_even")) == std::vector<int64_t>{0, 2, 4, 6, 8});
  CHECK(ints(Dataset::range(10).filter(FunctionRef{
          "mod_eq", {{"m", int64_t{3}}, {"r", int64_t{2}}}})) == std::vector<int64_t>{2, 5, 8});
  CHECK(ints(Dataset::range(4).flat_map("range_fn")) == std::vector<int64_t>{0, 0, 1, 0, 1, 2});
  CHECK(ints(Dataset::range(3).flat_map(FunctionRef{"repeat_fn", {{"count", int64_t{3}}}})) ==
        std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2});
  CHECK(
    ints(Dataset::source(FunctionRef{"counter", {{"start", int64_t{2}}, {"stop", int64_t{5}}}})) ==
    std::vector<int64_t>{2, 3, 4});
  CHECK(ints(Dataset::source("counter")).size() == 10);
}

TEST_CASE("collect refuses infinite datasets without a limit") {
  auto all = Dataset::range(3).repeat().collect();
  REQUIRE_FALSE(all.ok());
  CHECK(all.status().message() == "collect: the dataset is infinite; pass a `limit` >= 0");
  auto some = Dataset::range(3).repeat().collect(7);
  REQUIRE(some.ok());
  CHECK(some->size() == 7);
  auto invalid = Dataset::range(3).batch(0).collect();
  CHECK(invalid.status().message() == "batch: `batch_size` must be > 0, got 0");
}
