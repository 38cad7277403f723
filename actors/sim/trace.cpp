#include "actors/sim/trace.hpp"

#include <chrono>
#include <cstdio>

namespace conveyor::sim {

std::string format_time(Duration since_start) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(since_start).count();
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld.%06llds", static_cast<long long>(us / 1000000),
                static_cast<long long>(us % 1000000));
  return buf;
}

void Trace::mix(uint64_t x) {
  // splitmix-style finalizer over the running state: order-sensitive and cheap.
  uint64_t z = hash_ ^ (x + 0x9E3779B97F4A7C15ull + (hash_ << 6) + (hash_ >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  hash_ = z ^ (z >> 31);
}

void Trace::mix_bytes(std::string_view bytes) { mix(hash_of(bytes)); }

uint64_t Trace::hash_of(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string Trace::hash_hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash_));
  return buf;
}

void Trace::add_line(Duration at, std::string text) {
  if (lines_.size() >= max_lines_) {
    truncated_ = true;
    return;
  }
  lines_.push_back(format_time(at) + "  " + text);
}

} // namespace conveyor::sim
