// Distributed snapshots (include/conveyor/snapshot.hpp distributed_save): the dispatcher journals
// a snapshot and hands its streams to workers, which write the chunk files themselves.
//
//   client -> dispatcher  start_snapshot{path, dataset, ...} -> snapshot_started (once journaled)
//   dispatcher -> worker  heartbeat_ack.snapshot_streams: every stream the worker is to write
//                         (a stream not listed any more is stopped)
//   dispatcher -> worker  snapshot_nudge: streams may wait for it (a snapshot started, a stream
//                         lost its worker); it sends its heartbeat now, not at its next interval
//   worker -> dispatcher  worker_heartbeat.snapshot_streams: its streams' progress, done, error
//   worker -> dispatcher  get_snapshot_splits{path, stream, seq} -> snapshot_splits: the stream's
//                         splits from sequence number `seq` on, journaled before the answer, so
//                         a stream written again (a restarted or another worker) reads exactly
//                         the same splits
// The saving client itself only waits: it watches the snapshot directory (DONE / ERROR).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/journal_records.hpp"
#include "messages/protocol.hpp"

namespace conveyor::msg {

// client -> dispatcher. The snapshot directory holds its metadata already (the client wrote it).
struct start_snapshot {
  std::string path;
  dataset_id_t dataset;    // registered with the dispatcher
  uint8_t compression = 0; // conveyor::Compression of the chunks (lz4 or none)
  int64_t chunk_bytes = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, start_snapshot& x) {
  return f(caf::meta::type_name("start_snapshot"), x.path, x.dataset, x.compression, x.chunk_bytes);
}

struct snapshot_started {
  std::string path;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_started& x) {
  return f(caf::meta::type_name("snapshot_started"), x.path);
}

// What a worker needs to write one stream.
struct snapshot_stream_def {
  std::string path;
  int64_t stream = 0;
  std::string definition; // pipeline/graph/serialize.hpp to_binary form
  uint8_t compression = 0;
  int64_t chunk_bytes = 0;
  // The pipeline is per-split (dispatcher/job_core.hpp is_per_split): its chunks end at split
  // boundaries and a stream written again resumes after its last committed chunk.
  bool per_split = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_stream_def& x) {
  return f(x.path, x.stream, x.definition, x.compression, x.chunk_bytes, x.per_split);
}

// dispatcher -> worker. Only a prompt: the streams themselves come with the heartbeat's ack, so
// a nudge lost on the way costs one heartbeat interval, nothing else.
struct snapshot_nudge {
  std::string auth_token = {}; // as in assign_task
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_nudge& x) {
  return f(caf::meta::type_name("snapshot_nudge"), x.auth_token);
}

// A stream as its worker reports it (committed chunks only).
struct snapshot_stream_report {
  std::string path;
  int64_t stream = 0;
  int64_t chunks = 0;
  int64_t elements = 0;
  int64_t bytes = 0;
  bool done = false; // every split of the stream is in committed chunks
  std::string error; // the stream failed (the snapshot fails with it)
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_stream_report& x) {
  return f(x.path, x.stream, x.chunks, x.elements, x.bytes, x.done, x.error);
}

// worker -> dispatcher
struct get_snapshot_splits {
  std::string path;
  int64_t stream = 0;
  int64_t seq = 0; // the stream's split sequence number to start from
  int64_t max = 1; // at most this many
  worker_id_t worker = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_snapshot_splits& x) {
  return f(caf::meta::type_name("get_snapshot_splits"), x.path, x.stream, x.seq, x.max, x.worker);
}

struct snapshot_splits {
  std::vector<JournalSplit> splits; // sequence numbers seq, seq + 1, ...
  bool end = false;                 // the stream has no split after these
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_splits& x) {
  return f(caf::meta::type_name("snapshot_splits"), x.splits, x.end);
}

// `conveyor status`: one snapshot's progress.
struct snapshot_status {
  std::string path;
  std::string dataset;
  std::string state; // "writing", "done" or "failed: CAUSE"
  int64_t streams = 0;
  int64_t streams_done = 0;
  int64_t chunks = 0;
  int64_t elements = 0;
  int64_t bytes = 0;
  double elements_per_s = 0; // since the snapshot started (this dispatcher's run)
  double bytes_per_s = 0;
  int64_t age_ms = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_status& x) {
  return f(x.path, x.dataset, x.state, x.streams, x.streams_done, x.chunks, x.elements, x.bytes,
           x.elements_per_s, x.bytes_per_s, x.age_ms);
}

} // namespace conveyor::msg
