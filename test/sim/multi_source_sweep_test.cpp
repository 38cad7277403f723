// Several splittable sources under the simulator's faults (crashes, restarts, partitions,
// disconnects, slow links drawn per seed). One consumer, so that the invariants account exactly:
// a per-split concatenation holds each element exactly once in a stream that ended OK (its
// origins name their source), also under faults; a zip of equal-length sources (not per-split)
// hands every split of both sources to a task at least once, exactly once without faults.
// CONVEYOR_SIM_SEEDS caps the seed count (sweep_support.hpp).
#include <doctest/doctest.h>

#include <string>

#include "sim/sim.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::Dataset;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;
using conveyor::sim_test::capped_seeds;
using conveyor::sim_test::failures_of;

namespace {

void sweep_sources(const Dataset& dataset, int runs) {
  SimConfig cfg;
  cfg.workers = 3;
  cfg.consumers = 1;
  cfg.options.policy = ShardingPolicy::dynamic;
  cfg.random_faults = "any:2";
  auto s = conveyor::sweep(dataset, cfg, 1, runs);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE(s->summary());
  CHECK(s->runs == runs);
  CHECK(s->faults_injected >= runs); // most seeds inject their two faults before the end
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
}

} // namespace

TEST_CASE("multi-source sweep: a per-split concatenation is exactly-once under faults") {
  sweep_sources(Dataset::range(120).concatenate(Dataset::range(1000, 1080)).map("square"),
                capped_seeds(40));
}

TEST_CASE("multi-source sweep: zip of equal-length sources reads every split under faults") {
  sweep_sources(Dataset::zip({Dataset::range(120), Dataset::range(1000, 1120)}), capped_seeds(40));
}
