// The simulator's autoscale actuator (SimConfig::autoscale): what `conveyor run --autoscale` or
// `kubectl scale` do for a real cluster. The dispatcher's autoscaler hands it every changed
// target (DispatcherStart::scale_to, in place of --scale-command); it then, between messages:
//   - target above the workers it runs: starts that many more, numbered on from the last; each
//     starts its worker (which registers) after a delay drawn in [register_min, register_max];
//   - target below: drains the newest ones (as SIGTERM; their process ends once drained), or
//     cancels one whose worker has not started yet.
// The cluster run supplies the node operations; the actuator keeps the order and the record.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/rng.hpp"
#include "sim/sim.hpp"
#include "sim/trace.hpp"

namespace conveyor::sim {

class World;

class ScaleActuator {
public:
  struct Nodes {
    std::function<void(int index)> add;   // creates node "worker-<index>" (no worker yet)
    std::function<void(int index)> start; // starts its worker (it registers)
    std::function<void(int index)> stop;  // drains its worker, or ends a node that has none yet
  };
  // `first_index`: the workers 0 .. first_index-1 run already.
  ScaleActuator(World& world, Nodes nodes, int first_index, Duration register_min,
                Duration register_max, uint64_t seed);

  // The autoscaler's new target (called on the dispatcher actor: acts between messages).
  void request(int64_t target);

  const std::vector<SimScaleTarget>& targets() const { return targets_; }
  int64_t started() const { return started_; }
  int64_t stopped() const { return stopped_; }
  // Worker indexes started so far are 0 .. next_index()-1.
  int next_index() const { return next_; }

private:
  void apply(int64_t target);

  World& world_;
  Nodes nodes_;
  Duration register_min_;
  Duration register_max_;
  Rng rng_;
  std::vector<int> running_; // indexes of the workers neither drained nor ended, oldest first
  int next_;
  int64_t started_ = 0;
  int64_t stopped_ = 0;
  std::vector<SimScaleTarget> targets_;
};

} // namespace conveyor::sim
