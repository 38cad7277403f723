// The dispatcher actor's `conveyor status`: the cluster, its datasets, jobs and workers.
#include "dispatcher/dispatcher_actor_state.hpp"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <algorithm>
#include <set>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "net/admission.hpp"
#include "worker/cross_trainer_cache.hpp"
#include "dispatcher/dispatcher_state.hpp"
#include "dispatcher/job_actor.hpp"
#include "dispatcher/journal.hpp"
#include "dispatcher/tenant_caps.hpp"
#include "net/local_sender.hpp"
#include "net/node_key.hpp"
#include "node/log.hpp"
#include "consumer/placement.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::actors::dispatcher_detail {

// `conveyor status`: the dispatcher's own state plus each live job's counters (asked in
// parallel; a job that does not answer within the request timeout is listed from the state).
const msg::dataset_status& dataset_facts(self_ptr self, const DatasetEntry& d) {
  auto& facts = self->state.dataset_facts;
  if (auto it = facts.find(d.id); it != facts.end())
    return it->second;
  msg::dataset_status s;
  s.id = d.id;
  s.fingerprint = d.fingerprint;
  s.definition_bytes = static_cast<int64_t>(d.definition.size());
  s.compression = to_string(d.compression);
  if (auto ds = from_binary(d.definition); ds.ok()) {
    if (auto spec = ds->element_spec(); spec.ok())
      s.element_spec = spec->to_string();
    s.cardinality = ds->cardinality();
  }
  return facts.emplace(d.id, std::move(s)).first->second;
}

// Every tenant with a cap or an unfinished job: its caps, the workers its tasks are on, and
// what its tasks buffer on the live workers (their last heartbeats).
std::vector<msg::tenant_status> tenant_statuses(const dispatcher_actor_state& st) {
  std::map<std::string, msg::tenant_status> out;
  auto entry = [&](const std::string& tenant) -> msg::tenant_status& {
    auto& t = out[tenant];
    t.tenant = tenant;
    return t;
  };
  for (const auto& [tenant, cap] : st.start.tenant_max_workers)
    entry(tenant).max_workers = cap;
  for (const auto& [tenant, cap] : st.start.tenant_max_buffer_bytes)
    entry(tenant).max_buffer_bytes = cap;
  for (const auto* job : st.cluster.unfinished_jobs())
    (void)entry(job->tenant);
  for (auto& [tenant, t] : out)
    t.workers = static_cast<int64_t>(tenant_workers(st.cluster, tenant).size());
  for (const auto& [id, w] : st.workers)
    for (const auto& u : w.tenants)
      if (auto t = out.find(u.tenant); t != out.end())
        t->second.buffered_bytes += u.buffered_bytes;
  std::vector<msg::tenant_status> list;
  for (auto& [tenant, t] : out)
    list.push_back(std::move(t));
  return list;
}

Expected<msg::element_spec_reply> element_spec_of(self_ptr self, const msg::dataset_id_t& id) {
  const DatasetEntry* d = self->state.cluster.dataset(id);
  if (d == nullptr)
    return not_found("dataset id \"" + id + "\" is not registered");
  msg::element_spec_reply reply;
  auto ds = from_binary(d->definition);
  if (!ds.ok())
    return ds.status();
  if (auto spec = ds->element_spec(); spec.ok()) // unknown (a plugin not loaded here): ""
    reply.spec = snapshot::format_spec_components(*spec);
  return reply;
}

caf::result<msg::cluster_status> get_status(self_ptr self, const msg::get_status& req) {
  auto& st = self->state;
  // What the dispatcher holds (worker addresses, datasets, jobs) is for admitted peers only.
  if (auto admitted = check_admission(st.start.auth_token, req.auth_token, "status client");
      !admitted.ok()) {
    log::warning(kLog, "refused a status request: " + admitted.message());
    return msg::to_error(admitted);
  }
  if (!st.start.auth_token.empty())
    admit_sender_node(self);
  auto now = self->clock().now();
  auto status = std::make_shared<msg::cluster_status>();
  status->protocol_version = st.start.protocol_version;
  status->uptime_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(now - st.started).count();
  for (const auto* w : st.cluster.workers()) {
    msg::worker_status ws;
    ws.id = w->id;
    ws.address = w->address;
    ws.tasks = static_cast<int64_t>(st.cluster.tasks_of_worker(w->id).size());
    if (auto live = st.workers.find(w->id); live != st.workers.end()) {
      ws.heartbeat_age_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - live->second.last_heartbeat)
          .count();
      ws.tags = live->second.tags;
      ws.tenants = live->second.tenants;
    }
    status->workers.push_back(std::move(ws));
  }
  std::set<msg::dataset_id_t> listed;
  for (const auto& [id, job] : st.jobs)
    if (const auto* entry = st.cluster.job(id))
      listed.insert(entry->dataset);
  // Every dataset a live job reads, plus the most recent ones (bounded: a long-lived
  // dispatcher may hold many).
  constexpr std::size_t kMaxDatasets = 100;
  for (const auto& id : listed)
    if (const auto* d = st.cluster.dataset(id))
      (void)dataset_facts(self, *d);
  for (const auto& [id, facts] : st.dataset_facts) {
    if (status->datasets.size() >= kMaxDatasets)
      break;
    if (st.cluster.dataset(id))
      status->datasets.push_back(facts);
  }
  add_estimates(st, *status);
  status->tenants = tenant_statuses(st);
  add_snapshot_status(self, *status);
  if (req.include_jobs)
    for (const auto& js : st.finished_jobs)
      status->jobs.push_back(js);
  if (!req.include_jobs || st.jobs.empty())
    return *status;
  auto promise = self->make_response_promise<msg::cluster_status>();
  auto pending = std::make_shared<std::size_t>(st.jobs.size());
  auto deliver_one = [self, status, pending, promise](msg::job_status js) mutable {
    if (const auto* entry = self->state.cluster.job(js.id)) {
      js.name = entry->name;
      js.dataset = entry->dataset;
      js.tenant = entry->tenant;
      js.tenant_weight = entry->tenant_weight;
    }
    add_estimate(self->state, js);
    status->jobs.push_back(std::move(js));
    if (--*pending == 0) {
      std::sort(status->jobs.begin(), status->jobs.end(),
                [](const auto& a, const auto& b) { return a.id < b.id; });
      promise.deliver(*status);
    }
  };
  for (const auto& [id, job] : st.jobs) {
    auto jid = id;
    self->request(job, std::chrono::seconds(2), msg::get_job_status{})
      .then([deliver_one](msg::job_status& js) mutable { deliver_one(std::move(js)); },
            [self, jid, deliver_one](caf::error&) mutable {
              msg::job_status js;
              js.id = jid;
              if (const auto* entry = self->state.cluster.job(jid)) {
                js.mode = to_string(entry->policy);
                js.finished = entry->finished;
                js.tenant = entry->tenant;
                js.tenant_weight = entry->tenant_weight;
              }
              deliver_one(std::move(js));
            });
  }
  return promise;
}

} // namespace conveyor::actors::dispatcher_detail
