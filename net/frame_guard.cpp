#include "net/frame_guard.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "net/admitted_peers.hpp"
#include "net/inner_port.hpp"
#include "node/log.hpp"
#include "pipeline/runtime/thread_name.hpp"

namespace conveyor::actors {

namespace {

constexpr std::size_t kHeaderSize = 32;         // caf::io::basp::header_size
constexpr std::size_t kSmallBuffer = 16 << 10;  // a connection's copy buffer at first
constexpr std::size_t kLargeBuffer = 256 << 10; // once it carries bulk traffic
constexpr unsigned char kClientHandshake = 0x01;
constexpr unsigned char kMaxOperation = 0x06; // heartbeat

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool write_all(int fd, const unsigned char* data, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Connects to CAF at 127.0.0.1:`port` from a source port bound first and registered with
// net/inner_port.hpp (CAF's accept lets only such connections through); -1 on failure.
int connect_loopback(uint16_t port, uint16_t& source_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  source_port = ntohs(addr.sin_port);
  inner_port::allow_source(source_port);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    inner_port::disallow_source(source_port);
    ::close(fd);
    return -1;
  }
  set_nodelay(fd);
  return fd;
}

} // namespace

Status check_basp_header(const unsigned char* h, bool handshake_done, bool admitted,
                         const GuardLimits& limits) {
  const unsigned char op = h[0];
  const uint32_t len =
    (uint32_t{h[4]} << 24) | (uint32_t{h[5]} << 16) | (uint32_t{h[6]} << 8) | h[7];
  if (op > kMaxOperation)
    return invalid_argument("unknown BASP operation " + std::to_string(op));
  if (!handshake_done && op != kClientHandshake)
    return invalid_argument("the first frame is not a BASP client handshake (operation " +
                            std::to_string(op) + ")");
  if (handshake_done && limits.require_admission && !admitted && len > limits.preauth_max_bytes)
    return resource_exhausted(
      "a BASP frame announces " + std::to_string(len) + " payload bytes, more than the limit of " +
      std::to_string(limits.preauth_max_bytes) + " before the peer presents the admission token");
  const uint32_t max = handshake_done ? limits.max_frame_bytes : limits.handshake_max_bytes;
  if (len > max)
    return resource_exhausted("a BASP frame announces " + std::to_string(len) +
                              " payload bytes, more than the limit of " + std::to_string(max));
  return Status::OK();
}

struct FrameGuard::Shared {
  GuardLimits limits;
  uint16_t target_port = 0;
  std::string node;
  std::shared_ptr<GuardStats> stats;
  int listen_fd = -1;
  int wake[2] = {-1, -1}; // written once on stop; never drained, so every poller wakes
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable cv;
  int threads = 0; // accept thread + connection threads alive
  // Node key -> the one connection lifted for it (guarded by mu): a second connection claiming
  // the same node id stays under the pre-auth cap.
  std::map<std::string, uint64_t> lifted_by;
  std::atomic<uint64_t> next_connection{1};
  // Open connections per peer address (IP, no port), and those not admitted yet by connection
  // id (the oldest first) with their client socket and address (guarded by mu).
  std::map<std::string, int> per_address;
  struct Unadmitted {
    int fd;
    std::string address;
  };
  std::map<uint64_t, Unadmitted> unadmitted;

  ~Shared() { // the last thread is gone
    for (int fd : {listen_fd, wake[0], wake[1]})
      if (fd >= 0)
        ::close(fd);
  }

