// The autoscaler in the actor simulator (issue 38): the real dispatcher, worker and consumer
// actors in virtual time, each worker's pipeline costing virtual time per element (a CPU-bound
// map at `worker_rate`), one trainer taking elements at a fixed rate that drops halfway, and
// the dispatcher's AutoscalePolicy acting through the simulated actuator (workers started that
// register after a delay; the newest drained, as SIGTERM, on the way down). Per seed:
//   - converged: from kConverged s until the trainer slows, the target stays within one worker
//     of the oracle (the fewest workers that keep up);
//   - no flapping: at most kMaxChanges target changes in that window (a probe one below and
//     back is two; a policy without hysteresis changes every few intervals);
//   - scaled down: from kSettleSlow s after the slowdown until kTail s before the read ended,
//     within one worker of the slower trainer's oracle, again with at most kMaxChanges changes;
//     at least one worker was drained. (The epoch's tail is left out: there the trainer waits
//     for the last splits while the other workers have none, and the estimate, as tf.data's,
//     asks for more workers, which cannot help.)
//   - DYNAMIC across the scale events: every element of range(N) arrived exactly once, and the
//     simulator's invariants held.
// CONVEYOR_SIM_SEEDS sets the number of seeds (default 500; this sweep runs a 25th of them, so
// CONVEYOR_SIM_SEEDS=5000 runs 201: docs/SIMULATION.md "Autoscaling").
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "pipeline/graph/text_form.hpp"
#include "sim/rng.hpp"
#include "sim/sim.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::SimConfig;
using conveyor::SimResult;
using conveyor::sim_test::env_int;

