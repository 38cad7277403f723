// Worker <-> dispatcher side: registration, heartbeats, and the job's task assignments.
//
//   worker -> dispatcher  register_worker{version, address, worker, tags} -> worker_registered
//                         (a version mismatch is refused with version_mismatch)
//   worker -> dispatcher  worker_heartbeat every heartbeat interval -> heartbeat_ack
//                         (known = false: the dispatcher dropped this worker; register again;
//                         both carry snapshot streams: messages/snapshot_stream.hpp)
//   job    -> worker      assign_task{task_def} -> task_assigned{task}   (the job actor lives in
//                         the dispatcher process; one task per job and worker)
//   job    -> worker      stop_task (the job was released)
//   dispatcher -> worker  snapshot_nudge (messages/snapshot_stream.hpp): heartbeat now
// assign_task, stop_task and snapshot_nudge carry the dispatcher's admission token: a worker started with one
// refuses them without it (anyone reaching the worker's port could otherwise run pipelines).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/job_task.hpp"
#include "messages/protocol.hpp"
#include "messages/snapshot_stream.hpp"
#include "messages/tenant_usage.hpp"
#include "messages/type_ids.hpp"
#include "messages/worker_consumer.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/sharding/sharding.hpp"

namespace conveyor::msg {

// Everything a worker needs to run its share of a job.
struct task_def {
  task_id_t task = 0;
  job_id_t job = 0;
  dataset_id_t dataset;
  std::string definition; // pipeline/graph/serialize.hpp to_binary form
  ShardingPolicy policy = ShardingPolicy::off;
  Compression compression = Compression::automatic;
  split_source_actor splits; // the job: DYNAMIC splits, task_done
  // Static sharding (FILE, DATA, FILE_OR_DATA, HINT): this worker's place in the dispatcher's
  // fixed worker list. num_workers = 0 for OFF and DYNAMIC.
  int64_t num_workers = 0;
  int64_t worker_index = 0;
  CacheSharing cross_trainer_cache =
    CacheSharing::none; // serve the job's trainers from a shared cache
  // Coordinated reads: the job's num_consumers (-1 = not coordinated; coordinated/round_robin.hpp).
  int64_t num_consumers = -1;
  // The executor share its work runs in (get_or_create_job.tenant, tenant_weight).
  std::string tenant = "default";
  int64_t tenant_weight = 1;
  // The bytes the tenant's tasks on one worker may buffer together (--tenant-max-buffer-bytes;
  // 0 = no cap): worker/tenant_buffers.hpp.
  int64_t tenant_max_buffer_bytes = 0;
  // OFF, a resumed read (task_info.off_skip): the task skips this many elements of its
  // pipeline's output (INT64_MAX: all of them).
  int64_t skip = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_def& x) {
  return f(caf::meta::type_name("task_def"), x.task, x.job, x.dataset, x.definition, x.policy,
           x.compression, x.splits, x.num_workers, x.worker_index, x.cross_trainer_cache,
           x.num_consumers, x.tenant, x.tenant_weight, x.tenant_max_buffer_bytes, x.skip);
}

// job -> worker
struct assign_task {
  task_def def;
  // Admission: the dispatcher's token; a worker started with a token refuses assignments
  // without it (permission_denied). Never logged.
  std::string auth_token = {};
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, assign_task& x) {
  return f(caf::meta::type_name("assign_task"), x.def, x.auth_token);
}

// worker -> job
struct task_assigned {
  task_id_t task = 0;
  task_actor handle;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_assigned& x) {
  return f(caf::meta::type_name("task_assigned"), x.task, x.handle);
}

// job -> worker
struct stop_task {
  task_id_t task = 0;
  std::string auth_token = {}; // as in assign_task
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stop_task& x) {
  return f(caf::meta::type_name("stop_task"), x.task, x.auth_token);
}

// job -> worker -> task (coordinated reads, a draining worker): the task serves its local rounds
// [0, local_rounds) and no more; once every consumer took them, it is drained.
struct end_rounds {
  task_id_t task = 0;
  int64_t local_rounds = 0;
  std::string auth_token = {}; // as in assign_task
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, end_rounds& x) {
  return f(caf::meta::type_name("end_rounds"), x.task, x.local_rounds, x.auth_token);
}

// The worker actor, as the dispatcher and its jobs see it.
using worker_actor =
  caf::typed_actor<caf::replies_to<assign_task>::with<task_assigned>, caf::reacts_to<stop_task>,
                   caf::reacts_to<end_rounds>, caf::reacts_to<snapshot_nudge>>;

// worker -> dispatcher
struct register_worker {
  uint32_t protocol_version = 0;
  std::string address; // advertised "host:port" consumers connect to
  worker_actor worker;
  std::string auth_token; // admission proof (NetworkConfig::auth_token); never logged
  // The worker's tags (WorkerConfig::worker_tags, e.g. "COLOCATED"; consumer/placement.hpp).
  std::vector<std::string> worker_tags = {};
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, register_worker& x) {
  return f(caf::meta::type_name("register_worker"), x.protocol_version, x.address, x.worker,
           x.auth_token, x.worker_tags);
}

// dispatcher -> worker
struct worker_registered {
  worker_id_t worker = 0;
  uint32_t protocol_version = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_registered& x) {
  return f(caf::meta::type_name("worker_registered"), x.worker, x.protocol_version);
}

// worker -> dispatcher
struct worker_heartbeat {
  worker_id_t worker = 0;
  uint64_t num_tasks = 0; // tasks the worker runs (for logs and status)
  // The worker drains (graceful stop): the dispatcher tells the jobs of its tasks (coordinated
  // reads retire the task at a round every consumer agrees on). Sent at once when the drain
  // starts, then with every heartbeat.
  bool draining = false;
  std::vector<tenant_usage> tenants; // its executor's thread time per tenant (status shows it)
  // Distributed snapshots (messages/snapshot_stream.hpp): the streams it writes or finished
  // since the last ack, and how many it may write at once (0 = no limit).
  std::vector<snapshot_stream_report> snapshot_streams = {};
  int64_t max_snapshot_streams = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_heartbeat& x) {
  return f(caf::meta::type_name("worker_heartbeat"), x.worker, x.num_tasks, x.draining, x.tenants,
           x.snapshot_streams, x.max_snapshot_streams);
}

// dispatcher -> worker
struct heartbeat_ack {
  bool known = true; // false: the dispatcher does not know this worker (any more)
  // Every snapshot stream this worker is to write now; one it writes and is not listed stops.
  std::vector<snapshot_stream_def> snapshot_streams = {};
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat_ack& x) {
  return f(caf::meta::type_name("heartbeat_ack"), x.known, x.snapshot_streams);
}

} // namespace conveyor::msg
