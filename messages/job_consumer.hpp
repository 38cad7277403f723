// Consumer <-> job (the job actor lives in the dispatcher process): joining a job and
// learning its tasks.
//
//   consumer -> job  join_job{consumer} -> job_joined{consumer id}; the job monitors the
//                    consumer and releases itself when no consumer is left for job_gc_timeout
//   consumer -> job  get_tasks{consumer, known_version} -> task_list. A long poll: when the
//                    list still has `known_version`, the job holds the request until the list
//                    changes (a task added, removed, the job finished) or its hold limit passes,
//                    so consumers notice new and removed tasks at once without busy polling.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>

#include "messages/protocol.hpp"
#include "pipeline/runtime/status.hpp"
#include "messages/status.hpp"
#include "messages/type_ids.hpp"
#include "messages/worker_consumer.hpp"

namespace conveyor::msg {

// round_span (messages/protocol.hpp: the round-robin core uses it too, without CAF).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, round_span& x) {
  return f(caf::meta::type_name("round_span"), x.task, x.start_round, x.end_round, x.served_rounds);
}

struct join_job {
  caf::actor consumer; // monitored by the job
  // Re-joining after the connection to the dispatcher broke: the id it had (0: a first join).
  // A job that still counts it gets it back, with its unacknowledged batches; one that does
  // not (a restarted dispatcher's job) gives a new id.
  consumer_id_t previous = 0;
  // Coordinated reads: this consumer's index (-1 = none); one live consumer per index.
  int64_t consumer_index = -1;
  // Coordinated reads: what this consumer's planner knows of the schedule (RoundRobinPlanner::
  // known_schedule), from which a restarted dispatcher's job rebuilds it (RoundRobinJob::
  // recover): tasks serving rounds, tasks gone, lost tasks being settled.
  std::vector<round_span> known_active = {};
  std::vector<round_span> known_gone = {};
  std::vector<round_span> known_lost = {};
  // Whole-epoch cross-trainer sharing: this consumer's trainer id (the job tells its tasks).
  std::string trainer_id = {};
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_job& x) {
  return f(caf::meta::type_name("join_job"), x.consumer, x.previous, x.consumer_index,
           x.known_active, x.known_gone, x.known_lost, x.trainer_id);
}

struct job_joined {
  consumer_id_t consumer = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_joined& x) {
  return f(caf::meta::type_name("job_joined"), x.consumer);
}

// consumer -> job: the consumer stops reading (`finished`: it read every task to its end;
// otherwise it gave up or was cancelled). A job whose every consumer finished is released at
// once; one whose consumers all left is released after job_gc_timeout (named) or at once.
struct leave_job {
  consumer_id_t consumer = 0;
  bool finished = false;
  // Admission: the job forwards leave_job to its tasks with the dispatcher's token (a worker
  // with a token ignores one without it). Empty from consumers (the job checks them otherwise).
  std::string auth_token = {};
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, leave_job& x) {
  return f(caf::meta::type_name("leave_job"), x.consumer, x.finished, x.auth_token);
}

struct get_tasks {
  consumer_id_t consumer = 0;
  uint64_t known_version = 0; // 0 = none known yet (answered at once)
  // How long the job may hold the request when nothing changed (nanoseconds; the consumer
  // picks it below its own request timeout).
  int64_t hold_ns = 0;
  // What the consumer received so far (for `conveyor status` and the metrics; status.hpp).
  consumer_progress progress;
  // Coordinated reads: the next round this consumer would plan, and the fence of the list it
  // has (task_list::round_fence); the job promotes a pending task once every consumer acked.
  int64_t round = -1;
  int64_t round_fence = -1;
  // Coordinated reads: for each lost task the list names (task_list::lost_rounds), how many of
  // its local rounds this consumer received (-1: none counts, it is rejoining). The job keeps
  // the rounds every consumer received (coordinated/round_robin.hpp).
  struct lost_report {
    task_id_t task = 0;
    int64_t rounds = -1;
  };
  std::vector<lost_report> lost_reports = {};
  // The tasks this consumer reads (its placement's choice, consumer/placement.hpp): DYNAMIC
  // hands splits to a task not every consumer reads only once one does (protocol 13).
  std::vector<task_id_t> reading = {};
  // Deterministic reads: how many entries of the job's finished-split log this consumer has
  // (task_list::finished_next of the last list it took); the job forgets those before it.
  int64_t finished_known = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_tasks::lost_report& x) {
  return f(caf::meta::type_name("lost_report"), x.task, x.rounds);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_tasks& x) {
  return f(caf::meta::type_name("get_tasks"), x.consumer, x.known_version, x.hold_ns, x.progress,
           x.round, x.round_fence, x.lost_reports, x.reading, x.finished_known);
}

