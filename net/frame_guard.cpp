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

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "node/log.hpp"
#include "pipeline/runtime/thread_name.hpp"

namespace conveyor::actors {

namespace {

constexpr std::size_t kHeaderSize = 32; // caf::io::basp::header_size
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

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  set_nodelay(fd);
  return fd;
}

} // namespace

Status check_basp_header(const unsigned char* h, bool handshake_done, const GuardLimits& limits) {
  const unsigned char op = h[0];
  const uint32_t len = (uint32_t{h[4]} << 24) | (uint32_t{h[5]} << 16) | (uint32_t{h[6]} << 8) | h[7];
  if (op > kMaxOperation)
    return invalid_argument("unknown BASP operation " + std::to_string(op));
  if (!handshake_done && op != kClientHandshake)
    return invalid_argument("the first frame is not a BASP client handshake (operation " +
                            std::to_string(op) + ")");
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

// One connection: peer <-> CAF until either side closes, a bad frame, idleness or stop.
void serve(std::shared_ptr<FrameGuard::Shared> sh, int client) {
  name_this_thread("conveyor-guard");
  auto& stats = *sh->stats;
  int server = connect_loopback(sh->target_port);
  std::string why;
  if (server >= 0) {
    std::vector<unsigned char> in(256 << 10);
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
                      handshake_deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
          ++stats.closed_idle;
          why = "no BASP handshake within " +
                std::to_string(sh->limits.handshake_timeout.count()) + " ms";
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
            out.insert(out.end(), in.begin() + static_cast<long>(i), in.begin() + static_cast<long>(i + take));
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
            bad = check_basp_header(probe, handshake_done, sh->limits);
            break;
          }
          bad = check_basp_header(header, handshake_done, sh->limits);
          if (!bad.ok())
            break;
          handshake_done = true;
          header_have = 0;
          payload_left = (uint32_t{header[4]} << 24) | (uint32_t{header[5]} << 16) |
                         (uint32_t{header[6]} << 8) | header[7];
          out.insert(out.end(), header, header + kHeaderSize);
        }
        // What was checked goes on even when a later frame of the same read is refused.
        if (!out.empty() && !write_all(server, out.data(), out.size()))
          break;
        if (!bad.ok()) {
          ++stats.closed_bad_frame;
          why = bad.message();
          break;
        }
      }
    }
    ::close(server);
  }
  ::close(client);
  --stats.open;
  if (!why.empty() && why != "idle") { // rate-limited: garbage must not flood the log either
    static std::atomic<int64_t> closed{0};
    int64_t n = ++closed;
    if (n <= 10 || n % 1000 == 0)
      log::warning(sh->node, "closed a connection: " + why + " (" + std::to_string(n) +
                               " closed so far)");
  }
  sh->thread_done();
}

// A connection closed on accept at the cap: the peer sees only a closed connection (a client
// says its handshake did not complete), so the node says why: the first refusal at once, then at
// most one line per kFullLogEvery with the count since the last one.
constexpr auto kFullLogEvery = std::chrono::seconds(5);

void accept_loop(std::shared_ptr<FrameGuard::Shared> sh) {
  name_this_thread("conveyor-guard");
  auto& stats = *sh->stats;
  std::optional<std::chrono::steady_clock::time_point> last_full_log;
  int64_t full_unlogged = 0;
  for (;;) {
    pollfd fds[2] = {{sh->listen_fd, POLLIN, 0}, {sh->wake[0], POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0 || (fds[1].revents & POLLIN))
      break;
    int client = ::accept4(sh->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
      continue;
    if (stats.open.load() >= sh->limits.max_connections) {
      ++stats.refused_full;
      ::close(client);
      ++full_unlogged;
      const auto now = std::chrono::steady_clock::now();
      if (!last_full_log || now - *last_full_log >= kFullLogEvery) {
        std::string when;
        if (last_full_log)
          when = " in the last " +
                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - *last_full_log).count()) + " s";
        log::warning(sh->node, "refused " + std::to_string(full_unlogged) + " connection(s)" + when +
                                 ": " + std::to_string(sh->limits.max_connections) +
                                 " connections are open, the cap set by `--max-connections` (" +
                                 std::to_string(stats.refused_full.load()) + " refused so far)");
        last_full_log = now;
        full_unlogged = 0;
      }
      continue;
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
    std::thread(serve, sh, client).detach();
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
  const std::string where = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                            std::to_string(port);
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
  sh->threads = 1;
  std::thread(accept_loop, sh).detach();
  return guard;
}

FrameGuard::~FrameGuard() {
  if (!shared_)
    return;
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
