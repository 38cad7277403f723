// The event log of one simulated run: every network delivery, drop, fault and timer jump is
// folded into a 64-bit hash (the run's determinism fingerprint), and, when asked for, also kept
// as a readable line. Building the text is skipped when nobody reads it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_clock.hpp>

namespace conveyor::sim {

using Time = caf::actor_clock::time_point;
using Duration = caf::timespan;

// "12.345678s" relative to the start of the run.
std::string format_time(Duration since_start);

// Makes CAF's rendering of a message readable in one line: non-printable bytes become '.',
// and simulated node ids ("4@636F6E76...#1") become node names ("4@worker-2") via `name_of`
// (slot, incarnation) -> name.
std::string readable(std::string text,
                     const std::function<std::string(std::size_t, uint32_t)>& name_of);

class Trace {
public:
  explicit Trace(bool keep_lines = false, std::size_t max_lines = 200000)
    : keep_lines_(keep_lines), max_lines_(max_lines) {}

  bool keeps_lines() const { return keep_lines_; }

  // Folds `fields` into the hash; when lines are kept, also stores "<time>  <describe()>".
  template <class Describe>
  void record(Duration at, std::initializer_list<uint64_t> fields, Describe&& describe) {
    mix(static_cast<uint64_t>(at.count()));
    for (auto f : fields)
      mix(f);
    ++events_;
    if (keep_lines_)
      add_line(at, describe());
  }

  void mix(uint64_t x);
  void mix_bytes(std::string_view bytes);

  uint64_t hash() const { return hash_; }
  std::string hash_hex() const; // 16 lowercase hex digits
  uint64_t events() const { return events_; }
  const std::vector<std::string>& lines() const { return lines_; }
  bool truncated() const { return truncated_; }

  // Stable 64-bit hash of a byte string (FNV-1a), for folding payloads in.
  static uint64_t hash_of(std::string_view bytes);

private:
  void add_line(Duration at, std::string text);

  bool keep_lines_;
  std::size_t max_lines_;
  bool truncated_ = false;
  uint64_t hash_ = 0xcbf29ce484222325ull;
  uint64_t events_ = 0;
  std::vector<std::string> lines_;
};

} // namespace conveyor::sim
