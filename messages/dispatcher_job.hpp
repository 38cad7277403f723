// Dispatcher <-> job actor (both in the dispatcher process). The dispatcher owns the cluster
// state (dispatcher/dispatcher_state.hpp) and decides every id; a job actor runs one job.
//
//   dispatcher -> job  add_task (a task record was created: a live worker for a new job, or a
//                      new worker for every unfinished job)
//   dispatcher -> job  remove_task (its worker was removed: timeout or connection lost)
//   job -> dispatcher  task_finished, job_finished, job_released (the job's state changes, which
//                      the dispatcher records)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/dispatcher_worker.hpp"
#include "messages/job_consumer.hpp"
#include "messages/job_task.hpp"
#include "messages/journal_records.hpp"
#include "messages/protocol.hpp"
#include "messages/status.hpp"
#include "messages/type_ids.hpp"

namespace conveyor::msg {

struct add_task {
  task_id_t task = 0;
  worker_id_t worker = 0;
  std::string worker_address;
  worker_actor handle;
  // Static sharding: the worker's place in the dispatcher's fixed list (num_workers = 0: none).
  int64_t num_workers = 0;
  int64_t worker_index = 0;
  std::vector<std::string> worker_tags = {}; // the worker's tags, passed on in task_info
  // OFF: the read-cursor slot the task serves and its start (task_info.off_slot, off_skip).
  int64_t off_slot = -1;
  int64_t off_skip = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, add_task& x) {
  return f(caf::meta::type_name("add_task"), x.task, x.worker, x.worker_address, x.handle,
           x.num_workers, x.worker_index, x.worker_tags, x.off_slot, x.off_skip);
}

struct remove_task {
  task_id_t task = 0;
  std::string reason;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, remove_task& x) {
  return f(caf::meta::type_name("remove_task"), x.task, x.reason);
}

// dispatcher -> job: the task's worker drains (coordinated reads: retire the task at a round
// every consumer agrees on; other jobs ignore it). Repeated with the worker's heartbeats.
struct drain_task {
  task_id_t task = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, drain_task& x) {
  return f(caf::meta::type_name("drain_task"), x.task);
}

struct task_finished {
  job_id_t job = 0;
  task_id_t task = 0;
  std::string error; // empty = ended normally
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_finished& x) {
  return f(caf::meta::type_name("task_finished"), x.job, x.task, x.error);
}

struct job_finished {
  job_id_t job = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_finished& x) {
  return f(caf::meta::type_name("job_finished"), x.job);
}

// The job had no consumer for job_gc_timeout: it stopped its tasks and exited.
struct job_released {
  job_id_t job = 0;
  // The job's last status (its consumers' totals), kept by the dispatcher in its bounded list
  // of recently finished jobs for `conveyor status` and metrics.
  job_status final_status;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_released& x) {
  return f(caf::meta::type_name("job_released"), x.job, x.final_status);
}

// Journal hook (DYNAMIC): the job asks the dispatcher to make its split hand-out position
// durable; the reply (ok) comes once the record is in the journal (at once without --work-dir),
// so the job hands a split out only after its position is durable.
struct persist_splits {
  SplitPositionRecord record;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, persist_splits& x) {
  return f(caf::meta::type_name("persist_splits"), x.record);
}

// The job actor: tasks, consumers and the dispatcher see it through this interface.
using job_actor = split_source_actor::extend<
  caf::replies_to<join_job>::with<job_joined>, caf::replies_to<get_tasks>::with<task_list>,
  caf::reacts_to<leave_job>, caf::reacts_to<add_task>, caf::reacts_to<remove_task>,
  caf::reacts_to<drain_task>, caf::replies_to<get_job_status>::with<job_status>>;

// The dispatcher, as its job actors see it.
using job_report_actor =
  caf::typed_actor<caf::replies_to<persist_splits>::with<caf::ok_atom>,
                   caf::reacts_to<task_finished>, caf::reacts_to<job_finished>,
                   caf::reacts_to<job_released>>;

} // namespace conveyor::msg