struct task_info {
  task_id_t task = 0;
  worker_id_t worker = 0;
  std::string worker_address; // where the consumer connects to reach the task directly
  task_actor handle;
  // The worker's tags: with target_workers AUTO a consumer leaves a COLOCATED worker of another
  // process alone (consumer/placement.hpp).
  std::vector<std::string> worker_tags = {};
  // Coordinated reads: the first global round this task serves; -1 = pending (not read yet).
  int64_t start_round = 0;
  // Coordinated reads: the first global round this task no longer serves (its worker drains);
  // -1 = none.
  int64_t end_round = -1;
  // OFF: the read-cursor slot this task serves (-1: its own, named by the task id) and the
  // number of the slot's first element it produces (a resumed read skips what was consumed).
  int64_t off_slot = -1;
  int64_t off_skip = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_info& x) {
  return f(caf::meta::type_name("task_info"), x.task, x.worker, x.worker_address, x.handle,
           x.worker_tags, x.start_round, x.end_round, x.off_slot, x.off_skip);
}

struct task_list {
  uint64_t version = 0;         // changes whenever the list or job_finished changes
  std::vector<task_info> tasks; // the job's live tasks (finished ones included)
  // Every listed task's pipeline ended (DYNAMIC: and no split is left to hand out again): a
  // consumer ends once it read each listed task to its end. May turn false again when a worker
  // joins (its new task is listed).
  bool job_finished = false;
  // Non-empty: the job cannot deliver its data any more (e.g. an OFF task was lost, or a lost
  // task's splits cannot be re-run): the consumer fails the read with this error.
  std::string error;
  // The ErrorCode of `error` (a failed task's own code, e.g. resource_exhausted; data_loss when
  // elements cannot be read again).
  uint8_t error_code = static_cast<uint8_t>(ErrorCode::data_loss);
  // Coordinated reads: no consumer plans a round >= round_fence (-1 = no fence) while a task
  // is pending or retiring.
  int64_t round_fence = -1;
  // Coordinated reads: the tasks that served their last round and are gone.
  std::vector<round_span> retired_rounds = {};
  // Coordinated reads: tasks lost while serving rounds, being settled: no consumer asks them
  // for rounds any more, each reports how many it received (get_tasks::lost_reports); the job
  // then gives served_rounds (the least reported) and, behind a fence, the end round. Once
  // both are known the task moves to retired_rounds.
  std::vector<round_span> lost_rounds = {};
  // Coordinated reads: the job was restored by a restarted dispatcher and waits for every
  // consumer_index to join again with what it knows (join_job::known_*): the list's rounds,
  // fence and spans mean nothing yet; consumers read on with the schedule they have.
  bool rounds_recovering = false;
  // Deterministic reads (get_or_create_job::deterministic_window): the splits whose every
  // element the consumer acknowledged, in the order they finished, from log entry
  // get_tasks::finished_known on; finished_next is the entry after the last one. Every split of
  // an epoch finishes before any split of the next one is handed out, so the first entry of a
  // later epoch says the earlier epoch is over.
  std::vector<std::pair<int64_t, int64_t>> finished_splits = {}; // (epoch, index)
  int64_t finished_next = 0;
  // Deterministic reads: the task holding the job's lowest unfinished split (empty while it waits
  // to be handed out again). A consumer whose reorder holds more than its byte budget asks only
  // it for elements (DistributeOptions::deterministic_hold_bytes).
  std::vector<task_id_t> lowest_split_tasks = {};
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_list& x) {
  return f(caf::meta::type_name("task_list"), x.version, x.tasks, x.job_finished, x.error,
           x.error_code, x.round_fence, x.retired_rounds, x.lost_rounds, x.rounds_recovering,
           x.finished_splits, x.finished_next, x.lowest_split_tasks);
}

} // namespace conveyor::msg
