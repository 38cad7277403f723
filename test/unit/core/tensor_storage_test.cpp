// Shared, immutable tensor storage: copies and slices share bytes, writes copy first, views keep
// their owner alive.
#include <doctest/doctest.h>

#include <memory>
#include <numeric>

#include "pipeline/tensor/tensor.hpp"

using namespace conveyor;

namespace {
Tensor big_ints(int64_t n) {
  std::vector<int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return Tensor::vector(v);
}
} // namespace

TEST_CASE("a copy shares the bytes - writing to one copies first (copy on write)") {
  Tensor a = big_ints(100);
  Tensor b = a;
  CHECK(a.bytes().data() == b.bytes().data());
  CHECK(a.shares_storage());
  b.mutable_data<int64_t>()[0] = 42;
  CHECK(a.at<int64_t>(0) == 0);
  CHECK(b.at<int64_t>(0) == 42);
  CHECK(a.bytes().data() != b.bytes().data());
  CHECK_FALSE(b.shares_storage());
}

TEST_CASE("small numeric tensors live inline") {
  Tensor a = Tensor::scalar(int64_t{7});
  CHECK_FALSE(a.shares_storage());
  Tensor b = a;
  b.mutable_data<int64_t>()[0] = 8;
  CHECK(a.as_int64() == 7);
  CHECK(b.as_int64() == 8);
}

TEST_CASE("a slice of a large tensor views its rows without copying") {
  auto m = Tensor::from_values<int64_t>(Shape{4, 8}, std::vector<int64_t>(32, 5));
  REQUIRE(m.ok());
  Tensor row = m->slice(2);
  CHECK(row.shape() == Shape{8});
  CHECK(row.bytes().data() == m->bytes().data() + 2 * 8 * sizeof(int64_t));
  Tensor kept = row;
  m = Tensor{}; // the parent goes away; the row keeps the storage alive
  CHECK(kept.at<int64_t>(7) == 5);
}

TEST_CASE("numeric and string views keep their owner alive and read the owner's bytes") {
  auto buf = std::make_shared<std::vector<char>>(64, 0);
  std::weak_ptr<std::vector<char>> watch = buf;
  for (std::size_t i = 0; i < 32; ++i)
    (*buf)[i] = static_cast<char>(i);
  std::memcpy(buf->data() + 32, "helloworld", 10);
  const auto* p = reinterpret_cast<const unsigned char*>(buf->data());
  Tensor n = Tensor::numeric_view(DType::int32, Shape{8}, buf, p, 32);
  Tensor s = Tensor::string_view_of(
    Shape{2}, buf, {std::string_view{buf->data() + 32, 5}, std::string_view{buf->data() + 37, 5}});
  buf.reset();
  CHECK_FALSE(watch.expired());
  CHECK(n.bytes().data() == p);
  CHECK(n.shares_storage());
  CHECK(s.string_at(1) == "world");
  CHECK(s.strings() == std::vector<std::string>{"hello", "world"}); // built on first use
  CHECK(s.byte_size() == 10);
  CHECK(s == Tensor::vector<std::string>({"hello", "world"}));
  Tensor s2 = s;
  s2.mutable_strings()[0] = "HELLO"; // writing detaches from the view
  CHECK(s.string_at(0) == "hello");
  CHECK(s2.string_at(0) == "HELLO");
  n = Tensor{};
  s = Tensor{};
  s2 = Tensor{};
  CHECK(watch.expired());
}

TEST_CASE("stack copies into fresh storage - string slices view their parent") {
  Tensor a = big_ints(10), b = big_ints(10);
  auto st = Tensor::stack({a, b});
  REQUIRE(st.ok());
  CHECK(st->shape() == Shape{2, 10});
  CHECK(st->slice(1) == b);
  Tensor strs = Tensor::vector<std::string>({"x", "yz", "w"});
  auto stacked = Tensor::stack({strs, strs});
  REQUIRE(stacked.ok());
  Tensor row = stacked->slice(1);
  CHECK(row == strs);
  CHECK(row.string_at(1).data() == stacked->string_at(4).data()); // no copy
}