  void thread_done() {
    std::lock_guard<std::mutex> lock(mu);
    --threads;
    cv.notify_all();
  }
};

namespace {

// What one connection knows of its peer's node (plain mode): the payload of its first client
// handshake (net/admitted_peers.hpp) and whether the pre-auth cap is lifted for it.
struct PeerNode {
  std::string key;
  bool key_complete = false;
  bool key_usable = true; // false: a handshake payload over kMaxKeyBytes, never admitted
  uint64_t key_left = 0;  // handshake payload bytes still to come
  bool lifted = false;
};

// Lifts the cap for connection `me` when its node is admitted and no other connection of this
// guard is lifted for the same node.
bool try_lift(FrameGuard::Shared& sh, PeerNode& peer, uint64_t me) {
  if (!peer.key_complete || !peer.key_usable || !admitted_peers::admitted(peer.key))
    return false;
  std::lock_guard<std::mutex> lock(sh.mu);
  auto [it, fresh] = sh.lifted_by.emplace(peer.key, me);
  if (!fresh && it->second != me)
    return false;
  peer.lifted = true;
  ++sh.stats->lifted;
  return true;
}

// One connection: peer <-> CAF until either side closes, a bad frame, idleness or stop.
void serve(std::shared_ptr<FrameGuard::Shared> sh, int client, uint64_t me,
           std::string peer_address, std::string peer_host) {
  name_this_thread("conveyor-guard");
  auto& stats = *sh->stats;
  // In Shared::unadmitted (put there by accept_loop, plain mode) until its node is admitted.
  bool counted_unadmitted = sh->limits.parse_basp;
  const auto admitted_now = [&] {
    counted_unadmitted = false;
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->unadmitted.erase(me);
  };
  PeerNode peer;
  peer.lifted = !sh->limits.require_admission; // no token: the handshake is all it takes
  uint16_t source_port = 0;
  int server = connect_loopback(sh->target_port, source_port);
  std::string why;
  if (server >= 0) {
    // Small until the peer is lifted or our node sends it a lot: 256 idle strangers hold 4 MiB of
    // buffers, not 64.
    std::vector<unsigned char> in(kSmallBuffer);
    std::vector<unsigned char> out;
    unsigned char header[kHeaderSize];
    std::size_t header_have = 0;
    uint64_t payload_left = 0;
    bool handshake_done = false;
    const int idle_ms = static_cast<int>(sh->limits.idle_timeout.count());
    const auto handshake_deadline = std::chrono::steady_clock::now() + sh->limits.handshake_timeout;
    for (;;) {
      int wait_ms = idle_ms;
      if (sh->limits.parse_basp && !handshake_done) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      handshake_deadline - std::chrono::steady_clock::now())
                      .count();
        if (left <= 0) {
          ++stats.closed_idle;
          why = "no BASP handshake within " + std::to_string(sh->limits.handshake_timeout.count()) +
                " ms";
          break;
        }
        wait_ms = std::min<int>(wait_ms, static_cast<int>(left));
      }
      pollfd fds[3] = {{client, POLLIN, 0}, {server, POLLIN, 0}, {sh->wake[0], POLLIN, 0}};
      int rc = ::poll(fds, 3, wait_ms);
      if (rc < 0 && errno == EINTR)
        continue;
      if (rc == 0) {
        if (sh->limits.parse_basp && !handshake_done)
          continue; // the deadline check above decides
        ++stats.closed_idle;
        why = "idle";
        break;
      }
      if (rc < 0 || (fds[2].revents & POLLIN))
        break;
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::recv(server, in.data(), in.size(), 0);
        if (n <= 0 || !write_all(client, in.data(), static_cast<std::size_t>(n)))
          break;
        if (static_cast<std::size_t>(n) == in.size() && in.size() < kLargeBuffer)
          in.resize(kLargeBuffer); // our node streams to this peer (replies, elements)
      }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::recv(client, in.data(), in.size(), 0);
        if (n <= 0)
          break;
        if (!sh->limits.parse_basp) {
          if (!write_all(server, in.data(), static_cast<std::size_t>(n)))
            break;
          continue;
        }
        out.clear();
        Status bad;
        for (std::size_t i = 0; i < static_cast<std::size_t>(n) && bad.ok();) {
          if (payload_left > 0) {
            std::size_t take = std::min<uint64_t>(payload_left, static_cast<std::size_t>(n) - i);
            if (peer.key_left > 0) { // the first handshake's payload: the peer's node id
              const std::size_t k = std::min<uint64_t>(peer.key_left, take);
              if (peer.key_usable)
                peer.key.append(reinterpret_cast<const char*>(in.data() + i), k);
              peer.key_left -= k;
              peer.key_complete = peer.key_left == 0;
            }
            out.insert(out.end(), in.begin() + static_cast<long>(i),
                       in.begin() + static_cast<long>(i + take));
            payload_left -= take;
            i += take;
            continue;
          }
          std::size_t take = std::min(kHeaderSize - header_have, static_cast<std::size_t>(n) - i);
          std::memcpy(header + header_have, in.data() + i, take);
          header_have += take;
          i += take;
          if (header_have < kHeaderSize) { // check what is there already (unknown bytes as 0)
            unsigned char probe[kHeaderSize] = {};
            std::memcpy(probe, header, header_have);
            bad = check_basp_header(probe, handshake_done, true, sh->limits);
            break;
          }
          const uint32_t len = (uint32_t{header[4]} << 24) | (uint32_t{header[5]} << 16) |
                               (uint32_t{header[6]} << 8) | header[7];
          // Asked only when a frame needs it: the token message that admits the node is small,
          // and its reply reaches the peer only after the actor admitted it.
          if (handshake_done && !peer.lifted && len > sh->limits.preauth_max_bytes &&
              try_lift(*sh, peer, me) && in.size() < kLargeBuffer)
            in.resize(kLargeBuffer); // keeps this read's bytes, so `i` and `n` stay valid
          bad = check_basp_header(header, handshake_done, peer.lifted, sh->limits);
          if (!bad.ok())
            break;
          if (!handshake_done) { // the client handshake's payload is the peer's node id
            peer.key_left = len;
            peer.key_usable = len > 0 && len <= admitted_peers::kMaxKeyBytes;
            peer.key_complete = len == 0;
          }
          handshake_done = true;
          header_have = 0;
          payload_left = len;
          out.insert(out.end(), header, header + kHeaderSize);
        }
        // What was checked goes on even when a later frame of the same read is refused.
        if (!out.empty() && !write_all(server, out.data(), out.size()))
          break;
        if (bad.ok() && counted_unadmitted && handshake_done &&
            (!sh->limits.require_admission || peer.lifted ||
             (peer.key_complete && peer.key_usable && admitted_peers::admitted(peer.key))))
          admitted_now(); // the room kept for admitted peers is now its
        if (!bad.ok()) {
          ++stats.closed_bad_frame;
          if (bad.code() == ErrorCode::resource_exhausted && handshake_done && !peer.lifted &&
              sh->limits.require_admission)
            ++stats.closed_preauth;
          why = bad.message();
          break;
        }
      }
    }
    inner_port::disallow_source(source_port); // before the port is free for anyone else
    ::close(server);
  }
  if (sh->limits.require_admission && peer.lifted) {
    // Its node's next connection proves the token again (a node id is no secret).
    {
      std::lock_guard<std::mutex> lock(sh->mu);
      if (auto it = sh->lifted_by.find(peer.key); it != sh->lifted_by.end() && it->second == me)
        sh->lifted_by.erase(it);
    }
    admitted_peers::forget(peer.key);
  }
  {
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->unadmitted.erase(me); // before the fd closes: accept_loop may shut it down until then
    if (auto it = sh->per_address.find(peer_host); it != sh->per_address.end() && --it->second <= 0)
      sh->per_address.erase(it);
  }
  ::close(client);
  --stats.open;
  if (!why.empty() && why != "idle") { // rate-limited: garbage must not flood the log either
    static std::atomic<int64_t> closed{0};
    int64_t n = ++closed;
    if (n <= 10 || n % 1000 == 0)
      log::warning(sh->node, "closed a connection from " + peer_address + ": " + why + " (" +
                               std::to_string(n) + " closed so far)");
  }
  sh->thread_done();
}

