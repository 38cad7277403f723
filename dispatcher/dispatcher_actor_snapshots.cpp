// Distributed snapshots (messages/snapshot_stream.hpp): the dispatcher journals a snapshot, hands
// its streams to workers with their heartbeat acks, journals every split before a stream's
// worker sees it, and ends the snapshot (DONE or ERROR on disk, then the record) once every
// stream is done or one failed.
//
// Streams are created as workers ask for work (at most one per worker and snapshot, within the
// worker's --worker-max-concurrent-snapshots) while the split provider has splits left. A stream
// whose worker is removed is free: the next worker with room takes it over and, reading the same
// journaled splits, resumes after the stream's last committed chunk (worker/snapshot_stream.hpp).
// Who writes which stream is not journaled: a restarted dispatcher learns it from the workers'
// heartbeats and split requests, and gives the old writers worker_timeout before it hands their
// streams to others. When streams start waiting for workers (a snapshot starts, a stream loses
// its worker) every registered worker is nudged to send its heartbeat now: a save starts within
// a round trip instead of within a heartbeat interval, and the periodic heartbeat stays the
// fallback for a nudge that is lost.
#include <algorithm>

#include "dispatcher/dispatcher_actor_state.hpp"
#include "dispatcher/file_order_seed.hpp"
#include "dispatcher/job_core.hpp"
#include "node/log.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/io/snapshot_files.hpp"

