// Streaming (non-temporal) stores: a copy that writes whole lines without reading them first.
// `conveyor bench stream-copy` measures it against memcpy for the Python pool's input copy
// (process_pool.cpp), which uses memcpy: with the copy on an executor thread (issue 34), memcpy
// cost less in total (worker + pool processes: 1 MiB `x + 1` through a pool of 2, ~130 against
// ~139 us of CPU per element, 4 of 4 alternating pairs, docs/BENCHMARKS.md): streaming stores push
// the input out to memory, and the pool's function then reads it from there instead of the
// shared cache. Nothing here needs Python (tested in test/unit/core).
#pragma once

#include <cstddef>

namespace conveyor {

// Copies `n` bytes (any alignment, any size) from `src` to `dst` (not overlapping) with streaming
// stores, fenced before it returns; false (nothing copied) where the CPU or build lacks them.
bool streaming_copy(void* dst, const void* src, std::size_t n);

} // namespace conveyor
