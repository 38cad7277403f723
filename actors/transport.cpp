#include "actors/transport.hpp"

#include "actors/log.hpp"

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/send.hpp>

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

  caf::expected<BulkServer> serve_bulk(const std::string& host) override {
    return spawn_tcp_bulk_server(sys_, host);
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
class TlsTransport : public Transport {
public:
  explicit TlsTransport(caf::actor_system& sys) : sys_(sys) {}

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

private:
  caf::actor_system& sys_;
};

} // namespace

std::shared_ptr<Transport> make_tcp_transport(caf::actor_system& sys) {
  return std::make_shared<TcpTransport>(sys);
}

std::shared_ptr<Transport> make_tls_transport(caf::actor_system& sys) {
  return std::make_shared<TlsTransport>(sys);
}

std::shared_ptr<Transport> make_transport(caf::actor_system& sys, const NetworkConfig& network) {
  if (!network.tls())
    return make_tcp_transport(sys);
  if (sys.has_openssl_manager())
    return make_tls_transport(sys);
  log::error("transport", "TLS files are configured but this actor system has no openssl module "
                          "(configure it with conveyor::configure_actor_system); using plain TCP");
  return make_tcp_transport(sys);
}

} // namespace conveyor::actors
