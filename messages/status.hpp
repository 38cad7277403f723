// `conveyor status`: what a running dispatcher holds, as one typed request.
//
//   anyone -> dispatcher  get_status{} -> cluster_status (workers, datasets, jobs)
//   dispatcher -> job     get_job_status{} -> job_status (the job's live counters; the
//                         dispatcher fills in what its own state knows)
//   consumer -> job       consumer_progress rides on every get_tasks long poll (at least every
//                         task_refresh), so the job knows what its consumers received.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "conveyor/stats.hpp"
#include "messages/protocol.hpp"
#include "messages/snapshot_stream.hpp"
#include "messages/tenant_usage.hpp"
#include "messages/type_ids.hpp"

namespace conveyor::msg {

// What one consumer received so far, and where its waiting went (conveyor/stats.hpp; the shares
// are attributed by the consumer, see consumer/wait_stats.hpp).
using consumer_progress = ReadProgress;

} // namespace conveyor::msg

namespace conveyor { // found by argument-dependent lookup of ReadProgress
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ReadProgress& x) {
  return f(caf::meta::type_name("consumer_progress"), x.elements, x.bytes, x.wait_worker_ns,
           x.wait_network_ns, x.wait_split_ns, x.wait_credit_ns, x.elapsed_ns, x.lost_tasks);
}
} // namespace conveyor

namespace conveyor::msg {

struct get_status {
  bool include_jobs = true;
  std::string auth_token; // the dispatcher's admission token, when it requires one
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_status& x) {
  return f(caf::meta::type_name("get_status"), x.include_jobs, x.auth_token);
}

struct get_job_status {
  int64_t unused = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_job_status& x) {
  return f(caf::meta::type_name("get_job_status"), x.unused);
}

struct worker_status {
  worker_id_t id = 0;
  std::string address;
  std::vector<std::string> tags;
  int64_t tasks = 0;
  int64_t heartbeat_age_ms = 0;
  std::vector<tenant_usage> tenants; // as of its last heartbeat
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_status& x) {
  return f(caf::meta::type_name("worker_status"), x.id, x.address, x.tags, x.tasks,
           x.heartbeat_age_ms, x.tenants);
}

struct dataset_status {
  dataset_id_t id;
  std::string fingerprint;
  std::string element_spec; // e.g. "(int64, [])"; empty when it cannot be known here
  int64_t cardinality = -2; // n, -1 infinite, -2 unknown
  int64_t definition_bytes = 0;
  std::string compression;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dataset_status& x) {
  return f(caf::meta::type_name("dataset_status"), x.id, x.fingerprint, x.element_spec,
           x.cardinality, x.definition_bytes, x.compression);
}

struct job_status {
  job_id_t id = 0;
  std::string name; // empty = private
  dataset_id_t dataset;
  std::string mode;
  bool finished = false;
  int64_t age_ms = 0;
  int64_t consumers = 0;
  int64_t tasks = 0;
  int64_t elements = 0; // delivered to its consumers (as they last reported)
  int64_t bytes = 0;
  double elements_per_s = 0; // over about the last 10 s of consumer reports (0 once none reads)
  double bytes_per_s = 0;
  int64_t epoch = -1;             // DYNAMIC: the job's split epoch; -1 otherwise
  int64_t splits_handed_out = -1; // DYNAMIC only
  consumer_progress waiting;      // summed over its consumers
  std::string waiting_for;        // what holds production open besides running tasks, or empty
  // The dispatcher's worker estimate (dispatcher/worker_estimate.hpp) over its last autoscale
  // interval: workers the job needs for its consumers not to wait on workers, and their share
  // of time waiting on workers then. -1: not estimated (no consumers, or not observed yet).
  int64_t desired_workers = -1;
  double recent_worker_wait = -1;
  std::string tenant; // DistributeOptions::tenant, tenant_weight
  int64_t tenant_weight = 1;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_status& x) {
  return f(caf::meta::type_name("job_status"), x.id, x.name, x.dataset, x.mode, x.finished,
           x.age_ms, x.consumers, x.tasks, x.elements, x.bytes, x.elements_per_s, x.bytes_per_s,
           x.epoch, x.splits_handed_out, x.waiting, x.waiting_for, x.desired_workers,
           x.recent_worker_wait, x.tenant, x.tenant_weight);
}

struct cluster_status {
  std::string dispatcher; // where it listens (as it was asked)
  uint32_t protocol_version = 0;
  int64_t uptime_ms = 0;
  std::vector<worker_status> workers;
  std::vector<dataset_status> datasets;
  std::vector<job_status> jobs;
  // The worker estimate over all jobs (-1 before the first estimate; 0: no job has readers),
  // the autoscaler's target (-1: no --scale-command), and its actuator's runs and failures.
  int64_t desired_workers = -1;
  int64_t autoscale_target = -1;
  int64_t scale_commands = 0;
  int64_t scale_command_failures = 0;
  // Every tenant with a cap or a live job, by name.
  std::vector<tenant_status> tenants;
  std::vector<snapshot_status> snapshots; // distributed snapshots (messages/snapshot_stream.hpp)
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_status& x) {
  return f(caf::meta::type_name("cluster_status"), x.dispatcher, x.protocol_version, x.uptime_ms,
           x.workers, x.datasets, x.jobs, x.desired_workers, x.autoscale_target, x.scale_commands,
           x.scale_command_failures, x.tenants, x.snapshots);
}

} // namespace conveyor::msg
