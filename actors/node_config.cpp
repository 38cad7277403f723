#include "actors/node_config.hpp"

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include "actors/log.hpp"
#include "actors/openssl_error_queue.hpp"
#include "conveyor/async.hpp"
#include "messages/all.hpp"

namespace conveyor {

void configure_actor_system(caf::actor_system_config& cfg, const NetworkConfig& network) {
  cfg.load<caf::io::middleman>();
  actors::register_conveyor_types(cfg);
  cfg.set("middleman.heartbeat-interval", caf::timespan{network.heartbeat_interval});
  cfg.set("middleman.connection-timeout", caf::timespan{network.connection_timeout});
  // Consumers reach workers over connections they open themselves (to the advertised
  // address), never relayed through the dispatcher.
  cfg.set("middleman.enable-automatic-connections", false);
  if (network.scheduler_threads > 0)
    cfg.set("scheduler.max-threads", network.scheduler_threads);
  if (network.tls()) { // mutual TLS (CAF_NOTES §7); validate_security() checked the files
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = network.tls_cert;
    cfg.openssl_key = network.tls_key;
    cfg.openssl_cafile = network.tls_ca;
    if (!actors::openssl_error_queue_guarded())
      log::warning("tls", "CAF's TLS connections may be cut when any peer disconnects: OpenSSL's "
                          "error queue is not cleared before each call (actors/openssl_error_queue.hpp)");
  }
}

namespace actors {

void register_conveyor_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::conveyor>();
  msg::add_error_category(cfg);
}

NodeConfig::NodeConfig(const NetworkConfig& network) { configure_actor_system(*this, network); }

} // namespace actors
} // namespace conveyor
