// One stream of a distributed snapshot, written by a worker (dispatcher/
// dispatcher_actor_snapshots.cpp hands it out): the dataset runs over the stream's splits, which
// the dispatcher journals before they arrive, and its output becomes chunk files in the snapshot
// layout (pipeline/io/snapshot_files.hpp) through the one chunk writer (snapshot_writer.hpp).
//
// Resuming exactly once: a per-split pipeline (dispatcher/job_core.hpp is_per_split) produces
// all of a split's elements before it reads the next split, so a chunk is cut only where the
// pipeline moves to a later split and is named by the last split it holds. Whoever writes the
// stream again (its worker restarted, or another worker after a loss) finds that name on disk
// and asks the dispatcher for the splits after it: the same splits, so no element is written
// twice or lost. A pipeline that is not per-split (batch, shuffle, parallel map) keeps elements
// of several splits in flight: its stream cuts chunks by size and cannot resume once it
// committed one, so writing it again fails loudly (failed_precondition) instead.
//
// CAF-free: the splits come from a callback (the worker asks the dispatcher).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/sharding/split_provider.hpp"
#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/codec.hpp"

namespace conveyor {
class FunctionRegistry;
class PathPolicy;
} // namespace conveyor

namespace conveyor::actors {

struct StreamTask {
  std::string path;
  int64_t stream = 0;
  std::string definition; // to_binary form
  Compression compression = Compression::lz4;
  int64_t chunk_bytes = 32 << 20;
  bool per_split = false;
};

struct StreamCounts { // committed chunks of the stream (bytes: their files), earlier writers' too
  int64_t chunks = 0;
  int64_t elements = 0;
  int64_t bytes = 0;
};

struct StreamSplits {
  std::vector<Split> splits; // sequence numbers seq, seq + 1, ...
  bool end = false;          // none after these
};
// The stream's splits from sequence number `seq` on. unavailable / deadline_exceeded: asked
// again (the dispatcher restarts, or has not given this worker the stream yet).
using FetchStreamSplits = std::function<Expected<StreamSplits>(int64_t seq)>;

struct StreamEnv {
  const FunctionRegistry* functions = nullptr;        // null: the global registry
  const PathPolicy* paths = nullptr;                  // the worker's --allow-path; null: any
  const std::atomic<bool>* stop = nullptr;            // set: return `cancelled` soon
  bool sync = true;                                   // fsync chunks
  std::function<void(const StreamCounts&)> on_commit; // after every committed chunk
};

// Writes the stream to its end (OK: every split is in committed chunks) or returns why not.
Status write_stream(const StreamTask& task, const FetchStreamSplits& fetch, const StreamEnv& env);

} // namespace conveyor::actors
