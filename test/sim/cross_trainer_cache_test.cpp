// The cross-trainer cache in the simulator: three trainers (distinct trainer ids) read one
// shared job of an infinite dataset from two workers through the workers' caches, with the
// cache window drawn per seed (8 or 32 elements, so slow trainers fall behind it and skip
// ahead, or large enough never to evict). The invariants (check_cross_trainer_cache in
// sim/invariants.cpp) check that every trainer reads each task's sequence in order,
// the whole of it when nothing could be evicted.
// CONVEYOR_SIM_SEEDS sets the number of seeds (default 500; this sweep runs a fifth of them).
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "sim/sim.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::sim_test::env_int;
using conveyor::sim_test::failures_of;

namespace {

conveyor::SimConfig cache_config() {
  conveyor::SimConfig cfg;
  cfg.workers = 2;
  cfg.consumers = 3;
  cfg.options.job_name = "ctc";
  cfg.options.cross_trainer_cache = conveyor::CrossTrainerCacheOptions{"trainer-0"};
  cfg.take = 200;
  return cfg;
}

} // namespace

TEST_CASE("CI sweep: cross-trainer cache - every trainer reads each task's sequence in order") {
  auto d = conveyor::parse_dataset("range(1000000).repeat()");
  REQUIRE(d.ok());
  const auto cfg = cache_config();
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 5 + 1;
  int whole = 0, skipped = 0;
  auto s = conveyor::sweep(*d, cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    // Whether some trainer skipped ahead (a window that evicts, and a trainer behind it).
    bool gap = false;
    for (const auto& c : r.consumers) {
      std::map<std::string, int64_t> last;
      for (std::size_t i = 0; i < c.elements.size(); ++i) {
        const auto v = c.elements[i].components.at(0).as_int64();
        auto at = last.find(c.sources[i]);
        gap = gap || (at == last.end() ? v != 0 : v != at->second + 1);
        last[c.sources[i]] = v;
      }
    }
    (gap ? skipped : whole) += 1;
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("cross-trainer cache: " << s->summary() << "; a trainer skipped ahead in " << skipped
                                  << " run(s), every trainer read every task whole in " << whole);
  CHECK(s->runs == runs);
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  // Both behaviours are exercised: the slow-trainer skip (the reference's documented one) and
  // the lossless sharing.
  CHECK(skipped > 0);
  CHECK(whole > 0);
}

// The reference's testDynamicSharding: trainers share a DYNAMIC job through the cache. Each
// task's sequence is now the splits the job gave it; the invariants check that every trainer
// reads it in order (whole without evictions) and that no split was made twice.
TEST_CASE(
  "CI sweep: cross-trainer cache under DYNAMIC - trainers share each task's split sequence") {
  auto d = conveyor::parse_dataset("range(1000000).repeat()");
  REQUIRE(d.ok());
  auto cfg = cache_config();
  cfg.options.policy = conveyor::ShardingPolicy::dynamic;
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 10 + 1;
  int64_t shared = 0; // elements read by more than one trainer: what the cache saved
  auto s = conveyor::sweep(*d, cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    std::map<int64_t, int> readers;
    for (const auto& c : r.consumers)
      for (const auto& e : c.elements)
        ++readers[e.components.at(0).as_int64()];
    for (const auto& [value, n] : readers)
      shared += n > 1 ? 1 : 0;
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("cross-trainer cache, DYNAMIC: " << s->summary() << "; " << shared
                                           << " element(s) read by several trainers");
  CHECK(s->runs == runs);
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  CHECK(shared > 0);
}

// The same invariants while nodes fail: worker crashes and restarts, partitions, a drain, a
// dispatcher crash and restart (under DYNAMIC its restored job starts tasks again under their
// old ids: the checks tell the incarnations apart by the task actor that served each batch,
// msg::stream_stats::pushed_incarnation). The checks stay on when a fault fires:
// a trainer whose stream ended short must have failed, and each task's sequence stays in order.
static void sweep_cache_with_faults(conveyor::ShardingPolicy policy, const std::string& faults) {
  auto d = conveyor::parse_dataset("range(1000000).repeat()");
  REQUIRE(d.ok());
  auto cfg = cache_config();
  cfg.options.policy = policy;
  cfg.random_faults = faults;
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 10 + 1;
  auto s = conveyor::sweep(*d, cfg, 1, runs, 0, [](const conveyor::SimResult&) {});
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("cross-trainer cache, " << std::string{conveyor::to_string(policy)} << ", faults "
                                  << faults << ": " << s->summary());
  CHECK(s->runs == runs);
  CHECK(s->faults_injected >= runs);
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
}

TEST_CASE("CI sweep: cross-trainer cache with faults - OFF") {
  sweep_cache_with_faults(conveyor::ShardingPolicy::off, "any:2,drain:1");
}

TEST_CASE("CI sweep: cross-trainer cache with faults - DYNAMIC") {
  sweep_cache_with_faults(conveyor::ShardingPolicy::dynamic,
                          "crash:1,partition:1,drain:1,restart:1,dispatcher:1");
}

// Whole-epoch sharing (beyond the reference): three trainers share one epoch of a finite
// dataset; each trainer's stream must hold what a lone consumer of the job reads (OFF: every
// worker's whole dataset; DYNAMIC: the dataset exactly once — also when workers crash or the
// dispatcher restarts: a split made again reaches every trainer, which drops what it has). The
// window is drawn from a few times the credits upwards, so the slowest trainer paces the others
// in many runs. `min_ok_percent`: the share of trainers whose stream ended OK (faults may fail
// a stream, loudly; never one that ends OK short).
static void sweep_whole_epoch(conveyor::ShardingPolicy policy, const std::string& faults,
                              int min_ok_percent, int64_t credits = 0, int runs_divisor = 10) {
  CAPTURE(faults);
  CAPTURE(credits);
  auto d = conveyor::parse_dataset("range(3000)");
  REQUIRE(d.ok());
  auto cfg = cache_config();
  cfg.options.policy = policy;
  cfg.options.cross_trainer_cache->finite_epoch = true;
  cfg.take = -1;
  cfg.random_faults = faults;
  if (credits > 0)
    cfg.options.max_outstanding_requests = credits;
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / runs_divisor + 1;
  int ok = 0, streams = 0, paced = 0;
  auto s = conveyor::sweep(*d, cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    for (const auto& c : r.consumers) {
      ++streams;
      ok += c.status.ok() ? 1 : 0;
    }
    paced += r.derived_config.find("cross-trainer cache") != std::string::npos ? 1 : 0;
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("whole-epoch sharing, " << std::string{conveyor::to_string(policy)} << ", faults "
                                  << faults << ": " << s->summary() << "; " << ok << " of "
                                  << streams << " trainer streams ended OK; a window that paces in "
                                  << paced << " run(s)");
  CHECK(s->runs == runs);
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  CHECK(ok * 100 >= streams * min_ok_percent);
  CHECK(paced > 0);
}

TEST_CASE("CI sweep: whole-epoch cross-trainer sharing - OFF, DYNAMIC") {
  sweep_whole_epoch(conveyor::ShardingPolicy::off, "none", 100);
  sweep_whole_epoch(conveyor::ShardingPolicy::dynamic, "none", 100);
}

TEST_CASE(
  "CI sweep: whole-epoch cross-trainer sharing with faults - DYNAMIC reads each element once") {
  sweep_whole_epoch(conveyor::ShardingPolicy::dynamic, "any:2", 50);
}

// One credit per trainer: a paced request held long at one task would hold the credit its
// trainer needs at another task, whose cache waits for that trainer (a deadlock between two
// tasks and two trainers). Paced requests are held briefly instead; without that, seeds 13 and
// 14 of this sweep (among 6 of the first 100) never ended.
TEST_CASE("CI sweep: whole-epoch cross-trainer sharing - one credit per trainer, no deadlock") {
  sweep_whole_epoch(conveyor::ShardingPolicy::off, "none", 100, 1, 20);
}