// The peer's host ("203.0.113.7", "::1"): what the per-address cap counts.
std::string host_of(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, host, sizeof host);
  else if (a.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, host, sizeof host);
  return host;
}

// The peer's address for the log ("203.0.113.7:51234", "[::1]:4000").
std::string address_of(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    auto* in4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in4->sin_addr, host, sizeof host);
    return std::string{host} + ":" + std::to_string(ntohs(in4->sin_port));
  }
  if (a.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string{host} + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "an unknown address";
}

// A connection closed on accept (at a cap): the peer sees only a closed connection (a client
// says its handshake did not complete), so the node says why: the first refusal of each kind at
// once, then at most one line per kRefusalLogEvery with the count since the last one.
constexpr auto kRefusalLogEvery = std::chrono::seconds(5);

struct RefusalLog {
  std::optional<std::chrono::steady_clock::time_point> last;
  int64_t unlogged = 0;
  int64_t total = 0;

  // `why` completes "refused N connection(s)[ in the last S s]: ".
  void refused(const std::string& node, const std::string& why) {
    ++unlogged;
    ++total;
    const auto now = std::chrono::steady_clock::now();
    if (last && now - *last < kRefusalLogEvery)
      return;
    std::string when;
    if (last)
      when = " in the last " +
             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - *last).count()) +
             " s";
    log::warning(node, "refused " + std::to_string(unlogged) + " connection(s)" + when + ": " +
                         why + " (" + std::to_string(total) + " refused so far)");
    last = now;
    unlogged = 0;
  }
};

