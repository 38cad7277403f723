// The virtual cost of production in the simulator (SimConfig::worker_rate): each element a
// worker's task makes costs about 1/rate of that worker's time, so a worker makes at most `rate`
// elements per virtual second, as a CPU-bound map would. Without it the simulator's pipelines
// cost no virtual time, and no worker could fall behind a trainer.
//
// It acts through the task actor's hook (node/hooks.hpp produce_allowance / produced), which
// exists only in the simulator's build of the worker: a task asks before each step, makes one
// element when the worker's CPU is free and waits (a timer, virtual time passes) when it is busy.
// The worker's tasks share its CPU. While installed it forwards the planted-bug hooks to the
// hooks it replaced, so a planted bug still acts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "node/hooks.hpp"
#include "sim/rng.hpp"
#include "sim/trace.hpp"

namespace conveyor::sim {

class World;

class ProductionCost : public actors::hooks::Hooks {
public:
  // Installs itself for its lifetime. `noise`: each element's cost varies by up to +-noise of
  // the mean 1/rate (uniformly, drawn from `seed`).
  ProductionCost(World& world, double rate, double noise, uint64_t seed);
  ~ProductionCost() override;
  ProductionCost(const ProductionCost&) = delete;
  ProductionCost& operator=(const ProductionCost&) = delete;

  int64_t produce_allowance(uint64_t task, int64_t& wait_ns) override;
  void produced(int64_t elements) override;

  std::unique_ptr<actors::hooks::SplitAnswerFilter> new_split_answer_filter() override;
  bool forget_lost_split() override;
  bool forget_held_split() override;
  bool credit_off_by_one() override;
  bool skip_round(int64_t consumer_index, int64_t round) override;

private:
  // The running node's CPU, when it runs a worker: (slot, incarnation); false otherwise.
  bool current_worker(std::pair<std::size_t, uint32_t>& key) const;

  World& world_;
  Duration cost_; // mean per element
  double noise_;
  Rng rng_;
  actors::hooks::Hooks* previous_;
  std::map<std::pair<std::size_t, uint32_t>, Time> busy_until_;       // per worker process
  std::map<std::tuple<std::size_t, uint32_t, uint64_t>, Time> armed_; // per task: its timer's time
};

} // namespace conveyor::sim
