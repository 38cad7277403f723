// Garbage at a live dispatcher and worker (real processes, loopback): random bytes, mutated BASP
// headers, an announced 4 GB payload, truncated frames, idle connections past the cap. Every bad
// connection is closed by the frame guard; afterwards a normal read still succeeds.
// Bounded: CONVEYOR_FUZZ_ROUNDS (default 150) connections per node, each at most ~1 s.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include <doctest/doctest.h>

#include "test/support/loopback.hpp"
#include "test/integration/cluster.hpp"

using namespace conveyor::testing;

namespace {

// Reads until the peer closes (true) or `ms` pass (false).
bool closed_by_peer(int fd, int ms) {
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    if (left <= 0)
      return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0)
      continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      return true;
  }
}

std::string header(uint8_t op, uint32_t len) {
  std::string h(32, '\0');
  h[0] = static_cast<char>(op);
  h[4] = static_cast<char>(len >> 24);
  h[5] = static_cast<char>(len >> 16);
  h[6] = static_cast<char>(len >> 8);
  h[7] = static_cast<char>(len);
  return h;
}

// One bad connection; returns whether the node closed it (garbage must be closed; a truncated
// frame is left for the handshake deadline, so it is only sent and dropped).
bool send_garbage(uint16_t port, std::mt19937_64& rng, int round) {
  int fd = connect_loopback(port);
  if (fd < 0)
    return false;
  std::string bytes;
  bool expect_close = true;
  switch (round % 5) {
    case 0: // the issue's packet: a handshake announcing 0xFFFFFFFF payload bytes
      bytes = header(1, 0xFFFFFFFFu);
      break;
    case 1: { // random bytes
      bytes.resize(1 + rng() % 4096);
      for (auto& c : bytes)
        c = static_cast<char>(rng());
      bytes[0] = static_cast<char>(0x07 + rng() % 0xF0); // an operation that does not exist
      break;
    }
    case 2: // a plausible handshake header with a mutated, too large length
      bytes = header(1, (64u << 10) + 1 + static_cast<uint32_t>(rng() % 0x7FFFFFFF));
      break;
    case 3: // a direct message before any handshake
      bytes = header(2, static_cast<uint32_t>(rng() % 100));
      break;
    default: // truncated header, then we hang up
      bytes = header(1, 10).substr(0, 1 + rng() % 30);
      expect_close = false;
      break;
  }
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  bool closed = expect_close ? closed_by_peer(fd, 5000) : true; // generous: loaded CI boxes
  ::close(fd);
  return closed;
}

} // namespace

TEST_CASE("frame guard fuzz: garbage and oversized frames are closed, the cluster keeps serving") {
  int rounds = 150;
  if (const char* env = std::getenv("CONVEYOR_FUZZ_ROUNDS"))
    rounds = std::max(1, std::atoi(env));
  // Every connection here comes from 127.0.0.1: the per-address cap is not what is tested.
  Cluster cluster(0, {"--max-connections", "64", "--max-connections-per-address", "200",
                      "--idle-timeout", "60000"});
  cluster.add_worker({"--max-connections", "64"});
  auto worker_port = cluster.worker(0).wait_listening(kStartTimeout);
  REQUIRE(worker_port.ok());

  std::mt19937_64 rng(1234);
  int not_closed = 0;
  std::string which;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds && std::chrono::steady_clock::now() - start < std::chrono::seconds(60);
       ++i) {
    if (!send_garbage(cluster.port(), rng, i)) {
      ++not_closed;
      which += " dispatcher#" + std::to_string(i);
    }
    if (!send_garbage(*worker_port, rng, i)) {
      ++not_closed;
      which += " worker#" + std::to_string(i);
    }
  }
  CAPTURE(which);
  CHECK(not_closed == 0);

  // More idle connections than the cap: the surplus is closed at once, and the read below still
  // gets through once they are gone.
  std::vector<int> idle;
  for (int i = 0; i < 80; ++i)
    if (int fd = connect_loopback(cluster.port()); fd >= 0)
      idle.push_back(fd);
  int closed_at_once = 0;
  for (int fd : idle)
    if (closed_by_peer(fd, 50))
      ++closed_at_once;
  CHECK(closed_at_once >= 80 - 64);
  for (int fd : idle)
    ::close(fd);
  // The node says why (the peers saw only a closed connection), rate-limited: not one line each.
  CHECK(cluster.dispatcher().wait_for_output("the cap set by `--max-connections`", Millis{5000}));
  const auto log = cluster.dispatcher().stderr_text();
  int cap_lines = 0;
  for (auto at = log.find("the cap set by `--max-connections`"); at != std::string::npos;
       at = log.find("the cap set by `--max-connections`", at + 1))
    ++cap_lines;
  CHECK(cap_lines >= 1);
  CHECK(cap_lines <= 3);

  auto r = cluster.read("range(100).map(square)");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 100);
  CHECK(cluster.dispatcher().wait_for_output("closed a connection", Millis{1000}));
}

TEST_CASE(
  "frame guard: a connection over --max-connections is logged on the node, and the client's "
  "error names the cap") {
  Cluster cluster(0, {"--max-connections", "1"});
  int held = connect_loopback(cluster.port()); // the one connection the cap allows
  REQUIRE(held >= 0);
  REQUIRE_FALSE(closed_by_peer(held, 300)); // accepted (it has 10 s for its handshake)
  auto r = run_conveyor({"status", "--dispatcher", cluster.address(), "--timeout-ms", "2000"},
                        Millis{20000}, "over-cap");
  CAPTURE(r.describe);
  CHECK(r.exit_code == 1);
  CHECK(r.stderr_text.find("`--max-connections` cap") != std::string::npos);
  CHECK(cluster.dispatcher().wait_for_output(
    "1 connections are open, the cap set by `--max-connections`", Millis{5000}));
  ::close(held);
}
