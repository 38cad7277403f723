#include "actors/transport.hpp"

#include <caf/io/middleman.hpp>

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

} // namespace

std::shared_ptr<Transport> make_tcp_transport(caf::actor_system& sys) {
  return std::make_shared<TcpTransport>(sys);
}

} // namespace conveyor::actors
