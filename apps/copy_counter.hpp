// Counts large user-space copies in this process, for `conveyor bench service`: memcpy/memmove
// calls of at least kCopyCountMinBytes (and memset zero-fills of that size) while counting is
// on. The conveyor executable interposes memcpy/memmove/memset (apps/copy_counter.cpp), so the
// calls made by CAF and libstdc++ count too. Not available in sanitizer builds (available()
// is then false and nothing is counted).
#pragma once

#include <cstddef>
#include <cstdint>

namespace conveyor::apps {

inline constexpr std::size_t kCopyCountMinBytes = 64 * 1024;

struct CopyCounts {
  uint64_t copy_calls = 0;
  uint64_t copy_bytes = 0;
  uint64_t fill_bytes = 0;
};

bool copy_counter_available();
void copy_counter_enable(bool on);
CopyCounts copy_counts();

} // namespace conveyor::apps
