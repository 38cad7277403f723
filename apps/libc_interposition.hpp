// Whether this build may replace libc functions in the executable (apps/copy_counter.cpp,
// apps/alloc_counter.cpp). AddressSanitizer and ThreadSanitizer interpose memcpy, malloc and
// friends themselves: there the counters are off (CONVEYOR_NO_INTERPOSITION is defined).
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CONVEYOR_NO_INTERPOSITION 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CONVEYOR_NO_INTERPOSITION 1
#endif
#endif
