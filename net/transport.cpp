#include "net/transport.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "node/log.hpp"
#include "net/tls_stream.hpp"
#include "messages/all.hpp"

namespace conveyor::actors {

namespace {

class TcpTransport : public Transport {
public:
  explicit TcpTransport(caf::actor_system& sys) : sys_(sys) {}

  // reuse_addr: a restarted node can take its port back at once.
  caf::expected<uint16_t> publish(const msg::dispatcher_actor& whom, const std::string& host,
                                  uint16_t port) override {
    return sys_.middleman().publish(whom, port, host.c_str(), true);
  }

  caf::expected<uint16_t> publish(const msg::worker_actor& whom, const std::string& host,
                                  uint16_t port) override {
    return sys_.middleman().publish(whom, port, host.c_str(), true);
  }

  void unpublish(const caf::actor& whom, uint16_t port) override {
    (void)sys_.middleman().unpublish(whom, port);
  }

  caf::expected<BulkServer> serve_bulk(const std::string& host, uint16_t port) override {
    return spawn_tcp_bulk_server(sys_, host, port);
  }

  caf::actor bulk_client(const caf::actor& consumer) override {
    return spawn_tcp_bulk_client(sys_, consumer);
  }

  caf::actor connector() override {
    return caf::actor_cast<caf::actor>(sys_.middleman().actor_handle());
  }

private:
  caf::actor_system& sys_;
};

// Mutual TLS: the same calls through CAF's openssl module; its middleman actor answers
// connect_atom like the plain one, after the TLS handshake (both certificates checked against the
// CA). A plain peer never completes that handshake: connect_to's timeout ends the wait.
// The bulk data path runs its own TLS sessions (net/tls_stream.hpp) with the same files.
class TlsTransport : public Transport {
public:
  TlsTransport(caf::actor_system& sys, const NetworkConfig& network)
    : sys_(sys), network_(network) {}

  caf::expected<uint16_t> publish(const msg::dispatcher_actor& whom, const std::string& host,
                                  uint16_t port) override {
    return caf::openssl::publish(whom, port, host.c_str(), true);
  }

  caf::expected<uint16_t> publish(const msg::worker_actor& whom, const std::string& host,
                                  uint16_t port) override {
    return caf::openssl::publish(whom, port, host.c_str(), true);
  }

  // caf/openssl/unpublish.hpp does not compile in 0.17.6 (it omits the actor address), so ask
  // the openssl middleman actor directly.
  void unpublish(const caf::actor& whom, uint16_t port) override {
    caf::anon_send(sys_.openssl_manager().actor_handle(), caf::unpublish_atom_v, whom.address(),
                   port);
  }

  caf::actor connector() override {
    return caf::actor_cast<caf::actor>(sys_.openssl_manager().actor_handle());
  }

  caf::expected<BulkServer> serve_bulk(const std::string& host, uint16_t port) override {
    auto endpoint = TlsEndpoint::create(network_, TlsEndpoint::Role::server);
    if (!endpoint.ok())
      return msg::to_error(endpoint.status());
    return spawn_tcp_bulk_server(sys_, host, port, *endpoint);
  }

