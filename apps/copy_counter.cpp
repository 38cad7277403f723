// memcpy/memmove/memset interposition for the copy counter (see copy_counter.hpp), as in
// ../shared/design/caf-probes/p10_bulk_broker.cpp: the executable's definitions take precedence
// over libc's for every shared library; the real functions come from dlsym(RTLD_NEXT).
#include "apps/copy_counter.hpp"

#include <atomic>

#include "apps/libc_interposition.hpp"

namespace conveyor::apps {
namespace {
std::atomic<bool> g_on{false};
std::atomic<uint64_t> g_calls{0}, g_bytes{0}, g_fill{0};
} // namespace

void copy_counter_enable(bool on) { g_on.store(on, std::memory_order_relaxed); }
CopyCounts copy_counts() { return {g_calls.load(), g_bytes.load(), g_fill.load()}; }

#ifdef CONVEYOR_NO_INTERPOSITION
bool copy_counter_available() { return false; }
#else
bool copy_counter_available() { return true; }
#endif

} // namespace conveyor::apps

#ifndef CONVEYOR_NO_INTERPOSITION
#include <dlfcn.h>

namespace {
using copy_fn = void* (*)(void*, const void*, std::size_t);
using fill_fn = void* (*)(void*, int, std::size_t);
copy_fn real_memcpy = nullptr;
copy_fn real_memmove = nullptr;
fill_fn real_memset = nullptr;

// Used only before the constructor below ran (dynamic loading itself may copy).
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void*
slow_move(void* d, const void* s, std::size_t n) {
  auto dd = static_cast<volatile char*>(d);
  auto ss = static_cast<const char*>(s);
  if (dd < ss)
    for (std::size_t i = 0; i < n; ++i)
      dd[i] = ss[i];
  else
    for (std::size_t i = n; i > 0; --i)
      dd[i - 1] = ss[i - 1];
  return d;
}

__attribute__((constructor(101))) void init_real() {
  real_memcpy = reinterpret_cast<copy_fn>(dlsym(RTLD_NEXT, "memcpy"));
  real_memmove = reinterpret_cast<copy_fn>(dlsym(RTLD_NEXT, "memmove"));
  real_memset = reinterpret_cast<fill_fn>(dlsym(RTLD_NEXT, "memset"));
}

inline void count_copy(std::size_t n) {
  using namespace conveyor::apps;
  if (n >= kCopyCountMinBytes && g_on.load(std::memory_order_relaxed)) {
    g_calls.fetch_add(1, std::memory_order_relaxed);
    g_bytes.fetch_add(n, std::memory_order_relaxed);
  }
}
} // namespace

extern "C" void* memcpy(void* d, const void* s, std::size_t n) {
  count_copy(n);
  return real_memcpy ? real_memcpy(d, s, n) : slow_move(d, s, n);
}

extern "C" void* memmove(void* d, const void* s, std::size_t n) {
  count_copy(n);
  return real_memmove ? real_memmove(d, s, n) : slow_move(d, s, n);
}

extern "C" __attribute__((optimize("no-tree-loop-distribute-patterns"))) void*
memset(void* d, int c, std::size_t n) {
  using namespace conveyor::apps;
  if (n >= kCopyCountMinBytes && g_on.load(std::memory_order_relaxed))
    g_fill.fetch_add(n, std::memory_order_relaxed);
  if (real_memset)
    return real_memset(d, c, n);
  auto dd = static_cast<volatile char*>(d);
  for (std::size_t i = 0; i < n; ++i)
    dd[i] = static_cast<char>(c);
  return d;
}
#endif
