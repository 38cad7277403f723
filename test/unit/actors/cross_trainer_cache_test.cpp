// The cross-trainer cache (actors/cross_trainer_cache.hpp): trainers share one produced sequence
// through a bounded window; a trainer behind the window skips ahead; the reference's errors.
#include <doctest/doctest.h>

#include <random>

#include "actors/cross_trainer_cache.hpp"
#include "pipeline/tensor.hpp"

using namespace conveyor;
using namespace conveyor::actors;

namespace {

// Element i: one int64 scalar (8 bytes).
Element el(int64_t i) { return Element{Tensor::scalar(i)}; }
int64_t value(const Element& e) { return e[0].as_int64(); }

// A source: produces 0, 1, 2, ... whenever a trainer is at the cache's end.
struct Source {
  int64_t next = 0;
  int64_t produced = 0;
};

// Reads one element for `trainer`, producing into the cache when needed.
int64_t read(CrossTrainerCache& cache, Source& src, const std::string& trainer) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto got = cache.next(trainer);
    REQUIRE(got.ok());
    if (*got)
      return value(**got);
    REQUIRE(cache.add(el(src.next++)).ok());
    ++src.produced;
  }
  FAIL("the cache did not hand out the element it was given");
  return -1;
}

} // namespace

TEST_CASE("trainers read the same sequence, produced once") {
  auto cache = CrossTrainerCache::make(1 << 20);
  REQUIRE(cache.ok());
  Source src;
  for (int64_t i = 0; i < 10; ++i)
    CHECK(read(*cache, src, "trainer-1") == i);
  for (int64_t i = 0; i < 10; ++i)
    CHECK(read(*cache, src, "trainer-2") == i); // the reference's testEnableCrossTrainerCache
  CHECK(src.produced == 10);
  CHECK(cache->misses() == 10);
  CHECK(cache->hits() == 10);
  CHECK(cache->trainers() == 2);
  CHECK(cache->skipped("trainer-2") == 0);
}

TEST_CASE("the same trainer id does not re-read: its readers share one position") {
  auto cache = CrossTrainerCache::make(1 << 20);
  Source src;
  std::vector<int64_t> got;
  for (int i = 0; i < 6; ++i)
    got.push_back(read(*cache, src, "t")); // two readers of trainer "t" alternate
  CHECK(got == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(src.produced == 6);
}

TEST_CASE("a bounded window: a trainer that falls behind skips to the oldest cached element") {
  // 8-byte elements, 5 fit.
  auto cache = CrossTrainerCache::make(5 * 8);
  REQUIRE(cache.ok());
  Source src;
  for (int64_t i = 0; i < 3; ++i)
    CHECK(read(*cache, src, "slow") == i);
  for (int64_t i = 0; i < 20; ++i)
    CHECK(read(*cache, src, "fast") == i);
  CHECK(cache->size_bytes() == 40);
  CHECK(cache->start_index() == 15);
  CHECK(cache->end_index() == 20);
  CHECK(cache->skipped("slow") == 12); // 3..14 were evicted before it read them
  CHECK(read(*cache, src, "slow") == 15);
  CHECK(cache->skipped("slow") == 12);
  // A new trainer starts at the oldest cached element too.
  CHECK(read(*cache, src, "late") == 15);
  CHECK(cache->skipped("late") == 0);
  // Never more than max_bytes held.
  CHECK(cache->size_bytes() <= cache->max_bytes());
}

TEST_CASE("many trainers at random speeds: every trainer's sequence increases, gaps only from eviction") {
  std::mt19937 rng(7);
  for (int64_t capacity : {1, 3, 16, 1000}) {
    auto cache = CrossTrainerCache::make(capacity * 8);
    REQUIRE(cache.ok());
    Source src;
    std::map<std::string, std::vector<int64_t>> seen;
    for (int step = 0; step < 3000; ++step) {
      std::string t = "t" + std::to_string(rng() % 7);
      seen[t].push_back(read(*cache, src, t));
      CHECK(cache->size_bytes() <= cache->max_bytes());
    }
    int64_t reads = 0;
    for (const auto& [t, v] : seen) {
      reads += static_cast<int64_t>(v.size());
      int64_t gaps = 0;
      for (std::size_t i = 1; i < v.size(); ++i) {
        REQUIRE(v[i] > v[i - 1]);
        gaps += v[i] - v[i - 1] - 1;
      }
      // The first read starts at the window's oldest element; later gaps are skips.
      CHECK(gaps <= cache->skipped(t));
    }
    // Sharing: elements produced at most the number of reads, far fewer with a large window.
    CHECK(src.produced <= reads);
    if (capacity == 1000)
      CHECK(src.produced * 5 < reads);
  }
}

TEST_CASE("the reference's errors") {
  CHECK(CrossTrainerCache::make(0).status().code() == ErrorCode::invalid_argument);
  auto cache = CrossTrainerCache::make(16);
  REQUIRE(cache.ok());
  CHECK(cache->next("").status().message() ==
        "tf.data service cross-trainer cache requires a non-empty trainer ID.");
  Element big{Tensor::scalar(std::string(100, 'x'))};
  auto too_big = cache->add(big);
  CHECK(too_big.code() == ErrorCode::invalid_argument);
  CHECK(too_big.message().find("tf.data service element size is larger than cache size in bytes.") == 0);

  const auto off = ShardingPolicy::off;
  CHECK(validate_cross_trainer_cache(true, kInfiniteCardinality, std::nullopt, off).ok());
  CHECK(validate_trainer_id("").message() ==
        "tf.data service cross-trainer cache requires a non-empty trainer ID.");
  CHECK(validate_trainer_id("t").ok());
  CHECK(validate_cross_trainer_cache(false, kInfiniteCardinality, std::nullopt, off).message() ==
        "Cross-trainer caching requires named jobs. Got empty `job_name`.");
  CHECK(validate_cross_trainer_cache(true, 10, std::nullopt, off).message() ==
        "Cross-trainer caching requires the input dataset to be infinite. Got input with "
        "cardinality 10");
  CHECK(validate_cross_trainer_cache(true, kUnknownCardinality, std::nullopt, off).code() ==
        ErrorCode::invalid_argument);
  CHECK(validate_cross_trainer_cache(true, kInfiniteCardinality, 2, off).message() ==
        "Cross-trainer caching does not support coordinated reads. Got number of coordinated "
        "consumers: 2");
  CHECK(validate_cross_trainer_cache(true, kInfiniteCardinality, std::nullopt,
                                     ShardingPolicy::dynamic)
          .message()
          .find("requires processing mode OFF") != std::string::npos);
}

// --- the cache in a cluster: two trainers read one named OFF job of an infinite dataset.

#include "cluster_fixture.hpp"

namespace {

DistributeOptions cached(const std::string& trainer) {
  DistributeOptions o;
  o.policy = ShardingPolicy::off;
  o.job_name = "ctc";
  o.cross_trainer_cache = CrossTrainerCacheOptions{trainer};
  return o;
}

std::vector<int64_t> take_ints(ElementStream& stream, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    Element e;
    bool end = false;
    auto st = stream.next(e, end, std::chrono::seconds(20));
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    REQUIRE_FALSE(end);
    out.push_back(e[0].as_int64());
  }
  return out;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = i;
  return v;
}

} // namespace

