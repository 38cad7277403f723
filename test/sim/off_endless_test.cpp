// Endless OFF reads while workers come and go (issue 32): with on_worker_loss "continue" (the
// default) the consumer reads on with the workers left and picks up workers that join or come
// back — no failure, no hang, the reading recovers — and every loss it took is counted
// (check_endless_off: a task stream with a gap is one the consumer counted as lost).
#include <doctest/doctest.h>

#include <string>

#include "sim/sim.hpp"
#include "pipeline/graph/dataset.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::Dataset;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;
using conveyor::sim_test::env_int;
using conveyor::sim_test::failures_of;

namespace {

constexpr int64_t kPeriod = 50;
constexpr int64_t kTake = 1500;

SimConfig endless_config() {
  SimConfig cfg;
  cfg.workers = 4;
  cfg.consumers = 1;
  cfg.options.policy = ShardingPolicy::off;
  cfg.options.max_outstanding_requests = 4;
  cfg.take = kTake;
  cfg.endless_period = kPeriod;
  return cfg;
}

// A sweep of `faults` per seed (and `late_workers` joining mid-read): each run passes the
// invariants, and its consumer read all `kTake` elements — none failed or hung; the elements
// after the first fault came, so the reading recovered.
void sweep_reads_on(const std::string& faults, int late_workers, const std::string& label) {
  auto cfg = endless_config();
  cfg.random_faults = faults;
  cfg.late_workers = late_workers;
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 5 + 1;
  int complete = 0;
  int64_t lost = 0;
  auto s = conveyor::sweep(
    Dataset::range(kPeriod).repeat(), cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
      REQUIRE(r.consumers.size() == 1);
      const auto& c = r.consumers[0];
      lost += c.lost_tasks;
      if (static_cast<int64_t>(c.elements.size()) == kTake)
        ++complete;
      else
        FAIL_CHECK("seed " << r.seed << ": " << c.elements.size() << " of " << kTake
                           << " elements, " << c.status.to_string());
    });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  MESSAGE("endless OFF with " << label << ": " << s->summary() << "; " << lost
                              << " lost task(s) counted");
  CHECK_MESSAGE(s->failed_runs == 0, failures_of(*s));
  CHECK(complete == runs);
}

} // namespace

TEST_CASE("CI sweep: an endless OFF read goes on while workers crash (on_worker_loss continue)") {
  sweep_reads_on("crash:2", 0, "crashes");
}

TEST_CASE("CI sweep: an endless OFF read goes on while workers restart, drain and join") {
  sweep_reads_on("restart:1,drain:1", 1, "restarts, drains and a late worker");
}

TEST_CASE("CI sweep: an endless OFF read goes on under any fault mix") {
  sweep_reads_on("any:2", 1, "any faults");
}

TEST_CASE("endless OFF without faults: every task's stream whole, no loss counted") {
  auto r = conveyor::simulate(Dataset::range(kPeriod).repeat(), [] {
    auto cfg = endless_config();
    cfg.seed = 3;
    return cfg;
  }());
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK_MESSAGE(r->ok(), r->summary());
  REQUIRE(r->consumers.size() == 1);
  CHECK(r->consumers[0].elements.size() == static_cast<std::size_t>(kTake));
  CHECK(r->consumers[0].lost_tasks == 0);
}
