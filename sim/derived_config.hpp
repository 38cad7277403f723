// What one seed decides about a simulated run beyond the user's SimConfig (TigerBeetle's
// "swarm" testing: every seed also explores another configuration): network latency and jitter,
// credits, split size, task buffer and produce step, the trainer's step time, when consumers
// start, and the faults drawn from the fault spec. Printed with every result.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/task_runner.hpp"
#include "sim/sim.hpp"

namespace conveyor::sim {

struct DerivedConfig {
  std::chrono::microseconds latency{200};
  std::chrono::microseconds jitter{100};
  int64_t credits = 65536;
  int64_t split_size = 64;
  actors::TaskLimits task_limits;
  std::chrono::microseconds consumer_step{0};
  std::vector<std::chrono::microseconds> consumer_start;
  std::vector<Fault> faults;
  // The dispatcher's simulated disk (sim/sim_journal.hpp): time to a group's fsync, and
  // records after which the journal compacts into a snapshot (0 = never).
  std::chrono::microseconds fsync_latency{100};
  int64_t compact_after = 0;

  // "latency 1338us, jitter 880us, credits 4096, split size 2, ..."
  std::string describe() const;
  // Cross-trainer cache reads: whether the seed drew a window small enough to evict (else the
  // workers' default, which no simulated run fills).
  bool cache_evicts() const {
    return task_limits.cross_trainer_cache_bytes < actors::TaskLimits{}.cross_trainer_cache_bytes;
  }
};

DerivedConfig derive_config(const SimConfig& config, const FaultSpec& spec);

// Checks what simulate() refuses: counts, options, node names in faults, the planted bug name.
Status validate_config(const SimConfig& config, const FaultSpec& spec);

} // namespace conveyor::sim
