// What the snapshot benchmarks read with (`bench snapshot`, `bench snapshot-decode`): a dataset
// drained as a user's loop drains it, a fresh Element per element, and the raw read() of the
// chunk files that the load is measured against.
#pragma once

#include <cstdint>
#include <vector>

#include "conveyor/dataset.hpp"
#include "conveyor/iterator.hpp"
#include "pipeline/io/snapshot_files.hpp"

namespace conveyor::apps {

// Reads `it` to its end; the elements read.
Expected<int64_t> drain(Iterator& it);
// The same over a new iterator of `dataset`.
Expected<int64_t> drain(const Dataset& dataset);

// read() of every chunk file into one reused 4 MiB buffer; the bytes read.
Expected<int64_t> read_chunk_files(const std::vector<snapshot::ChunkRef>& chunks);

} // namespace conveyor::apps
