// Peers that connect right after others disconnected must be answered.
//
// CAF 0.17.6's BASP broker removes a closed connection's route only after every message received
// before the close was deserialized (a `delete_atom` sent through its in-order message queue).
// With BASP worker threads that can be much later, and the OS meanwhile gives the closed socket's
// number - CAF's connection handle - to the next connection. The late cleanup then erased the new
// peer's route: its requests arrived without a sender, so no reply could reach it (found as a
// `Client` handshake that timed out in `conveyor bench service`). configure_actor_system()
// deserializes in the broker's own thread (middleman.workers = 0), so the cleanup runs at once.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>

#include "node/node_config.hpp"
#include "cluster_fixture.hpp"
#include "echo_actor.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

// Keeps the node's one scheduler thread busy in 3 ms slices with short gaps, so that work queued
// behind it (BASP workers, when there are any) waits but still runs.
caf::behavior hog(caf::event_based_actor* self, std::shared_ptr<std::atomic<bool>> stop) {
  return {[self, stop](int32_t) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3);
    while (std::chrono::steady_clock::now() < until) {
    }
    if (!stop->load())
      self->delayed_send(self, std::chrono::microseconds(300), int32_t{0});
    else
      self->quit();
  }};
}

// conveyor's configuration (configure_actor_system), with this many scheduler threads.
NetworkConfig network_with_threads(std::size_t scheduler_threads) {
  auto network = test_network();
  network.scheduler_threads = scheduler_threads;
  return network;
}

// The node peers connect to: an echo actor published on a free port, and the hog. Its actors
// end before its system (whose destructor waits for them), also when a REQUIRE throws.
struct Server {
  actors::NodeConfig cfg{network_with_threads(1)};
  caf::actor_system sys{cfg};
  std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
  caf::actor target = sys.spawn(echo, int32_t{0});
  caf::actor busy = sys.spawn(hog, stop);
  ~Server() {
    *stop = true;
    caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(busy, caf::exit_reason::user_shutdown);
  }
};

} // namespace

TEST_CASE("a peer that connects as others disconnect gets its requests answered") {
  Server server;
  auto port = server.sys.middleman().publish(server.target, 0, "127.0.0.1");
  REQUIRE(port);
  caf::anon_send(server.busy, int32_t{0});

  // A steady stream of one-way messages from a long-lived peer: each one is in the server's
  // receive queue for a while, as in a cluster where workers keep talking to the dispatcher.
  actors::NodeConfig chatty_cfg{network_with_threads(2)};
  caf::actor_system chatty{chatty_cfg};
  auto chatty_target = chatty.middleman().remote_actor("127.0.0.1", *port);
  REQUIRE(chatty_target);
  std::atomic<bool> chatting{true};
  std::thread chatter([&chatting, to = *chatty_target] {
    for (int i = 0; i < 20000 && chatting.load(); ++i) { // bounded: ~20 s at most
      caf::anon_send(to, int32_t{i});
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });

  // Short-lived peers, one after another, each asking once and then shutting down.
  int unanswered = 0;
  int asked = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (int i = 0; i < 150 && std::chrono::steady_clock::now() < deadline; ++i) {
    actors::NodeConfig cfg{network_with_threads(1)};
    caf::actor_system peer{cfg};
    auto remote = peer.middleman().remote_actor("127.0.0.1", *port);
    if (!remote) { // (no REQUIRE while the chatter thread runs)
      FAIL_CHECK("peer " << i << " could not connect: " << peer.render(remote.error()));
      break;
    }
    ++asked;
    if (!answered(peer, *remote, i))
      ++unanswered;
  }
  chatting = false;
  chatter.join();
  INFO(unanswered << " of " << asked << " short-lived peers got no answer");
  CHECK(asked >= 10);
  CHECK(unanswered == 0);
}
