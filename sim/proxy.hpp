// The stand-in for another node's actor, as CAF's forwarding_actor_proxy is over BASP: it
// hands every message to the simulated network, and dies (monitors get down_msg) when the
// remote actor exits or the connection to its node is lost.
#pragma once

#include <cstddef>
#include <cstdint>

#include <caf/actor_proxy.hpp>

namespace conveyor::sim {

class Network;

class SimProxy final : public caf::actor_proxy {
public:
  // Lives on node (home_slot, home_incarnation); stands for the actor with this proxy's own
  // id() on node node().
  SimProxy(caf::actor_config& cfg, Network& network, std::size_t home_slot,
           uint32_t home_incarnation);

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* ctx) override;
  bool add_backlink(caf::abstract_actor* x) override;
  bool remove_backlink(caf::abstract_actor* x) override;
  void kill_proxy(caf::execution_unit* ctx, caf::error reason) override;

  std::size_t home_slot() const { return home_slot_; }
  uint32_t home_incarnation() const { return home_incarnation_; }

private:
  Network& network_;
  std::size_t home_slot_;
  uint32_t home_incarnation_;
};

} // namespace conveyor::sim
