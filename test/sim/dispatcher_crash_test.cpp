// The dispatcher crashes and restarts from its simulated disk (sim/sim_journal.hpp),
// losing whatever was not yet synced, or a consumer's connection to it breaks: the reads go on
// and end with every element. Stronger than the invariants (which let a stream fail loudly
// under faults): here every stream must end OK and complete.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "sim/sim.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::Dataset;
using conveyor::ShardingPolicy;
using conveyor::SimConfig;

namespace {

void every_stream_completes(ShardingPolicy policy, int64_t copies,
                            std::vector<conveyor::Fault> faults = {}) {
  SimConfig cfg;
  cfg.workers = 3;
  cfg.options.policy = policy;
  if (faults.empty())
    cfg.random_faults = "dispatcher:1";
  cfg.faults = std::move(faults);
  const auto dataset = Dataset::range(300).map("square");
  int crashed_mid_read = 0;
  const int runs = conveyor::sim_test::capped_seeds(60);
  auto s = conveyor::sweep(dataset, cfg, 1, runs, 0, [&](const conveyor::SimResult& r) {
    INFO(r.summary());
    REQUIRE(r.consumers.size() == 1);
    const auto& c = r.consumers[0];
    CHECK(c.ended);
    CHECK_MESSAGE(c.status.ok(), c.status.to_string());
    CHECK(static_cast<int64_t>(c.elements.size()) == 300 * copies);
    if (!r.faults_injected.empty())
      ++crashed_mid_read;
  });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  CHECK_MESSAGE(s->failed_runs == 0, s->summary());
  CHECK(crashed_mid_read > runs / 2); // the crashes did hit reads in progress
}

} // namespace

TEST_CASE("dispatcher crash on the simulated disk: every DYNAMIC read completes, exactly once") {
  every_stream_completes(ShardingPolicy::dynamic, 1);
}

TEST_CASE("dispatcher crash on the simulated disk: every OFF read completes") {
  every_stream_completes(ShardingPolicy::off, 3);
}

// A pipeline that is not per-split (shuffle) is at-least-once: every element, repeats allowed.
// The restored job re-creates its tasks under their journaled ids; a consumer that had seen the
// old task's end of sequence once skipped the new one and lost the splits handed to it (16 of
// 40 seeds ended OK with elements missing).
TEST_CASE("dispatcher crash, a pipeline that is not per-split: every element at least once") {
  SimConfig cfg;
  cfg.workers = 4;
  cfg.options.policy = ShardingPolicy::dynamic;
  cfg.random_faults = "dispatcher:1";
  const auto dataset = Dataset::range(200).shuffle(8, 3);
  auto s = conveyor::sweep(dataset, cfg, 1, conveyor::sim_test::capped_seeds(40), 0,
                           [&](const conveyor::SimResult& r) {
                             INFO(r.summary());
                             REQUIRE(r.consumers.size() == 1);
                             const auto& c = r.consumers[0];
                             CHECK(c.ended);
                             CHECK_MESSAGE(c.status.ok(), c.status.to_string());
                             std::vector<int64_t> got;
                             for (const auto& e : c.elements)
                               got.push_back(e.components.at(0).as_int64());
                             std::sort(got.begin(), got.end());
                             got.erase(std::unique(got.begin(), got.end()), got.end());
                             CHECK(got.size() == 200);
                           });
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  CHECK_MESSAGE(s->failed_runs == 0, s->summary());
}

TEST_CASE(
  "a consumer whose connection to the dispatcher breaks re-joins with its id: nothing lost") {
  using conveyor::Fault;
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  for (auto policy : {ShardingPolicy::off, ShardingPolicy::dynamic}) {
    int64_t copies = policy == ShardingPolicy::off ? 3 : 1;
    every_stream_completes(
      policy, copies,
      {Fault::disconnect("consumer-0", "dispatcher", microseconds{0}).at_fraction(0.3)});
    every_stream_completes(
      policy, copies,
      {Fault::partition("consumer-0", "dispatcher", microseconds{0}, milliseconds{2000})
         .at_fraction(0.3)});
  }
}
