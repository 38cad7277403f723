// The cross-trainer cache (worker/cross_trainer_cache.hpp): trainers share one produced sequence
// through a bounded window; a trainer behind the window skips ahead; the reference's errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <thread>

#include "worker/cross_trainer_cache.hpp"
#include "pipeline/tensor/tensor.hpp"

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

TEST_CASE(
  "many trainers at random speeds: every trainer's sequence increases, gaps only from eviction") {
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

TEST_CASE(
  "whole-epoch sharing: nothing is evicted before every trainer read it, the slowest paces") {
  auto cache = CrossTrainerCache::make(3 * 8, true); // three 8-byte elements fit
  REQUIRE(cache.ok());
  Source src;
  CHECK(read(*cache, src, "fast") == 0);
  CHECK(read(*cache, src, "slow") == 0); // both trainers known before anything is evicted
  CHECK(read(*cache, src, "fast") == 1);
  CHECK(read(*cache, src, "fast") == 2);
  CHECK(read(*cache, src, "fast") == 3); // evicts 0, which both read
  // Full, and "slow" has not read 1: "fast" is at the end and waits.
  auto at_end = cache->next("fast");
  REQUIRE(at_end.ok());
  CHECK_FALSE(at_end->has_value());
  CHECK_FALSE(cache->can_add(8));
  CHECK(cache->add(el(4)).code() == ErrorCode::failed_precondition);
  CHECK(read(*cache, src, "slow") == 1); // 1 is read by both now: it may go
  CHECK(cache->can_add(8));
  REQUIRE(cache->add(el(src.next++)).ok());
  CHECK(cache->start_index() == 2);
  auto four = cache->next("fast");
  REQUIRE(four.ok());
  REQUIRE(four->has_value());
  CHECK(value(**four) == 4);
  // Every trainer reads everything, in order, nothing skipped.
  CHECK(read(*cache, src, "slow") == 2);
  CHECK(read(*cache, src, "slow") == 3);
  CHECK(read(*cache, src, "slow") == 4);
  CHECK(cache->skipped("slow") == 0);
  SUBCASE("a trainer that starts after an eviction would miss elements: an error") {
    auto late = cache->next("late");
    CHECK(late.status().code() == ErrorCode::failed_precondition);
    CHECK(late.status().message().find("trainer \"late\" joined the shared epoch after the task's "
                                       "cross-trainer cache had evicted its first 2 element(s)") ==
          0);
  }
  SUBCASE("a trainer that left holds nobody back") {
    CHECK(read(*cache, src, "fast") == 5); // evicts 2 (both read it)
    CHECK(read(*cache, src, "fast") == 6); // evicts 3
    CHECK(read(*cache, src, "fast") == 7); // evicts 4
    CHECK_FALSE(cache->can_add(8));        // 5, 6, 7 cached; "slow" read none of them
    cache->remove_trainer("slow");
    CHECK(read(*cache, src, "fast") == 8);
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
  CHECK(too_big.message().find(
          "tf.data service element size is larger than cache size in bytes.") == 0);
  // Whole-epoch sharing: a full cache waits for its trainers (can_add false), but an element
  // larger than the whole cache never fits: it is refused at once, not waited for (issue 32:
  // the task waited forever and the read hung).
  auto epoch = CrossTrainerCache::make(16, true);
  REQUIRE(epoch.ok());
  REQUIRE(epoch->join("t").ok());
  CHECK(epoch->can_add(static_cast<int64_t>(big.byte_size())));
  auto refused = epoch->add(big);
  CHECK(refused.code() == ErrorCode::invalid_argument);
  CHECK(refused.message().find(
          "tf.data service element size is larger than cache size in bytes.") == 0);

  CHECK(validate_cross_trainer_cache(true, kInfiniteCardinality, std::nullopt).ok());
  CHECK(validate_trainer_id("").message() ==
        "tf.data service cross-trainer cache requires a non-empty trainer ID.");
  CHECK(validate_trainer_id("t").ok());
  CHECK(validate_cross_trainer_cache(false, kInfiniteCardinality, std::nullopt).message() ==
        "Cross-trainer caching requires named jobs. Got empty `job_name`.");
  CHECK(validate_cross_trainer_cache(true, 10, std::nullopt).message() ==
        "Cross-trainer caching requires the input dataset to be infinite. Got input with "
        "cardinality 10");
  CHECK(validate_cross_trainer_cache(true, kUnknownCardinality, std::nullopt).code() ==
        ErrorCode::invalid_argument);
  // Whole-epoch sharing (beyond the reference): a finite dataset, known or unknown cardinality.
  CHECK(validate_cross_trainer_cache(true, 10, std::nullopt, true).ok());
  CHECK(validate_cross_trainer_cache(true, kUnknownCardinality, std::nullopt, true).ok());
  CHECK(validate_cross_trainer_cache(true, kInfiniteCardinality, std::nullopt, true)
          .message()
          .find("Whole-epoch cross-trainer sharing (`finite_epoch`) requires a finite dataset") ==
        0);
  CHECK(validate_cross_trainer_cache(false, 10, std::nullopt, true).message() ==
        "Cross-trainer caching requires named jobs. Got empty `job_name`.");
  CHECK(validate_cross_trainer_cache(true, kInfiniteCardinality, 2).message() ==
        "Cross-trainer caching does not support coordinated reads. Got number of coordinated "
        "consumers: 2");
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

// Whole-epoch sharing (beyond the reference) for `trainer`.
DistributeOptions whole_epoch(const std::string& trainer) {
  auto o = cached(trainer);
  o.cross_trainer_cache->finite_epoch = true;
  return o;
}

// Workers whose cache holds `elements` int64 elements.
WorkerConfig cache_of(int64_t elements) {
  auto wc = conveyor::test::test_worker_config();
  wc.cross_trainer_cache_size_bytes = elements * 8;
  return wc;
}

// What reading `d` with `o` fails with first (OK when its first element arrives).
Status first_read_error(Client& client, const Dataset& d, const DistributeOptions& o) {
  auto s = client.distribute(d, o);
  if (!s.ok())
    return s.status();
  Element e;
  bool end = false;
  return s->next(e, end, std::chrono::seconds(10));
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

// The reference's testDynamicSharding: two trainers of one DYNAMIC job share what the workers
// made from their splits. Each trainer reads every element at most once (splits do not overlap),
// and the second trainer reads elements the first one made (the intersection the reference
// checks). With one worker its task's sequence is the splits in order, so the second trainer
// reads exactly what the first one did.
TEST_CASE("cluster: DYNAMIC trainers share the workers' split output through the cache") {
  auto dynamic = [](const std::string& trainer) {
    auto o = cached(trainer);
    o.policy = ShardingPolicy::dynamic;
    // One element per request, taken from the tasks in turn (as the reference's client reads):
    // with large batches a trainer's first 100 elements could all come from one task and the
    // other trainer's from the other, so that they share none although both read each task
    // from its start.
    o.max_outstanding_requests = 1;
    return o;
  };
  auto dataset = Dataset::range(10000000).repeat();
  SUBCASE("two workers") {
    conveyor::test::TestCluster cluster{2};
    auto client = cluster.client();
    auto t1 = client.distribute(dataset, dynamic("Trainer 1"));
    REQUIRE_MESSAGE(t1.ok(), t1.status().to_string());
    auto out1 = take_ints(*t1, 100);
    auto t2 = client.distribute(dataset, dynamic("Trainer 2"));
    REQUIRE_MESSAGE(t2.ok(), t2.status().to_string());
    auto out2 = take_ints(*t2, 100);
    std::set<int64_t> s1(out1.begin(), out1.end()), s2(out2.begin(), out2.end());
    CHECK(s1.size() == out1.size());
    CHECK(s2.size() == out2.size());
    std::vector<int64_t> both;
    std::set_intersection(s1.begin(), s1.end(), s2.begin(), s2.end(), std::back_inserter(both));
    CHECK_FALSE(both.empty());
  }
  SUBCASE("one worker: the same sequence") {
    conveyor::test::TestCluster cluster{1};
    auto client = cluster.client();
    auto t1 = client.distribute(dataset, dynamic("Trainer 1"));
    REQUIRE_MESSAGE(t1.ok(), t1.status().to_string());
    CHECK(take_ints(*t1, 10) == iota(10));
    auto t2 = client.distribute(dataset, dynamic("Trainer 2"));
    REQUIRE(t2.ok());
    CHECK(take_ints(*t2, 10) == iota(10));
  }
}

// Whole-epoch sharing (beyond the reference): two trainers of a named job of a FINITE dataset
// each read every element once, in order, and then the end of the epoch, while the worker's
// cache holds only 16 elements: the faster trainer waits for the slower one instead of either
// skipping.
TEST_CASE(
  "cluster: finite_epoch - each trainer reads the whole finite epoch through a small cache") {
  conveyor::test::TestCluster cluster{1, conveyor::test::test_dispatcher_config(), cache_of(16)};
  auto client = cluster.client();
  auto epoch = [](const std::string& trainer) {
    auto o = whole_epoch(trainer);
    o.max_outstanding_requests = 2;
    return o;
  };
  auto dataset = Dataset::range(300);
  auto t1 = client.distribute(dataset, epoch("Trainer 1"));
  REQUIRE_MESSAGE(t1.ok(), t1.status().to_string());
  auto first1 = take_ints(*t1, 1);
  auto t2 = client.distribute(dataset, epoch("Trainer 2"));
  REQUIRE_MESSAGE(t2.ok(), t2.status().to_string());
  auto first2 = take_ints(*t2, 1);
  CHECK(first1 == first2);
  // Each trainer reads on its own thread, as trainers run; trainer 2 is slower (100 us per
  // element), so trainer 1 runs ahead until the cache is full of what trainer 2 has not read,
  // and then goes at trainer 2's pace. (On one thread, reading one far ahead of the other
  // would wait forever: the slower one's reader would not take its elements.)
  auto read_all = [](ElementStream& s, std::vector<int64_t>& out, std::chrono::microseconds pace,
                     std::string& error) {
    for (;;) {
      Element e;
      bool end = false;
      auto st = s.next(e, end, std::chrono::seconds(20));
      if (!st.ok()) {
        error = st.to_string();
        return;
      }
      if (end)
        return;
      out.push_back(e[0].as_int64());
      std::this_thread::sleep_for(pace);
    }
  };
  std::vector<int64_t> out1 = first1, out2 = first2;
  std::string error1, error2;
  std::thread slow([&] { read_all(*t2, out2, std::chrono::microseconds(100), error2); });
  read_all(*t1, out1, std::chrono::microseconds(0), error1);
  slow.join();
  CHECK_MESSAGE(error1.empty(), error1);
  CHECK_MESSAGE(error2.empty(), error2);
  CHECK(out1 == iota(300));
  CHECK(out2 == iota(300));
}

TEST_CASE(
  "cluster: finite_epoch errors - an infinite dataset, a mismatch with the job, a late trainer") {
  conveyor::test::TestCluster cluster{1, conveyor::test::test_dispatcher_config(), cache_of(4)};
  auto client = cluster.client();
  const auto epoch = whole_epoch;
  auto first_error = [&](const Dataset& d, const DistributeOptions& o) {
    return first_read_error(client, d, o);
  };
  auto infinite = first_error(Dataset::range(10).repeat(), epoch("t"));
  CHECK_MESSAGE(
    infinite.message().find("Whole-epoch cross-trainer sharing (`finite_epoch`) requires "
                            "a finite dataset") != std::string::npos,
    infinite.to_string());
  auto dataset = Dataset::range(1000000); // t1 cannot finish it: the job stays open
  auto running = client.distribute(dataset, epoch("t1"));
  REQUIRE(running.ok());
  take_ints(*running, 1);
  auto window = epoch("t2");
  window.cross_trainer_cache->finite_epoch = false;
  auto mismatch = first_error(dataset, window);
  CHECK_MESSAGE(mismatch.message().find("runs with cross_trainer_cache on, whole epoch; a consumer "
                                        "asked for cross_trainer_cache on") != std::string::npos,
                mismatch.to_string());
  // t1 reads on alone: the 4-element cache moves past its first elements; a trainer starting
  // now would miss them, which whole-epoch sharing promises never happens: an error instead.
  // (A job whose trainers all read to the end is released; a trainer after that starts the
  // name's next repetition, as any named job does.)
  take_ints(*running, 20);
  auto late = first_error(dataset, epoch("t3"));
  CHECK_MESSAGE(late.message().find("trainer \"t3\" joined the shared epoch after") !=
                  std::string::npos,
                late.to_string());
}

TEST_CASE("cluster: the cache's errors (finite dataset, no job name, empty trainer id, mismatch)") {
  conveyor::test::TestCluster cluster{1};
  auto client = cluster.client();
  auto first_error = [&](const Dataset& d, const DistributeOptions& o) {
    return first_read_error(client, d, o);
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
  // Issue 32: re-iterating a cached dataset (its next iteration) was accepted.
  auto again = cached("t2");
  again.iteration = 1;
  auto second = first_error(infinite, again);
  CHECK(second.code() == ErrorCode::invalid_argument);
  CHECK_MESSAGE(second.message().find("Cross-trainer caching does not support re-iterating a "
                                      "dataset") != std::string::npos,
                second.to_string());
}
