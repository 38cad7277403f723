// The worker actor: one per worker process. Registers with the dispatcher (advertising the
// address consumers should connect to, which may differ from the bind address), heartbeats at
// a configurable interval, and runs one task actor per job it is assigned.
//
//   idle --(start: advertised address)--> connecting --> registering --> registered
//   registered --heartbeat ack "unknown"/dispatcher lost--> connecting (retried with backoff)
//   registering --version_mismatch--> refused (logged, reported to start(), never retried)
//
// A worker started before its dispatcher keeps trying for dispatcher_timeout before start()
// fails. When the dispatcher is lost the worker keeps its tasks running (OFF tasks go on
// serving consumers) and registers again with exponential backoff (heartbeat_interval doubling
// up to 2 s). A restarted dispatcher that journaled its state assigns the same tasks again
// (assign_task for a running task re-attaches it to the new job actor); tasks it does not claim
// within a grace period after the re-registration are stopped.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/timespan.hpp>

#include "worker/task_runner.hpp"
#include "net/transport.hpp"
#include "messages/dispatcher_worker.hpp"
#include "messages/type_ids.hpp"

namespace conveyor::actors {

struct ExecutorActors; // worker/executor_scheduled.hpp

struct WorkerStart {
  std::shared_ptr<Transport> transport;
  HostPort dispatcher;
  caf::timespan heartbeat_interval = std::chrono::milliseconds(500);
  caf::timespan connect_timeout = std::chrono::seconds(5);
  // How long a worker started before its dispatcher waits for it before start() fails.
  caf::timespan dispatcher_timeout = std::chrono::seconds(60);
  caf::timespan request_timeout = std::chrono::seconds(10);
  TaskLimits task_limits;
  // Tasks run on the process's Executor, counted here (worker/task_actor.hpp spawn_task); null:
  // on the actor system's scheduler (the simulator).
  std::shared_ptr<ExecutorActors> task_executor;
  BulkServer bulk; // this node's bulk server (linked to the worker), may be empty
  uint32_t protocol_version = msg::kProtocolVersion;
  std::string auth_token;        // presented to the dispatcher when registering
  std::vector<std::string> tags; // announced when registering (consumer/placement.hpp)
  // Distributed snapshots: streams it writes at once (--worker-max-concurrent-snapshots; one
  // per snapshot; 0 = no limit).
  int64_t max_snapshot_streams = 0;
  // Lists the worker and its tasks in the process-wide LocalWorkers registry under its
  // advertised address, for LOCAL reads (worker/local_workers.hpp). WorkerServer sets it.
  bool local_registry = false;
  // Called once, with the outcome of the first registration attempt.
  std::function<void(Status)> on_first_registration;
};

// The worker's full interface: what it publishes (msg::worker_actor) plus its own timer and
// the start message carrying the advertised address (known only once its port is bound).
// drain_atom: a graceful stop — the worker takes no new task, its DYNAMIC tasks take no new
// split and hand the unstarted ones back to their jobs, every task finishes what it started
// and serves it; the reply (true) comes once every task's output was acknowledged (OFF: taken).
using worker_full_actor =
  msg::worker_actor::extend<caf::reacts_to<msg::tick_atom>, caf::reacts_to<msg::tick_atom, bool>,
                            caf::reacts_to<caf::connect_atom, std::string>,
                            caf::replies_to<msg::drain_atom>::with<bool>,
                            caf::reacts_to<msg::drained_atom>>;

worker_full_actor spawn_worker(caf::actor_system& sys, WorkerStart start);

} // namespace conveyor::actors
