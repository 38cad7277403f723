// The actor_system_config of every conveyor node (dispatcher, worker, client): the middleman
// for TCP, conveyor's message types under the same names everywhere, the "conveyor" error
// category, and connection heartbeats so a frozen peer is noticed (CAF_NOTES §5).
#pragma once

#include <caf/actor_system_config.hpp>

#include "conveyor/options.hpp"

namespace conveyor::actors {

// Conveyor's message types and error category, registered under the same names on every node.
// Real nodes get it through configure_actor_system; simulated nodes (actors/sim/) call it alone
// because the simulated network replaces the middleman.
void register_conveyor_types(caf::actor_system_config& cfg);

class NodeConfig : public caf::actor_system_config {
public:
  explicit NodeConfig(const NetworkConfig& network = {});
};

} // namespace conveyor::actors
