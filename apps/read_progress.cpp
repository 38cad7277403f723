#include "apps/read_progress.hpp"

namespace conveyor::apps {

namespace {

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

} // namespace

std::string progress_line(double secs, int64_t read, const StreamStats& s, double rate,
                          double byte_rate, int64_t total) {
  const double elapsed = static_cast<double>(s.elapsed_ns);
  const auto pct = [&](int64_t ns) {
    return elapsed > 0 ? 100.0 * static_cast<double>(ns) / elapsed : 0.0;
  };
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "read: %lld elements, %s in %.0f s, %.0f elements/s (%s/s); waiting %.0f%%: "
                "worker %.0f%%, network %.0f%%, split %.0f%%, credit %.0f%%",
                static_cast<long long>(read), bytes_text(static_cast<double>(s.bytes)).c_str(),
                secs, rate, bytes_text(byte_rate).c_str(),
                pct(s.wait_worker_ns + s.wait_network_ns + s.wait_split_ns + s.wait_credit_ns),
                pct(s.wait_worker_ns), pct(s.wait_network_ns), pct(s.wait_split_ns),
                pct(s.wait_credit_ns));
  std::string line = buf;
  if (total > 0) {
    const double done = static_cast<double>(read) / static_cast<double>(total);
    std::snprintf(buf, sizeof buf, "; %.0f%% of %lld", 100 * done, static_cast<long long>(total));
    line += buf;
    if (rate > 0 && read < total) {
      std::snprintf(buf, sizeof buf, ", ETA %.0f s", static_cast<double>(total - read) / rate);
      line += buf;
    }
  }
  return line;
}

void ReadProgress::tick(Clock::time_point now, int64_t read, const ElementStream& stream) {
  const double since = std::chrono::duration<double>(now - last_).count();
  if (since < 1.0)
    return;
  const StreamStats s = stream.stats();
  const double rate = static_cast<double>(read - last_read_) / since;
  const double byte_rate = static_cast<double>(s.bytes - last_bytes_) / since;
  const std::string line = progress_line(std::chrono::duration<double>(now - start_).count(), read,
                                         s, rate, byte_rate, total_);
  // On a terminal: back to the line's start, and clear what a longer line left behind.
  if (terminal_)
    std::fprintf(err_, "\r%s\x1b[K", line.c_str());
  else
    std::fprintf(err_, "%s\n", line.c_str());
  std::fflush(err_);
  printed_ = true;
  last_ = now;
  last_read_ = read;
  last_bytes_ = s.bytes;
}

void ReadProgress::finish() {
  if (terminal_ && printed_) {
    std::fputc('\n', err_);
    std::fflush(err_);
  }
}

} // namespace conveyor::apps
