#include "worker/snapshot_streams.hpp"

#include <set>

#include "node/log.hpp"
#include "pipeline/io/path_policy.hpp"

namespace conveyor::actors {

namespace {
constexpr const char* kLog = "worker";
}

SnapshotStreams::~SnapshotStreams() {
  for (auto& [key, r] : streams_)
    r.shared->stop.store(true);
  for (auto& r : stopping_)
    r.shared->stop.store(true);
  for (auto& [key, r] : streams_)
    if (r.thread.joinable())
      r.thread.join();
  for (auto& r : stopping_)
    if (r.thread.joinable())
      r.thread.join();
}

void SnapshotStreams::reap() {
  for (auto r = stopping_.begin(); r != stopping_.end();) {
    if (!r->shared->ended.load()) {
      ++r;
      continue;
    }
    if (r->thread.joinable())
      r->thread.join();
    r = stopping_.erase(r);
  }
}

void SnapshotStreams::assign(const std::vector<msg::snapshot_stream_def>& defs) {
  reap();
  std::set<Key> wanted;
  for (const auto& def : defs)
    wanted.insert(Key{def.path, def.stream});
  for (auto s = streams_.begin(); s != streams_.end();) {
    if (wanted.count(s->first)) {
      ++s;
      continue;
    }
    if (!s->second.shared->ended.load())
      log::info(kLog, "stopping stream " + std::to_string(s->first.second) +
                        " of the snapshot at " + s->first.first +
                        " (the dispatcher gave it to another worker)");
    s->second.shared->stop.store(true);
    stopping_.push_back(std::move(s->second));
    s = streams_.erase(s);
  }
  for (const auto& def : defs) {
    Key key{def.path, def.stream};
    if (streams_.count(key))
      continue; // running, or ended and reported (done: the dispatcher has not recorded it yet)
    auto shared = std::make_shared<Shared>();
    shared->report.path = def.path;
    shared->report.stream = def.stream;
    StreamTask task;
    task.path = def.path;
    task.stream = def.stream;
    task.definition = def.definition;
    task.compression = static_cast<Compression>(def.compression);
    task.chunk_bytes = def.chunk_bytes;
    task.per_split = def.per_split;
    log::info(kLog,
              "writing stream " + std::to_string(def.stream) + " of the snapshot at " + def.path);
    Running r;
    r.shared = shared;
    r.thread =
      std::thread([shared, task, fetch = make_fetch_(def), paths = paths_, on_ended = on_ended_] {
        StreamEnv env;
        env.paths = paths.get();
        env.stop = &shared->stop;
        env.on_commit = [shared](const StreamCounts& c) {
          std::lock_guard<std::mutex> lock(shared->mutex);
          shared->report.chunks = c.chunks;
          shared->report.elements = c.elements;
          shared->report.bytes = c.bytes;
        };
        Status s = write_stream(task, fetch, env);
        {
          std::lock_guard<std::mutex> lock(shared->mutex);
          if (s.ok())
            shared->report.done = true;
          else if (!shared->stop.load())
            shared->report.error = s.to_string();
        }
        if (s.ok())
          log::info(kLog, "stream " + std::to_string(task.stream) + " of the snapshot at " +
                            task.path + " is written");
        else if (!shared->stop.load())
          log::error(kLog, s.to_string());
        shared->ended.store(true);
        if (on_ended && !shared->stop.load())
          on_ended();
      });
    streams_.emplace(std::move(key), std::move(r));
  }
}

std::vector<msg::snapshot_stream_report> SnapshotStreams::reports() {
  reap();
  std::vector<msg::snapshot_stream_report> out;
  for (auto& [key, r] : streams_) {
    std::lock_guard<std::mutex> lock(r.shared->mutex);
    out.push_back(r.shared->report);
  }
  return out;
}

std::size_t SnapshotStreams::running() {
  std::size_t n = 0;
  for (auto& [key, r] : streams_)
    n += r.shared->ended.load() ? 0 : 1;
  return n;
}

} // namespace conveyor::actors
