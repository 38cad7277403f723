// DispatchServer and WorkerServer: the reference's in-process servers
// (002_32961d854c9a04d3.txt: DispatchServer / WorkerServer). Each server owns its own actor
// system and listens on TCP; tests and `conveyor run` start them in-process, the `conveyor
// dispatcher` / `conveyor worker` commands start one each. No CAF in this header.
//
//   DispatchServer dispatcher{DispatcherConfig{}};
//   CONVEYOR_RETURN_IF_ERROR(dispatcher.start());        // logs "dispatcher: listening on HOST:PORT"
//   WorkerServer worker{WorkerConfig{.dispatcher_address = dispatcher.target()}};
//   CONVEYOR_RETURN_IF_ERROR(worker.start());            // registers with the dispatcher
//   ...
//   worker.stop(); dispatcher.stop();                    // also done by the destructors
#pragma once

#include <chrono>
#include <map>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/options.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

namespace detail {
class DispatcherContext;
class WorkerContext;
} // namespace detail

// What an unadmitted peer can make a server node hold (net/frame_guard.hpp): a front end on
// the node's port checks every BASP frame header a peer sends before CAF reads it (plain TCP),
// caps open connections and closes idle ones. CAF itself then listens on 127.0.0.1 only.
struct GuardConfig {
  bool enabled = false;                 // the `conveyor` commands turn it on (--no-frame-guard)
  uint32_t max_frame_bytes = 64u << 20; // per BASP frame (element chunks are <= 4 MiB)
  int max_connections = 256;
  int max_connections_per_address = 32; // open at once from one peer IP
  std::chrono::milliseconds idle_timeout{60000};
};

struct DispatcherConfig {
  uint16_t port = 0; // 0 = pick a free port (see bound_port())
  std::string bind_host = "127.0.0.1";
  // Directory of the journal (dispatcher/journal.hpp): every state change is made durable there
  // before it takes effect, and a dispatcher restarted on it carries on (datasets, jobs, tasks,
  // split positions). Empty = state in memory only (a warning says so at start-up).
  std::string work_dir;
  // Records after which the journal is folded into a snapshot (0 = the default, 100 000).
  int64_t journal_compact_after = 0;
  // Damage in the journal's segment (anything but a torn last record) stops start-up; with this
  // set the damaged segment is moved aside instead and the longest valid prefix is kept (logged).
  bool journal_recover = false;
  // A worker without a heartbeat for this long is removed (as is one whose connection drops).
  std::chrono::milliseconds worker_timeout{5000};
  // A named job whose consumers all left unfinished is released after this long (never before
  // a first consumer joined). A job whose consumers all read to the end is released at once.
  std::chrono::milliseconds job_gc_timeout{60000};
  // A consumer that sent no heartbeat (task-list poll) for this long is dropped from its job.
  std::chrono::milliseconds client_timeout{60000};
  // Elements per split for DYNAMIC index-range sources (range, from_tensor_slices).
  int64_t range_split_size = 64;
  // Directories under which the dispatcher may list files: it expands the file patterns of
  // DYNAMIC file sources (text_lines, tfrecord, list_files) and checks FILE sharding on its own
  // host. A pattern elsewhere fails the job with permission_denied naming the directory. Empty =
  // the dispatcher lists no files (as a worker without --allow-path), unless allow_all_paths.
  std::vector<std::string> allowed_paths;
  bool allow_all_paths = false; // no confinement (the user's own in-process cluster)
  // Snapshot reuse: a dataset registered with the fingerprint of a finished snapshot (conveyor
  // save) in one of these directories, or in one of their subdirectories, is read from it
  // (load(DIR)) instead of running its pipeline; logged. Each must lie under allowed_paths
  // (the dispatcher lists the chunks of DYNAMIC reads); the workers need it in theirs too.
  std::vector<std::string> snapshot_reuse;
  // The fixed list of workers (their advertised "host:port") that the static sharding
  // policies FILE, DATA, FILE_OR_DATA and HINT need: worker i of the list reads shard i of
  // len(list). When set, a worker not in the list is refused at registration. Empty = any
  // worker may join, and static sharding policies are refused.
  std::vector<std::string> worker_addresses;
  // Protocol version this node speaks; 0 = this build's version. Tests override it to check
  // that a mismatch is refused.
  uint32_t protocol_version = 0;
  // Prometheus text endpoint (GET /metrics) on metrics_host (empty = bind_host):metrics_port;
  // -1 = none, 0 = a free port (see metrics_port()).
  int metrics_port = -1;
  std::string metrics_host;
  // Every autoscale_interval the dispatcher estimates the workers its jobs need for their
  // trainers not to wait on workers (conveyor_desired_workers, `conveyor status`). With a
  // scale_command ("CMD {n}", run through /bin/sh with {n} = the worker count) it also acts on
  // it: hill climbing on the trainers' wait share, between min_workers and max_workers, at most
  // one change per scale_cooldown (docs/OPERATIONS.md "Autoscaling"). Empty = estimate only.
  std::chrono::milliseconds autoscale_interval{5000};
  std::string scale_command;
  int64_t min_workers = 1;
  int64_t max_workers = 64;
  std::chrono::milliseconds scale_cooldown{30000};
  // Per-tenant caps (docs/OPERATIONS.md "Tenant caps"), tenant -> a positive number; a tenant not
  // named has none. tenant_max_workers: the workers a tenant's jobs may have tasks on together
  // (its other workers serve other tenants). tenant_max_buffer_bytes: the bytes a tenant's tasks
  // may buffer on each worker together; at the cap they stop producing until consumers take
  // some (backpressure, nothing is dropped).
  std::map<std::string, int64_t> tenant_max_workers;
  std::map<std::string, int64_t> tenant_max_buffer_bytes;
  NetworkConfig network;
  GuardConfig guard;
};

