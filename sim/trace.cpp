#include "sim/trace.hpp"

#include <cctype>
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

namespace {

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

unsigned hex_value(char c) {
  if (c >= '0' && c <= '9')
    return static_cast<unsigned>(c - '0');
  return static_cast<unsigned>(std::toupper(static_cast<unsigned char>(c)) - 'A' + 10);
}

} // namespace

std::string readable(std::string text,
                     const std::function<std::string(std::size_t, uint32_t)>& name_of) {
  // A node id prints as 40 hex digits (the host id, node.cpp: slot, incarnation,
  // "conveyor-sim") then '#' and the process id.
  static constexpr char tag_hex[] = "636F6E7665796F722D73696D"; // "conveyor-sim"
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '@' && i + 41 < text.size() && text.compare(i + 17, 24, tag_hex) == 0) {
      bool hex = true;
      for (std::size_t k = i + 1; k < i + 41 && hex; ++k)
        hex = is_hex(text[k]);
      if (hex && text[i + 41] == '#') {
        auto byte = [&](std::size_t n) {
          return (hex_value(text[i + 1 + 2 * n]) << 4) | hex_value(text[i + 2 + 2 * n]);
        };
        std::size_t slot = 0;
        uint32_t inc = 0;
        for (int b = 0; b < 4; ++b) {
          slot |= static_cast<std::size_t>(byte(b)) << (8 * b);
          inc |= static_cast<uint32_t>(byte(4 + b)) << (8 * b);
        }
        out += '@';
        out += name_of(slot, inc);
        i += 42;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
          ++i;
        continue;
      }
    }
    auto c = static_cast<unsigned char>(text[i]);
    out += (c < 0x20 || c >= 0x7f) ? '.' : text[i];
    ++i;
  }
  return out;
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
