// Node IDs of live actor systems stay distinct however many systems the process started.
//
// CAF 0.17.6 makes a node ID of the host, the pid and a one-byte count of the actor systems the
// process started, so the 257th system gets the first one's ID. Two live systems with one ID
// that talk to one peer get each other's replies: a Client that lived while its process made
// 255 others (a Client per epoch) saw its requests time out. NodeSystem skips live IDs.
#include <doctest/doctest.h>

#include <memory>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/node_id.hpp>
#include <caf/send.hpp>

#include "node/node_config.hpp"
#include "cluster_fixture.hpp"
#include "echo_actor.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

uint8_t last_byte(const caf::node_id& node) {
  const auto* data = dynamic_cast<const caf::node_id::default_data*>(node.operator->());
  REQUIRE(data != nullptr);
  return data->host_id().back();
}

} // namespace

TEST_CASE("a node's actor system never takes the node ID of a live one") {
  actors::NodeSystem server{test_network()};
  auto target = server.get().spawn(echo, int32_t{0});
  auto port = server.get().middleman().publish(target, 0, "127.0.0.1");
  REQUIRE(port);
  struct Stop {
    caf::actor a;
    ~Stop() { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); }
  } stop{target};

  auto first = std::make_unique<actors::NodeSystem>(test_network());
  auto first_target = first->get().middleman().remote_actor("127.0.0.1", *port);
  REQUIRE(first_target);
  CHECK(answered(first->get(), *first_target, 1));

  // Plain actor systems (as a library beside conveyor might make) until CAF's counter stands just
  // before `first`'s ID: the next system would take it.
  const uint8_t wanted = static_cast<uint8_t>(last_byte(first->get().node()) - 1);
  int made = 0;
  for (; made < 300; ++made) {
    caf::actor_system_config cfg;
    cfg.load<caf::io::middleman>();
    caf::actor_system plain{cfg};
    if (last_byte(plain.node()) == wanted)
      break;
  }
  REQUIRE(made < 300);

  actors::NodeSystem second{test_network()};
  CAPTURE(caf::to_string(first->get().node()));
  CAPTURE(caf::to_string(second.get().node()));
  CHECK(second.get().node() != first->get().node());
  CHECK(second.get().node() != server.get().node());
  auto second_target = second.get().middleman().remote_actor("127.0.0.1", *port);
  REQUIRE(second_target);
  CHECK(answered(second.get(), *second_target, 2));
  CHECK(answered(first->get(), *first_target, 3)); // (with one ID, this request timed out)

  // Once a system is gone its ID is free again.
  first.reset();
  actors::NodeSystem third{test_network()};
  CHECK(third.get().node() != second.get().node());
  CHECK(third.get().node() != server.get().node());
}
