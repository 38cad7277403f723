#include <doctest/doctest.h>

#include "pipeline/tensor/tensor.hpp"

using namespace conveyor;

TEST_CASE("dtype names round-trip and unknown names are rejected") {
  for (DType d : kAllDTypes)
    CHECK(dtype_from_name(dtype_name(d)) == d);
  CHECK(std::string{dtype_name(DType::boolean)} == "bool");
  CHECK_FALSE(dtype_from_name("int128").has_value());
  CHECK_FALSE(dtype_from_name("half").has_value());
  CHECK(dtype_size(DType::boolean) == 1);
  CHECK(dtype_size(DType::int32) == 4);
  CHECK(dtype_size(DType::float64) == 8);
  CHECK(dtype_size(DType::string) == 0);
}

TEST_CASE("a default tensor is the int64 scalar 0") {
  Tensor t;
  CHECK(t.dtype() == DType::int64);
  CHECK(t.rank() == 0);
  CHECK(t.num_elements() == 1);
  CHECK(t.as_int64() == 0);
  CHECK(t.bytes().size() == 8); // its 8 inline bytes, set without allocate()
  CHECK(t == Tensor::scalar(int64_t{0}));
}

TEST_CASE("shaped tensors are zero-filled") {
  Tensor f{DType::float32, {2, 3}};
  CHECK(f.num_elements() == 6);
  CHECK(f.bytes().size() == 24);
  CHECK(f.byte_size() == 24);
  for (int64_t i = 0; i < 6; ++i)
    CHECK(f.at<float>(i) == 0.0f);
  Tensor s{DType::string, {2}};
  CHECK(s.strings() == std::vector<std::string>{"", ""});
  CHECK(s.bytes().empty());
  Tensor empty{DType::int64, {0, 5}};
  CHECK(empty.num_elements() == 0);
  CHECK(empty.bytes().empty());
}

TEST_CASE("scalars convert to int64 and double") {
  CHECK(Tensor::scalar(true).as_int64() == 1);
  CHECK(Tensor::scalar(false).as_double() == 0.0);
  CHECK(Tensor::scalar(int32_t{-7}).as_int64() == -7);
  CHECK(Tensor::scalar(int64_t{1} << 40).as_int64() == (int64_t{1} << 40));
  CHECK(Tensor::scalar(2.5f).as_double() == 2.5);
  CHECK(Tensor::scalar(2.75).as_int64() == 2);
  CHECK(Tensor::scalar(int32_t{3}).dtype() == DType::int32);
  CHECK(Tensor::scalar("hi").strings() == std::vector<std::string>{"hi"});
  CHECK(Tensor::scalar("hi").byte_size() == 2);
}

TEST_CASE("from_values checks the number of values against the shape") {
  auto ok = Tensor::from_values<int32_t>({2, 2}, {1, 2, 3, 4});
  REQUIRE(ok.ok());
  CHECK(ok->at<int32_t>(3) == 4);
  auto bad = Tensor::from_values<int64_t>({2, 2}, {1, 2, 3});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::invalid_argument);
  CHECK(bad.status().message() == "tensor of shape with 4 entries cannot take 3 values");
  auto flags = Tensor::from_values<bool>({3}, {true, false, true});
  REQUIRE(flags.ok());
  CHECK(flags->bytes() == std::vector<unsigned char>{1, 0, 1});
}

TEST_CASE("slice takes one row along dimension 0") {
  Tensor m = Tensor::from_values<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6}).value();
  Tensor row = m.slice(1);
  CHECK(row == Tensor::vector<int64_t>({3, 4}));
  CHECK(m.slice(2) == Tensor::vector<int64_t>({5, 6}));
  Tensor v = Tensor::vector<double>({0.5, 1.5});
  CHECK(v.slice(1) == Tensor::scalar(1.5));
  Tensor words = Tensor::from_values<std::string>({2, 2}, {"a", "b", "c", "d"}).value();
  CHECK(words.slice(1) == Tensor::vector<std::string>({"c", "d"}));
}

TEST_CASE("stack adds a leading dimension and inverts slice") {
  Tensor m = Tensor::from_values<float>({3, 2}, {1, 2, 3, 4, 5, 6}).value();
  auto stacked = Tensor::stack({m.slice(0), m.slice(1), m.slice(2)});
  REQUIRE(stacked.ok());
  CHECK(*stacked == m);

  auto scalars = Tensor::stack({Tensor::scalar("x"), Tensor::scalar("yz")});
  REQUIRE(scalars.ok());
  CHECK(scalars->shape() == Shape{2});
  CHECK(scalars->strings() == std::vector<std::string>{"x", "yz"});
}

TEST_CASE("stack rejects empty input and mismatched parts") {
  auto none = Tensor::stack({});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() == "stack: needs at least one tensor, got none");

  auto shapes =
    Tensor::stack({Tensor::vector<int64_t>({1, 2}), Tensor::vector<int64_t>({1, 2, 3})});
  REQUIRE_FALSE(shapes.ok());
  CHECK(shapes.status().code() == ErrorCode::invalid_argument);
  CHECK(shapes.status().message() == "stack: tensor 1 has dtype int64 and shape (3,), expected "
                                     "dtype int64 and shape (2,) like tensor 0");

  auto dtypes = Tensor::stack({Tensor::scalar(int64_t{1}), Tensor::scalar(1.0f)});
  REQUIRE_FALSE(dtypes.ok());
  CHECK(dtypes.status().message() == "stack: tensor 1 has dtype float32 and shape (), expected "
                                     "dtype int64 and shape () like tensor 0");
}
