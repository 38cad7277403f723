// The task actor: one per (job, worker), in the worker process. It runs the job's pipeline
// (worker/task_runner.hpp) into a bounded buffer, in steps so that consumer requests are
// answered in between, and serves get_elements with batches; a request that finds nothing is
// held until elements arrive, the pipeline ends, or its hold time has passed at the next step
// (then an empty batch tells the consumer to ask again; a request held through a very slow
// step ends at the consumer's own timeout, and the consumer asks again). DYNAMIC: the pipeline's splits come from the
// job (get_splits, a window in flight); while none is buffered the pipeline waits, resumable. When the pipeline ends
// (or fails) the task reports task_done to the job; consumers then drain its buffer and get
// end_of_sequence (or the error).
#pragma once

#include <caf/local_actor.hpp>
#include <caf/timespan.hpp>

#include "net/admission.hpp"
#include "net/bulk.hpp"
#include "worker/task_runner.hpp"
#include "worker/tenant_buffers.hpp"
#include "messages/dispatcher_worker.hpp"
#include "pipeline/functions/functions.hpp"

namespace conveyor::actors {

struct TaskStart {
  msg::task_def def;
  TaskLimits limits;
  const FunctionRegistry* functions = nullptr; // null = the global registry
  caf::timespan split_timeout = std::chrono::seconds(10);
  caf::timespan step_time = std::chrono::milliseconds(5); // bound of one produce step
  std::string worker_address;                             // for logs
  BulkServer bulk; // the node's bulk server (empty: payloads go inline)
  // Where this actor's batch numbers start. A worker numbers each task actor it spawns apart
  // (its count of spawned task actors << 40): a task re-created under the same id (after a
  // dispatcher restart) shares its bulk channel with the old actor, whose late frames must not
  // pass for the new one's batches at the consumer.
  uint64_t first_batch_seq = 1;
  // The worker's admission gate: get_elements, assign_task and stop_task without its token are
  // refused (get_elements with permission_denied), once per message.
  AdmissionGate gate;
  // The worker's per-tenant buffer accounting (null: none, e.g. a test's lone task).
  std::shared_ptr<TenantBuffers> tenant_buffers;
};

struct ExecutorActors; // worker/executor_scheduled.hpp

// Spawns the task linked to `parent` (it dies with its worker). With `executor` (production) it
// runs on the process's Executor, counted there until it finished: a slow or blocked pipeline
// must not hold CAF's scheduler threads, and a node's threads must not grow with its tasks. The
// deterministic simulator passes none: the task runs on its scheduler.
msg::task_actor spawn_task(caf::local_actor* parent, TaskStart start,
                           const std::shared_ptr<ExecutorActors>& executor);

// Task actor objects alive in this process (terminated ones included until the last handle to
// them goes): a node that keeps handles of ended tasks shows here.
int task_actor_objects();

} // namespace conveyor::actors
