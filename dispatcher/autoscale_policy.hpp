// The autoscaler's decision: how many workers the cluster should have. CAF-free; the dispatcher
// actor feeds it one observation per autoscale interval (dispatcher_actor_autoscale.cpp) and
// hands a changed target to the actuator (scale_command.hpp).
//
// Cachew-like hill climbing on the trainers' wait share on workers (the largest job's, over the
// interval; worker_estimate.hpp):
//   above `high_wait`  climb: to the worker estimate, at least one more worker;
//   below `low_wait`   for `settle_rounds` observations in a row: probe one worker less;
//   in between        hold (the hysteresis band keeps a noisy share from flapping).
// When the share climbs above `high_wait` after a move down (at once, or later, as noise shows
// the smaller count was too small after all), the move is undone and the count it left is a floor
// the policy does not probe below for 10 cooldowns (doubling each time at the same count, so a
// cluster at its right size probes ever more rarely). A floor is lifted early when the readers'
// demand (the elements/s they would take without waiting) falls under 80% of what it was when the
// floor was set, for `settle_rounds` observations in a row (one interval's demand is noisy): the
// trainers slowed, and fewer workers may do now. After every change it
// waits `cooldown` before deciding again (new workers register, pipelines warm up), and holds
// while the registered workers have not reached the target yet (for up to 3 cooldowns: an
// actuator that failed does not block the policy for good). Targets stay within
// [min_workers, max_workers]. Without readers there is no signal: it holds.
#pragma once

#include <cstdint>
#include <string>

#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

struct AutoscaleConfig {
  int64_t min_workers = 1;
  int64_t max_workers = 64;
  double cooldown_s = 30;
  double high_wait = 0.10;
  double low_wait = 0.05;
  int settle_rounds = 3;
};

// invalid_argument naming the bad bound (as the dispatcher's flags spell them).
Status validate(const AutoscaleConfig& c);

struct AutoscaleObservation {
  double now_s = 0;      // any steady clock, seconds
  int64_t workers = 0;   // registered now
  double wait_share = 0; // the trainers' share of time waiting on workers (0..1)
  int64_t estimate = -1; // workers needed (WorkerEstimator::total), -1 unknown
  double demand = -1;    // elements/s the readers would take without waiting, -1 unknown
  bool has_readers = false;
};

struct AutoscaleDecision {
  int64_t target = 0;
  bool changed = false;
  std::string reason; // why (for the log)
};

class AutoscalePolicy {
public:
  explicit AutoscalePolicy(AutoscaleConfig config) : config_(config) {}
  AutoscaleDecision decide(const AutoscaleObservation& o);
  // The current target; -1 before the first decide().
  int64_t target() const { return target_; }
  const AutoscaleConfig& config() const { return config_; }

private:
  int64_t clamp(int64_t n) const;
  AutoscaleDecision move(double now_s, int64_t to, std::string reason);
  AutoscaleDecision hold(std::string reason) const { return {target_, false, std::move(reason)}; }

  AutoscaleConfig config_;
  int64_t target_ = -1;
  double last_change_s_ = 0;
  int low_rounds_ = 0;
  int64_t came_down_from_ = 0; // the count before the last move down (0: the last move was up)
  int64_t floor_ = 0;          // do not probe below this count ...
  double floor_until_ = 0;     // ... until then
  double block_s_ = 0;         // how long the current floor blocks (doubles at each failed probe)
  double floor_demand_ = -1;   // the readers' demand when the floor was set
  int demand_low_rounds_ = 0;  // observations in a row with the demand under 80% of that
};

} // namespace conveyor::actors
