#include "net/inner_port.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "node/log.hpp"

namespace conveyor::actors::inner_port {

namespace {

// One flag per TCP port: lock-free, since `accept` runs on CAF's multiplexer thread.
std::atomic<uint8_t> protected_ports[65536];
std::atomic<uint8_t> guard_sources[65536];
std::atomic<int> protected_count{0};
std::atomic<int64_t> refused_count{0};

uint16_t port_of(const sockaddr_in& a) { return ntohs(a.sin_port); }

// Whether the connection `fd` (just accepted) may stay: not to a protected port, or from the guard.
bool admissible(int fd) {
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      local.sin_family != AF_INET)
    return true; // not an IPv4 connection: CAF's inner port is 127.0.0.1 only
  if (protected_ports[port_of(local)].load() == 0)
    return true;
  sockaddr_in peer{};
  len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 ||
      peer.sin_family != AF_INET)
    return false;
  return peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && guard_sources[port_of(peer)].load() != 0;
}

void log_refusal(uint16_t peer_port) {
  const int64_t n = ++refused_count;
  if (n <= 10 || n % 1000 == 0)
    log::warning("frame guard", "closed a connection to CAF's inner port from 127.0.0.1:" +
                                  std::to_string(peer_port) + " that is not the frame guard's (" +
                                  std::to_string(n) +
                                  " closed so far): peers must connect to the public port");
}

using accept_fn = int (*)(int, sockaddr*, socklen_t*);

accept_fn next_accept() {
  static const auto real = reinterpret_cast<accept_fn>(dlsym(RTLD_NEXT, "accept"));
  return real;
}

} // namespace

void protect(uint16_t port) {
  if (protected_ports[port].exchange(1) == 0)
    ++protected_count;
}

void unprotect(uint16_t port) {
  if (protected_ports[port].exchange(0) != 0)
    --protected_count;
}

void allow_source(uint16_t port) { guard_sources[port].store(1); }
void disallow_source(uint16_t port) { guard_sources[port].store(0); }
int64_t refused() { return refused_count.load(); }

} // namespace conveyor::actors::inner_port

// Interposed over libc's (see the header): CAF's libcaf_io binds to the executable's definition.
extern "C" __attribute__((visibility("default"))) int accept(int fd, sockaddr* addr,
                                                             socklen_t* len) {
  using namespace conveyor::actors::inner_port;
  const auto real = next_accept();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const socklen_t given = len != nullptr ? *len : 0;
  // Bounded: a burst of strangers is closed here, the rest waits for the next readiness event.
  for (int i = 0; i < 64; ++i) {
    if (len != nullptr)
      *len = given;
    const int c = real(fd, addr, len);
    if (c < 0 || protected_count.load() == 0 || admissible(c))
      return c;
    sockaddr_in peer{};
    socklen_t plen = sizeof peer;
    ::getpeername(c, reinterpret_cast<sockaddr*>(&peer), &plen);
    ::close(c);
    log_refusal(port_of(peer));
  }
  errno = EAGAIN;
  return -1;
}

namespace conveyor::actors::inner_port {

bool accept_checked() {
  // The object `accept` resolves to must be this one (compared by the object's base: a function
  // of internal linkage here cannot be preempted, unlike `::accept` itself).
  Dl_info resolved{}, here{};
  void* sym = dlsym(RTLD_DEFAULT, "accept");
  return sym != nullptr && dladdr(sym, &resolved) != 0 &&
         dladdr(reinterpret_cast<void*>(&admissible), &here) != 0 &&
         resolved.dli_fbase == here.dli_fbase;
}

} // namespace conveyor::actors::inner_port
