// `conveyor read`'s progress line on stderr (--progress): once a second, elements and bytes
// read, the rate over the last second, the share of time the reader waited and why
// (consumer/wait_stats.hpp), and the ETA when the total is known. On a terminal it rewrites one
// line in place; otherwise (--progress into a file or pipe) it appends a line each time.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "conveyor/client.hpp"

namespace conveyor::apps {

// The line itself (no newline): `read` elements and `s` since the read began `secs` ago;
// `rate` / `byte_rate` over the last interval; `total` the elements expected, or -1.
std::string progress_line(double secs, int64_t read, const StreamStats& s, double rate,
                          double byte_rate, int64_t total);

class ReadProgress {
public:
  using Clock = std::chrono::steady_clock;
  ReadProgress(std::FILE* err, bool terminal, int64_t total, Clock::time_point start)
    : err_(err), terminal_(terminal), total_(total), start_(start), last_(start) {}
  // Prints a line when a second has passed since the last one.
  void tick(Clock::time_point now, int64_t read, const ElementStream& stream);
  // Ends the in-place line on a terminal (so what follows starts on a line of its own).
  void finish();

private:
  std::FILE* err_;
  bool terminal_;
  int64_t total_;
  Clock::time_point start_;
  Clock::time_point last_;
  int64_t last_read_ = 0;
  int64_t last_bytes_ = 0;
  bool printed_ = false;
};

} // namespace conveyor::apps