namespace conveyor::actors::dispatcher_detail {

namespace {

// At most this many splits per answer (a worker asks for a few ahead).
constexpr int64_t kMaxSplitsPerRequest = 16;

std::string stream_name(const std::string& path, int64_t stream) {
  return "stream " + std::to_string(stream) + " of the snapshot at " + path;
}

// A snapshot's list_files(shuffle=True) sources without a seed take one from its creation time
// (journaled), so a restarted dispatcher lists the files in the order the committed splits name.
Expected<std::shared_ptr<SplitProvider>> snapshot_provider(self_ptr self, const Dataset& dataset,
                                                           int64_t split_size, int64_t created_us) {
  SplitOptions options;
  options.range_split_size = split_size;
  options.paths = self->state.start.paths.get();
  options.seed = file_order_seed(0, created_us);
  auto made = make_split_provider(dataset, options);
  if (!made.ok())
    return made.status().with_context("distributed_save reads the dataset with DYNAMIC sharding");
  return std::shared_ptr<SplitProvider>(std::move(made).value());
}

// `worker` writes the stream from now on: in memory, and journaled when the journal names
// another writer (a restarted dispatcher gives the stream back to it).
void set_writer(self_ptr self, LiveSnapshot& live, const std::string& path, int64_t stream,
                msg::worker_id_t worker) {
  live.owners[stream] = worker;
  const SnapshotEntry* snap = self->state.cluster.snapshot_at(path);
  if (!snap || stream < 0 || stream >= static_cast<int64_t>(snap->streams.size()) ||
      snap->streams[static_cast<std::size_t>(stream)].writer == worker)
    return;
  if (Status s = persist(self, msg::SnapshotStreamWriterRecord{path, stream, worker, now_us(self)});
      !s.ok())
    log::warning(kLog, "cannot journal the writer of " + stream_name(path, stream) + ": " +
                         s.to_string());
}

void finish(self_ptr self, const std::string& path, const std::string& error) {
  auto& st = self->state;
  if (auto live = st.snapshots.find(path); live != st.snapshots.end()) {
    live->second.provider.reset();
    live->second.owners.clear();
    live->second.finished_at = self->clock().now();
  }
  (void)persist(self, msg::FinishSnapshotRecord{path, error, now_us(self)});
}

// Marks the snapshot failed on disk (unless it says so already) and ends it.
void fail(self_ptr self, const std::string& path, const std::string& error) {
  auto progress = snapshot::progress(path);
  if (!progress.ok() || progress->state == snapshot::State::writing) {
    if (Status s = snapshot::mark_failed(path, Status{ErrorCode::internal, error}); !s.ok())
      log::error(kLog, "cannot mark the snapshot at " + path + " failed: " + s.to_string());
  }
  log::error(kLog, "the snapshot at " + path + " failed: " + error);
  finish(self, path, error);
}

// Ends the snapshot once every stream is done and the splits ran out: DONE on disk, the streams'
// checkpoints removed, then the record (a crash in between finds DONE on restart, removes what is
// left of the checkpoints and records it).
void finish_if_complete(self_ptr self, const std::string& path) {
  const SnapshotEntry* snap = self->state.cluster.snapshot_at(path);
  if (!snap || snap->finished || !snap->exhausted || snap->streams.empty())
    return;
  for (const auto& s : snap->streams)
    if (!s.done)
      return;
  auto progress = snapshot::progress(path);
  if (!progress.ok())
    return fail(self, path, progress.status().to_string());
  if (progress->state == snapshot::State::failed)
    return finish(self, path, progress->error);
  auto chunks = snapshot::committed_chunks(path);
  if (!chunks.ok())
    return fail(self, path, chunks.status().to_string());
  int64_t elements = 0;
  for (const auto& c : *chunks)
    elements += c.elements;
  if (progress->state == snapshot::State::writing) {
    const auto n = static_cast<int64_t>(chunks->size());
    if (Status s = snapshot::mark_done(path, n, elements); !s.ok())
      return fail(self, path, s.to_string());
  }
  // Done: no stream resumes, so their checkpoints go (again after a restart: idempotent).
  if (Status s = snapshot::remove_checkpoints(path); !s.ok())
    log::warning(kLog, "the snapshot at " + path +
                         " is done, but its stream checkpoints stay: " + s.to_string());
  log::info(kLog, "the snapshot at " + path + " is done: " + std::to_string(elements) +
                    " elements in " + std::to_string(chunks->size()) + " chunks from " +
                    std::to_string(snap->streams.size()) + " stream(s)");
  finish(self, path, "");
}

// Every registered worker sends its heartbeat now (its ack carries the streams it may take).
void nudge_workers(self_ptr self) {
  auto& st = self->state;
  for (const auto& [id, w] : st.workers)
    if (w.handle)
      self->send(w.handle, msg::snapshot_nudge{st.start.auth_token});
}

msg::snapshot_stream_def stream_def(self_ptr self, const SnapshotEntry& snap, int64_t stream) {
  msg::snapshot_stream_def def;
  def.path = snap.path;
  def.stream = stream;
  if (const auto* d = self->state.cluster.dataset(snap.dataset))
    def.definition = d->definition;
  def.compression = snap.compression;
  def.chunk_bytes = snap.chunk_bytes;
  def.per_split = snap.per_split;
  return def;
}

} // namespace

caf::expected<msg::snapshot_started> start_snapshot(self_ptr self, msg::start_snapshot& req) {
  auto& st = self->state;
  if (auto admitted = check_admitted_sender(self, "starting a snapshot"); !admitted.ok())
    return msg::to_error(admitted);
  const auto bad = [](Status s) { return msg::to_error(s); };
  if (req.path.empty())
    return bad(invalid_argument("start_snapshot: `path` must name a directory, got \"\""));
  const DatasetEntry* d = st.cluster.dataset(req.dataset);
  if (!d)
    return bad(not_found("start_snapshot: dataset id \"" + req.dataset + "\" is not registered"));
  if (const auto* known = st.cluster.snapshot_at(req.path); known && !known->finished)
    return bad(Status{ErrorCode::already_exists,
                      "a distributed snapshot at " + req.path +
                        " is being written already (a snapshot is written once)"});
  const auto compression = static_cast<Compression>(req.compression);
  if (compression != Compression::lz4 && compression != Compression::none)
    return bad(invalid_argument("start_snapshot: `compression` must be lz4 or none"));
  if (req.chunk_bytes < 1)
    return bad(invalid_argument("start_snapshot: `chunk_bytes` must be positive, got " +
                                std::to_string(req.chunk_bytes)));
  if (auto allowed = check_path(st.start.paths.get(), req.path, PathPolicy::Access::write, "save");
      !allowed.ok())
    return bad(allowed);
  if (auto metadata = snapshot::read_metadata(req.path); !metadata.ok())
    return bad(metadata.status().with_context(
      "start_snapshot: the saving client creates the snapshot directory first"));
  auto dataset = from_binary(d->definition);
  if (!dataset.ok())
    return bad(dataset.status());
  if (num_epochs(*dataset) != 1)
    return bad(invalid_argument(
      "distributed_save: the dataset repeats its splittable source (repeat() below the last "
      "op that reads it); save the dataset without that repeat and repeat the load instead"));
  int64_t split_size = st.start.range_split_size;
  if (auto card = dataset->cardinality(); st.start.adaptive_split_size && card > 0)
    split_size = std::clamp<int64_t>(card / 256, st.start.range_split_size,
                                     std::max<int64_t>(st.start.range_split_size, 8192));
  const int64_t created_us = now_us(self);
  auto provider = snapshot_provider(self, *dataset, split_size, created_us);
  if (!provider.ok())
    return bad(provider.status());
  msg::CreateSnapshotRecord record{req.path,        req.dataset, req.compression,
                                   req.chunk_bytes, split_size,  is_per_split(*dataset),
                                   created_us};
  if (auto s = persist(self, record); !s.ok())
    return bad(s);
  LiveSnapshot live;
  live.provider = std::move(provider).value();
  live.started = self->clock().now();
  live.assign_after = live.started;
  st.snapshots[req.path] = std::move(live);
  // Nudged before the record is durable: the heartbeats' acks wait for that (reply_when_durable).
  nudge_workers(self);
  log::info(kLog, "created snapshot at " + req.path + " (dataset " + req.dataset + ", " +
                    (record.per_split ? "per-split" : "not per-split") + ", splits of " +
                    std::to_string(split_size) + " elements)");
  return msg::snapshot_started{req.path};
}

caf::expected<msg::snapshot_splits> snapshot_splits_for(self_ptr self,
                                                        const msg::get_snapshot_splits& req) {
  auto& st = self->state;
  const auto bad = [](Status s) { return msg::to_error(s); };
  const SnapshotEntry* snap = st.cluster.snapshot_at(req.path);
  if (!snap)
    return bad(not_found("no distributed snapshot at " + req.path));
  if (snap->finished)
    return bad(failed_precondition("the snapshot at " + req.path + " has finished"));
  if (req.stream < 0 || req.stream >= static_cast<int64_t>(snap->streams.size()))
    return bad(
      not_found("the snapshot at " + req.path + " has no stream " + std::to_string(req.stream)));
  auto& live = st.snapshots[req.path];
  // A restarted dispatcher learns the writers from them; another worker's stream is not this
  // one's (yet): it asks again until its heartbeat ack drops the stream.
  auto owner = live.owners.find(req.stream);
  if (owner == live.owners.end() && st.workers.count(req.worker)) {
    set_writer(self, live, req.path, req.stream, req.worker);
    owner = live.owners.find(req.stream);
  }
  if (owner == live.owners.end() || owner->second != req.worker)
    return bad(unavailable(stream_name(req.path, req.stream) + " is not assigned to worker " +
                           std::to_string(req.worker)));
  const auto& stream = snap->streams[static_cast<std::size_t>(req.stream)];
  const auto have = static_cast<int64_t>(stream.splits.size());
  const int64_t max = std::clamp<int64_t>(req.max, 1, kMaxSplitsPerRequest);
  if (req.seq < 0 || req.seq > have)
    return bad(invalid_argument(stream_name(req.path, req.stream) + " has " + std::to_string(have) +
                                " splits; split " + std::to_string(req.seq) + " cannot be next"));
  msg::snapshot_splits reply;
  if (req.seq < have) { // read again: the journaled splits
    const auto last = std::min(have, req.seq + max);
    reply.splits.assign(stream.splits.begin() + req.seq, stream.splits.begin() + last);
    reply.end = stream.ended && last == have;
    return reply;
  }
  if (stream.ended || snap->exhausted) {
    reply.end = true;
    if (!stream.ended) // recorded, so that whoever reads the stream again ends here too
      (void)persist(self, msg::SnapshotSplitsRecord{req.path,
                                                    req.stream,
                                                    have,
                                                    {},
                                                    true,
                                                    snap->provider_epoch,
                                                    snap->next_index,
                                                    now_us(self)});
    return reply;
  }
  if (!live.provider)
    return bad(internal_error("the snapshot at " + req.path + " has no split provider"));
  msg::SnapshotSplitsRecord record{req.path, req.stream, have, {}, false, 0, 0, now_us(self)};
  for (int64_t i = 0; i < max; ++i) {
    Split split;
    bool end = false;
    if (Status s = live.provider->get_next(split, end); !s.ok()) {
      fail(self, req.path, s.to_string());
      return bad(s);
    }
    if (end) {
      record.end = true;
      break;
    }
    record.splits.push_back(to_journal(split));
  }
  const SplitPosition position = live.provider->position();
  record.provider_epoch = position.epoch;
  record.next_index = position.next_index;
  reply.splits = record.splits;
  reply.end = record.end;
  if (auto s = persist(self, std::move(record)); !s.ok())
    return bad(s);
  return reply;
}

std::vector<msg::snapshot_stream_def>
snapshot_heartbeat(self_ptr self, msg::worker_id_t worker,
                   const std::vector<msg::snapshot_stream_report>& reports, int64_t max_streams,
                   bool draining) {
  auto& st = self->state;
  std::set<std::string> touched;
  for (const auto& r : reports) {
    const SnapshotEntry* snap = st.cluster.snapshot_at(r.path);
    if (!snap || snap->finished || r.stream < 0 ||
        r.stream >= static_cast<int64_t>(snap->streams.size()))
      continue;
    auto& live = st.snapshots[r.path];
    auto owner = live.owners.find(r.stream);
    if (owner == live.owners.end() && !snap->streams[static_cast<std::size_t>(r.stream)].done) {
      set_writer(self, live, r.path, r.stream, worker); // a restarted dispatcher learns it
      owner = live.owners.find(r.stream);
    }
    if (owner == live.owners.end() || owner->second != worker)
      continue; // not (any more) this worker's stream
    live.progress[r.stream] = r;
    if (!r.error.empty()) {
      fail(self, r.path,
           stream_name(r.path, r.stream) + " failed on worker " + std::to_string(worker) + ": " +
             r.error);
      continue;
    }
    const auto& stream = snap->streams[static_cast<std::size_t>(r.stream)];
    if (r.done && stream.ended && !stream.done) {
      (void)persist(self, msg::SnapshotStreamDoneRecord{r.path, r.stream, now_us(self)});
      live.owners.erase(r.stream);
      touched.insert(r.path);
    }
  }
  for (const auto& path : touched)
    finish_if_complete(self, path);

  // The worker's streams, and one more per snapshot it has none of while it has room.
  std::vector<msg::snapshot_stream_def> out;
  std::vector<const SnapshotEntry*> without;
  for (const auto* snap : st.cluster.snapshots()) {
    if (snap->finished)
      continue;
    auto& live = st.snapshots[snap->path];
    bool has = false;
    for (const auto& [stream, owner] : live.owners)
      if (owner == worker) {
        out.push_back(stream_def(self, *snap, stream));
        has = true;
      }
    if (!has)
      without.push_back(snap);
  }
  if (draining)
    return out;
  const auto now = self->clock().now();
  for (const auto* snap : without) {
    if (max_streams > 0 && static_cast<int64_t>(out.size()) >= max_streams)
      break;
    auto& live = st.snapshots[snap->path];
    if (now < live.assign_after)
      continue;
    int64_t take = -1;
    for (std::size_t i = 0; i < snap->streams.size() && take < 0; ++i)
      if (!snap->streams[i].done && !live.owners.count(static_cast<int64_t>(i)))
        take = static_cast<int64_t>(i);
    if (take < 0 && !snap->exhausted) {
      take = static_cast<int64_t>(snap->streams.size());
      if (!persist(self, msg::AddSnapshotStreamRecord{snap->path, take, now_us(self)}).ok())
        continue;
    }
    if (take < 0)
      continue;
    set_writer(self, live, snap->path, take, worker);
    log::info(kLog, stream_name(snap->path, take) + " goes to worker " + std::to_string(worker));
    out.push_back(stream_def(self, *st.cluster.snapshot_at(snap->path), take));
  }
  return out;
}

void release_snapshot_streams(self_ptr self, msg::worker_id_t worker) {
  bool released = false;
  for (auto& [path, live] : self->state.snapshots)
    for (auto o = live.owners.begin(); o != live.owners.end();) {
      if (o->second != worker) {
        ++o;
        continue;
      }
      log::warning(kLog, stream_name(path, o->first) + " lost its worker " +
                           std::to_string(worker) + "; another worker takes it over");
      o = live.owners.erase(o);
      released = true;
    }
  if (released)
    nudge_workers(self);
}

void nudge_if_snapshots_wait(self_ptr self, const msg::worker_actor& worker) {
  const auto& snaps = self->state.snapshots;
  const bool waiting =
    std::any_of(snaps.begin(), snaps.end(), [](const auto& s) { return !s.second.finished_at; });
  if (waiting && worker)
    self->send(worker, msg::snapshot_nudge{self->state.start.auth_token});
}

void restore_snapshots(self_ptr self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  std::vector<std::string> paths;
  for (const auto* snap : st.cluster.snapshots())
    if (!snap->finished)
      paths.push_back(snap->path);
  for (const auto& path : paths) {
    const SnapshotEntry* snap = st.cluster.snapshot_at(path);
    LiveSnapshot live;
    live.started = now;
    live.assign_after = now + st.start.worker_timeout;
    // A stream stays with its journaled writer while that worker is known: it gets the stream
    // back when it registers again (or the stream is released when the worker is removed).
    for (std::size_t i = 0; i < snap->streams.size(); ++i) {
      const SnapshotStreamEntry& stream = snap->streams[i];
      if (stream.done || stream.writer == 0 || !st.workers.count(stream.writer))
        continue;
      live.owners[static_cast<int64_t>(i)] = stream.writer;
      log::info(kLog, stream_name(path, static_cast<int64_t>(i)) + " stays with worker " +
                        std::to_string(stream.writer) + " (journaled)");
    }
    const DatasetEntry* d = st.cluster.dataset(snap->dataset);
    auto dataset = d ? from_binary(d->definition) : Expected<Dataset>(not_found("no dataset"));
    if (!dataset.ok()) {
      st.snapshots[path] = std::move(live);
      fail(self, path, "cannot restore its dataset: " + dataset.status().to_string());
      continue;
    }
    auto provider = snapshot_provider(self, *dataset, snap->split_size, snap->created_us);
    Status restored = provider.ok() ? Status::OK() : provider.status();
    if (restored.ok())
      restored = (*provider)->restore(SplitPosition{snap->provider_epoch, snap->next_index});
    if (!restored.ok()) {
      st.snapshots[path] = std::move(live);
      fail(self, path, "cannot restore its split provider: " + restored.to_string());
      continue;
    }
    live.provider = std::move(provider).value();
    st.snapshots[path] = std::move(live);
    log::info(kLog, "resuming the snapshot at " + path + " (" +
                      std::to_string(snap->streams.size()) + " stream(s))");
    finish_if_complete(self, path);
  }
}

void check_snapshots(self_ptr self) {
  auto& st = self->state;
  std::vector<std::pair<std::string, std::string>> ended;
  for (const auto* snap : st.cluster.snapshots()) {
    if (snap->finished)
      continue;
    auto progress = snapshot::progress(snap->path);
    if (!progress.ok())
      ended.emplace_back(snap->path, progress.status().to_string());
    else if (progress->state == snapshot::State::failed) // the saving client gave up
      ended.emplace_back(snap->path, progress->error);
  }
  for (const auto& [path, error] : ended)
    fail(self, path, error);
}

void add_snapshot_status(self_ptr self, msg::cluster_status& status) {
  auto& st = self->state;
  const auto now = self->clock().now();
  for (const auto* snap : st.cluster.snapshots()) {
    msg::snapshot_status s;
    s.path = snap->path;
    s.dataset = snap->dataset;
    s.state = !snap->finished ? "writing" : snap->error.empty() ? "done" : "failed: " + snap->error;
    s.streams = static_cast<int64_t>(snap->streams.size());
    for (const auto& stream : snap->streams)
      s.streams_done += stream.done ? 1 : 0;
    if (auto live = st.snapshots.find(snap->path); live != st.snapshots.end()) {
      for (const auto& [stream, r] : live->second.progress) {
        s.chunks += r.chunks;
        s.elements += r.elements;
        s.bytes += r.bytes;
      }
      const auto until = live->second.finished_at.value_or(now);
      s.age_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - live->second.started).count();
      if (s.age_ms > 0) {
        s.elements_per_s = static_cast<double>(s.elements) * 1000.0 / static_cast<double>(s.age_ms);
        s.bytes_per_s = static_cast<double>(s.bytes) * 1000.0 / static_cast<double>(s.age_ms);
      }
    }
    status.snapshots.push_back(std::move(s));
  }
}

} // namespace conveyor::actors::dispatcher_detail
