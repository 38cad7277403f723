#include "dispatcher/journal_format.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dispatcher/journal.hpp"   // kJournalFormatVersion
#include "pipeline/io/tfrecord.hpp" // crc32c

namespace conveyor::actors::journal_format {

namespace fs = std::filesystem;

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

void append_frame(std::string& out, uint64_t seq, std::string_view payload) {
  char head[kFrameBytes];
  put_u32(head, static_cast<uint32_t>(payload.size()));
  put_u64(head + 4, seq);
  put_u32(head + 12, masked(head, 12));
  put_u32(head + 16, masked(payload.data(), payload.size()));
  out.append(head, kFrameBytes);
  out.append(payload);
}

std::string header(const char (&magic)[8], uint64_t seq) {
  char h[kHeaderBytes] = {};
  std::memcpy(h, magic, 8);
  put_u32(h + 8, kJournalFormatVersion);
  put_u64(h + 16, seq);
  put_u32(h + 24, masked(h, 24));
  return std::string(h, kHeaderBytes);
}

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
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return io_error("opening directory " + dir + ": " + errno_text());
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    return io_error("syncing directory " + dir + ": " + errno_text());
  return Status::OK();
}

Status write_whole_file(const std::string& dir, const std::string& path, std::string_view data,
                        bool sync) {
  auto tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error("cannot create " + tmp + ": " + errno_text());
  Status s = write_all(fd, data.data(), data.size(), tmp);
  if (s.ok() && sync && ::fsync(fd) != 0)
    s = io_error("syncing " + tmp + ": " + errno_text());
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = io_error("renaming " + tmp + " to " + path + ": " + errno_text());
  if (s.ok() && sync)
    s = sync_dir(dir);
  if (!s.ok()) {
    std::error_code ec;
    fs::remove(tmp, ec);
  }
  return s;
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return io_error("cannot read " + path + ": " + errno_text());
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    return io_error("reading " + path + " failed");
  return data;
}

bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

bool parse_generation(const std::string& name, const std::string& prefix, const std::string& suffix,
                      uint64_t& out) {
  if (name.size() != prefix.size() + 1 + 20 + suffix.size() || name.rfind(prefix + "-", 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  auto digits = name.substr(prefix.size() + 1, 20);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  out = std::stoull(digits);
  return true;
}

std::string generation_name(const char* prefix, uint64_t g, const char* suffix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%020llu%s", prefix, static_cast<unsigned long long>(g),
                suffix);
  return buf;
}

} // namespace conveyor::actors::journal_format
