#include "apps/read_checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace conveyor::apps {

Expected<std::string> load_cursor_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found("`" + flag + "`: cannot open \"" + path + "\": " + std::strerror(errno));
  std::ostringstream blob;
  blob << in.rdbuf();
  if (in.bad())
    return io_error("`" + flag + "`: cannot read \"" + path + "\"");
  return blob.str();
}

Status save_cursor_file(const std::string& path, const std::string& blob) {
  const std::string tmp = path + ".tmp";
  const auto failed = [&](const std::string& what) {
    return io_error("`--checkpoint-to`: " + what + " \"" + tmp + "\": " + std::strerror(errno));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return failed("cannot create");
  std::size_t done = 0;
  while (done < blob.size()) {
    ssize_t n = ::write(fd, blob.data() + done, blob.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      Status st = failed("cannot write");
      ::close(fd);
      return st;
    }
    done += static_cast<std::size_t>(n);
  }
  // A trainer's checkpoint survives a machine crash too: on disk before it replaces the old one.
  if (::fsync(fd) != 0) {
    Status st = failed("cannot flush");
    ::close(fd);
    return st;
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return io_error("`--checkpoint-to`: cannot rename \"" + tmp + "\" to \"" + path +
                    "\": " + std::strerror(errno));
  return Status::OK();
}

} // namespace conveyor::apps
