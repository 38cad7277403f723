// Resumed reads in the simulator (issue 36): a trainer is killed mid-epoch and restarts from its
// last checkpoint — the read cursor of the elements it finished its step on — with
// DistributeOptions::resume_from, alone and together with the other fault kinds (worker crashes
// and restarts, drains, links cut, slowed and partitioned, the dispatcher restarted from its
// disk). The invariant is the cursor's guarantee: what the trainer finished over all its lives
// is the epoch, each element exactly once (what it had received but not finished at a kill is
// forgotten, so the resumed read must bring it again).
// CONVEYOR_SIM_SEEDS sets the seeds (default 500, spread over the fault mixes below).
#include <doctest/doctest.h>

#include "sim/planted_bugs.hpp"
#include "sim/sim.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::Dataset;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;
using conveyor::sim_test::env_int;
using conveyor::sim_test::failures_of;

namespace {

SimConfig resumable(const char* faults) {
  SimConfig cfg;
  cfg.workers = 3;
  cfg.options.policy = ShardingPolicy::dynamic;
  cfg.random_faults = faults;
  return cfg;
}

// A per-split pipeline (the cursor's condition): map and filter after the source.
Dataset epoch() { return Dataset::range(600).map("square").filter("is_even"); }

} // namespace

TEST_CASE("trainer restarts: the union of what a resumed trainer finished is the epoch, once, "
          "under every fault kind") {
  const int seeds = env_int("CONVEYOR_SIM_SEEDS", 500);
  const char* mixes[] = {"trainer:2",         "trainer:1,crash:1",      "trainer:1,restart:1",
                         "trainer:1,drain:1", "trainer:1,dispatcher:1", "trainer:1,any:2"};
  const int per_mix = seeds / static_cast<int>(std::size(mixes)) + 1;
  int restarted = 0;
  for (const std::string mix : mixes) {
    CAPTURE(mix);
    auto s = conveyor::sweep(epoch(), resumable(mix.c_str()), 1, per_mix, 0, [&](const auto& r) {
      INFO(r.summary());
      REQUIRE(r.consumers.size() == 1);
      CHECK(r.consumers[0].ended);
      // The mixes of crashes, restarts and drains must complete; `any` adds partitions that
      // may outlast the client timeout, where the read may fail loudly (the invariants, checked
      // by the sweep, still hold: nothing twice, and nothing missing from a read that ended OK).
      if (mix.find("any") == std::string::npos) {
        CHECK_MESSAGE(r.consumers[0].status.ok(), r.consumers[0].status.to_string());
        CHECK(r.consumers[0].elements.size() == 300); // the even squares of range(600)
      }
      for (const auto& f : r.faults_injected)
        restarted += f.rfind("restart(consumer-0)", 0) == 0 ? 1 : 0;
    });
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    CHECK_MESSAGE(s->failed_runs == 0, s->summary() << "\n" << failures_of(*s));
  }
  CHECK(restarted > seeds / 2); // the kills did hit reads in progress
}

TEST_CASE("trainer restarts: a trainer that checkpoints what it received, not what it finished, "
          "is caught") {
  SimConfig cfg = resumable("trainer:2");
  cfg.plant_bug = "checkpoint-early";
  cfg.consumer_step = std::chrono::microseconds{3000}; // steps long enough to die inside one
  auto s = conveyor::sweep(epoch(), cfg, 1, 30);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  CHECK(s->failed_runs > 0);
  bool missing = false;
  for (const auto& r : s->failures)
    for (const auto& f : r.failures)
      missing = missing || f.find("never delivered") != std::string::npos;
  CHECK_MESSAGE(missing, s->summary() << "\n" << failures_of(*s));
  // The same seeds pass without the bug.
  cfg.plant_bug.clear();
  auto clean = conveyor::sweep(epoch(), cfg, 1, 30);
  REQUIRE(clean.ok());
  CHECK_MESSAGE(clean->failed_runs == 0, clean->summary() << "\n" << failures_of(*clean));
}

TEST_CASE("trainer restarts are refused where a read cannot be resumed") {
  SimConfig off = resumable("trainer:1");
  off.options.policy = ShardingPolicy::off;
  auto r = conveyor::simulate(epoch(), off);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("needs a DYNAMIC read of a private job") != std::string::npos);
  SimConfig shared = resumable("none");
  shared.consumers = 2;
  shared.faults = {conveyor::Fault::restart("consumer-1", std::chrono::milliseconds{10},
                                            std::chrono::milliseconds{10})};
  auto s = conveyor::simulate(epoch(), shared);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("consumers can crash but not restart") != std::string::npos);
}
