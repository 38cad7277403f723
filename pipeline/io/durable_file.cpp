#include "pipeline/io/durable_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/io/tfrecord.hpp" // crc32c

namespace conveyor::durable {

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
void put_u64(char* p, uint64_t v) {
  put_u32(p, static_cast<uint32_t>(v));
  put_u32(p + 4, static_cast<uint32_t>(v >> 32));
}
uint64_t get_u64(const char* p) {
  return static_cast<uint64_t>(get_u32(p)) | (static_cast<uint64_t>(get_u32(p + 4)) << 32);
}

uint32_t masked(const char* p, std::size_t n) { return mask_crc32c(crc32c(p, n)); }

std::string errno_text() { return std::strerror(errno); }

Status write_all(int fd, const char* data, std::size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return io_error("writing " + path + ": " + errno_text());
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return Status::OK();
}

Status sync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return io_error("opening directory " + dir + ": " + errno_text());
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    return io_error("syncing directory " + dir + ": " + errno_text());
  return Status::OK();
}

// read() straight into a string sized by fstat: a chunk of a snapshot is megabytes, and a
// character-by-character stream iterator spent half of a load's time here.
Expected<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return io_error("cannot read " + path + ": " + errno_text());
  struct stat st {};
  std::string data;
  data.resize(::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1
                                                      : 4096);
  std::size_t size = 0;
  for (;;) { // bounded by the file's end (it may have grown since fstat: the buffer doubles)
    if (size == data.size())
      data.resize(data.size() * 2);
    const ssize_t got = ::read(fd, data.data() + size, data.size() - size);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      Status failed = io_error("reading " + path + " failed: " + errno_text());
      ::close(fd);
      return failed;
    }
    if (got == 0)
      break;
    size += static_cast<std::size_t>(got);
  }
  ::close(fd);
  data.resize(size);
  return data;
}

} // namespace conveyor::durable
