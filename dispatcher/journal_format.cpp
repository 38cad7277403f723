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

#include "dispatcher/journal.hpp" // kJournalFormatVersion

namespace conveyor::actors::journal_format {

namespace fs = std::filesystem;

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