class DispatchServer {
public:
  explicit DispatchServer(DispatcherConfig config = {});
  ~DispatchServer(); // stop() + join()
  DispatchServer(const DispatchServer&) = delete;
  DispatchServer& operator=(const DispatchServer&) = delete;

  // Starts the actor system and listens. failed_precondition if already started; io_error /
  // invalid_argument naming the host and port when it cannot listen.
  Status start();
  // The port it listens on (after start(); 0 before).
  uint16_t bound_port() const;
  // "host:port" to give workers and clients.
  std::string target() const;
  // Stops serving: the dispatcher actor exits, connections close. Idempotent.
  void stop();
  // Blocks until stop() was called (from another thread or a signal handler's helper).
  void join();
  // The metrics endpoint's port (0 when there is none).
  uint16_t metrics_port() const;

private:
  DispatcherConfig config_;
  std::shared_ptr<detail::DispatcherContext> ctx_;
};

struct WorkerConfig {
  std::string dispatcher_address; // "host:port" of the dispatcher (required)
  uint16_t port = 0;              // 0 = pick a free port
  // The bulk data path's port (large elements, consumer <- worker) on bind_host; 0 = a free
  // one (then a worker that cannot listen serves elements inline, with a warning). A fixed port
  // that cannot be opened fails start(): firewalls and container specs name it.
  uint16_t bulk_port = 0;
  std::string bind_host = "127.0.0.1";
  // The address consumers use to reach this worker ("host:port"); empty = bind_host:bound port.
  // It may differ from the bind address (NAT, containers). A "%port%" in it is replaced by the
  // bound port.
  std::string advertised_address;
  std::chrono::milliseconds heartbeat_interval{500};
  // Plugin shared libraries loaded into the function registry before serving.
  std::vector<std::string> plugins;
  // Directories the datasets' file ops (text_lines, tfrecord, list_files, cache) may read and
  // write, symbolic links and `..` resolved. Empty = no file access at all (a dataset naming a
  // path fails at its consumer), unless allow_all_paths.
  std::vector<std::string> allowed_paths;
  bool allow_all_paths = false; // no confinement (the user's own in-process cluster)
  // Per-job memory budget of a task on this worker: buffered elements, shuffle buffers, batches
  // and memory caches count. A job exceeding it fails with resource_exhausted at its consumers.
  // 0 = no budget.
  int64_t job_memory_limit = 0;
  // The same budget for all jobs of this worker together (a backstop when many jobs run, or when
  // job_memory_limit is 0): a charge passing it fails that job with resource_exhausted naming
  // --memory-limit. 0 = none.
  int64_t memory_limit = 0;
  // Distributed snapshots (distributed_save): how many snapshot streams this worker writes at
  // once, one per snapshot (0 = no limit; `--worker-max-concurrent-snapshots`).
  int64_t max_concurrent_snapshots = 0;
  // Elements a task buffers ahead of its consumers (and a byte bound on the same buffer).
  int64_t task_buffer_elements = 65536;
  int64_t task_buffer_bytes = 32 << 20;
  // Limit of one connection attempt to the dispatcher (retried with backoff within it).
  std::chrono::milliseconds connect_timeout{5000};
  // How long start() waits for a dispatcher that is not up yet (a worker started first).
  std::chrono::milliseconds dispatcher_timeout{60000};
  uint32_t protocol_version = 0; // 0 = this build's version
  // Tags announced to the dispatcher (`conveyor status` shows them). "COLOCATED" marks a worker
  // running beside a trainer: consumers with target_workers AUTO in other processes skip it.
  // Each tag 1..64 of [A-Za-z0-9_.-], at most 32.
  std::vector<std::string> worker_tags;
  // List this worker in its process's registry of local workers: consumers in the same process
  // reading with target_workers LOCAL or AUTO then take its elements as in-process messages (no
  // socket, no serialization of the payload). false keeps it reachable only over the network,
  // like a worker on another machine (tests and benchmarks of the network path from one
  // process); LOCAL readers then find no local worker.
  bool in_process_reads = true;
  // Bytes each task of a job read with the cross-trainer cache keeps for its trainers (the
  // window a slow trainer may fall behind before it skips ahead). Must be positive.
  int64_t cross_trainer_cache_size_bytes = int64_t{1} << 30;
  // Prometheus text endpoint, as for the dispatcher (-1 = none, 0 = a free port).
  int metrics_port = -1;
  std::string metrics_host;
  NetworkConfig network;
  GuardConfig guard;
};

class WorkerServer {
public:
  explicit WorkerServer(WorkerConfig config);
  ~WorkerServer(); // stop() + join()
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  // Loads plugins, listens, connects to the dispatcher and registers (retrying for up to
  // dispatcher_timeout). Errors: invalid_argument (bad address), unavailable / deadline_exceeded
  // (dispatcher unreachable or silent), version_mismatch (refused by the dispatcher).
  Status start();
  uint16_t bound_port() const;
  // The address advertised to the dispatcher ("host:port").
  std::string worker_address() const;
  // Graceful stop, first half: take no new task or split, hand unstarted splits back to their
  // jobs, deliver what was started. OK once every task's output was acknowledged (and an
  // endless OFF task's consumers acknowledged its retirement: nothing is still on its way to
  // them); deadline_exceeded when that took longer than `timeout`. Call stop() after it.
  Status drain(std::chrono::milliseconds timeout);
  void stop();
  void join();
  uint16_t metrics_port() const; // 0 when there is none

private:
  WorkerConfig config_;
  std::shared_ptr<detail::WorkerContext> ctx_;
};

} // namespace conveyor
