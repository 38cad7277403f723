// The simulated network on its own, with toy actors: delivery and virtual latency, handles
// inside messages, remote monitors, crashes, partitions that heal or break the connection,
// messages that cannot be serialized, and determinism.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "sim/world.hpp"

using namespace std::chrono_literals;
using conveyor::sim::Duration;
using conveyor::sim::Network;
using conveyor::sim::StopReason;
using conveyor::sim::World;
using conveyor::sim::WorldOptions;

namespace {

struct not_registered {
  int x = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, not_registered& v) {
  return f(caf::meta::type_name("not_registered"), v.x);
}

// Replies x + offset. (Every toy actor takes an argument: CAF 0.17 spawns argument-less
// function actors through a null pointer, which UBSan reports.)
caf::behavior pong(caf::event_based_actor*, int offset) {
  return {
    [offset](caf::ping_atom, int x) {
      return caf::make_message(caf::pong_atom::value, x + offset);
    },
    [](caf::get_atom, caf::actor other, int x) {
      // Replies through a handle that arrived inside the message.
      caf::anon_send(other, caf::pong_atom::value, x);
    },
  };
}

struct client_state {
  std::vector<int> replies;
  std::vector<caf::error> errors;
  std::vector<caf::error> downs;
  std::vector<int> pushed; // pong_atom messages sent to us through our own handle
  std::string name;
  caf::actor_clock::time_point replied_at{};
};

caf::behavior client(caf::stateful_actor<client_state>* self, std::string name) {
  self->state.name = std::move(name);
  self->set_down_handler([=](caf::down_msg& d) { self->state.downs.push_back(d.reason); });
  return {
    [=](caf::ping_atom, caf::actor target, int x, caf::timespan timeout) {
      self->request(target, timeout, caf::ping_atom::value, x)
        .then(
          [=](caf::pong_atom, int y) {
            self->state.replies.push_back(y);
            self->state.replied_at = self->clock().now();
          },
          [=](caf::error& e) { self->state.errors.push_back(e); });
    },
    [=](caf::monitor_atom, caf::actor target) { self->monitor(target); },
    [=](caf::get_atom, caf::actor target, int x) {
      self->send(target, caf::get_atom::value, caf::actor_cast<caf::actor>(self), x);
    },
    [=](caf::pong_atom, int x) { self->state.pushed.push_back(x); },
    [=](caf::put_atom, caf::actor target) { self->send(target, not_registered{7}); },
  };
}

template <class State>
State& state_of(const caf::actor& h) {
  return dynamic_cast<caf::stateful_actor<State>&>(*caf::actor_cast<caf::abstract_actor*>(h)).state;
}

// Two nodes: "a" runs a client, "b" publishes a pong at "b:1". The client gets a proxy of it.
struct TwoNodes {
  explicit TwoNodes(uint64_t seed = 1, Duration latency = 1ms, Duration jitter = 0ms)
    : world(make_options(seed, latency, jitter)) {
    a = world.add_node("a");
    b = world.add_node("b");
    server = world.node(b)->system().spawn(pong, 0);
    REQUIRE_FALSE(world.network().publish(*world.node(b), "b:1",
                                          caf::actor_cast<caf::strong_actor_ptr>(server), {}));
    cli = world.node(a)->system().spawn(client, std::string{"client"});
    std::optional<caf::strong_actor_ptr> got;
    REQUIRE(
      world.network().connect(*world.node(a), "b:1", [&](caf::expected<Network::Connected> r) {
        REQUIRE(r);
        got = r->actor;
      }));
    world.run_until([&] { return got.has_value(); }, world.now() + 1s);
    REQUIRE(got.has_value());
    proxy = caf::actor_cast<caf::actor>(*got);
  }
  ~TwoNodes() {
    proxy = nullptr;
    server = nullptr;
    cli = nullptr;
  }
  static WorldOptions make_options(uint64_t seed, Duration latency, Duration jitter) {
    WorldOptions o;
    o.seed = seed;
    o.keep_trace = true;
    o.link.latency = latency;
    o.link.jitter = jitter;
    o.connection_timeout = 2s;
    return o;
  }
  void settle(Duration d = 100ms) { world.run_until(nullptr, world.now() + d); }
  client_state& cs() { return state_of<client_state>(cli); }

  World world;
  std::size_t a = 0, b = 0;
  caf::actor server, cli, proxy;
};

} // namespace

TEST_CASE("a request crosses the simulated network and its reply comes back after two latencies") {
  TwoNodes t;
  auto sent_at = t.world.now();
  caf::anon_send(t.cli, caf::ping_atom::value, t.proxy, 42, caf::timespan{1s});
  t.settle();
  REQUIRE(t.cs().replies == std::vector<int>{42});
  CHECK(t.cs().replied_at - sent_at >= 2ms);
  CHECK(t.cs().replied_at - sent_at < 3ms);
  CHECK(t.world.network().messages_delivered() == 2);
  CHECK(t.world.violations().empty());
}

