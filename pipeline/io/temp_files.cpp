#include "pipeline/io/temp_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "pipeline/runtime/per_process.hpp"

namespace conveyor {

namespace fs = std::filesystem;

namespace {

struct WriterId {
  std::string pid, start, pidns, boot, host;
};

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The state (field 3) and start time (field 22) of /proc/PID/stat; false when there is no such
// process. The name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
bool process_stat(const std::string& pid, char& state, std::string& start) {
  const std::string line = first_line("/proc/" + pid + "/stat");
  const auto close = line.rfind(')');
  if (close == std::string::npos)
    return false;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3)
      state = field.empty() ? '?' : field[0];
    if (i == 22) {
      start = field;
      return true;
    }
  }
  return false;
}

std::string own_pidns() {
  char buf[64];
  const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  std::string link = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  std::string digits;
  for (char c : link)
    if (c >= '0' && c <= '9')
      digits.push_back(c);
  return digits.empty() ? "0" : digits;
}

std::string own_boot() {
  std::string hex;
  for (char c : first_line("/proc/sys/kernel/random/boot_id"))
    if (c != '-' && hex.size() < 12)
      hex.push_back(c);
  return hex.empty() ? "0" : hex;
}

std::string own_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  uint32_t h = 2166136261u; // FNV-1a
  for (const char* p = name; *p != '\0'; ++p)
    h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return hex;
}

WriterId compute_own_id() {
  WriterId w;
  w.pid = std::to_string(::getpid());
  char state = '?';
  if (!process_stat(w.pid, state, w.start))
    w.start = "0"; // no /proc: the tag never proves this writer dead (see temp_writer_state)
  w.pidns = own_pidns();
  w.boot = own_boot();
  w.host = own_host();
  return w;
}

// Computed again in a forked child (a Python worker process): it must not carry its parent's.
const WriterId& own_id() {
  static PerProcess<const WriterId> id;
  return id.get([] { return new WriterId(compute_own_id()); });
}

bool parse_tag(std::string_view tag, WriterId& out) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : tag) {
    if (c == '.') {
      parts.push_back(std::move(part));
      part.clear();
    } else {
      part.push_back(c);
    }
  }
  parts.push_back(std::move(part));
  if (parts.size() != 5)
    return false;
  for (const auto& p : parts)
    if (p.empty() || p.find_first_not_of("0123456789abcdef") != std::string::npos)
      return false;
  out = WriterId{parts[0], parts[1], parts[2], parts[3], parts[4]};
  return true;
}

} // namespace

std::string temp_writer_tag() {
  const WriterId& w = own_id();
  return w.pid + "." + w.start + "." + w.pidns + "." + w.boot + "." + w.host;
}

TempWriter temp_writer_state(std::string_view tag) {
  WriterId w;
  if (!parse_tag(tag, w))
    return TempWriter::unknown;
  const WriterId& self = own_id();
  if (w.host != self.host || self.boot == "0" || self.start == "0")
    return TempWriter::unknown; // another machine's, or no /proc to look in
  if (w.boot != self.boot)
    return TempWriter::dead; // written before this host's reboot
  if (w.pidns != self.pidns)
    return TempWriter::unknown; // its pids are not ours to look up
  char state = '?';
  std::string start;
  if (!process_stat(w.pid, state, start))
    return TempWriter::dead;
  // A zombie ('Z', 'X') writes nothing any more; another start time is another process.
  return state == 'Z' || state == 'X' || start != w.start ? TempWriter::dead : TempWriter::alive;
}

Expected<int> remove_dead_writers_files(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  fs::directory_iterator it(dir.empty() ? "." : dir, ec), end;
  if (ec)
    return io_error("cannot list `" + dir + "` for stale temporary files: " + ec.message());
  int removed = 0;
  for (; it != end; it.increment(ec)) {
    if (ec)
      return io_error("listing `" + dir + "` for stale temporary files: " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0)
      continue;
    std::string_view tag(name);
    tag.remove_prefix(prefix.size());
    tag = tag.substr(0, tag.find('-'));
    if (temp_writer_state(tag) != TempWriter::dead)
      continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm))
      ++removed;
    else if (rm && rm != std::errc::no_such_file_or_directory)
      return io_error("cannot remove the stale temporary file `" + it->path().string() +
                      "`: " + rm.message());
  }
  return removed;
}

} // namespace conveyor
