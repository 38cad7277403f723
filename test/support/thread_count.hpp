// The number of threads of this process (entries of /proc/self/task).
#pragma once

#include <cstddef>
#include <filesystem>

namespace conveyor::testing {

inline std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

} // namespace conveyor::testing
