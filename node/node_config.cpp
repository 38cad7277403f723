#include "node/node_config.hpp"

#include <mutex>
#include <set>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/logger.hpp>
#include <caf/node_id.hpp>
#include <caf/openssl/manager.hpp>

#include "node/log.hpp"
#include "net/openssl_error_queue.hpp"
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
  // Deserialize BASP messages in the broker's thread, not in worker threads. CAF 0.17.6 (and
  // 0.18) removes a closed connection's route only once every message received before the close
  // is delivered; with workers busy that is late, and the OS has meanwhile given the closed
  // socket's number (CAF's connection handle) to a new connection, whose route the late cleanup
  // then erases: the new peer's requests arrive without a sender and are never answered (a
  // Client handshake timed out in ~1 of 300 connects; test/unit/actors/connection_reuse_test.cpp).
  // Control messages are small (elements go over the bulk path), so the broker thread keeps up.
  cfg.set("middleman.workers", size_t{0});
  if (network.scheduler_threads > 0)
    cfg.set("scheduler.max-threads", network.scheduler_threads);
  // An idle scheduler thread spins briefly (aggressive polling), then by default polls 500 more
  // times with a 50 us sleep before it blocks. A node always has some message traffic, so with
  // the default every thread of every node stayed in that sleep-poll loop: 20 000 wake-ups a
  // second per thread, which took the cores the pipelines need (`conveyor bench scaling`: 2
  // workers on 2 cores reached 62% of twice one core's rate). Blocking right after the spin
  // (0 moderate polls; a new message wakes the thread) gave 96% there, and 8-byte elements
  // 3.3 -> 4.9 M/s, 1 MiB 0.41-0.44 -> 0.67-0.76 of raw TCP (docs/ARCHITECTURE.md "scheduler").
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  if (network.tls()) { // mutual TLS (CAF_NOTES §7); validate_security() checked the files
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = network.tls_cert;
    cfg.openssl_key = network.tls_key;
    cfg.openssl_cafile = network.tls_ca;
    if (!actors::openssl_error_queue_guarded())
      log::warning("tls",
                   "CAF's TLS connections may be cut when any peer disconnects: OpenSSL's "
                   "error queue is not cleared before each call (net/openssl_error_queue.hpp)");
  }
}

namespace actors {

void register_conveyor_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::conveyor>();
  msg::add_error_category(cfg);
}

NodeConfig::NodeConfig(const NetworkConfig& network) { configure_actor_system(*this, network); }

namespace {

// The node IDs of the live NodeSystems; the mutex also keeps two from starting at once, so that
// the ID the next middleman takes is the one predicted.
std::mutex live_nodes_mutex;
std::multiset<caf::node_id>& live_nodes() {
  static std::multiset<caf::node_id> nodes;
  return nodes;
}

// The ID CAF gives the next actor system: default_data::local() hands out the current one and
// advances the counter, and the middleman calls it again.
caf::node_id next_after(const caf::node_id& taken) {
  const auto* data = dynamic_cast<const caf::node_id::default_data*>(taken.operator->());
  if (data == nullptr)
    return {};
  auto host = data->host_id();
  ++host.back(); // (a uint8_t: wraps as CAF's counter does)
  return caf::make_node_id(data->process_id(), host);
}

} // namespace

NodeSystem::NodeSystem(const NetworkConfig& network) : cfg_(std::make_unique<NodeConfig>(network)) {
  std::lock_guard<std::mutex> guard{live_nodes_mutex};
  auto& live = live_nodes();
  for (std::size_t skipped = 0; !live.empty() && skipped < 256; ++skipped) {
    auto next = next_after(caf::node_id::default_data::local(*cfg_));
    if (next == caf::node_id{} || live.count(next) == 0)
      break;
  }
  sys_ = std::make_unique<caf::actor_system>(*cfg_);
  if (live.count(sys_->node()) > 0) // another library's actor system started in between
    log::warning("node", "this actor system's node ID " + caf::to_string(sys_->node()) +
                           " is also another live one's in this process: replies between them "
                           "and a common peer may go astray");
  live.insert(sys_->node());
  ReleaseThreadLogger release{*sys_}; // the constructor pinned its logger to this thread
}

NodeSystem::~NodeSystem() {
  auto node = sys_->node();
  sys_.reset(); // the system goes before its config, and before its ID is free again
  std::lock_guard<std::mutex> guard{live_nodes_mutex};
  auto& live = live_nodes();
  if (auto it = live.find(node); it != live.end())
    live.erase(it);
}

ReleaseThreadLogger::~ReleaseThreadLogger() {
  if (caf::logger::current_logger() == &sys_.logger())
    caf::logger::set_current_actor_system(nullptr);
}

} // namespace actors
} // namespace conveyor
