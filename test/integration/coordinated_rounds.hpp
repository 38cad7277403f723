// Checks of coordinated reads shared by the integration tests: the grouped dataset, the round
// alignment and how many OFF tasks served rounds.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace conveyor::testing {

// Element x expands to the group [x*N, ..., x*N + N - 1]: round r of N coordinated consumers is
// aligned when consumer i's line r is consumer 0's + i.
inline std::string group_dataset(int n) {
  return "range(1000000).flat_map(group_fn(n=" + std::to_string(n) + ")).repeat()";
}

// The number of aligned rounds, or -(first bad round + 1).
inline long aligned_rounds(const std::vector<std::vector<std::string>>& out) {
  const auto n = static_cast<long>(out.size());
  std::size_t rounds = out[0].size();
  for (const auto& o : out)
    rounds = std::min(rounds, o.size());
  for (std::size_t r = 0; r < rounds; ++r) {
    const long first = std::stol(out[0][r]);
    if (first % n != 0)
      return -static_cast<long>(r) - 1;
    for (long i = 1; i < n; ++i)
      if (std::stol(out[static_cast<std::size_t>(i)][r]) != first + i)
        return -static_cast<long>(r) - 1;
  }
  return static_cast<long>(rounds);
}

// Each OFF task produces the dataset from its start, so "0" comes once from every task that
// served (consumer 0's lines of a coordinated read; any reader's of an uncoordinated one).
inline std::size_t tasks_that_served(const std::vector<std::string>& lines) {
  return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), "0"));
}

} // namespace conveyor::testing
