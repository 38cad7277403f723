// Snapshots: a dataset's output saved once as chunk files, loaded many times with
// Dataset::load(path) (the on-disk layout: pipeline/io/snapshot_files.hpp, docs/USER_GUIDE.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "conveyor/client.hpp"
#include "conveyor/dataset.hpp"
#include "conveyor/options.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

struct SaveOptions {
  std::string compression = "lz4";  // of the chunks: "lz4" or "none"
  int64_t chunk_bytes = 32LL << 20; // encoded bytes per chunk file (each holds >= 1 element)
  // distributed_save only: fail (deadline_exceeded, the snapshot marked failed) when no element
  // was committed for this long, e.g. no worker is registered. 0: wait as long as it takes (as
  // tf.data); a warning is logged every 30 s of waiting either way.
  std::chrono::milliseconds stall_timeout{0};
};

struct SaveResult {
  int64_t chunks = 0;
  int64_t elements = 0;
  int64_t bytes = 0; // save(): encoded element bytes written; distributed_save(): chunk file bytes
};

// Runs `dataset` in this process and writes its output as a snapshot at `path` (a directory that
// must not hold a snapshot yet). On failure the snapshot is marked failed with the cause (a
// load() of it then fails with that cause) and the error is returned.
Expected<SaveResult> save(const Dataset& dataset, const std::string& path,
                          const SaveOptions& options = {});

// The same written by the service's workers (tf.data's distributed_save): this process creates
// the snapshot directory and its metadata, the dispatcher journals the snapshot and hands its
// streams to workers, which read DYNAMIC splits and write the chunk files themselves; a stream
// whose worker is lost is taken over, a restarted dispatcher resumes the snapshot from its
// journal. This process only waits for DONE or ERROR (it carries no data; it may die without
// harm to the save). The dispatcher and the workers must reach `path` (a shared filesystem) and
// be allowed to write it (--allow-path).
Expected<SaveResult> distributed_save(Client& client, const Dataset& dataset,
                                      const std::string& path, const SaveOptions& options = {});

} // namespace conveyor
