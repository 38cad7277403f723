#include "actors/sim/sim_transport.hpp"

#include <map>

#include <caf/atom.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/sim/world.hpp"
#include "messages/all.hpp"

namespace conveyor::sim {

namespace {

// Local-only messages from the network's callbacks to the connector (never serialized).
using connected_atom = caf::atom_constant<caf::atom("sim_conok")>;
using refused_atom = caf::atom_constant<caf::atom("sim_conno")>;

struct connector_state {
  static inline const char* name = "conveyor.sim.connector";
  uint64_t next_token = 1;
  std::map<uint64_t, caf::response_promise> pending;
};

caf::behavior connector_impl(caf::stateful_actor<connector_state>* self, World* world,
                             std::size_t slot, uint32_t incarnation) {
  return {
    [=](caf::connect_atom, const std::string& host, uint16_t port) {
      auto* node = world->node(slot);
      if (node == nullptr || node->incarnation() != incarnation)
        return;
      auto token = self->state.next_token++;
      self->state.pending.emplace(token, self->make_response_promise());
      auto me = caf::actor_cast<caf::actor>(self);
      bool answers = world->network().connect(
        *node, host + ":" + std::to_string(port),
        [me, token](caf::expected<Network::Connected> r) {
          if (r)
            caf::anon_send(me, connected_atom::value, token, r->node, r->actor, r->ifs);
          else
            caf::anon_send(me, refused_atom::value, token, r.error());
        });
      if (!answers)
        self->state.pending.erase(token); // dropped promise: the requester's timeout fires
    },
    [=](connected_atom, uint64_t token, caf::node_id& nid, caf::strong_actor_ptr& ptr,
        std::set<std::string>& ifs) {
      auto i = self->state.pending.find(token);
      if (i == self->state.pending.end())
        return;
      i->second.deliver(std::move(nid), std::move(ptr), std::move(ifs));
      self->state.pending.erase(i);
    },
    [=](refused_atom, uint64_t token, caf::error& err) {
      auto i = self->state.pending.find(token);
      if (i == self->state.pending.end())
        return;
      i->second.deliver(std::move(err));
      self->state.pending.erase(i);
    },
  };
}

} // namespace

SimTransport::SimTransport(World& world, std::size_t slot, uint32_t incarnation)
  : world_(world), slot_(slot), incarnation_(incarnation) {}

caf::expected<uint16_t> SimTransport::publish_impl(caf::strong_actor_ptr whom,
                                                   std::set<std::string> ifs,
                                                   const std::string& host, uint16_t port) {
  auto* node = world_.node(slot_);
  if (node == nullptr || node->incarnation() != incarnation_)
    return caf::make_error(caf::sec::cannot_open_port, "the node is down");
  if (port == 0)
    port = next_port_++;
  host_ = host;
  if (auto err = world_.network().publish(*node, host + ":" + std::to_string(port), std::move(whom),
                                          std::move(ifs)))
    return err;
  return port;
}

caf::expected<uint16_t> SimTransport::publish(const msg::dispatcher_actor& whom,
                                              const std::string& host, uint16_t port) {
  auto* node = world_.node(slot_);
  if (node == nullptr)
    return caf::make_error(caf::sec::cannot_open_port, "the node is down");
  return publish_impl(caf::actor_cast<caf::strong_actor_ptr>(whom),
                      node->system().message_types(caf::detail::type_list<msg::dispatcher_actor>{}),
                      host, port);
}

caf::expected<uint16_t> SimTransport::publish(const msg::worker_actor& whom, const std::string& host,
                                              uint16_t port) {
  auto* node = world_.node(slot_);
  if (node == nullptr)
    return caf::make_error(caf::sec::cannot_open_port, "the node is down");
  return publish_impl(caf::actor_cast<caf::strong_actor_ptr>(whom),
                      node->system().message_types(caf::detail::type_list<msg::worker_actor>{}),
                      host, port);
}

void SimTransport::unpublish(const caf::actor& whom, uint16_t port) {
  auto* node = world_.node(slot_);
  if (node != nullptr && node->incarnation() == incarnation_)
    world_.network().unpublish(*node, host_ + ":" + std::to_string(port), whom.address());
}

caf::actor SimTransport::connector() {
  if (!connector_) {
    auto* node = world_.node(slot_);
    if (node == nullptr || node->incarnation() != incarnation_)
      return caf::actor{};
    connector_ = node->system().spawn(connector_impl, &world_, slot_, incarnation_);
  }
  return connector_;
}

} // namespace conveyor::sim
