// A dispatcher behind a slow link (400 ms from dispatcher to client, test/support/delay_proxy.hpp).
// CAF 0.17.6 ends a connection it opens at the middleman's next heartbeat tick unless the peer's
// handshake came first (docs/ARCHITECTURE.md, "Connecting"): with a 200 ms heartbeat interval (the
// old default) no handshake over this link can finish, whatever the connect timeout; with the
// default interval (1 s) it connects and reads.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "cluster_fixture.hpp"
#include "test/support/delay_proxy.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

uint16_t port_of(const std::string& target) {
  return static_cast<uint16_t>(std::stoi(target.substr(target.rfind(':') + 1)));
}

} // namespace

TEST_CASE("slow link: a dispatcher 400 ms away is reached with the default heartbeat interval") {
  TestCluster cluster{1};
  conveyor::testing::DelayProxy proxy{port_of(cluster.target()), std::chrono::milliseconds(400)};
  REQUIRE(proxy.port() != 0);
  const auto via_proxy = "127.0.0.1:" + std::to_string(proxy.port());

  SUBCASE("default interval: connects, reads every element") {
    ClientConfig cc;
    cc.connect_timeout = std::chrono::milliseconds(10000);
    REQUIRE(cc.network.heartbeat_interval > std::chrono::milliseconds(400));
    auto client = Client::connect(via_proxy, cc);
    REQUIRE_MESSAGE(client.ok(), client.status().to_string());
    auto stream = client->distribute(Dataset::range(10), DistributeOptions{});
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    CHECK(sorted(ints(read_all(*stream))) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }

  SUBCASE("200 ms interval: every attempt ends at a heartbeat tick, and the error says so") {
    ClientConfig cc;
    cc.connect_timeout = std::chrono::milliseconds(2000);
    cc.network.heartbeat_interval = std::chrono::milliseconds(200);
    auto client = Client::connect(via_proxy, cc);
    REQUIRE_FALSE(client.ok());
    const auto text = client.status().to_string();
    CHECK_MESSAGE(text.find("heartbeat tick") != std::string::npos, text);
    CHECK_MESSAGE(proxy.connections() >= 5, text); // one attempt per tick, not one per timeout
  }
}
