// The dispatcher actor and its workers and datasets: registering (or adopting a restored worker
// that registers again), removing, and registering datasets.
#include "dispatcher/snapshot_reuse.hpp"
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
#include "net/local_sender.hpp"
#include "net/node_key.hpp"
#include "node/log.hpp"
#include "consumer/placement.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::actors::dispatcher_detail {

void remove_worker(self_ptr self, msg::worker_id_t id, const std::string& reason) {
  auto& st = self->state;
  const auto* entry = st.cluster.worker(id);
  if (!entry)
    return;
  std::string address = entry->address;
  std::vector<std::pair<msg::task_id_t, msg::job_id_t>> tasks;
  for (const auto* t : st.cluster.tasks_of_worker(id))
    tasks.emplace_back(t->id, t->job);
  if (!persist(self, msg::RemoveWorkerRecord{id, reason, now_us(self)}, [self, tasks, reason] {
         for (const auto& [task, job] : tasks)
           if (auto j = self->state.jobs.find(job); j != self->state.jobs.end())
             self->send(j->second, msg::remove_task{task, reason});
       }).ok())
    return;
  if (auto w = st.workers.find(id); w != st.workers.end()) {
    if (w->second.handle)
      self->demonitor(w->second.handle.address());
    st.workers.erase(w);
  }
  release_snapshot_streams(self, id);
  log::info(kLog,
            "worker " + address + " removed (worker " + std::to_string(id) + ", " + reason + ")");
  place_capped_jobs(self); // a capped tenant that used it may take another worker
}

// Ops in a dataset graph (shared inputs counted once).
std::size_t count_nodes(const NodePtr& root) {
  std::set<const Node*> seen;
  std::vector<const Node*> todo{root.get()};
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (n == nullptr || !seen.insert(n).second)
      continue;
    for (const auto& in : n->inputs)
      todo.push_back(in.get());
  }
  return seen.size();
}

// With a token required, only nodes that passed client_hello (or this node itself) may register
// datasets and create jobs: an unadmitted peer cannot skip the handshake.
Status check_admitted_sender(self_ptr self, const char* what) {
  auto& st = self->state;
  if (st.start.auth_token.empty())
    return Status::OK();
  const auto& sender = self->current_sender();
  if (!sender || sender->node() == self->node() || st.admitted_nodes.count(sender->node()) > 0)
    return Status::OK();
  log::warning(kLog, std::string{"refused "} + what + " from node " +
                       caf::to_string(sender->node()) +
                       ": it did not present the admission token (no client_hello)");
  return permission_denied(std::string{what} +
                           " needs an admitted client: say client_hello with the admission token "
                           "first");
}

caf::expected<msg::dataset_registered> register_dataset(self_ptr self, msg::register_dataset& req) {
  auto& st = self->state;
  if (auto admitted = check_admitted_sender(self, "registering a dataset"); !admitted.ok())
    return msg::to_error(admitted);
  if (req.definition.size() > st.start.max_dataset_bytes)
    return msg::to_error(resource_exhausted("the dataset definition has " +
                                            std::to_string(req.definition.size()) +
                                            " bytes, more than the dispatcher accepts (" +
                                            std::to_string(st.start.max_dataset_bytes) + ")"));
  auto dataset = from_binary(req.definition);
  if (!dataset.ok())
    return msg::to_error(dataset.status().with_context("decoding the dataset definition"));
  if (auto nodes = count_nodes(dataset->node()); nodes > st.start.max_dataset_nodes)
    return msg::to_error(resource_exhausted("the dataset graph has " + std::to_string(nodes) +
                                            " nodes, more than the dispatcher accepts (" +
                                            std::to_string(st.start.max_dataset_nodes) + ")"));
  std::string fp = dataset->fingerprint();
  msg::dataset_id_t id;
  if (req.requested_id) {
    id = *req.requested_id;
    if (id.empty())
      return msg::make_error(ErrorCode::invalid_argument,
                             "the requested dataset id must not be empty");
    if (const auto* existing = st.cluster.dataset(id)) {
      if (existing->fingerprint == fp && existing->compression != req.compression)
        return msg::make_error(ErrorCode::invalid_argument,
                               "dataset id \"" + id + "\" is already registered with compression " +
                                 to_string(existing->compression) +
                                 "; this registration asked for compression " +
                                 to_string(req.compression) +
                                 " (a dataset's compression is fixed when it is registered)");
      if (existing->fingerprint == fp)
        return msg::dataset_registered{id};
      return msg::make_error(ErrorCode::already_exists,
                             "dataset id \"" + id +
                               "\" is already registered with another definition");
    }
  } else if (const auto* existing = st.cluster.dataset_by_fingerprint(fp, req.compression)) {
    return msg::dataset_registered{existing->id};
  } else {
    id = st.cluster.next_dataset_id();
  }
  const auto definition_bytes = req.definition.size();
  if (!st.start.snapshot_reuse.empty()) {
    auto reuse = find_reusable_snapshot(st.start.snapshot_reuse, fp);
    for (const auto& why : reuse.passed_over)
      log::info(kLog, "dataset " + id + " (fingerprint " + fp + "): not reusing " + why);
    if (reuse.path) {
      log::info(kLog, "dataset " + id + " (fingerprint " + fp +
                        "): reading the finished snapshot at " + *reuse.path +
                        " instead of running its pipeline (--snapshot-reuse)");
      req.definition = std::move(reuse.definition);
    }
  }
  msg::RegisterDatasetRecord record{id, fp, std::move(req.definition),
                                    static_cast<uint8_t>(req.compression), now_us(self)};
  if (auto s = persist(self, std::move(record)); !s.ok())
    return msg::to_error(s);
  (void)dataset_facts(self, *st.cluster.dataset(id));
  // By id and fingerprint only: the text form of a dataset holding tensors can be megabytes.
  log::info(kLog, "registered dataset " + id + " (fingerprint " + fp + ", " +
                    std::to_string(definition_bytes) + " bytes, compression " +
                    to_string(req.compression) + ")");
  return msg::dataset_registered{id};
}

