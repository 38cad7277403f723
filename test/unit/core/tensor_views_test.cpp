// String tensors over someone else's storage (one entry held inline, many in a views block) and
// decoded numeric tensors in uninitialized storage: every accessor, copies, and the lazily built
// strings() cache under concurrent readers.
#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <vector>

#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/tensor.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

using namespace conveyor;

namespace {

// A buffer holding "hello" then "world", owned by a shared_ptr the tensors keep.
struct Buffer {
  std::shared_ptr<std::string> bytes = std::make_shared<std::string>("helloworld");
  std::string_view hello() const { return {bytes->data(), 5}; }
  std::string_view world() const { return {bytes->data() + 5, 5}; }
};

bool inside(std::string_view part, const std::string& whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

} // namespace

TEST_CASE("a one-entry string view answers every accessor from the viewed bytes") {
  Buffer buf;
  std::weak_ptr<std::string> watch = buf.bytes;
  Tensor s = Tensor::single_string_view(Shape{}, buf.bytes, buf.hello());
  CHECK(s.dtype() == DType::string);
  CHECK(s.shape() == Shape{});
  CHECK(s.num_elements() == 1);
  CHECK(s.string_at(0) == "hello");
  CHECK(s.string_at(0).data() == buf.bytes->data()); // no copy
  CHECK(s.byte_size() == 5);
  CHECK(s.bytes().empty());
  CHECK(s.shares_storage());
  CHECK(s.storage_owner() == buf.bytes);
  CHECK(s.to_string() == "\"hello\"");
  CHECK(s == Tensor::scalar("hello"));
  CHECK(s != Tensor::scalar("world"));
  CHECK(s.strings() == std::vector<std::string>{"hello"});
  CHECK(&s.strings() == &s.strings()); // built once
  buf.bytes.reset();
  CHECK_FALSE(watch.expired()); // the view keeps its owner
  CHECK(s.string_at(0) == "hello");
  s = Tensor{};
  CHECK(watch.expired());
}

TEST_CASE("string_view_of with one entry and a slice of one row take the one-view form") {
  Buffer buf;
  Tensor one = Tensor::string_view_of(Shape{1}, buf.bytes, {buf.world()});
  CHECK(one.shape() == Shape{1});
  CHECK(one.string_at(0) == "world");
  CHECK(one.byte_size() == 5);
  CHECK(one.to_string() == "[\"world\"]");
  CHECK(one == Tensor::vector<std::string>({"world"}));
  Tensor row = one.slice(0);
  CHECK(row.shape() == Shape{});
  CHECK(row.string_at(0).data() == buf.world().data());
  CHECK(row.storage_owner() == buf.bytes);
  Tensor owned = Tensor::vector<std::string>({"a", "bc"});
  Tensor owned_row = owned.slice(1);
  CHECK(owned_row.string_at(0) == "bc");
  CHECK(owned_row.string_at(0).data() == owned.string_at(1).data());
  owned = Tensor{};
  CHECK(owned_row.string_at(0) == "bc"); // the row keeps its parent's strings
}

TEST_CASE("copies of a one-entry view share it - strings() before and after a copy") {
  Buffer buf;
  Tensor a = Tensor::single_string_view(Shape{}, buf.bytes, buf.hello());
  Tensor before = a; // copied before any strings() call: each builds its own
  CHECK(before.strings() == std::vector<std::string>{"hello"});
  CHECK(a.strings() == std::vector<std::string>{"hello"});
  CHECK(&before.strings() != &a.strings());
  Tensor after = a; // copied after: shares the built cache
  CHECK(&after.strings() == &a.strings());
  Tensor assigned = Tensor::scalar(int64_t{1});
  assigned = a;
  CHECK(&assigned.strings() == &a.strings());
  CHECK(assigned == a);
  Tensor moved = std::move(after);
  CHECK(moved.string_at(0) == "hello");
  CHECK(moved.string_at(0).data() == buf.hello().data());
}

TEST_CASE("writing to a one-entry view detaches it from the viewed bytes") {
  Buffer buf;
  Tensor a = Tensor::single_string_view(Shape{}, buf.bytes, buf.hello());
  const std::vector<std::string>& built = a.strings();
  CHECK(built.size() == 1);
  Tensor b = a;
  b.mutable_strings()[0] = "HELLO";
  CHECK(b.string_at(0) == "HELLO");
  CHECK_FALSE(b.shares_storage());
  CHECK(b.strings() == std::vector<std::string>{"HELLO"});
  CHECK(a.string_at(0) == "hello");
  CHECK(a.strings() == std::vector<std::string>{"hello"});
  CHECK(*buf.bytes == "helloworld");
}

TEST_CASE("concurrent strings() and copies of one view agree on one cache") {
  Buffer buf;
  // Several rounds, each a fresh tensor whose cache the threads race to build.
  for (int round = 0; round < 20; ++round) {
    const Tensor s = Tensor::single_string_view(Shape{}, buf.bytes, buf.world());
    constexpr int kThreads = 4;
    std::vector<const std::vector<std::string>*> seen(kThreads, nullptr);
    std::vector<Tensor> copies(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        copies[static_cast<std::size_t>(i)] = s;
        seen[static_cast<std::size_t>(i)] = &s.strings();
      });
    for (auto& t : threads)
      t.join();
    for (int i = 0; i < kThreads; ++i) {
      CHECK(seen[static_cast<std::size_t>(i)] == &s.strings());
      CHECK(copies[static_cast<std::size_t>(i)].strings() == std::vector<std::string>{"world"});
    }
  }
}

