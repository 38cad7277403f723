// DispatcherState's distributed snapshots (dispatcher/dispatcher_state.hpp): the records that
// create a snapshot, its streams and their splits, and end it.
#include "dispatcher/dispatcher_state.hpp"

namespace conveyor::actors {

using namespace conveyor::msg;

const SnapshotEntry* DispatcherState::snapshot_at(const std::string& path) const {
  auto s = snapshots_.find(path);
  return s == snapshots_.end() ? nullptr : &s->second;
}

std::vector<const SnapshotEntry*> DispatcherState::snapshots() const {
  std::vector<const SnapshotEntry*> out;
  for (const auto& [path, s] : snapshots_)
    out.push_back(&s);
  return out;
}

SnapshotEntry* DispatcherState::unfinished_snapshot(const std::string& path, Status& why) {
  auto s = snapshots_.find(path);
  if (s == snapshots_.end()) {
    why = not_found("no distributed snapshot at " + path);
    return nullptr;
  }
  if (s->second.finished) {
    why = failed_precondition("the distributed snapshot at " + path + " has finished");
    return nullptr;
  }
  return &s->second;
}

SnapshotStreamEntry* DispatcherState::unfinished_stream(const std::string& path, int64_t stream,
                                                        Status& why) {
  SnapshotEntry* s = unfinished_snapshot(path, why);
  if (!s)
    return nullptr;
  if (stream < 0 || stream >= static_cast<int64_t>(s->streams.size())) {
    why =
      not_found("the distributed snapshot at " + path + " has no stream " + std::to_string(stream));
    return nullptr;
  }
  return &s->streams[static_cast<std::size_t>(stream)];
}

Status DispatcherState::apply_one(const CreateSnapshotRecord& r) {
  if (r.path.empty())
    return invalid_argument("a distributed snapshot needs a path");
  if (!datasets_.count(r.dataset))
    return not_found("the distributed snapshot at " + r.path + " names unknown dataset " +
                     r.dataset);
  // A finished one at the same path is replaced (its directory was removed and saved again).
  if (auto old = snapshots_.find(r.path); old != snapshots_.end() && !old->second.finished)
    return failed_precondition("a distributed snapshot at " + r.path + " is being written");
  SnapshotEntry e;
  e.path = r.path;
  e.dataset = r.dataset;
  e.compression = r.compression;
  e.chunk_bytes = r.chunk_bytes;
  e.split_size = r.split_size;
  e.per_split = r.per_split;
  e.created_us = r.time_us;
  snapshots_[r.path] = std::move(e);
  return Status::OK();
}

Status DispatcherState::apply_one(const AddSnapshotStreamRecord& r) {
  Status why;
  SnapshotEntry* s = unfinished_snapshot(r.path, why);
  if (!s)
    return why;
  if (r.stream != static_cast<int64_t>(s->streams.size()))
    return failed_precondition("the distributed snapshot at " + r.path + " has " +
                               std::to_string(s->streams.size()) + " streams; stream " +
                               std::to_string(r.stream) + " is not the next");
  s->streams.emplace_back();
  return Status::OK();
}

Status DispatcherState::apply_one(const SnapshotSplitsRecord& r) {
  Status why;
  SnapshotStreamEntry* found = unfinished_stream(r.path, r.stream, why);
  if (!found)
    return why;
  auto& stream = *found;
  SnapshotEntry* s = unfinished_snapshot(r.path, why);
  if (stream.ended)
    return failed_precondition("stream " + std::to_string(r.stream) + " of the snapshot at " +
                               r.path + " has ended; it takes no more splits");
  if (r.first_seq != static_cast<int64_t>(stream.splits.size()))
    return failed_precondition("stream " + std::to_string(r.stream) + " of the snapshot at " +
                               r.path + " has " + std::to_string(stream.splits.size()) +
                               " splits; split " + std::to_string(r.first_seq) +
                               " is not the next");
  stream.splits.insert(stream.splits.end(), r.splits.begin(), r.splits.end());
  stream.ended = r.end;
  s->provider_epoch = r.provider_epoch;
  s->next_index = r.next_index;
  s->exhausted = s->exhausted || r.end;
  return Status::OK();
}

Status DispatcherState::apply_one(const SnapshotStreamDoneRecord& r) {
  Status why;
  SnapshotStreamEntry* found = unfinished_stream(r.path, r.stream, why);
  if (!found)
    return why;
  auto& stream = *found;
  if (!stream.ended)
    return failed_precondition("stream " + std::to_string(r.stream) + " of the snapshot at " +
                               r.path + " cannot be done: its splits have not ended");
  stream.done = true;
  return Status::OK();
}

Status DispatcherState::apply_one(const SnapshotStreamWriterRecord& r) {
  Status why;
  SnapshotStreamEntry* stream = unfinished_stream(r.path, r.stream, why);
  if (!stream)
    return why;
  if (stream->done)
    return failed_precondition("stream " + std::to_string(r.stream) + " of the snapshot at " +
                               r.path + " is done; it gets no writer");
  if (r.worker == 0)
    return invalid_argument("stream " + std::to_string(r.stream) + " of the snapshot at " + r.path +
                            ": a writer needs a worker id (ids start at 1)");
  stream->writer = r.worker;
  return Status::OK();
}

Status DispatcherState::apply_one(const FinishSnapshotRecord& r) {
  Status why;
  SnapshotEntry* s = unfinished_snapshot(r.path, why);
  if (!s)
    return why;
  s->finished = true;
  s->error = r.error;
  return Status::OK();
}

} // namespace conveyor::actors
