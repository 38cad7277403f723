// A node's HTTP endpoints (metrics port: /metrics, /healthz, /readyz) as tests reach them: the
// port from the node's "metrics on http://HOST:PORT/metrics" log line, and a plain GET.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <regex>
#include <string>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"

namespace conveyor::testing {

struct HttpReply {
  int code = 0; // 0: no HTTP answer
  std::string body;
};

// GET http://127.0.0.1:port/path (bounded by a 10 s receive timeout).
inline HttpReply http_get(uint16_t port, const std::string& path) {
  HttpReply out;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return out;
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return out;
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string resp;
  char buf[4096];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      break;
    resp.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (resp.rfind("HTTP/1.", 0) != 0 || resp.size() < 12)
    return out;
  out.code = std::atoi(resp.c_str() + 9);
  if (auto body = resp.find("\r\n\r\n"); body != std::string::npos)
    out.body = resp.substr(body + 4);
  return out;
}

inline uint16_t metrics_port_of(ChildProcess& p) {
  REQUIRE(p.wait_for_output("/metrics", kStartTimeout));
  std::smatch m;
  const std::string text = p.stderr_text();
  REQUIRE(std::regex_search(text, m, std::regex(R"(metrics on http://[^ ]*:(\d+)/metrics)")));
  return static_cast<uint16_t>(std::stoi(m[1].str()));
}

} // namespace conveyor::testing
