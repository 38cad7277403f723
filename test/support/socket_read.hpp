// Reads up to `n` bytes from `fd`, never past them (the next unit stays in the socket), stopping at
// EOF or after 10 s; `eof` (optional) says whether the peer closed.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>

namespace conveyor::testing {

inline std::string read_up_to(int fd, std::size_t n, bool* eof = nullptr) {
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

} // namespace conveyor::testing