TEST_CASE("a many-entry view keeps its views block - accessors, copies and strings()") {
  Buffer buf;
  Tensor m = Tensor::string_view_of(Shape{2}, buf.bytes, {buf.hello(), buf.world()});
  CHECK(m.num_elements() == 2);
  CHECK(m.string_at(1) == "world");
  CHECK(m.string_at(1).data() == buf.world().data());
  CHECK(m.byte_size() == 10);
  CHECK(m.bytes().empty());
  CHECK(m.shares_storage());
  CHECK(m.storage_owner() == buf.bytes);
  CHECK(m.to_string() == "[\"hello\", \"world\"]");
  Tensor copy = m; // copied before strings(): the block is shared, so is its cache
  CHECK(copy.strings() == std::vector<std::string>{"hello", "world"});
  CHECK(&copy.strings() == &m.strings());
  CHECK(copy == m);
  Tensor row = m.slice(0);
  CHECK(row.string_at(0).data() == buf.hello().data());
}

TEST_CASE("decoding a scalar string element views the buffer - without an owner it copies") {
  Element e{
    std::vector<Tensor>{Tensor::scalar("payload-bytes"), Tensor::vector<std::string>({"x", "yz"})}};
  auto encoded = std::make_shared<std::string>(encode_batch({e, e}, Compression::none));
  std::vector<Element> viewed;
  REQUIRE(decode_batch(encoded, *encoded, viewed).ok());
  REQUIRE(viewed.size() == 2);
  for (const Element& got : viewed) {
    CHECK(got[0] == e[0]);
    CHECK(got[1] == e[1]);
    CHECK(inside(got[0].string_at(0), *encoded)); // zero copy
    CHECK(inside(got[1].string_at(1), *encoded));
    CHECK(got[0].storage_owner() == encoded);
    CHECK(got[0].strings() == std::vector<std::string>{"payload-bytes"});
  }
  std::vector<Element> copied;
  REQUIRE(decode_batch(*encoded, copied).ok());
  CHECK_FALSE(inside(copied[0][0].string_at(0), *encoded));
  CHECK(copied[0][0] == e[0]);
}

TEST_CASE("uninitialized storage: in place while unshared, copy on write once shared") {
  Tensor small = TensorInternals::uninitialized(DType::int32, Shape{2});
  CHECK(small.bytes() == std::vector<unsigned char>(8, 0)); // inline ones are zeroed
  CHECK_FALSE(small.shares_storage());

  Tensor t = TensorInternals::uninitialized(DType::int64, Shape{2, 4});
  CHECK(t.bytes().size() == 64);
  CHECK_FALSE(t.shares_storage());
  CHECK(t.storage_owner() != nullptr);
  int64_t* p = t.mutable_data<int64_t>();
  for (int i = 0; i < 8; ++i)
    p[i] = i;
  CHECK(t.mutable_data<int64_t>() == p); // unshared: written in place
  CHECK(t.data<int64_t>() == p);
  CHECK(t.to_string() == "[[0, 1, 2, 3], [4, 5, 6, 7]]");
  Tensor row = t.slice(1);
  CHECK(row.data<int64_t>() == p + 4);
  CHECK(t.shares_storage());
  t.mutable_data<int64_t>()[4] = 40; // shared with the row: copies first
  CHECK(row.at<int64_t>(0) == 4);
  CHECK(t.at<int64_t>(4) == 40);
  Tensor copy = row;
  std::vector<unsigned char>& v = copy.mutable_bytes(); // a vector, detached from the row
  CHECK(v.size() == 32);
  v[0] = 99;
  CHECK(row.at<int64_t>(0) == 4);
  CHECK(copy.at<int64_t>(0) == 99);
}

TEST_CASE("decoded numeric tensors hold exactly the encoded bytes") {
  std::vector<double> values(100);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = 0.5 * static_cast<double>(i);
  Element e{std::vector<Tensor>{Tensor::vector(values), Tensor::scalar(int16_t{-3})}};
  std::string encoded;
  encode_element(e, encoded);
  auto got = decode_element(encoded); // no owner: copied into the tensor's own storage
  REQUIRE(got.ok());
  CHECK((*got)[0] == e[0]);
  CHECK((*got)[1] == e[1]);
  CHECK_FALSE((*got)[0].shares_storage());
  auto stacked = Tensor::stack({(*got)[0], e[0]});
  REQUIRE(stacked.ok());
  CHECK(stacked->slice(0) == e[0]);
  CHECK(stacked->slice(1) == e[0]);
}
