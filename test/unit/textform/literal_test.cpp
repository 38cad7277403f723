// Tensor and Element literals: exact printed forms, and parse_element giving back exactly the
// same tensors (dtype, shape and bits).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "pipeline/graph/text_form.hpp"

using namespace conveyor;

namespace {

template <class T>
Tensor tensor(Shape shape, std::vector<T> values) {
  return std::move(Tensor::from_values<T>(std::move(shape), values)).value();
}

Element parse_ok(const std::string& text) {
  auto e = parse_element(text);
  REQUIRE_MESSAGE(e.ok(), text, " -> ", e.status().to_string());
  return std::move(e).value();
}

void check_round_trip(const Tensor& t) {
  std::string text = t.to_string();
  CAPTURE(text);
  Element back = parse_ok(text);
  REQUIRE(back.size() == 1);
  CHECK(back[0].dtype() == t.dtype());
  CHECK(back[0].shape() == t.shape());
  CHECK(back[0] == t); // byte for byte
}

} // namespace

TEST_CASE("scalars print like tf.constant literals - other dtypes carry a cast") {
  CHECK(Tensor::scalar(int64_t{3}).to_string() == "3");
  CHECK(Tensor::scalar(int64_t{-7}).to_string() == "-7");
  CHECK(Tensor::scalar(2.5f).to_string() == "2.5");
  CHECK(Tensor::scalar(3.0f).to_string() == "3.0");
  CHECK(Tensor::scalar(0.1f).to_string() == "0.1");
  CHECK(Tensor::scalar(1e20f).to_string() == "1e+20");
  CHECK(Tensor::scalar(-0.0f).to_string() == "-0.0");
  CHECK(Tensor::scalar(std::numeric_limits<float>::infinity()).to_string() == "inf");
  CHECK(Tensor::scalar(-std::numeric_limits<float>::infinity()).to_string() == "-inf");
  CHECK(Tensor::scalar(std::numeric_limits<float>::quiet_NaN()).to_string() == "nan");
  CHECK(Tensor::scalar(true).to_string() == "true");
  CHECK(Tensor::scalar(false).to_string() == "false");
  CHECK(Tensor::scalar("a\"b").to_string() == R"("a\"b")");
  CHECK(Tensor::scalar(int32_t{3}).to_string() == "int32(3)");
  CHECK(Tensor::scalar(0.5).to_string() == "float64(0.5)");
  CHECK(Tensor::scalar(0.1).to_string() == "float64(0.1)");
  CHECK(Tensor::scalar(2.0).to_string() == "float64(2.0)");
}

TEST_CASE("strings escape quotes, backslashes and control bytes, and keep UTF-8") {
  CHECK(Tensor::scalar(std::string{"back\\slash"}).to_string() == R"("back\\slash")");
  CHECK(Tensor::scalar(std::string{"l1\nl2\tt\rr"}).to_string() == R"("l1\nl2\tt\rr")");
  CHECK(Tensor::scalar(std::string{"\x01\x7f", 2}).to_string() == R"("\x01\x7f")");
  CHECK(Tensor::scalar(std::string{"nul\0byte", 8}).to_string() == R"("nul\x00byte")");
  CHECK(Tensor::scalar(std::string{"héllo"}).to_string() == "\"héllo\"");
  CHECK(Tensor::scalar(std::string{}).to_string() == R"("")");
}

TEST_CASE("rank >= 1 prints as nested lists, row-major") {
  CHECK(Tensor::vector<int64_t>({1, 2, 3}).to_string() == "[1, 2, 3]");
  CHECK(tensor<int64_t>({2, 2}, {1, 2, 3, 4}).to_string() == "[[1, 2], [3, 4]]");
  CHECK(tensor<int32_t>({2, 1, 2}, {1, 2, 3, 4}).to_string() == "int32([[[1, 2]], [[3, 4]]])");
  CHECK(Tensor::vector<std::string>({"a", "b"}).to_string() == R"(["a", "b"])");
  CHECK(Tensor::vector<bool>({true, false}).to_string() == "[true, false]");
  CHECK(Tensor::vector<double>({0.5, 1.0}).to_string() == "float64([0.5, 1.0])");
  CHECK(Tensor::vector<float>({1.0f, 2.5f}).to_string() == "[1.0, 2.5]");
}

TEST_CASE(
  "tensors without entries always carry their dtype, and their shape when the lists lose it") {
  CHECK((Tensor{DType::int64, {0}}).to_string() == "int64([])");
  CHECK((Tensor{DType::float32, {0}}).to_string() == "float32([])");
  CHECK((Tensor{DType::string, {2, 0}}).to_string() == "string([[], []])");
  CHECK((Tensor{DType::boolean, {0, 3}}).to_string() == "bool([], shape=[0, 3])");
  CHECK((Tensor{DType::int32, {2, 0, 3}}).to_string() == "int32([[], []], shape=[2, 0, 3])");
}

