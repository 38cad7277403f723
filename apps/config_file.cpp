#include "apps/config_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace conveyor::apps {

Expected<std::string> read_config_file(const std::string& path, std::size_t max_bytes) {
  const std::string what = "`--config` file \"" + path + "\"";
  // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat() can refuse it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return invalid_argument(what + " cannot be opened: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return invalid_argument(what + " cannot be examined: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return invalid_argument(what + " is not a regular file (expected a text file of "
                                   "`name = value` lines)");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return invalid_argument(what + " is " + std::to_string(st.st_size) +
                            " bytes; a config file may hold at most " + std::to_string(max_bytes));
  // The size can change while reading: read at most one byte past the cap to notice.
  std::string data;
  data.resize(max_bytes + 1);
  std::size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return invalid_argument(what + " cannot be read: " + std::strerror(errno));
    if (n == 0)
      break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes)
    return invalid_argument(what + " grew past " + std::to_string(max_bytes) +
                            " bytes while being read; a config file may hold at most that");
  data.resize(got);
  return data;
}

} // namespace conveyor::apps