void accept_loop(std::shared_ptr<FrameGuard::Shared> sh) {
  name_this_thread("conveyor-guard");
  auto& stats = *sh->stats;
  const auto& limits = sh->limits;
  // Room kept for admitted peers (plain mode; under TLS the guard cannot tell): connections not
  // admitted yet may hold at most 3/4 of the cap. Past that a new connection closes the oldest of
  // them instead of being refused, so strangers that hold connections open cannot lock out a
  // client, which needs only milliseconds from its handshake to its token.
  // (No room is kept under a cap of 1..3: nothing would be left to share.)
  const int reserved = limits.max_connections / 4;
  const int max_unadmitted = limits.max_connections - reserved;
  RefusalLog full_log, address_log, evict_log;
  for (;;) {
    pollfd fds[2] = {{sh->listen_fd, POLLIN, 0}, {sh->wake[0], POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0 || (fds[1].revents & POLLIN))
      break;
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    int client =
      ::accept4(sh->listen_fd, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
    if (client < 0)
      continue;
    const std::string host = host_of(from);
    const std::string address = address_of(from);
    const uint64_t id = sh->next_connection++;
    bool over_address = false;
    int from_host = 0;
    std::string evicted; // the address of the connection closed to make room
    {
      std::lock_guard<std::mutex> lock(sh->mu);
      auto it = sh->per_address.find(host);
      from_host = it == sh->per_address.end() ? 0 : it->second;
      over_address = from_host >= limits.max_connections_per_address;
      if (!over_address && limits.parse_basp && reserved > 0 &&
          static_cast<int>(sh->unadmitted.size()) >= max_unadmitted) {
        auto oldest = sh->unadmitted.begin();
        ::shutdown(oldest->second.fd, SHUT_RDWR); // its thread sees the end and closes it
        evicted = oldest->second.address;
        sh->unadmitted.erase(oldest);
        ++stats.evicted_unadmitted;
      }
    }
    if (over_address) {
      ++stats.refused_address;
      ::close(client);
      address_log.refused(sh->node, "the last from " + host + ": " + std::to_string(from_host) +
                                      " connections from that address are open, the cap set by "
                                      "`--max-connections-per-address`");
      continue;
    }
    if (!evicted.empty())
      evict_log.refused(sh->node, "closed the oldest connection not admitted yet (the last from " +
                                    evicted + ") to make room: " + std::to_string(max_unadmitted) +
                                    " such connections were open, 3/4 of the cap set by "
                                    "`--max-connections` (the rest is kept for peers that "
                                    "presented the token or finished their handshake)");
    // The evicted connection's thread has not closed it yet: its place is this one's.
    if (stats.open.load() - (evicted.empty() ? 0 : 1) >= limits.max_connections) {
      ++stats.refused_full;
      ::close(client);
      full_log.refused(sh->node, std::to_string(limits.max_connections) +
                                   " connections are open, the cap set by `--max-connections`");
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(sh->mu);
      ++sh->per_address[host];
      if (limits.parse_basp)
        sh->unadmitted.emplace(id, FrameGuard::Shared::Unadmitted{client, address});
    }
    set_nodelay(client);
    timeval tv{};
    tv.tv_sec = sh->limits.idle_timeout.count() / 1000;
    tv.tv_usec = (sh->limits.idle_timeout.count() % 1000) * 1000;
    ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); // a peer that never reads
    ++stats.accepted;
    ++stats.open;
    {
      std::lock_guard<std::mutex> lock(sh->mu);
      ++sh->threads;
    }
    std::thread(serve, sh, client, id, address, host).detach();
  }
  sh->thread_done();
}

} // namespace

