// The job actor: one per job, in the dispatcher process, linked to the dispatcher.
//
// Glossary: a *job* is one reading of a registered dataset in a processing mode; it runs as one
// *task* per live worker (the dispatcher decides task ids and tells the job with add_task,
// including for workers that join mid-job). *Consumers* join the job and long-poll its task
// list. DYNAMIC jobs own the split provider (in dispatcher/job_core.hpp) and answer the tasks'
// get_splits. All bookkeeping lives in dispatcher/job_core.hpp; this actor only holds handles and
// timers. The job is *released* when its consumers are done (job_core.hpp): releasing stops its
// tasks on the workers, and the dispatcher erases the job.
#pragma once

#include <memory>
#include <string>

#include <caf/local_actor.hpp>
#include <caf/timespan.hpp>

#include "dispatcher/job_core.hpp"
#include "messages/dispatcher_job.hpp"
#include "messages/type_ids.hpp"

namespace conveyor::actors {

struct JobStart {
  msg::job_id_t id = 0;
  std::string name; // empty = private
  msg::dataset_id_t dataset;
  std::string definition;
  ShardingPolicy policy = ShardingPolicy::off;
  Compression compression = Compression::automatic;
  msg::CacheSharing cross_trainer_cache =
    msg::CacheSharing::none;      // tasks serve trainers from a cache
  std::string tenant = "default"; // the tasks' share of the workers' threads (task_def)
  int64_t tenant_weight = 1;
  // The bytes its tenant's tasks may buffer on each worker (--tenant-max-buffer-bytes; 0 = none).
  int64_t tenant_max_buffer_bytes = 0;
  std::shared_ptr<JobCore> core; // the job's bookkeeping (DYNAMIC: with its split provider)
  msg::job_report_actor dispatcher;
  caf::actor creator; // the consumer that created the job: gone before anyone joined -> release
  caf::timespan request_timeout = std::chrono::seconds(10);
  caf::timespan gc_timeout = std::chrono::seconds(60);
  caf::timespan client_timeout = std::chrono::seconds(60); // consumers' heartbeat (get_tasks)
  // DYNAMIC with a journal: every split hand-out position is made durable (persist_splits to
  // the dispatcher) before the split is handed out, so a restarted dispatcher resumes there.
  bool journal_splits = false;
  // Re-spawned from the journal by a restarted dispatcher: its consumers may be gone for good
  // (e.g. they read to the end while the dispatcher was down), so it is released when none
  // re-joined within client_timeout, instead of waiting for a first consumer forever.
  bool restored = false;
  // Coordinated reads (coordinated/round_robin.hpp): the job's num_consumers; -1 = not coordinated.
  int64_t num_consumers = -1;
  // The consumers' target_workers: with LOCAL (and AUTO for COLOCATED workers) some tasks are
  // not read by every consumer; DYNAMIC hands those splits only once one reads them.
  std::string target_workers = "AUTO";
  int64_t round_lookahead = 256;
  // Admission: the dispatcher's token, presented to workers in assign_task and stop_task.
  std::string auth_token;
};

using job_full_actor = msg::job_actor::extend<caf::reacts_to<msg::expire_atom, uint64_t>,
                                              caf::reacts_to<msg::gc_atom, uint64_t>>;

// Spawned linked to `parent` (the dispatcher), so that jobs end with it.
job_full_actor spawn_job(caf::local_actor* parent, JobStart start);

} // namespace conveyor::actors
