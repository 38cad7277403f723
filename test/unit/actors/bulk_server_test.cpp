// The worker's plain-TCP bulk server (net/bulk.hpp), spoken to over a real socket as a consumer
// would: the ack, frames sent as gather buffers arriving byte-exact, and the connection closing
// when the server ends (the writer's duplicate socket closes with CAF's).
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "net/bulk.hpp"
#include "net/bulk_frame.hpp"
#include "node/node_config.hpp"
#include "cluster_fixture.hpp"
#include "messages/all.hpp"
#include "test/support/socket_read.hpp"

using namespace conveyor;
using conveyor::testing::read_up_to;
namespace bulk = conveyor::actors::bulk;

namespace {

struct Socket {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ~Socket() { ::close(fd); }
};

} // namespace

TEST_CASE(
  "bulk server: gather frames reach a TCP consumer byte-exact, and ending the server closes it") {
  actors::NodeConfig cfg{conveyor::test::test_network()};
  caf::actor_system sys{cfg};
  auto server = actors::spawn_tcp_bulk_server(sys, "127.0.0.1", 0);
  REQUIRE_MESSAGE(server, sys.render(server.error()));

  Socket s;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server->port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  char hello[bulk::kHelloBytes];
  bulk::write_hello(hello, 0);
  REQUIRE(::write(s.fd, hello, sizeof hello) == static_cast<ssize_t>(sizeof hello));
  const std::string ack = read_up_to(s.fd, bulk::kAckBytes);
  const auto channel = bulk::read_ack(ack.data(), ack.size());
  REQUIRE(channel);

  // Two frames, each a header and a 300 000-byte view that only the frame keeps alive.
  std::string expected_payloads[2];
  for (uint32_t i = 0; i < 2; ++i) {
    auto storage = std::make_shared<const std::string>(300000, static_cast<char>('a' + i));
    GatherBuffer frame;
    frame.own.resize(bulk::kFrameHeaderBytes);
    frame.own.push_back('<');
    frame.add_view(storage, storage->data(), storage->size());
    frame.own.push_back('>');
    bulk::write_frame_header(frame, bulk::FrameHeader{9, 4, i, 2, 0});
    expected_payloads[i] = "<" + *storage + ">";
    caf::anon_send(server->actor, msg::bulk_send_atom_v, *channel, std::move(frame));
  }
  for (uint32_t i = 0; i < 2; ++i) {
    const std::string head = read_up_to(s.fd, bulk::kFrameHeaderBytes);
    bulk::FrameHeader h;
    REQUIRE_FALSE(bulk::read_frame_header(head.data(), head.size(), h));
    CHECK(h.task == 9);
    CHECK(h.batch_seq == 4);
    CHECK(h.index == i);
    REQUIRE(h.length == expected_payloads[i].size());
    CHECK(read_up_to(s.fd, h.length) == expected_payloads[i]);
  }

  // The worker's bulk server ends (its worker stops): the consumer sees its connection close,
  // while this test still holds the server's handle.
  caf::anon_send_exit(server->actor, caf::exit_reason::user_shutdown);
  bool eof = false;
  CHECK(read_up_to(s.fd, 1, &eof).empty());
  CHECK(eof);
}