namespace {

constexpr double kSlowAt = 60;     // s: the trainer slows down
constexpr double kSlowFor = 60;    // s: the slow phase's length (at the slow rate)
constexpr double kConverged = 30;  // s: within one worker of the oracle from here on
constexpr double kSettleSlow = 40; // s after the slowdown: within one of the slower oracle
constexpr double kTail = 10;       // s before the read ended: the epoch's tail
constexpr int kMaxChanges = 4;     // target changes allowed in a steady phase

struct Scenario {
  SimConfig cfg;
  int64_t elements = 0;
  int64_t oracle_fast = 0;
  int64_t oracle_slow = 0;
};

// A trainer rate for which `n` workers are clearly the oracle: above what n-1 workers make at
// the policy's high threshold, and within what n make at its low one (as autoscale_test.cpp).
double rate_for(int64_t n, double worker_rate, const conveyor::actors::AutoscaleConfig& p,
                conveyor::sim::Rng& rng) {
  const double lo = n == 1 ? 0.3 : static_cast<double>(n - 1) / (1 - p.high_wait);
  const double hi = static_cast<double>(n) / (1 - p.low_wait);
  return worker_rate * (lo + (hi - lo) * (0.15 + 0.7 * rng.unit()));
}

Scenario draw(uint64_t seed, const conveyor::actors::AutoscaleConfig& policy) {
  conveyor::sim::Rng rng(seed ^ 0xa5ca1eULL);
  Scenario s;
  auto& c = s.cfg;
  c.seed = seed;
  c.workers = 1; // the actuator starts the rest
  c.options.policy = conveyor::ShardingPolicy::dynamic;
  c.options.max_outstanding_requests = 4;
  c.latency = std::chrono::microseconds{200};
  c.jitter = std::chrono::microseconds{100};
  c.task_buffer_elements = rng.chance(0.5) ? 8 : 32;
  c.worker_rate = 20 + 20 * rng.unit(); // elements/s of one worker's CPU-bound map
  c.worker_rate_noise = 0.2;
  c.autoscale = policy;
  c.autoscale_interval = std::chrono::milliseconds{1000};
  s.oracle_fast = static_cast<int64_t>(2 + rng.below(4)); // 2..5
  s.oracle_slow = static_cast<int64_t>(1 + rng.below(static_cast<uint64_t>(s.oracle_fast - 1)));
  c.trainer_rate = rate_for(s.oracle_fast, *c.worker_rate, policy, rng);
  c.trainer_slow_rate = rate_for(s.oracle_slow, *c.worker_rate, policy, rng);
  c.trainer_slow_at = std::chrono::milliseconds{static_cast<int64_t>(kSlowAt * 1000)};
  s.elements = static_cast<int64_t>(*c.trainer_rate * kSlowAt + c.trainer_slow_rate * kSlowFor);
  return s;
}

conveyor::actors::AutoscaleConfig good_policy() {
  conveyor::actors::AutoscaleConfig p;
  p.min_workers = 1;
  p.max_workers = 10;
  p.cooldown_s = 4;
  return p;
}

// The target at `t` (the start count before the first change).
int64_t target_at(const SimResult& r, double t, int64_t start) {
  int64_t n = start;
  for (const auto& c : r.scale_targets)
    if (c.at_s <= t)
      n = c.target;
  return n;
}

int64_t max_distance(const SimResult& r, int64_t oracle, double from, double to) {
  const auto dist = [oracle](int64_t n) { return n > oracle ? n - oracle : oracle - n; };
  int64_t worst = dist(target_at(r, from, 1));
  for (const auto& c : r.scale_targets)
    if (c.at_s >= from && c.at_s < to)
      worst = std::max(worst, dist(c.target));
  return worst;
}

int count_changes(const SimResult& r, double from, double to) {
  return static_cast<int>(
    std::count_if(r.scale_targets.begin(), r.scale_targets.end(),
                  [&](const auto& c) { return c.at_s >= from && c.at_s < to; }));
}

std::string describe(const Scenario& s, const SimResult& r) {
  std::string out =
    "seed " + std::to_string(s.cfg.seed) + ": worker " + std::to_string(*s.cfg.worker_rate) +
    "/s, trainer " + std::to_string(*s.cfg.trainer_rate) + "/s (oracle " +
    std::to_string(s.oracle_fast) + ") then " + std::to_string(s.cfg.trainer_slow_rate) +
    "/s (oracle " + std::to_string(s.oracle_slow) + ") at " + std::to_string(kSlowAt) + " s, " +
    std::to_string(s.elements) + " elements; " + r.summary() + "\n  targets:";
  for (const auto& c : r.scale_targets)
    out += " " + std::to_string(c.target) + "@" + std::to_string(c.at_s).substr(0, 6);
  out += "\n  started " + std::to_string(r.workers_started) + ", drained " +
         std::to_string(r.workers_drained) + ", the read ended at " +
         std::to_string(std::chrono::duration<double>(r.consumers.at(0).ended_at).count()) + " s";
  return out;
}

// The scenario's checks; what failed, empty when the run passed.
std::vector<std::string> check(const Scenario& s, const SimResult& r) {
  std::vector<std::string> failed;
  const auto expect = [&](bool cond, const char* what) {
    if (!cond)
      failed.emplace_back(what);
  };
  expect(r.ok(), "the simulator's invariants failed");
  expect(max_distance(r, s.oracle_fast, kConverged, kSlowAt) <= 1,
         "not within one worker of the oracle from 30 s on");
  expect(count_changes(r, kConverged, kSlowAt) <= kMaxChanges,
         "flapping: more than 4 changes in the steady fast phase");
  const double end =
    std::chrono::duration<double>(r.consumers.at(0).ended_at).count() - kTail; // (one trainer)
  expect(end > kSlowAt + kSettleSlow + 10, "the read ended before the scale-down could show");
  expect(max_distance(r, s.oracle_slow, kSlowAt + kSettleSlow, end) <= 1,
         "not within one worker of the slower trainer's oracle 40 s after it slowed");
  expect(count_changes(r, kSlowAt + kSettleSlow, end) <= kMaxChanges,
         "flapping: more than 4 changes after scaling down");
  expect(r.workers_drained >= 1, "no worker was drained");
  // Every element exactly once (DYNAMIC), whatever workers came and went.
  std::vector<int64_t> got;
  for (const auto& c : r.consumers) {
    expect(c.ended && c.status.ok(), "the stream did not end OK");
    for (const auto& e : c.elements)
      got.push_back(e[0].as_int64());
  }
  std::sort(got.begin(), got.end());
  bool exact = static_cast<int64_t>(got.size()) == s.elements;
  for (std::size_t i = 0; exact && i < got.size(); ++i)
    exact = got[i] == static_cast<int64_t>(i);
  expect(exact, "an element was lost or repeated");
  return failed;
}

struct SweepOutcome {
  int runs = 0;
  int failed = 0;
  std::string first_failures;
  std::map<std::string, int> by_check; // failed seeds per check
};

// Stops after `stop_after` failed seeds (a seed costs seconds under the sanitizers).
SweepOutcome sweep(int runs, const conveyor::actors::AutoscaleConfig& policy,
                   int stop_after = std::numeric_limits<int>::max()) {
  SweepOutcome out;
  for (int seed = 1; seed <= runs && out.failed < stop_after; ++seed) {
    auto s = draw(static_cast<uint64_t>(seed), policy);
    auto d = conveyor::parse_dataset("range(" + std::to_string(s.elements) + ")");
    REQUIRE(d.ok());
    auto r = conveyor::simulate(*d, s.cfg);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    ++out.runs;
    auto failed = check(s, *r);
    if (failed.empty())
      continue;
    for (const auto& f : failed)
      ++out.by_check[f];
    if (++out.failed <= 3) {
      out.first_failures += describe(s, *r) + "\n";
      for (const auto& f : failed)
        out.first_failures += "  - " + f + "\n";
    }
  }
  return out;
}

} // namespace

TEST_CASE("autoscale in the simulator: converges to the oracle count, does not flap, scales down "
          "when the trainer slows, and loses or repeats no element") {
  const int runs = env_int("CONVEYOR_SIM_SEEDS", 500) / 25 + 1;
  auto o = sweep(runs, good_policy());
  std::string tally;
  for (const auto& [what, n] : o.by_check)
    tally += "\n  " + std::to_string(n) + " x " + what;
  MESSAGE(o.runs << " seeds, " << o.failed << " failed" << tally);
  CHECK_MESSAGE(o.failed == 0, o.first_failures);
}

TEST_CASE("autoscale in the simulator: the checks catch an autoscaler without hysteresis") {
  // Thresholds 1 point apart, no cooldown, a single low round: every noisy interval moves it.
  auto p = good_policy();
  p.cooldown_s = 0;
  p.settle_rounds = 1;
  p.low_wait = 0.09;
  p.high_wait = 0.10;
  auto o = sweep(3, p, 1);
  MESSAGE(o.first_failures);
  CHECK(o.failed > 0);
}
