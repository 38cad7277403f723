// Nothing large for an unauthenticated peer (issue 33, item 1), between real processes: a
// dispatcher started with --auth-token, and strangers that complete a BASP client handshake (as a
// made-up node) and then announce a 64 MiB frame. CAF 0.17.6 reserves a frame's announced size as
// soon as it reads the header, so without the frame guard's pre-auth cap each such connection
// pinned 64 MiB; with it, the guard closes them before CAF sees the header.
// And CAF's inner port (127.0.0.1, behind the guard) takes the guard's connections only.
// Bounded: CONVEYOR_PREAUTH_CONNECTIONS (default 256) connections, each waited for at most 10 s
// in all.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <caf/node_id.hpp>
#include <doctest/doctest.h>

#include "net/node_key.hpp"
#include "test/support/loopback.hpp"
#include "test/integration/cluster.hpp"

using namespace conveyor::testing;

namespace {

const std::string kTokenValue = "preauth-token-for-tests";

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A BASP header (CAF 0.17.6: operation, 2 padding, flags, payload length, operation data,
// source actor, destination actor; big-endian). CAF refuses a direct message to actor 0 before it
// reserves anything, so the huge frame names actor 1.
std::string header(uint8_t op, uint32_t len, uint8_t dest_actor = 0) {
  std::string h(32, '\0');
  h[31] = static_cast<char>(dest_actor);
  h[0] = static_cast<char>(op);
  h[4] = static_cast<char>(len >> 24);
  h[5] = static_cast<char>(len >> 16);
  h[6] = static_cast<char>(len >> 8);
  h[7] = static_cast<char>(len);
  return h;
}

// A BASP client handshake (operation 1) from a made-up node `n` — a payload CAF accepts (its
// serialized node id) — then the header of a direct message (operation 2) announcing 64 MiB,
// and the first bytes of that payload.
std::string handshake_then_huge_frame(uint32_t n) {
  caf::node_id::default_data::host_id_type host{};
  for (std::size_t i = 0; i < host.size(); ++i)
    host[i] = static_cast<uint8_t>(0xA0 + i);
  const auto node = caf::make_node_id(100000 + n, host);
  const auto key = conveyor::actors::node_key(node);
  std::string bytes = header(1, static_cast<uint32_t>(key.size())) + key;
  bytes += header(2, 64u << 20, 1);
  bytes += std::string(4096, 'x');
  return bytes;
}

int64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::atoll(line.c_str() + 6);
  return -1;
}

// The TCP ports `pid` listens on at 127.0.0.1 (from /proc: its socket inodes, then the
// listening rows of /proc/net/tcp with those inodes).
std::vector<int> loopback_listen_ports(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(fd_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      char target[256] = {};
      const auto path = fd_dir + "/" + e->d_name;
      const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
      const std::string t(target, n > 0 ? static_cast<std::size_t>(n) : 0);
      if (t.rfind("socket:[", 0) == 0)
        inodes.insert(t.substr(8, t.size() - 9));
    }
    ::closedir(d);
  }
  std::vector<int> ports;
  std::ifstream tcp("/proc/" + std::to_string(pid) + "/net/tcp");
  std::string line;
  std::getline(tcp, line); // the column titles
  while (std::getline(tcp, line)) {
    std::istringstream row(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    row >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
      inode;
    if (state == "0A" && local.rfind("0100007F:", 0) == 0 && inodes.count(inode) > 0)
      ports.push_back(static_cast<int>(std::stoul(local.substr(9), nullptr, 16)));
  }
  return ports;
}

// How many of `fds` the peer closes within `within` (all are watched at once; what the peer
// sends, e.g. a server handshake, is read and dropped).
int count_closed(const std::vector<int>& fds, Millis within) {
  std::vector<bool> closed(fds.size(), false);
  int n = 0;
  const auto deadline = std::chrono::steady_clock::now() + within;
  char buf[4096];
  while (n < static_cast<int>(fds.size())) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    if (left <= 0)
      break;
    std::vector<pollfd> watch;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (!closed[i]) {
        watch.push_back({fds[i], POLLIN, 0});
        index.push_back(i);
      }
    if (::poll(watch.data(), watch.size(), static_cast<int>(left)) <= 0)
      continue;
    for (std::size_t k = 0; k < watch.size(); ++k)
      if (watch[k].revents != 0) {
        const ssize_t r = ::recv(watch[k].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
          closed[index[k]] = true;
          ++n;
        }
      }
  }
  return n;
}

} // namespace

