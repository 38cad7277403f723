#include "test/support/free_port.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

namespace conveyor::testing {

namespace {

// The lowest port the kernel hands out for bind(0) and for outgoing connections.
int ephemeral_low() {
  std::ifstream range{"/proc/sys/net/ipv4/ip_local_port_range"};
  int low = 0;
  return range >> low && low > 0 ? low : 32768;
}

bool bindable(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

} // namespace

// Below the ephemeral range: a port bind(0) returned and the socket released could be the
// kernel's next choice for another test's `--port 0` node or for any outgoing connection before
// the process meant to bind it does (seen: a docs block's worker dialled another node's bulk port).
uint16_t free_loopback_port() {
  const int low = ephemeral_low();
  const int first = low > 11000 ? 10000 : 1024;
  if (low <= first)
    return 0;
  static thread_local std::mt19937 gen{std::random_device{}()};
  std::uniform_int_distribution<int> pick{first, low - 1};
  for (int attempt = 0; attempt < 1000; ++attempt)
    if (auto port = static_cast<uint16_t>(pick(gen)); bindable(port))
      return port;
  return 0;
}

} // namespace conveyor::testing
