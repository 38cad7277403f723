#include "sim/sim_transport.hpp"

#include <map>

#include <caf/atom.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "net/bulk_frame.hpp"
#include "sim/world.hpp"
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
        *node, host + ":" + std::to_string(port), [me, token](caf::expected<Network::Connected> r) {
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

// --- the bulk path (production: TCP brokers in net/bulk.cpp)

struct bulk_server_state {
  static inline const char* name = "conveyor.sim.bulk_server";
  uint16_t port = 0;
  uint64_t next_channel = 0;
  std::map<uint64_t, std::pair<caf::actor, uint64_t>> channels; // id -> client, its local id
};

// Takes its port as an argument: CAF 0.17.6 spawns an argument-less function through a null
// shared_ptr<std::tuple<>> it dereferences (UBSan reports it), so no actor is spawned without one.
caf::behavior bulk_server_impl(caf::stateful_actor<bulk_server_state>* self, uint16_t port) {
  self->state.port = port;
  self->set_down_handler([self](caf::down_msg& down) {
    auto& ch = self->state.channels;
    for (auto i = ch.begin(); i != ch.end();)
      i = i->second.first.address() == down.source ? ch.erase(i) : std::next(i);
  });
  return {
    [=](msg::bulk_hello_atom, uint64_t local, caf::actor client) {
      self->monitor(client);
      const uint64_t channel = ++self->state.next_channel;
      self->state.channels[channel] = {client, local};
      self->send(client, msg::bulk_ready_atom_v, local, channel);
    },
    [=](msg::bulk_send_atom, uint64_t channel, GatherBuffer& frame) {
      auto c = self->state.channels.find(channel);
      if (c == self->state.channels.end())
        return; // closed: the consumer saw it too
      actors::bulk::FrameHeader h;
      if (actors::bulk::read_frame_header(frame.own.data(), actors::bulk::kFrameHeaderBytes, h))
        return;
      std::vector<char> payload = frame.flatten(actors::bulk::kFrameHeaderBytes);
      self->send(c->second.first, msg::bulk_frame_atom_v, c->second.second, h.task, h.batch_seq,
                 h.index, h.count, std::move(payload));
    },
  };
}

struct bulk_client_state {
  static inline const char* name = "conveyor.sim.bulk_client";
  caf::actor consumer;
  std::map<uint64_t, caf::actor_addr> server_of; // channel -> server (a proxy)
};

caf::behavior bulk_client_impl(caf::stateful_actor<bulk_client_state>* self, caf::actor consumer,
                               caf::actor connector) {
  self->state.consumer = consumer;
  self->monitor(consumer);
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    if (down.source == st.consumer.address()) {
      self->quit();
      return;
    }
    for (auto i = st.server_of.begin(); i != st.server_of.end();) {
      if (i->second == down.source) {
        self->send(st.consumer, msg::bulk_lost_atom_v, i->first,
                   "the worker's bulk server is gone: " + caf::to_string(down.reason));
        i = st.server_of.erase(i);
      } else {
        ++i;
      }
    }
  });
  return {
    [=](msg::bulk_open_atom, const std::string& host, uint16_t port, uint64_t channel) {
      self->request(connector, std::chrono::seconds(5), caf::connect_atom_v, host, port)
        .then(
          [=](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            auto server = caf::actor_cast<caf::actor>(ptr);
            if (!server) {
              self->send(self->state.consumer, msg::bulk_lost_atom_v, channel,
                         std::string{"nothing at the bulk port"});
              return;
            }
            self->monitor(server);
            self->state.server_of[channel] = server.address();
            self->send(server, msg::bulk_hello_atom_v, channel, caf::actor_cast<caf::actor>(self));
          },
          [=](caf::error& err) {
            self->send(self->state.consumer, msg::bulk_lost_atom_v, channel,
                       "cannot connect to the bulk port: " + caf::to_string(err));
          });
    },
    [=](msg::bulk_ready_atom, uint64_t local, uint64_t channel) {
      self->send(self->state.consumer, msg::bulk_ready_atom_v, local, channel);
    },
    [=](msg::bulk_frame_atom, uint64_t channel, uint64_t task, uint64_t seq, uint32_t index,
        uint32_t count, std::vector<char>& payload) {
      self->send(self->state.consumer, msg::bulk_frame_atom_v, channel, task, seq, index, count,
                 std::move(payload));
    },
  };
}

} // namespace

caf::expected<actors::BulkServer> SimTransport::serve_bulk(const std::string& host,
                                                           uint16_t wanted) {
  (void)wanted; // simulated nodes take their ports in order: nothing to pin
  auto* node = world_.node(slot_);
  if (node == nullptr || node->incarnation() != incarnation_)
    return caf::make_error(caf::sec::cannot_open_port, "the node is down");
  auto port = next_port_++;
  auto server = node->system().spawn(bulk_server_impl, port);
  if (auto err = world_.network().publish(*node, host + ":" + std::to_string(port),
                                          caf::actor_cast<caf::strong_actor_ptr>(server), {})) {
    caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
    return err;
  }
  return actors::BulkServer{server, port};
}

caf::actor SimTransport::bulk_client(const caf::actor& consumer) {
  auto* node = world_.node(slot_);
  auto c = connector();
  if (node == nullptr || node->incarnation() != incarnation_ || !c)
    return caf::actor{};
  return node->system().spawn(bulk_client_impl, consumer, c);
}

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

caf::expected<uint16_t> SimTransport::publish(const msg::worker_actor& whom,
                                              const std::string& host, uint16_t port) {
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