TEST_CASE("an element of several components prints as a tuple") {
  CHECK(Element{Tensor::scalar(int64_t{0})}.to_string() == "0");
  CHECK(Element{{Tensor::scalar(int64_t{0}), Tensor::scalar("a")}}.to_string() == R"((0, "a"))");
  CHECK(Element{}.to_string() == "()");
}

TEST_CASE("printed tensors parse back to exactly the same tensor") {
  std::vector<Tensor> tensors = {
    Tensor::scalar(int64_t{0}),
    Tensor::scalar(std::numeric_limits<int64_t>::min()),
    Tensor::scalar(std::numeric_limits<int64_t>::max()),
    Tensor::scalar(std::numeric_limits<int32_t>::min()),
    Tensor::scalar(std::numeric_limits<int32_t>::max()),
    Tensor::scalar(std::numeric_limits<float>::denorm_min()),
    Tensor::scalar(std::numeric_limits<float>::max()),
    Tensor::scalar(std::numeric_limits<float>::lowest()),
    Tensor::scalar(std::numeric_limits<double>::denorm_min()),
    Tensor::scalar(std::numeric_limits<double>::max()),
    Tensor::scalar(-0.0f),
    Tensor::scalar(-0.0),
    Tensor::scalar(std::numeric_limits<float>::infinity()),
    Tensor::scalar(-std::numeric_limits<double>::infinity()),
    Tensor::scalar(std::numeric_limits<float>::quiet_NaN()),
    Tensor::scalar(-std::numeric_limits<double>::quiet_NaN()),
    Tensor::scalar(
      std::string{"controls \x01\x02\t\n\r, quote \", backslash \\, high \x7f\x80\xff"}),
    Tensor::scalar(std::string{"\0", 1}),
    Tensor::vector<bool>({false, true, true}),
    tensor<double>({3, 1}, {1.0 / 3, 2e-300, -7.0}),
    Tensor{DType::int64, {0}},
    Tensor{DType::string, {0}},
    Tensor{DType::float64, {3, 0}},
    Tensor{DType::boolean, {0, 2}},
    Tensor{DType::int32, {1, 0, 4}},
    Tensor{DType::float32, {2, 3, 0}},
  };
  for (const Tensor& t : tensors)
    check_round_trip(t);
}

TEST_CASE("random float and double bit patterns round-trip through the text form") {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    auto low = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &low, sizeof f);
    // A NaN keeps only its sign in the text form (documented), so only standard NaNs are checked.
    if (std::isnan(d))
      d = std::numeric_limits<double>::quiet_NaN();
    if (std::isnan(f))
      f = std::numeric_limits<float>::quiet_NaN();
    check_round_trip(Tensor::scalar(d));
    check_round_trip(Tensor::scalar(f));
  }
}

TEST_CASE("bare literals take tf.constant's default dtypes") {
  CHECK(parse_ok("3") == Element{Tensor::scalar(int64_t{3})});
  CHECK(parse_ok("2.5") == Element{Tensor::scalar(2.5f)});
  CHECK(parse_ok("1e3") == Element{Tensor::scalar(1000.0f)});
  CHECK(parse_ok("[1, 2.5]") == Element{Tensor::vector<float>({1.0f, 2.5f})});
  CHECK(parse_ok("[]") == Element{Tensor{DType::float32, {0}}});
  CHECK(parse_ok("'single'") == Element{Tensor::scalar("single")});
  CHECK(parse_ok(R"("\x41\0\'")") == Element{Tensor::scalar(std::string{"A\0'", 3})});
  CHECK(parse_ok("-inf") == Element{Tensor::scalar(-std::numeric_limits<float>::infinity())});
  CHECK(parse_ok("float64(1)") == Element{Tensor::scalar(1.0)});
}

TEST_CASE("tuples give several components - parentheses alone do not") {
  CHECK(parse_ok("(1, \"a\")") == Element{{Tensor::scalar(int64_t{1}), Tensor::scalar("a")}});
  CHECK(parse_ok("(1,)") == Element{Tensor::scalar(int64_t{1})});
  CHECK(parse_ok("(1)") == Element{Tensor::scalar(int64_t{1})});
  CHECK(parse_ok("()") == Element{});
  CHECK(parse_ok("(int32(1), [true], string([]))") ==
        Element{
          {Tensor::scalar(int32_t{1}), Tensor::vector<bool>({true}), Tensor{DType::string, {0}}}});
}
