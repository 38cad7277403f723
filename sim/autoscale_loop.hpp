// The autoscaler's closed loop in virtual time: the dispatcher's WorkerEstimator and
// AutoscalePolicy (the production classes) drive a model of workers whose CPU-bound map makes
// each produce about `worker_rate` elements/s, read by one trainer that takes an element every
// 1/`trainer_rate` s. CAF-free and separate from simulate(): the simulator runs the real actors,
// but a pipeline there costs no virtual time, so it cannot show workers falling behind a trainer.
// What the model stands for:
//   - the trainer's counters as a consumer reports them (elements, time waiting on workers,
//     reading time), cumulative, observed every `interval` as the dispatcher's tick does;
//   - DYNAMIC splits: the dispatcher hands each split to one worker; a worker produces its split
//     into a bounded buffer (its prefetch), element by element at its noisy rate;
//   - the actuator (`conveyor run --autoscale`, or kubectl): a started worker registers after a
//     delay drawn per worker; scaling down drains the newest worker (SIGTERM): it takes no new
//     split, delivers the rest of its split and its buffer, then leaves;
//   - the trainer slows down (its rate changes to `slow_rate`) at `slow_at`.
// The result records the target over time and every element the trainer received, so a test
// can check convergence to the oracle count (the fewest workers that keep up), the absence of
// flapping, and that each element arrived exactly once across the scale events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dispatcher/autoscale_policy.hpp"

namespace conveyor::sim {

struct AutoscaleLoopConfig {
  uint64_t seed = 1;
  double worker_rate = 200;  // elements/s one worker's map produces (on average)
  double rate_noise = 0.2;   // each worker's rate varies by up to this share, per tick
  double trainer_rate = 900; // elements/s the trainer takes when nothing is missing
  double slow_at_s = 300;    // when the trainer slows down ...
  double slow_rate = 300;    // ... to this rate
  double end_s = 600;        // virtual time the read lasts; then the dataset ends
  double tick_s = 0.01;
  double interval_s = 1;       // the dispatcher's --autoscale-interval-ms
  double register_min_s = 0.3; // a started worker registers after a delay drawn in this range
  double register_max_s = 3;   //
  int64_t split_size = 64;     // elements per DYNAMIC split
  int64_t buffer = 32;         // elements a worker holds ready (its prefetch)
  int64_t start_workers = 1;
  actors::AutoscaleConfig policy; // bounds, cooldown, thresholds
};

struct AutoscaleLoopResult {
  struct Change {
    double at_s = 0;
    int64_t target = 0;
    std::string reason;
  };
  std::vector<Change> changes; // every changed target (the actuator's input)
  // The fewest workers that keep the trainer's wait share under the policy's low threshold:
  // ceil(trainer_rate x (1 - low_wait) / worker_rate), within the bounds.
  int64_t oracle_fast = 0;
  int64_t oracle_slow = 0; // the same for slow_rate
  int64_t handed_out = 0;  // elements in the splits the dispatcher handed out
  int64_t received = 0;    // elements the trainer received
  int64_t duplicates = 0;  // of those, received before
  int64_t missing = 0;     // handed out, never received
  int64_t drains = 0;      // workers drained and gone
  double end_s = 0;        // virtual time when everything handed out was delivered

  // The target at `t` (the start count before the first change).
  int64_t target_at(double t, int64_t start) const;
  // Changes in [from, to).
  int count_changes(double from, double to) const;
  std::string describe() const; // the changes, one per line
};

AutoscaleLoopResult run_autoscale_loop(const AutoscaleLoopConfig& config);

} // namespace conveyor::sim
