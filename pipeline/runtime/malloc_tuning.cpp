#include "pipeline/runtime/malloc_tuning.hpp"

#include <malloc.h>

#include <cstdlib>
#include <mutex>
#include <optional>

namespace conveyor {

namespace {
std::mutex g_mu;
std::optional<MallocTuning> g_first; // what the first call did (guarded by g_mu)
} // namespace

// glibc gives the free top of a heap back to the kernel once 128 KiB of it are free (a thread
// arena's top once it exceeds twice the largest freed mmapped chunk), and serves allocations
// from 128 KiB up with fresh mmaps. A data plane allocates and frees batch buffers (up to 4 MiB)
// at a steady rate, so it faulted the same memory in again and again: every first touch of a page
// is a page fault (about a microsecond each on a virtual machine). In a Python process reading
// 8 KiB elements in-process, the reader's free of each 3.4 MB batch buffer trimmed the worker
// thread's arena (madvise: ~17% of the reader's time) and the worker's next encode faulted it
// back in (0.3-0.7 faults per element, a third of the producing thread's time; the more, the
// slower the reader: docs/BENCHMARKS.md). The process keeps up to 256 MiB of free heap per heap
// instead of returning it at once; 32 MiB is the largest mmap threshold glibc allows on 64-bit
// (and the one its dynamic threshold can reach by itself). An explicit setting in the
// environment wins (MALLOC_TRIM_THRESHOLD_=131072 restores glibc's trimming).
MallocTuning tune_malloc_for_data_plane() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_first)
    return MallocTuning::earlier;
  if (std::getenv("GLIBC_TUNABLES") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      std::getenv("MALLOC_MMAP_THRESHOLD_")) {
    g_first = MallocTuning::environment;
    return *g_first;
  }
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  g_first = MallocTuning::applied;
  return *g_first;
}

std::optional<MallocTuning> malloc_tuning_made() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_first;
}

} // namespace conveyor