TEST_CASE("a handle inside a message becomes a proxy on the receiving node") {
  TwoNodes t;
  caf::anon_send(t.cli, caf::get_atom::value, t.proxy, 5);
  t.settle();
  CHECK(t.cs().pushed == std::vector<int>{5});
  // b now holds a proxy of the client: one proxy registry entry for node a.
  CHECK(t.world.node(t.b)->proxies().count_proxies(t.world.node(t.a)->id()) == 1);
}

TEST_CASE("a remote actor's exit reaches monitors with its own exit reason") {
  TwoNodes t;
  caf::anon_send(t.cli, caf::monitor_atom::value, t.proxy);
  t.settle();
  caf::anon_send_exit(t.server, caf::exit_reason::user_shutdown);
  t.settle();
  REQUIRE(t.cs().downs.size() == 1);
  CHECK(t.cs().downs[0] == caf::exit_reason::user_shutdown);
}

TEST_CASE(
  "a crashed node is seen as remote_link_unreachable and in-flight requests only time out") {
  TwoNodes t;
  caf::anon_send(t.cli, caf::monitor_atom::value, t.proxy);
  t.settle();
  t.world.crash(t.b);
  caf::anon_send(t.cli, caf::ping_atom::value, t.proxy, 1, caf::timespan{500ms});
  t.settle(100ms);
  REQUIRE(t.cs().downs.size() == 1);
  CHECK(t.cs().downs[0] == caf::exit_reason::remote_link_unreachable);
  CHECK(t.cs().errors.empty()); // CAF does not fail it early...
  t.settle(1s);
  REQUIRE(t.cs().errors.size() == 1); // ...only its timeout does
  CHECK(t.cs().errors[0] == caf::sec::request_timeout);
}

TEST_CASE("a partition shorter than the connection timeout only delays messages") {
  TwoNodes t;
  caf::anon_send(t.cli, caf::monitor_atom::value, t.proxy);
  t.settle();
  t.world.network().partition(t.a, t.b);
  auto sent_at = t.world.now();
  caf::anon_send(t.cli, caf::ping_atom::value, t.proxy, 9, caf::timespan{5s});
  t.settle(1s);
  CHECK(t.cs().replies.empty());
  t.world.network().heal(t.a, t.b);
  t.settle(100ms);
  REQUIRE(t.cs().replies == std::vector<int>{9});
  CHECK(t.cs().replied_at - sent_at >= 1s);
  CHECK(t.cs().downs.empty());
}

TEST_CASE("a partition longer than the connection timeout breaks the connection") {
  TwoNodes t;
  caf::anon_send(t.cli, caf::monitor_atom::value, t.proxy);
  t.settle();
  t.world.network().partition(t.a, t.b);
  caf::anon_send(t.cli, caf::ping_atom::value, t.proxy, 9, caf::timespan{10s});
  t.settle(3s); // connection_timeout is 2 s
  REQUIRE(t.cs().downs.size() == 1);
  CHECK(t.cs().downs[0] == caf::exit_reason::remote_link_unreachable);
  t.world.network().heal(t.a, t.b);
  t.settle(8s);
  CHECK(t.cs().replies.empty()); // the queued request was lost with the connection
  REQUIRE(t.cs().errors.size() == 1);
  CHECK(t.cs().errors[0] == caf::sec::request_timeout);
}

TEST_CASE("an unregistered message type cannot cross the network and is reported") {
  TwoNodes t;
  caf::anon_send(t.cli, caf::put_atom::value, t.proxy);
  t.settle();
  REQUIRE(t.world.violations().size() == 1);
  CHECK(t.world.violations()[0].find("cannot serialize") != std::string::npos);
}

TEST_CASE("messages on one link are delivered in send order whatever the jitter") {
  TwoNodes t{7, 1ms, 900us};
  for (int i = 0; i < 50; ++i)
    caf::anon_send(t.cli, caf::get_atom::value, t.proxy, i);
  t.settle(1s);
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i)
    expected[i] = i;
  CHECK(t.cs().pushed == expected);
}

TEST_CASE("the same seed gives the same trace - another seed another one") {
  auto run = [](uint64_t seed) {
    TwoNodes t{seed, 1ms, 900us};
    for (int i = 0; i < 20; ++i)
      caf::anon_send(t.cli, caf::ping_atom::value, t.proxy, i, caf::timespan{1s});
    t.settle(1s);
    return t.world.trace().hash_hex();
  };
  auto h1 = run(11);
  CHECK(h1 == run(11));
  CHECK(h1 != run(12));
}
