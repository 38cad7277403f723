// One simulated cluster run (conveyor/sim.hpp's simulate): builds the dispatcher, worker and
// consumer nodes from the production actors (actors/dispatcher_actor, worker_actor,
// consumer_actor) over SimTransport, lets the seed draw what the configuration leaves open,
// injects the faults, runs the world until every stream ended, lets the cluster settle, and
// checks the invariants (actors/sim/invariants.hpp).
#pragma once

#include <vector>

#include "conveyor/sim.hpp"
#include "pipeline/dataset.hpp"

namespace conveyor::sim {

// What the dataset yields, computed once per sweep (the invariants compare against it).
struct Reference {
  std::vector<Element> elements;
  bool ordered = true;           // two local runs gave the same order
  bool split_transparent = true; // see Observation::split_transparent
};
Expected<Reference> make_reference(const Dataset& dataset);

// Checks what simulate() refuses: counts, options, node names in faults, the planted bug name.
Status validate_config(const SimConfig& config, const FaultSpec& spec);

SimResult run_cluster(const Dataset& dataset, const SimConfig& config, const Reference& reference,
                      const FaultSpec& spec);

} // namespace conveyor::sim
