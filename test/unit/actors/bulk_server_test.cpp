// The worker's plain-TCP bulk server (actors/bulk.hpp), spoken to over a real socket as a consumer
// would: the ack, frames sent as gather buffers arriving byte-exact, and the connection closing
// when the server ends (the writer's duplicate socket closes with CAF's).
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <chrono>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "actors/bulk.hpp"
#include "actors/bulk_frame.hpp"
#include "actors/node_config.hpp"
#include "cluster_fixture.hpp"
#include "messages/all.hpp"

using namespace conveyor;
namespace bulk = conveyor::actors::bulk;

namespace {

// Reads exactly `n` bytes (or less at EOF / after 10 s); `eof` says whether the peer closed.
std::string read_exactly(int fd, std::size_t n, bool* eof = nullptr) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string buf(1 << 16, '\0');
  while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    const ssize_t r = ::read(fd, buf.data(), std::min(buf.size(), n - got.size()));
    if (r <= 0) {
      if (eof)
        *eof = true;
      break;
    }
    got.append(buf.data(), static_cast<std::size_t>(r));
  }
  return got;
}

struct Socket {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ~Socket() { ::close(fd); }
};

} // namespace

TEST_CASE("bulk server: gather frames reach a TCP consumer byte-exact, and ending the server closes it") {
  actors::NodeConfig cfg{conveyor::test::test_network()};
  caf::actor_system sys{cfg};
  auto server = actors::spawn_tcp_bulk_server(sys, "127.0.0.1");
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
  const std::string ack = read_exactly(s.fd, bulk::kAckBytes);
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
    const std::string head = read_exactly(s.fd, bulk::kFrameHeaderBytes);
    bulk::FrameHeader h;
    REQUIRE_FALSE(bulk::read_frame_header(head.data(), head.size(), h));
    CHECK(h.task == 9);
    CHECK(h.batch_seq == 4);
    CHECK(h.index == i);
    REQUIRE(h.length == expected_payloads[i].size());
    CHECK(read_exactly(s.fd, h.length) == expected_payloads[i]);
  }

  // The worker's bulk server ends (its worker stops): the consumer sees its connection close,
  // while this test still holds the server's handle.
  caf::anon_send_exit(server->actor, caf::exit_reason::user_shutdown);
  bool eof = false;
  CHECK(read_exactly(s.fd, 1, &eof).empty());
  CHECK(eof);
}
