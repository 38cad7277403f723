// The autoscaler's policy (dispatcher/autoscale_policy.hpp), alone and against a model cluster:
// a trainer that would consume D elements/s if it never waited, workers that make p each. With
// n workers it waits on them a share max(0, 1 - n*p/D) of its time (plus measurement noise).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "dispatcher/autoscale_policy.hpp"
#include "dispatcher/worker_estimate.hpp"

using namespace conveyor::actors;

namespace {

AutoscaleConfig config(int64_t lo = 1, int64_t hi = 32) {
  AutoscaleConfig c;
  c.min_workers = lo;
  c.max_workers = hi;
  c.cooldown_s = 30;
  return c;
}

AutoscaleObservation obs(double t, int64_t workers, double wait, int64_t estimate = -1) {
  return AutoscaleObservation{t, workers, wait, estimate, -1, true};
}

} // namespace

TEST_CASE("autoscale policy: bounds are checked, naming the flag") {
  CHECK(validate(config()).ok());
  auto c = config(4, 2);
  CHECK(validate(c).message().find("--max-workers") != std::string::npos);
  c = config(-1, 2);
  CHECK(validate(c).message().find("--min-workers") != std::string::npos);
}

TEST_CASE("autoscale policy: climbs to the estimate, holds in the band, probes down, backs off") {
  AutoscalePolicy p{config(1, 8)};
  auto d = p.decide(obs(0, 2, 0.5));
  CHECK_FALSE(d.changed); // starts from what runs
  CHECK(p.target() == 2);
  CHECK_FALSE(p.decide(obs(10, 2, 0.5, 4)).changed); // cooldown
  d = p.decide(obs(30, 2, 0.5, 4));
  CHECK(d.changed);
  CHECK(d.target == 4);                              // straight to the estimate
  CHECK_FALSE(p.decide(obs(70, 3, 0.5, 8)).changed); // the workers have not come yet
  d = p.decide(obs(70, 4, 0.5, 20));
  CHECK(d.target == 8);                                // bounded by max_workers
  CHECK_FALSE(p.decide(obs(200, 8, 0.5, 20)).changed); // at max: holds
  CHECK_FALSE(p.decide(obs(300, 8, 0.07)).changed);    // in the band
  // Low for settle_rounds (3) observations: probe one less.
  CHECK_FALSE(p.decide(obs(310, 8, 0.01)).changed);
  CHECK_FALSE(p.decide(obs(320, 8, 0.01)).changed);
  d = p.decide(obs(330, 8, 0.01));
  CHECK(d.changed);
  CHECK(d.target == 7);
  // The probe made the trainers wait: back to 8, and no probe below 8 for 10 cooldowns.
  d = p.decide(obs(370, 7, 0.3, 9));
  CHECK(d.target == 8);
  for (double t = 400; t < 670; t += 10)
    CHECK_FALSE(p.decide(obs(t, 8, 0.0)).changed);
  // After it (300 s): probe again; failing again doubles the block.
  d = p.decide(obs(700, 8, 0.0));
  CHECK(d.target == 7);
  CHECK(p.decide(obs(740, 7, 0.3)).target == 8);
  for (double t = 780; t < 1300; t += 10)
    CHECK_FALSE(p.decide(obs(t, 8, 0.0)).changed);
  CHECK(p.decide(obs(1400, 8, 0.0)).target == 7);
}

TEST_CASE("autoscale policy: no readers, no signal - and min_workers is kept") {
  AutoscalePolicy p{config(2, 8)};
  auto d = p.decide(obs(0, 0, 0));
  CHECK(d.changed); // below the minimum: up to it at once
  CHECK(d.target == 2);
  AutoscaleObservation idle{100, 2, 0.0, 0, 0, false};
  for (int i = 0; i < 10; ++i, idle.now_s += 10)
    CHECK_FALSE(p.decide(idle).changed);
  for (double t = 300; t < 600; t += 10)
    CHECK_FALSE(p.decide(obs(t, 2, 0.0)).changed); // low, but at --min-workers
}

namespace {

struct Model {
  double demand;     // elements/s the trainer would take
  double per_worker; // elements/s one worker makes
  double wait(int64_t n) const { return std::max(0.0, 1.0 - n * per_worker / demand); }
};

// The count the autoscaler aims at: the fewest workers that keep the wait share at or under
// the policy's low threshold.
int64_t oracle(const Model& m, const AutoscaleConfig& c) {
  for (int64_t n = c.min_workers; n < c.max_workers; ++n)
    if (m.wait(n) <= c.low_wait)
      return n;
  return c.max_workers;
}

struct Run {
  int64_t final_target = 0;
  int changes_late = 0; // target changes in the last hour
  int off_late = 0;     // observations of the last hour more than one worker off `best`
  // After the first half hour (the climb past the need and the probes back down): a step down
  // within 10 cooldowns of a step up (a see-saw).
  int quick_reversals = 0;
};

// Runs the policy (and the estimate) against `m` for `seconds` of virtual time, observing every
// 5 s; workers follow a target one interval after it changed.
Run run(AutoscalePolicy& p, const Model& m, int64_t best, int64_t& workers, double& t,
        double seconds, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> noise(-0.015, 0.015);
  Run r;
  const double end = t + seconds;
  int64_t pending = -1;
  double last_up = -1e9;
  for (; t < end; t += 5) {
    if (pending >= 0) {
      workers = pending;
      pending = -1;
    }
    const double w = std::clamp(m.wait(workers) + noise(rng), 0.0, 1.0);
    const int64_t estimate = workers_needed(workers, 1, w, p.config().low_wait);
    // What the estimator would measure: the delivered rate over (1 - the measured share).
    const double demand = std::min(m.demand, workers * m.per_worker) / (1.0 - std::min(w, 0.95));
    auto d = p.decide(AutoscaleObservation{t, workers, w, estimate, demand, true});
    if (d.changed) {
      if (d.target < workers && t - last_up < 10 * p.config().cooldown_s &&
          t >= end - seconds + 1800)
        ++r.quick_reversals;
      if (d.target > workers)
        last_up = t;
      pending = d.target;
      if (t >= end - 3600)
        ++r.changes_late;
    }
    if (t >= end - 3600 && std::abs(p.target() - best) > 1)
      ++r.off_late;
  }
  r.final_target = p.target();
  return r;
}

} // namespace

TEST_CASE("autoscale policy: converges to within one worker of the oracle, without flapping, "
          "and scales down when the trainer slows (200 seeds)") {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng{seed};
    std::uniform_real_distribution<double> demand(100, 1500), per_worker(75, 150);
    Model m{demand(rng), per_worker(rng)};
    const auto c = config(1, 32);
    AutoscalePolicy p{c};
    int64_t workers = 1;
    double t = 0;
    CAPTURE(m.demand);
    CAPTURE(m.per_worker);
    // Two hours: the first to converge, the second to watch it stay.
    // The trainer slows to a third in the second: fewer workers do.
    for (int phase = 0; phase < 2; ++phase) {
      if (phase == 1)
        m.demand /= 3;
      CAPTURE(phase);
      const int64_t best = oracle(m, c);
      CAPTURE(best);
      auto r = run(p, m, best, workers, t, 7200, rng);
      CHECK(std::abs(r.final_target - best) <= 1);
      // Settled: within one worker of the oracle over the last hour but for the odd probe one
      // further down (under 5% of the time; probes back off, doubling), and never a see-saw.
      CHECK(r.off_late <= 36);
      CHECK(r.changes_late <= 6);
      CHECK(r.quick_reversals == 0);
    }
  }
}
