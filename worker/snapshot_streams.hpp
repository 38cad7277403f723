// The snapshot streams a worker writes (worker/snapshot_stream.hpp), one thread each: the worker
// actor hands over the dispatcher's list with every heartbeat ack (assign) and reports their
// progress with every heartbeat (reports), and at once when one ends (on_ended). A stream that is no longer listed is stopped; one
// that ended (done or failed) is reported until the dispatcher stops listing it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "messages/snapshot_stream.hpp"
#include "worker/snapshot_stream.hpp"

namespace conveyor::actors {

class SnapshotStreams {
public:
  // How a stream asks the dispatcher for its splits.
  using MakeFetch = std::function<FetchStreamSplits(const msg::snapshot_stream_def&)>;
  // `on_ended` runs on a stream's thread once it ended (done or failed), so that the worker
  // reports it now rather than at its next heartbeat (a save waits for that report).
  SnapshotStreams(MakeFetch make_fetch, std::shared_ptr<const PathPolicy> paths,
                  std::function<void()> on_ended = {})
    : make_fetch_(std::move(make_fetch)), paths_(std::move(paths)), on_ended_(std::move(on_ended)) {
  }
  ~SnapshotStreams(); // stops and joins every stream
  SnapshotStreams(const SnapshotStreams&) = delete;
  SnapshotStreams& operator=(const SnapshotStreams&) = delete;

  // The streams the dispatcher wants written now: starts the new ones, stops the others.
  void assign(const std::vector<msg::snapshot_stream_def>& defs);
  std::vector<msg::snapshot_stream_report> reports();
  std::size_t running();

private:
  using Key = std::pair<std::string, int64_t>; // path, stream
  struct Shared {
    std::mutex mutex;
    msg::snapshot_stream_report report;
    std::atomic<bool> stop{false};
    std::atomic<bool> ended{false};
  };
  struct Running {
    std::shared_ptr<Shared> shared;
    std::thread thread;
  };
  void reap(); // joins the threads that ended and were stopped

  MakeFetch make_fetch_;
  std::shared_ptr<const PathPolicy> paths_;
  std::function<void()> on_ended_;
  std::map<Key, Running> streams_;
  std::vector<Running> stopping_;
};

} // namespace conveyor::actors
