// The autoscaler's closed loop (sim/autoscale_loop.hpp: the production WorkerEstimator and
// AutoscalePolicy driving modelled workers with a CPU-bound map and a trainer at a fixed rate,
// in virtual time): from one worker it reaches the oracle count within a minute and stays within
// one worker of it with ever rarer probes (no flapping); when the trainer slows it scales down
// to the new oracle; and across every scale event (workers started, the newest drained) each
// DYNAMIC element arrives exactly once. The simulator proper covers the real actors' drains
// (drain_test.cpp); its pipelines cost no virtual time, hence this model for the rates.
// CONVEYOR_SIM_SEEDS sets the number of seeds (default 500; this test runs half of them).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "sim/autoscale_loop.hpp"
#include "sim/rng.hpp"
#include "test/sim/sweep_support.hpp"

using conveyor::sim::AutoscaleLoopConfig;
using conveyor::sim::AutoscaleLoopResult;
using conveyor::sim_test::env_int;

namespace {

// A trainer rate for which `n` workers are clearly the oracle: above what n-1 workers make at
// the policy's high threshold, and within what n make at its low one. At a rate right on a
// threshold two counts are equally right, and the noise decides between them.
double rate_for(int64_t n, double worker_rate, const conveyor::actors::AutoscaleConfig& p,
                conveyor::sim::Rng& rng) {
  const double lo = n == 1 ? 0.3 : static_cast<double>(n - 1) / (1 - p.high_wait);
  const double hi = static_cast<double>(n) / (1 - p.low_wait);
  return worker_rate * (lo + (hi - lo) * (0.1 + 0.8 * rng.unit()));
}

AutoscaleLoopConfig draw(uint64_t seed) {
  conveyor::sim::Rng rng(seed ^ 0x5ca1eULL);
  AutoscaleLoopConfig c;
  c.seed = seed;
  c.policy.min_workers = 1;
  c.policy.max_workers = 12;
  c.policy.cooldown_s = 5;
  c.worker_rate = 100 + 300 * rng.unit(); // elements/s of one worker's CPU-bound map
  const auto fast = static_cast<int64_t>(3 + rng.below(8));
  const auto slow = static_cast<int64_t>(1 + rng.below(static_cast<uint64_t>(fast - 2)));
  c.trainer_rate = rate_for(fast, c.worker_rate, c.policy, rng);
  c.slow_rate = rate_for(slow, c.worker_rate, c.policy, rng);
  return c;
}

// The largest distance of the target from `oracle` during [from, to).
int64_t max_distance(const AutoscaleLoopResult& r, int64_t start, int64_t oracle, double from,
                     double to) {
  const auto dist = [oracle](int64_t n) { return n > oracle ? n - oracle : oracle - n; };
  int64_t worst = dist(r.target_at(from, start));
  for (const auto& c : r.changes)
    if (c.at_s >= from && c.at_s < to)
      worst = std::max(worst, dist(c.target));
  return worst;
}

} // namespace

TEST_CASE("autoscale loop: converges to the oracle count, does not flap, scales down when the "
          "trainer slows, and loses or repeats no element") {
  const int runs = std::max(1, env_int("CONVEYOR_SIM_SEEDS", 500) / 2);
  int failed = 0;
  for (int seed = 1; seed <= runs && failed < 3; ++seed) {
    const auto c = draw(static_cast<uint64_t>(seed));
    const auto r = conveyor::sim::run_autoscale_loop(c);
    INFO("seed " << seed << ": worker " << c.worker_rate << "/s, trainer " << c.trainer_rate
                 << "/s then " << c.slow_rate << "/s at " << c.slow_at_s << " s\n"
                 << r.describe());
    bool ok = true;
    const auto check = [&](bool cond, const char* what) {
      if (!cond) {
        ok = false;
        FAIL_CHECK(std::string{what});
      }
    };
    // Converged a minute in, and stays within one worker (a probe goes one below, and back).
    check(max_distance(r, c.start_workers, r.oracle_fast, 60, c.slow_at_s) <= 1,
          "not within one worker of the oracle from 60 s on");
    // No flapping: few changes, and the probes back off (none in the phase's last 100 s).
    check(r.count_changes(60, c.slow_at_s) <= 4, "more than 4 changes in a steady phase");
    check(r.count_changes(c.slow_at_s - 100, c.slow_at_s) <= 1, "the probes do not back off");
    // The trainer slowed: down to the new oracle within 150 s, and steady there.
    check(max_distance(r, c.start_workers, r.oracle_slow, c.slow_at_s + 150, c.end_s) <= 1,
          "not within one worker of the slower trainer's oracle 150 s after it slowed");
    check(r.count_changes(c.slow_at_s + 150, c.end_s) <= 4,
          "more than 4 changes after scaling down");
    // DYNAMIC across the scale events: each element handed out arrived exactly once.
    check(r.drains >= 1, "no worker was drained");
    check(r.duplicates == 0, "an element arrived twice");
    check(r.missing == 0, "an element handed out never arrived");
    check(r.received == r.handed_out, "received != handed out");
    check(r.end_s > 0, "the workers did not deliver everything after the end");
    failed += ok ? 0 : 1;
  }
  MESSAGE(runs << " seeds, " << failed << " failed");
  CHECK(failed == 0);
}

TEST_CASE("autoscale loop: a seed replays the same run") {
  const auto c = draw(7);
  const auto a = conveyor::sim::run_autoscale_loop(c);
  const auto b = conveyor::sim::run_autoscale_loop(c);
  CHECK(a.describe() == b.describe());
  CHECK(a.received == b.received);
  CHECK(a.end_s == b.end_s);
  CHECK(a.changes.size() >= 2); // it scaled up and down: the run is not trivially equal
}
