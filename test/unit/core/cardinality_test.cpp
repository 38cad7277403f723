// Dataset::cardinality follows tf.data op by op, including its documented examples.
#include <doctest/doctest.h>

#include "pipeline/graph/dataset.hpp"

using namespace conveyor;

namespace {
constexpr int64_t INFINITE = kInfiniteCardinality;
constexpr int64_t UNKNOWN = kUnknownCardinality;
} // namespace

TEST_CASE("tf.data's documented cardinality example") {
  // dataset = tf.data.Dataset.range(42) -> 42; .repeat() -> INFINITE; .filter(...) -> UNKNOWN
  Dataset d = Dataset::range(42);
  CHECK(d.cardinality() == 42);
  CHECK(d.repeat().cardinality() == INFINITE);
  CHECK(d.repeat().filter("is_even").cardinality() == UNKNOWN);
  CHECK(d.filter("is_even").cardinality() == UNKNOWN);
}

TEST_CASE("sources") {
  CHECK(Dataset::range(0, 10, 3).cardinality() == 4);
  CHECK(Dataset::range(10, 0, -3).cardinality() == 4);
  CHECK(Dataset::range(5, 5).cardinality() == 0);
  CHECK(Dataset::range(10, 0).cardinality() == 0);
  CHECK(Dataset::range(-5).cardinality() == 0);
  CHECK(Dataset::range(INT64_MIN, INT64_MAX, INT64_MAX).cardinality() == 3);
  CHECK(Dataset::from_tensors(Element{Tensor::vector<int64_t>({1, 2, 3})}).cardinality() == 1);
  CHECK(Dataset::from_tensor_slices(Element{Tensor::vector<int64_t>({1, 2, 3})}).cardinality() ==
        3);
  CHECK(Dataset::list_files("/tmp/*.txt").cardinality() == UNKNOWN);
  CHECK(Dataset::text_lines({"a.txt"}).cardinality() == UNKNOWN);
  CHECK(Dataset::tfrecord({"a.tfrecord"}).cardinality() == UNKNOWN);
  CHECK(Dataset::source("counter").cardinality() == UNKNOWN);
}

TEST_CASE("ops that keep the count, and ops whose count is data-dependent") {
  Dataset r = Dataset::range(10);
  CHECK(r.map("square").cardinality() == 10);
  CHECK(r.shuffle(4).cardinality() == 10);
  CHECK(r.enumerate().cardinality() == 10);
  CHECK(r.prefetch().cardinality() == 10);
  CHECK(r.cache().cardinality() == 10);
  CHECK(r.flat_map("range_fn").cardinality() == UNKNOWN);
  CHECK(r.interleave("range_fn").cardinality() == UNKNOWN);
  CHECK(r.batch(2).unbatch().cardinality() == UNKNOWN);
  CHECK(r.repeat().map("square").cardinality() == INFINITE);
}

TEST_CASE("batch rounds up, or down with drop_remainder") {
  Dataset r = Dataset::range(10);
  CHECK(r.batch(4).cardinality() == 3);
  CHECK(r.batch(4, true).cardinality() == 2);
  CHECK(r.batch(5, true).cardinality() == 2);
  CHECK(r.batch(20).cardinality() == 1);
  CHECK(r.batch(20, true).cardinality() == 0);
  CHECK(r.repeat().batch(4).cardinality() == INFINITE);
  CHECK(r.filter("is_even").batch(4).cardinality() == UNKNOWN);
  CHECK(r.batch(0).cardinality() == UNKNOWN); // invalid: no count to give
}

TEST_CASE("repeat") {
  Dataset r = Dataset::range(5);
  CHECK(r.repeat(3).cardinality() == 15);
  CHECK(r.repeat(1).cardinality() == 5);
  CHECK(r.repeat(0).cardinality() == 0);
  CHECK(Dataset::range(0).repeat().cardinality() == 0);
  CHECK(Dataset::range(0).repeat(7).cardinality() == 0);
  CHECK(r.filter("is_even").repeat(2).cardinality() == UNKNOWN);
  CHECK(r.filter("is_even").repeat().cardinality() == INFINITE);
  CHECK(r.filter("is_even").repeat(0).cardinality() == 0);
  CHECK(r.repeat().repeat(2).cardinality() == INFINITE);
}

TEST_CASE("take and skip, including infinite inputs") {
  Dataset r = Dataset::range(10);
  CHECK(r.take(3).cardinality() == 3);
  CHECK(r.take(20).cardinality() == 10);
  CHECK(r.take(-1).cardinality() == 10);
  CHECK(r.take(0).cardinality() == 0);
  CHECK(r.repeat().take(5).cardinality() == 5);
  CHECK(r.repeat().take(-1).cardinality() == INFINITE);
  CHECK(r.filter("is_even").take(5).cardinality() == UNKNOWN);
  CHECK(r.skip(3).cardinality() == 7);
  CHECK(r.skip(20).cardinality() == 0);
  CHECK(r.skip(-1).cardinality() == 0);
  CHECK(r.repeat().skip(5).cardinality() == INFINITE);
  CHECK(r.filter("is_even").skip(5).cardinality() == UNKNOWN);
}

TEST_CASE("shard gives each index its share") {
  Dataset r = Dataset::range(10);
  CHECK(r.shard(3, 0).cardinality() == 4);
  CHECK(r.shard(3, 1).cardinality() == 3);
  CHECK(r.shard(3, 2).cardinality() == 3);
  CHECK(r.shard(1, 0).cardinality() == 10);
  CHECK(r.shard(20, 15).cardinality() == 0);
  CHECK(r.repeat().shard(3, 0).cardinality() == INFINITE);
  CHECK(r.shard(kShardHint, kShardHint).cardinality() == UNKNOWN);
}

TEST_CASE("zip takes the shortest input") {
  Dataset three = Dataset::range(3), five = Dataset::range(5);
  CHECK(Dataset::zip({three, five}).cardinality() == 3);
  CHECK(Dataset::zip({five, three.repeat()}).cardinality() == 5);
  CHECK(Dataset::zip({five.repeat(), three.repeat()}).cardinality() == INFINITE);
  CHECK(Dataset::zip({five, three.filter("is_even")}).cardinality() == UNKNOWN);
  CHECK(Dataset::zip({five}).cardinality() == 5);
}
