// malloc/calloc/realloc interposition for the allocation counter (see alloc_counter.hpp). The
// executable's definitions take precedence over libc's for every shared library; glibc's own
// allocator stays reachable as __libc_malloc/__libc_calloc/__libc_realloc, so nothing here
// allocates through the functions it replaces (no recursion, no dlsym at start-up).
#include "apps/alloc_counter.hpp"

#include <atomic>
#include <cstddef>
#include <new>

#include "apps/libc_interposition.hpp"

namespace conveyor::apps {
namespace {

// One per thread that allocated while counting was on; never freed (a few hundred bytes for
// the process's threads), so a thread that ended still adds its count.
struct Slot {
  std::atomic<uint64_t> count{0};
  Slot* next = nullptr;
};
std::atomic<Slot*> g_slots{nullptr};
std::atomic<bool> g_on{false};

} // namespace

void alloc_counter_enable(bool on) { g_on.store(on, std::memory_order_relaxed); }

uint64_t alloc_count() {
  uint64_t sum = 0;
  for (Slot* s = g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next)
    sum += s->count.load(std::memory_order_relaxed);
  return sum;
}

#ifdef CONVEYOR_NO_INTERPOSITION
bool alloc_counter_available() { return false; }
#else
bool alloc_counter_available() { return true; }
#endif

} // namespace conveyor::apps

#ifndef CONVEYOR_NO_INTERPOSITION
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);

namespace {

__thread conveyor::apps::Slot* t_slot = nullptr; // plain TLS: touching it never allocates

void count_allocation() {
  using namespace conveyor::apps;
  if (!g_on.load(std::memory_order_relaxed))
    return;
  Slot* s = t_slot;
  if (s == nullptr) {
    void* memory = __libc_malloc(sizeof(Slot));
    if (memory == nullptr)
      return;
    s = new (memory) Slot;
    s->next = g_slots.load(std::memory_order_relaxed);
    while (!g_slots.compare_exchange_weak(s->next, s, std::memory_order_release,
                                          std::memory_order_relaxed)) {
    }
    t_slot = s;
  }
  // Only this thread writes its slot: a plain increment, no read-modify-write on a shared line.
  s->count.store(s->count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

} // namespace

extern "C" void* malloc(std::size_t n) {
  count_allocation();
  return __libc_malloc(n);
}

extern "C" void* calloc(std::size_t n, std::size_t size) {
  count_allocation();
  return __libc_calloc(n, size);
}

extern "C" void* realloc(void* p, std::size_t n) {
  count_allocation();
  return __libc_realloc(p, n);
}
#endif