  caf::actor bulk_client(const caf::actor& consumer) override {
    auto endpoint = TlsEndpoint::create(network_, TlsEndpoint::Role::client);
    if (!endpoint.ok()) { // the files were checked at start-up; elements then go inline
      log::error("transport", "no TLS bulk path: " + endpoint.status().message());
      return {};
    }
    return spawn_tcp_bulk_client(sys_, consumer, *endpoint);
  }

private:
  caf::actor_system& sys_;
  NetworkConfig network_;
};

} // namespace

namespace {

struct retry_state {
  static inline const char* name = "conveyor.connect";
  caf::actor connector;
  HostPort addr;
  caf::timespan total{};
  caf::actor_clock::time_point deadline;
  caf::timespan backoff = std::chrono::milliseconds(10);
  caf::response_promise promise;
  int attempts = 0;
  caf::actor_clock::time_point attempt_started;
  std::string last_error;
  bool timed_out = false; // the last attempt ran out of time (a silent peer)
};

using retry_ptr = caf::stateful_actor<retry_state>*;

void give_up(retry_ptr self, ErrorCode code) {
  auto& st = self->state;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(st.total).count();
  st.promise.deliver(msg::make_error(
    code, "no connection to " + st.addr.to_string() + " within " + std::to_string(ms) + " ms (" +
            std::to_string(st.attempts) + " attempt(s); last: " + st.last_error + ")"));
  self->quit();
}

// How a connection that never came about is reported: a peer that stayed silent ran out the
// deadline; one that refused (or published nothing) is unavailable, however the clock ended.
ErrorCode final_code(const retry_state& st) {
  return st.timed_out ? ErrorCode::deadline_exceeded : ErrorCode::unavailable;
}

// True when another attempt fits before the deadline (then it is scheduled).
bool retry_later(retry_ptr self) {
  auto& st = self->state;
  auto left = st.deadline - self->clock().now();
  if (left <= std::chrono::milliseconds(2))
    return false;
  // The last retry comes just before the deadline: the whole timeout is used.
  auto delay = std::min<caf::timespan>(st.backoff, left - std::chrono::milliseconds(1));
  self->delayed_send(self, delay, msg::retry_atom_v);
  st.backoff = std::min<caf::timespan>(st.backoff * 2, std::chrono::milliseconds(500));
  return true;
}

// A connection_timeout before the middleman's connection-timeout had passed since the attempt
// began: CAF's heartbeat tick ended a handshake still in progress (see the caller).
bool early_heartbeat_timeout(retry_ptr self) {
  auto& st = self->state;
  auto limit =
    caf::get_or(self->system().config(), "middleman.connection-timeout", caf::timespan{0});
  return self->clock().now() - st.attempt_started < limit;
}

void attempt(retry_ptr self) {
  auto& st = self->state;
  auto left = st.deadline - self->clock().now();
  if (left <= caf::timespan{0}) {
    give_up(self, final_code(st));
    return;
  }
  ++st.attempts;
  st.attempt_started = self->clock().now();
  self->request(st.connector, left, caf::connect_atom_v, st.addr.host, st.addr.port)
    .then(
      [self](caf::node_id& node, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
        auto& st = self->state;
        if (!ptr) { // the process listens but has not published its actor (yet)
          st.last_error = "nothing is published there";
          if (retry_later(self))
            return;
        }
        st.promise.deliver(std::move(node), std::move(ptr), std::move(ifs));
        self->quit();
      },
      [self](caf::error& err) {
        auto& st = self->state;
        if (err == caf::sec::request_timeout) {
          // Our own time ran out. After refusals, the last attempt had only the remainder of
          // the window: the peer is still the one that refused, not a silent one. After earlier
          // attempts, their error says more than this cut-off one.
          if (st.attempts == 1)
            st.last_error = self->system().render(err);
          st.timed_out = st.timed_out || st.attempts == 1;
          give_up(self, final_code(st));
          return;
        }
        st.last_error = self->system().render(err);
        // A silent peer: the middleman's connection-timeout ended the handshake.
        st.timed_out = err == caf::sec::connection_timeout;
        if (st.timed_out && early_heartbeat_timeout(self)) {
          // CAF 0.17.6's BASP broker gives a connection it opens a `last_seen` of 0, so its next
          // heartbeat tick (at most middleman.heartbeat-interval away) ends the handshake unless
          // the peer's answer came first. The tick just passed: an attempt started now has a
          // whole interval. Not backing off keeps a merely slow peer reachable.
          st.last_error += " (the peer's handshake did not come before the middleman's next "
                           "heartbeat tick)";
          if (st.deadline - self->clock().now() > std::chrono::milliseconds(2)) {
            self->send(self, msg::retry_atom_v);
            return;
          }
        }
        if (!retry_later(self))
          give_up(self, final_code(st));
      });
}

caf::behavior retrying_connect(retry_ptr self, caf::actor connector, HostPort addr,
                               caf::timespan total, caf::strong_actor_ptr requester) {
  auto& st = self->state;
  if (requester) { // nobody waits for the answer once the requester is gone
    self->monitor(requester);
    self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  }
  st.connector = std::move(connector);
  st.addr = std::move(addr);
  st.total = total;
  st.deadline = self->clock().now() + total;
  return {
    [self](caf::connect_atom) -> caf::response_promise {
      self->state.promise = self->make_response_promise();
      attempt(self);
      return self->state.promise;
    },
    [self](msg::retry_atom) { attempt(self); },
  };
}

} // namespace

caf::actor spawn_retrying_connect(caf::actor_system& sys, caf::actor connector,
                                  const HostPort& addr, caf::timespan total,
                                  caf::strong_actor_ptr requester) {
  return sys.spawn(retrying_connect, std::move(connector), addr, total, std::move(requester));
}

std::shared_ptr<Transport> make_tcp_transport(caf::actor_system& sys) {
  return std::make_shared<TcpTransport>(sys);
}

std::shared_ptr<Transport> make_tls_transport(caf::actor_system& sys,
                                              const NetworkConfig& network) {
  return std::make_shared<TlsTransport>(sys, network);
}

std::shared_ptr<Transport> make_transport(caf::actor_system& sys, const NetworkConfig& network) {
  if (!network.tls())
    return make_tcp_transport(sys);
  if (sys.has_openssl_manager())
    return make_tls_transport(sys, network);
  log::error("transport", "TLS files are configured but this actor system has no openssl module "
                          "(configure it with conveyor::configure_actor_system); using plain TCP");
  return make_tcp_transport(sys);
}

} // namespace conveyor::actors
