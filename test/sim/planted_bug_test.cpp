// The simulator must be able to fail: a seed sweep finds each planted protocol bug
// (sim/planted_bugs.hpp), names the broken invariant, and the same sweep passes once the
// bug is switched off again.
#include <doctest/doctest.h>

#include "sim/planted_bugs.hpp"
#include "test/support/round_robin_cluster.hpp"
#include "sim/sim.hpp"

using conveyor::Dataset;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;

namespace {

SimConfig base(ShardingPolicy policy) {
  SimConfig cfg;
  cfg.workers = 4;
  cfg.options.policy = policy;
  return cfg;
}

conveyor::SweepResult sweep_of(SimConfig cfg, int runs,
                               const Dataset& dataset = Dataset::range(200)) {
  auto s = conveyor::sweep(dataset, cfg, 1, runs);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  return std::move(*s);
}

bool any_failure_mentions(const conveyor::SweepResult& s, const std::string& what) {
  for (const auto& r : s.failures)
    for (const auto& f : r.failures)
      if (f.find(what) != std::string::npos)
        return true;
  return false;
}

} // namespace

TEST_CASE("a sweep finds the job that hands a split out twice") {
  auto cfg = base(ShardingPolicy::dynamic);
  cfg.plant_bug = "duplicate-split";
  // Per-split pipelines drop repeats at the consumer: the bug shows where they cannot.
  auto dataset = Dataset::range(200).shuffle(8, 3); // split-transparent, not per-split
  auto s = sweep_of(cfg, 30, dataset);
  INFO(s.summary());
  CHECK(s.failed_runs > 0);
  CHECK(any_failure_mentions(s, "delivered more often than the dataset holds them"));
  // The failing seed replays: same failure, same trace.
  REQUIRE_FALSE(s.failures.empty());
  cfg.seed = s.failing_seeds.front();
  auto replay = conveyor::simulate(dataset, cfg);
  REQUIRE(replay.ok());
  CHECK_FALSE(replay->ok());
  CHECK(replay->trace_hash == s.failures.front().trace_hash);
  CHECK(replay->replay_command.find("--plant-bug duplicate-split") != std::string::npos);
  // Without the bug the same seeds pass.
  cfg.plant_bug.clear();
  auto clean = sweep_of(cfg, 30, dataset);
  CHECK_MESSAGE(clean.failed_runs == 0, clean.summary());
}

TEST_CASE("planted bugs are off unless switched on, and the switch is scoped") {
  using conveyor::sim::PlantedBug;
  namespace hooks = conveyor::actors::hooks;
  CHECK_FALSE(conveyor::sim::planted(PlantedBug::duplicate_split));
  CHECK(hooks::installed() == nullptr); // production code runs without hooks
  {
    conveyor::sim::PlantBug on{PlantedBug::duplicate_split};
    CHECK(conveyor::sim::planted(PlantedBug::duplicate_split));
    CHECK_FALSE(conveyor::sim::planted(PlantedBug::forget_lost_split));
    REQUIRE(hooks::installed() != nullptr);
    CHECK_FALSE(hooks::forget_lost_split()); // another bug's hook stays inert
    // The job's hook: the epoch's last split goes out again to another task.
    hooks::JobSplitHook job;
    conveyor::Split split;
    split.index = 7;
    bool eos = false;
    job.apply(1, split, eos);
    conveyor::Split answer;
    eos = true;
    job.apply(2, answer, eos);
    CHECK_FALSE(eos);
    CHECK(answer == split);
    {
      conveyor::sim::PlantBug off{PlantedBug::none};
      CHECK(hooks::installed() == nullptr);
    }
    CHECK(hooks::installed() != nullptr);
  }
  {
    conveyor::sim::PlantBug on{PlantedBug::forget_lost_split};
    CHECK(hooks::forget_lost_split());
  }
  CHECK(hooks::installed() == nullptr);
  CHECK_FALSE(hooks::forget_lost_split());
  CHECK_FALSE(conveyor::sim::planted(PlantedBug::duplicate_split));
  CHECK(conveyor::sim::planted_bug_from_string("forget-lost-split") ==
        PlantedBug::forget_lost_split);
  CHECK_FALSE(conveyor::sim::planted_bug_from_string("other").has_value());
}

TEST_CASE("a sweep with worker crashes finds the job that forgets a lost task's split") {
  auto cfg = base(ShardingPolicy::dynamic);
  cfg.random_faults = "crash:1";
  cfg.plant_bug = "forget-lost-split";
  auto s = sweep_of(cfg, 40);
  INFO(s.summary());
  CHECK(s.failed_runs > 0);
  CHECK(s.failed_runs < 40); // subtle: only runs where the lost task held an unfinished split
  CHECK(any_failure_mentions(s, "never delivered although every stream ended OK (faults fired"));
  cfg.plant_bug.clear();
  auto clean = sweep_of(cfg, 40);
  CHECK_MESSAGE(clean.failed_runs == 0, clean.summary());
}

TEST_CASE("a sweep with dispatcher crashes finds the restored job that forgets a held split") {
  auto cfg = base(ShardingPolicy::dynamic);
  cfg.random_faults = "dispatcher:1";
  cfg.plant_bug = "forget-held-split";
  auto s = sweep_of(cfg, 40);
  INFO(s.summary());
  CHECK(s.failed_runs > 0);
  CHECK(s.failed_runs < 40); // subtle: only runs where the crash hit while a split was held
  CHECK(any_failure_mentions(s, "never delivered although every stream ended OK (faults fired"));
  cfg.plant_bug.clear();
  auto clean = sweep_of(cfg, 40);
  CHECK_MESSAGE(clean.failed_runs == 0, clean.summary());
}

TEST_CASE("a sweep finds the consumer that plans with one credit too many") {
  auto cfg = base(ShardingPolicy::dynamic);
  cfg.plant_bug = "credit-off-by-one";
  auto s = sweep_of(cfg, 40);
  INFO(s.summary());
  CHECK(s.failed_runs > 0);
  CHECK(s.failed_runs < 40); // subtle: only runs where the reader fell behind its credits
  CHECK(any_failure_mentions(s, "more than its"));
  cfg.plant_bug.clear();
  auto clean = sweep_of(cfg, 40);
  CHECK_MESSAGE(clean.failed_runs == 0, clean.summary());
}

namespace {
// Plants the round-skipping bug directly into the coordinated-read planner (the hooked build of
// coordinated/round_robin.cpp), without the simulated cluster.
struct SkipRound : conveyor::actors::hooks::Hooks {
  int64_t index, at;
  SkipRound(int64_t i, int64_t r) : index(i), at(r) {}
  bool skip_round(int64_t consumer_index, int64_t round) override {
    return consumer_index == index && round == at;
  }
};
} // namespace

TEST_CASE("planted bug: a consumer that skips a round is found by the alignment check") {
  SkipRound bug{1, 37};
  auto* previous = conveyor::actors::hooks::install(&bug);
  conveyor::test_support::MiniCluster c{3, 7};
  c.add_task(1);
  c.add_task(2);
  for (int s = 0; s < 2000; ++s)
    c.step();
  conveyor::actors::hooks::install(previous);
  CHECK(c.aligned_rounds() == -38); // consumer 1 is out of step from round 37 on
}