TEST_CASE("cluster: trainers of one job read the same elements through the workers' cache") {
  conveyor::test::TestCluster cluster{1};
  auto client = cluster.client();
  // The reference's example: range(10000000).repeat(); trainer 1 then trainer 2 read 0..9.
  auto dataset = Dataset::range(10000000).repeat();
  auto t1 = client.distribute(dataset, cached("Trainer 1"));
  REQUIRE_MESSAGE(t1.ok(), t1.status().to_string());
  CHECK(take_ints(*t1, 10) == iota(10));
  auto t2 = client.distribute(dataset, cached("Trainer 2"));
  REQUIRE(t2.ok());
  CHECK(take_ints(*t2, 10) == iota(10));
  CHECK(take_ints(*t1, 5) == std::vector<int64_t>{10, 11, 12, 13, 14});
}

TEST_CASE("cluster: the cache's errors (finite dataset, no job name, empty trainer id, mismatch)") {
  conveyor::test::TestCluster cluster{1};
  auto client = cluster.client();
  auto first_error = [&](const Dataset& d, const DistributeOptions& o) {
    auto s = client.distribute(d, o);
    if (!s.ok())
      return s.status();
    Element e;
    bool end = false;
    return s->next(e, end, std::chrono::seconds(10));
  };
  auto finite = first_error(Dataset::range(10), cached("t"));
  CHECK(finite.message().find("Cross-trainer caching requires the input dataset to be infinite. "
                              "Got input with cardinality 10") != std::string::npos);
  auto unnamed = cached("t");
  unnamed.job_name.reset();
  CHECK(first_error(Dataset::range(1).repeat(), unnamed).message() ==
        "Cross-trainer caching requires named jobs. Got empty `job_name`.");
  CHECK(first_error(Dataset::range(1).repeat(), cached("")).message() ==
        "tf.data service cross-trainer cache requires a non-empty trainer ID.");
  // A job read with the cache and one without cannot share a name.
  auto infinite = Dataset::range(1000).repeat();
  auto running = client.distribute(infinite, cached("t"));
  REQUIRE(running.ok());
  take_ints(*running, 1);
  auto plain = cached("t");
  plain.cross_trainer_cache.reset();
  auto mismatch = first_error(infinite, plain);
  CHECK_MESSAGE(mismatch.message().find("runs with cross_trainer_cache on; a consumer asked for "
                                        "cross_trainer_cache off") != std::string::npos,
                mismatch.to_string());
}
