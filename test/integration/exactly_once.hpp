// Checks on what a reader printed, one value a line: range(n) arrived exactly once.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::testing {

inline std::vector<int64_t> sorted_values(const std::vector<std::string>& lines) {
  std::vector<int64_t> out;
  out.reserve(lines.size());
  for (const auto& l : lines)
    out.push_back(std::stoll(l));
  std::sort(out.begin(), out.end());
  return out;
}

// range(n) exactly once: the per-split guarantee.
inline void check_exactly_once(const std::vector<std::string>& lines, int64_t n,
                               const std::string& why) {
  auto got = sorted_values(lines);
  INFO(why);
  CHECK(static_cast<int64_t>(got.size()) == n);
  int64_t bad = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()) && i < n; ++i)
    if (got[static_cast<std::size_t>(i)] != i)
      ++bad;
  CHECK(bad == 0);
}

} // namespace conveyor::testing
