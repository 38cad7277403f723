// The seam between actors and the network: how a node makes an actor reachable at host:port
// and how an actor connects to one. Production uses CAF's middleman over TCP; the simulator
// (a later issue) swaps in an implementation over its simulated network. Protocol code reaches
// peers only through handles in messages and through connect_to() below.
#pragma once

#include <memory>
#include <set>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/expected.hpp>
#include <caf/node_id.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/timespan.hpp>

#include "net/bulk.hpp"
#include "conveyor/options.hpp"
#include "messages/dispatcher_consumer.hpp"
#include "messages/dispatcher_worker.hpp"
#include "messages/errors.hpp"

namespace conveyor::actors {

class Transport {
public:
  virtual ~Transport() = default;
  // Makes a node's entry actor reachable at host:port (port 0 = any free port) with its typed
  // interface; returns the bound port.
  virtual caf::expected<uint16_t> publish(const msg::dispatcher_actor& whom,
                                          const std::string& host, uint16_t port) = 0;
  virtual caf::expected<uint16_t> publish(const msg::worker_actor& whom, const std::string& host,
                                          uint16_t port) = 0;
  virtual void unpublish(const caf::actor& whom, uint16_t port) = 0;
  // An actor answering (caf::connect_atom, std::string host, uint16_t port) with
  // (caf::node_id, caf::strong_actor_ptr, std::set<std::string> interface) — the shape of
  // CAF's middleman actor, so that requests to it carry a timeout and never block.
  virtual caf::actor connector() = 0;

  // --- the bulk data path (net/bulk.hpp). A transport without one returns an empty server /
  // client: elements then travel inline in element_batch replies, as before.
  // Worker side: this node's bulk server listening on `host`:`port` (0 = a free port).
  virtual caf::expected<BulkServer> serve_bulk(const std::string& host, uint16_t port) {
    (void)host;
    (void)port;
    return BulkServer{};
  }
  // Consumer side: the actor that opens bulk channels for `consumer` and delivers their frames.
  virtual caf::actor bulk_client(const caf::actor& consumer) {
    (void)consumer;
    return {};
  }
};

// TCP through CAF's middleman (the actor system must have loaded it).
std::shared_ptr<Transport> make_tcp_transport(caf::actor_system& sys);
// Mutual TLS through CAF's openssl module (configure_actor_system loads it when the
// NetworkConfig names TLS files).
std::shared_ptr<Transport> make_tls_transport(caf::actor_system& sys, const NetworkConfig& network);
// The node's transport: TLS when `network.tls()`, TCP otherwise.
std::shared_ptr<Transport> make_transport(caf::actor_system& sys, const NetworkConfig& network);

namespace detail {
// A failed connection as a Status that starts with `context` (errors of conveyor's category
// carry their own message, which to_status keeps as it is); a handshake that never completed
// also says the likely causes.
inline Status connect_error(const caf::error& err, const std::string& context) {
  Status s = msg::to_status(err, context);
  if (s.message().rfind(context, 0) != 0)
    s = Status{s.code(), context + ": " + s.message()};
  // (After retries the last attempt's error is in the message: "last: ...disconnect_during_handshake".)
  if (s.code() == ErrorCode::deadline_exceeded || err == caf::sec::disconnect_during_handshake ||
      s.message().find("disconnect_during_handshake") != std::string::npos)
    s = Status{s.code(), s.message() +
                           " (the handshake did not complete: the peer is frozen or overloaded, "
                           "or it refused the connection at its `--max-connections` cap (its log "
                           "then says so), or one side uses TLS (--tls-*) and the other does not "
                           "or trusts another CA)"};
  return s;
}

// Checks the connector's answer: a published actor with exactly Handle's interface.
template <class Handle>
Expected<Handle> check_connected(caf::actor_system& sys, const HostPort& addr,
                                 caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
  if (!ptr)
    return Status{ErrorCode::unavailable, "nothing is published at " + addr.to_string()};
  auto expected = sys.message_types(caf::detail::type_list<Handle>{});
  if (ifs != expected)
    return Status{ErrorCode::version_mismatch,
                  "the peer at " + addr.to_string() +
                    " speaks another protocol (its actor interface differs from this build's)"};
  return caf::actor_cast<Handle>(std::move(ptr));
}
} // namespace detail

// An actor that answers one (caf::connect_atom) like the connector does, but retries a failed
// attempt (nothing listening yet, nothing published yet, a refused or reset connection) with
// exponential backoff (10 ms doubling up to 500 ms) until `total` has passed: a connection
// attempt fails within a millisecond when nothing listens, so without retries a timeout
// would never be waited for. The final error names the attempts and the last failure.
// It quits early when `requester` (if given) goes down.
caf::actor spawn_retrying_connect(caf::actor_system& sys, caf::actor connector,
                                  const HostPort& addr, caf::timespan total,
                                  caf::strong_actor_ptr requester = nullptr);

// Connects from inside an event-based actor: `on_done(Expected<Handle>)` runs in `self`'s
// context within `timeout` (retrying until then; unavailable / deadline_exceeded when no
// connection was made, version_mismatch for another interface). `what` names the peer.
template <class Handle, class Self, class OnDone>
void connect_to(Self* self, Transport& transport, const HostPort& addr, caf::timespan timeout,
                std::string what, OnDone on_done) {
  auto* sys = &self->system();
  auto helper = spawn_retrying_connect(*sys, transport.connector(), addr, timeout,
                                       caf::actor_cast<caf::strong_actor_ptr>(self));
  self->request(helper, timeout + std::chrono::seconds(1), caf::connect_atom_v)
    .then(
      [=](const caf::node_id&, caf::strong_actor_ptr& ptr,
          const std::set<std::string>& ifs) mutable {
        auto h = detail::check_connected<Handle>(*sys, addr, ptr, ifs);
        if (!h.ok())
          on_done(Expected<Handle>{h.status().with_context("connecting to " + what)});
        else
          on_done(std::move(h));
      },
      [=](caf::error& err) mutable {
        on_done(Expected<Handle>{
          detail::connect_error(err, "connecting to " + what + " at " + addr.to_string())});
      });
}

// The same from a thread outside the actor system (blocks at most `timeout`).
template <class Handle>
Expected<Handle> connect_blocking(caf::actor_system& sys, Transport& transport,
                                  const HostPort& addr, caf::timespan timeout,
                                  const std::string& what) {
  caf::scoped_actor self{sys};
  Expected<Handle> result{Status{ErrorCode::internal, "no answer"}};
  auto helper = spawn_retrying_connect(sys, transport.connector(), addr, timeout);
  self->request(helper, timeout + std::chrono::seconds(1), caf::connect_atom_v)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
        result = detail::check_connected<Handle>(sys, addr, ptr, ifs);
        if (!result.ok())
          result = result.status().with_context("connecting to " + what);
      },
      [&](caf::error& err) {
        result = detail::connect_error(err, "connecting to " + what + " at " + addr.to_string());
      });
  return result;
}

} // namespace conveyor::actors
