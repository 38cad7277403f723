// One simulated cluster run (sim/sim.hpp's simulate): builds the dispatcher, worker and
// consumer nodes from the production actors (actors/dispatcher_actor, worker_actor,
// consumer_actor) over SimTransport, takes what the seed decides (derived_config.hpp), injects
// the faults, runs the world until every stream ended, lets the cluster settle, and checks the
// invariants (invariants.hpp) against the reference (reference.hpp).
#pragma once

#include "sim/reference.hpp"
#include "sim/sim.hpp"
#include "pipeline/graph/dataset.hpp"

namespace conveyor::sim {

SimResult run_cluster(const Dataset& dataset, const SimConfig& config, const Reference& reference,
                      const FaultSpec& spec);

} // namespace conveyor::sim
