// A copy into memory that another core reads next and this one does not (a Python pool process's
// input region, process_pool.cpp). memcpy's ordinary stores must first take each destination line
// back from the core that last read it; streaming (non-temporal) stores write whole lines without
// reading them (glibc streams only above ~24 MiB here). On the 2-core EPYC VM, 1 MiB: streaming
// ~12 GB/s against memcpy's ~23 GB/s into lines this core holds, but the pool's 1 MiB `x + 1` cost
// the worker 58-69 us of CPU per element against 72-82 us with memcpy (docs/BENCHMARKS.md).
// Nothing here needs Python (tested in test/unit/core).
#pragma once

#include <cstddef>

namespace conveyor {

// Sizes from which copy_for_another_core streams (below, memcpy: the reader finds small copies in
// this core's cache, which streaming would evict).
constexpr std::size_t kStreamingCopyMin = 256 << 10;

// Copies `n` bytes (any alignment, any size) from `src` to `dst` (not overlapping): streaming
// stores from kStreamingCopyMin on when the CPU has them, else memcpy. The stores are fenced
// before it returns, so a message sent after it finds the bytes.
void copy_for_another_core(void* dst, const void* src, std::size_t n);

// The streaming path at any size; false (nothing copied) where the CPU or build lacks it. Tests.
bool streaming_copy(void* dst, const void* src, std::size_t n);

} // namespace conveyor
