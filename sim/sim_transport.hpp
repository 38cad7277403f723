// actors::Transport over the simulated network: what the production node code calls to publish
// its entry actor and to connect to a peer by "host:port" — here a named endpoint of the
// simulated network ("worker-2:6000") instead of a TCP socket. One per node incarnation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/transport.hpp"

namespace conveyor::sim {

class World;

class SimTransport : public actors::Transport {
public:
  SimTransport(World& world, std::size_t slot, uint32_t incarnation);

  caf::expected<uint16_t> publish(const msg::dispatcher_actor& whom, const std::string& host,
                                  uint16_t port) override;
  caf::expected<uint16_t> publish(const msg::worker_actor& whom, const std::string& host,
                                  uint16_t port) override;
  void unpublish(const caf::actor& whom, uint16_t port) override;
  // An actor on this node answering (connect_atom, host, port) as CAF's middleman actor does.
  caf::actor connector() override;
  // The bulk path over the simulated network: plain actors carrying the same frames as CAF
  // messages, so frames take virtual time (latency + size / bandwidth) and break with links.
  caf::expected<actors::BulkServer> serve_bulk(const std::string& host, uint16_t wanted) override;
  caf::actor bulk_client(const caf::actor& consumer) override;

private:
  caf::expected<uint16_t> publish_impl(caf::strong_actor_ptr whom, std::set<std::string> ifs,
                                       const std::string& host, uint16_t port);

  World& world_;
  std::size_t slot_;
  uint32_t incarnation_;
  std::string host_;           // the host part of what this node published
  uint16_t next_port_ = 40000; // for port 0
  caf::actor connector_;
};

} // namespace conveyor::sim
