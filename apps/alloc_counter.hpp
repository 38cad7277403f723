// Counts heap allocations in this process while counting is on, for `conveyor bench service`'s
// allocations per element: malloc, calloc and realloc calls (operator new allocates through
// malloc), by every thread and library. The conveyor executable interposes those three
// (apps/alloc_counter.cpp) and forwards them to glibc's allocator. Each thread counts in a slot
// of its own, so counting does not make the threads contend on one cache line. Not available in
// sanitizer builds (available() is then false and nothing is counted).
#pragma once

#include <cstdint>

namespace conveyor::apps {

bool alloc_counter_available();
void alloc_counter_enable(bool on);
// Allocations counted so far, all threads together (those that ended too).
uint64_t alloc_count();

} // namespace conveyor::apps