Expected<std::unique_ptr<FrameGuard>> FrameGuard::start(const std::string& host, uint16_t port,
                                                        uint16_t target_port, GuardLimits limits,
                                                        std::string node_name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string where =
    (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    return io_error("cannot listen on " + where + ": " + ::gai_strerror(rc));
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0)
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
    int err = errno;
    ::freeaddrinfo(res);
    if (fd >= 0)
      ::close(fd);
    if (err == EADDRINUSE)
      return io_error("cannot listen on " + where + ": port " + std::to_string(port) +
                      " is already in use by another process (choose another `--port`, or 0 for "
                      "a free one)");
    if (err == EADDRNOTAVAIL)
      return invalid_argument("cannot listen on " + where + ": `--host` " + host +
                              " is not an address of this machine");
    return io_error("cannot listen on " + where + ": " + std::strerror(err));
  }
  ::freeaddrinfo(res);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  uint16_t bound_port = bound.ss_family == AF_INET6
                          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  auto sh = std::make_shared<Shared>();
  sh->limits = limits;
  sh->target_port = target_port;
  sh->node = std::move(node_name);
  sh->stats = std::make_shared<GuardStats>();
  sh->listen_fd = fd;
  if (::pipe2(sh->wake, O_CLOEXEC) != 0) {
    ::close(fd);
    return io_error("cannot create a pipe for the frame guard");
  }
  std::unique_ptr<FrameGuard> guard(new FrameGuard());
  guard->port_ = bound_port;
  guard->stats_ = sh->stats;
  guard->shared_ = sh;
  // From here CAF's inner port takes the guard's connections only (a local user could otherwise
  // bypass every check above by connecting to it).
  inner_port::protect(target_port);
  if (!inner_port::accept_checked())
    log::warning(sh->node, "this process's `accept` is not the checking one (net/inner_port.hpp): "
                           "CAF's port 127.0.0.1:" +
                             std::to_string(target_port) +
                             " takes connections from any local user");
  else
    log::info(sh->node, "CAF listens on 127.0.0.1:" + std::to_string(target_port) +
                          " behind the frame guard, for the guard's connections only");
  sh->threads = 1;
  std::thread(accept_loop, sh).detach();
  return guard;
}

FrameGuard::~FrameGuard() {
  if (!shared_)
    return;
  inner_port::unprotect(shared_->target_port);
  shared_->stopping = true;
  const char byte = 1;
  [[maybe_unused]] auto n = ::write(shared_->wake[1], &byte, 1);
  {
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->cv.wait_for(lock, std::chrono::seconds(5), [&] { return shared_->threads == 0; });
  }
  // The sockets and the pipe close with the last holder of `shared_` (a straggler thread may
  // still poll them).
}

} // namespace conveyor::actors