TEST_CASE("pre-auth: handshaken strangers announcing 64 MiB frames pin no memory, and an admitted "
          "reader still gets through") {
  int connections = 256;
  if (const char* env = std::getenv("CONVEYOR_PREAUTH_CONNECTIONS"))
    connections = std::max(1, std::atoi(env));
  const std::vector<std::string> token{"--auth-token", kTokenValue};
  // Room for every stranger and the legitimate peers: the cap on connections is not what is tested.
  Cluster cluster(0, {"--auth-token", kTokenValue, "--max-connections",
                      std::to_string(connections + 64), "--max-connections-per-address",
                      std::to_string(connections + 64)});
  cluster.add_worker(token);

  // A dataset definition over the pre-auth cap (12 000 int64 values: ~96 KB in register_dataset):
  // the guard lifts the cap once the reader's client_hello carried the token.
  std::string values;
  for (int i = 0; i < 12000; ++i)
    values += (i ? "," : "") + std::to_string(1000000 + i);
  const std::string big_dataset = "from_tensor_slices([" + values + "])";
  auto warm = cluster.read(big_dataset, token + std::vector<std::string>{"--print", "none"});
  CAPTURE(warm.describe);
  REQUIRE(warm.exit_code == 0);

  const pid_t dispatcher = cluster.dispatcher().pid();
  const int64_t before = rss_kib(dispatcher);
  REQUIRE(before > 0);

  std::vector<int> strangers;
  for (int i = 0; i < connections; ++i) {
    int fd = connect_loopback(cluster.port());
    REQUIRE(fd >= 0);
    const auto bytes = handshake_then_huge_frame(static_cast<uint32_t>(i));
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    strangers.push_back(fd);
  }
  // The guard closes each at its 64 MiB header; without the cap they stay open (CAF waits for
  // the payload it reserved), so wait at most 10 s in all.
  const int closed = count_closed(strangers, Millis{10000});
  const int64_t after = rss_kib(dispatcher);

  // A reader with the token while the strangers' connections (those left) are still held.
  auto r = cluster.read("range(100).map(square)", token);
  for (int fd : strangers)
    ::close(fd);

  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 100);
  MESSAGE("dispatcher RSS before " << before << " KiB, after " << connections << " strangers "
                                   << after << " KiB (" << closed << " closed by the guard)");
  CHECK(after - before < 16 * 1024);
  CHECK(closed == connections);
  CHECK(cluster.dispatcher().wait_for_output("before the peer presents the admission token",
                                             Millis{5000}));
  CHECK(cluster.dispatcher().wait_for_output("closed a connection from 127.0.0.1:", Millis{1000}));
}

TEST_CASE(
  "pre-auth: without a token the handshake is all it takes (frames up to --max-frame-bytes)") {
  Cluster cluster(1);
  std::string values;
  for (int i = 0; i < 12000; ++i)
    values += (i ? "," : "") + std::to_string(1000000 + i);
  auto r = cluster.read("from_tensor_slices([" + values + "])", {"--print", "none"});
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
}

TEST_CASE(
  "pre-auth: CAF's inner port behind the guard closes any connection that is not the guard's") {
  const std::vector<std::string> token{"--auth-token", kTokenValue};
  Cluster cluster(0, token);
  cluster.add_worker(token);
  // CAF's port: the dispatcher's other listening port on 127.0.0.1 (the guard has the public one).
  int inner = 0;
  for (int port : loopback_listen_ports(cluster.dispatcher().pid()))
    if (port != cluster.port())
      inner = port;
  CAPTURE(cluster.dispatcher().pid());
  REQUIRE(inner > 0);
  CHECK(cluster.dispatcher().wait_for_output("CAF listens on 127.0.0.1:" + std::to_string(inner),
                                             Millis{5000}));

  const pid_t dispatcher = cluster.dispatcher().pid();
  const int64_t before = rss_kib(dispatcher);
  // The packet: a client handshake announcing 512 MiB, straight to CAF's port, four times.
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    int fd = connect_loopback(static_cast<uint16_t>(inner));
    REQUIRE(fd >= 0);
    const auto bytes = header(1, 512u << 20) + std::string(4096, 'x');
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  const int closed = count_closed(fds, Millis{10000});
  const int64_t after = rss_kib(dispatcher);
  for (int fd : fds)
    ::close(fd);
  MESSAGE("dispatcher RSS before " << before << " KiB, after 4 connections to CAF's port " << after
                                   << " KiB (" << closed << " closed)");
  CHECK(closed == 4);
  CHECK(after - before < 16 * 1024);
  CHECK(
    cluster.dispatcher().wait_for_output("closed a connection to CAF's inner port", Millis{5000}));
  // Through the guard everything still works.
  auto r = cluster.read("range(10)", token);
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 10);
}

TEST_CASE("pre-auth: one address holds at most --max-connections-per-address, and says so") {
  const std::vector<std::string> token{"--auth-token", kTokenValue};
  Cluster cluster(0, token + std::vector<std::string>{"--max-connections-per-address", "8"});
  cluster.add_worker(token); // its connection to the dispatcher is one of the 8 from 127.0.0.1
  std::vector<int> idle;
  for (int i = 0; i < 12; ++i)
    if (int fd = connect_loopback(cluster.port()); fd >= 0)
      idle.push_back(fd);
  const int closed = count_closed(idle, Millis{1000});
  for (int fd : idle)
    ::close(fd);
  CHECK(closed >= 12 - 7);
  CHECK(cluster.dispatcher().wait_for_output(
    "the last from 127.0.0.1: 8 connections from that address are open, the cap set by "
    "`--max-connections-per-address`",
    Millis{5000}));
  // Once they are gone the address may connect again.
  auto r = cluster.read("range(10)", token);
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
}

TEST_CASE("pre-auth: strangers holding connections open cannot lock out a reader with the token") {
  const std::vector<std::string> token{"--auth-token", kTokenValue};
  // 16 connections: strangers (no handshake, no token) may hold 12; past that each new connection
  // closes the oldest of theirs. Before, the 17th connection was refused until one idled out.
  Cluster cluster(0, token + std::vector<std::string>{"--max-connections", "16",
                                                      "--max-connections-per-address", "200"});
  cluster.add_worker(token);
  std::vector<int> strangers;
  for (int i = 0; i < 40; ++i)
    if (int fd = connect_loopback(cluster.port()); fd >= 0)
      strangers.push_back(fd);
  auto r = cluster.read("range(100).map(square)", token);
  const int closed = count_closed(strangers, Millis{1000});
  for (int fd : strangers)
    ::close(fd);
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 100);
  CHECK(closed >= 40 - 12);
  CHECK(cluster.dispatcher().wait_for_output("closed the oldest connection not admitted yet",
                                             Millis{5000}));
}