// A worker the restarted dispatcher knows from its journal registers again: it keeps its id and
// its tasks (each job learns the task again; the worker answers with the running task if it is
// OFF, which kept serving, else with a fresh one under the same id: the old one quits with its
// lost job), and gets a task for every unfinished job it lacks.
caf::expected<msg::worker_registered> adopt_worker(self_ptr self, msg::worker_id_t id,
                                                   msg::worker_actor handle,
                                                   std::vector<std::string> tags) {
  auto& st = self->state;
  const auto* entry = st.cluster.worker(id);
  auto& live = st.workers[id];
  live.handle = handle;
  live.tags = std::move(tags);
  live.last_heartbeat = self->clock().now();
  self->monitor(handle);
  std::string address = entry->address;
  std::vector<msg::job_id_t> has;
  for (const auto* t : st.cluster.tasks_of_worker(id)) {
    has.push_back(t->job);
    // Finished ones too: a task whose pipeline ended may still hold elements its consumers
    // have not read; the job must list it again, or the worker stops it as unclaimed.
    const auto* job = st.cluster.job(t->job);
    if (auto j = st.jobs.find(t->job); j != st.jobs.end() && job)
      self->send(j->second, task_on_worker(st, t->id, job->policy, id, address, live));
  }
  log::info(kLog, "worker " + address + " is back (worker " + std::to_string(id) + ", " +
                    std::to_string(has.size()) + " task(s) kept)");
  create_tasks_for_live_jobs(self, id);
  return msg::worker_registered{id, st.start.protocol_version};
}

caf::expected<msg::worker_registered> register_worker(self_ptr self, msg::register_worker& req) {
  auto& st = self->state;
  if (req.protocol_version != st.start.protocol_version) {
    auto why = version_refusal(st.start.protocol_version, req.protocol_version, "worker");
    log::warning(kLog, "refused worker at " + req.address + ": " + why);
    return msg::make_error(ErrorCode::version_mismatch, why);
  }
  if (auto admitted = check_admission(st.start.auth_token, req.auth_token, "worker");
      !admitted.ok()) {
    log::warning(kLog, "refused worker at " + req.address + ": " + admitted.message());
    return msg::to_error(admitted);
  }
  if (!st.start.auth_token.empty())
    admit_sender_node(self); // its frames may now pass the guard's pre-auth cap
  if (st.start.auth_token.empty() && !req.auth_token.empty()) {
    // Such a worker requires the token in assign_task, which this dispatcher cannot present:
    // every job would lose its task there. Refused now, clearly, instead.
    auto why = "the worker presents an admission token but this dispatcher has none, so the "
               "worker would refuse every task it is assigned; give the dispatcher the same "
               "--auth-token / --token-file / CONVEYOR_AUTH_TOKEN";
    log::warning(kLog, "refused worker at " + req.address + ": " + why);
    return msg::make_error(ErrorCode::permission_denied, why);
  }
  if (req.address.empty() || !req.worker)
    return msg::make_error(ErrorCode::invalid_argument,
                           "a worker must register with its address and handle");
  if (auto tags = validate_worker_tags(req.worker_tags); !tags.ok()) {
    log::warning(kLog, "refused worker at " + req.address + ": " + tags.message());
    return msg::to_error(tags.with_context("worker " + req.address));
  }
  if (!st.start.worker_addresses.empty() && fixed_index(st, req.address) < 0) {
    std::string list;
    for (const auto& a : st.start.worker_addresses)
      list += (list.empty() ? "" : ", ") + a;
    auto why = "worker " + req.address +
               " is not in the dispatcher's fixed worker list (--worker-addresses: " + list + ")";
    log::warning(kLog, "refused " + why);
    return msg::make_error(ErrorCode::permission_denied, why); // final: the worker does not retry
  }
  if (const auto* old = st.cluster.worker_by_address(req.address)) {
    auto w = st.workers.find(old->id);
    if (w != st.workers.end() && !w->second.handle)
      return adopt_worker(self, old->id, req.worker, req.worker_tags);
    remove_worker(self, old->id, "it registered again");
  }
  auto id = st.cluster.next_worker_id();
  if (auto s = persist(self, msg::RegisterWorkerRecord{id, req.address, now_us(self)}); !s.ok())
    return msg::to_error(s);
  self->monitor(req.worker);
  st.workers[id] = LiveWorker{req.worker, self->clock().now(), req.worker_tags};
  std::string tags;
  for (const auto& t : req.worker_tags)
    tags += (tags.empty() ? ", tags " : ",") + t;
  log::info(kLog,
            "worker " + req.address + " registered (worker " + std::to_string(id) + tags + ")");
  create_tasks_for_live_jobs(self, id);
  return msg::worker_registered{id, st.start.protocol_version};
}

} // namespace conveyor::actors::dispatcher_detail
