#include "actors/dispatcher_actor.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/admission.hpp"
#include "actors/dispatcher_state.hpp"
#include "actors/job_actor.hpp"
#include "actors/log.hpp"
#include "messages/all.hpp"
#include "pipeline/serialize.hpp"
#include "pipeline/sharding.hpp"
#include "pipeline/split_provider.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "dispatcher";

struct LiveWorker {
  msg::worker_actor handle;
  caf::actor_clock::time_point last_heartbeat;
};

struct dispatcher_state {
  static inline const char* name = "conveyor.dispatcher";
  DispatcherStart start;
  DispatcherState state;
  std::map<msg::worker_id_t, LiveWorker> workers;
  std::map<msg::job_id_t, job_full_actor> jobs; // running job actors
  std::set<caf::actor_addr> job_addrs;           // job actors not yet exited
  // Observability: dataset facts computed once for `conveyor status`, and the start time.
  std::map<msg::dataset_id_t, msg::dataset_status> dataset_facts;
  caf::actor_clock::time_point started;
  std::set<caf::node_id> admitted_nodes;         // passed client_hello with the token
};

using self_ptr = dispatcher_full_actor::stateful_pointer<dispatcher_state>;

int64_t now_us(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

// Applies a record the dispatcher just made. A refusal here is a dispatcher bug (requests are
// validated before their records are made), so it is logged and reported, never ignored.
Status apply(self_ptr self, msg::Update update) {
  Status s = self->state.state.apply(update);
  if (!s.ok())
    log::error(kLog, "internal: an update record was refused: " + s.to_string());
  return s;
}

std::string version_refusal(uint32_t ours, uint32_t theirs, const std::string& who) {
  return "protocol version mismatch: the dispatcher speaks version " + std::to_string(ours) +
         ", the " + who + " version " + std::to_string(theirs);
}

// Where `address` stands in the fixed worker list (static sharding), or -1.
int64_t fixed_index(const dispatcher_state& st, const std::string& address) {
  const auto& list = st.start.worker_addresses;
  auto it = std::find(list.begin(), list.end(), address);
  return it == list.end() ? -1 : static_cast<int64_t>(it - list.begin());
}

bool is_static(ShardingPolicy p) { return p != ShardingPolicy::off && p != ShardingPolicy::dynamic; }

// Creates the task of `job` on `worker` and tells the job.
void create_task(self_ptr self, msg::job_id_t job, msg::worker_id_t worker) {
  auto& st = self->state;
  auto j = st.jobs.find(job);
  auto w = st.workers.find(worker);
  const auto* entry = st.state.worker(worker);
  if (j == st.jobs.end() || w == st.workers.end() || !entry)
    return;
  auto task = st.state.next_task_id();
  if (!apply(self, msg::CreateTaskRecord{task, job, worker, now_us(self)}).ok())
    return;
  msg::add_task add{task, worker, entry->address, w->second.handle};
  const auto* job_entry = st.state.job(job);
  if (job_entry && is_static(job_entry->policy)) {
    add.num_workers = static_cast<int64_t>(st.start.worker_addresses.size());
    add.worker_index = fixed_index(st, entry->address); // registration admitted listed ones only
  }
  self->send(j->second, std::move(add));
}

void remove_worker(self_ptr self, msg::worker_id_t id, const std::string& reason) {
  auto& st = self->state;
  const auto* entry = st.state.worker(id);
  if (!entry)
    return;
  std::string address = entry->address;
  std::vector<std::pair<msg::task_id_t, msg::job_id_t>> tasks;
  for (const auto* t : st.state.tasks_of_worker(id))
    tasks.emplace_back(t->id, t->job);
  if (!apply(self, msg::RemoveWorkerRecord{id, reason, now_us(self)}).ok())
    return;
  for (const auto& [task, job] : tasks)
    if (auto j = st.jobs.find(job); j != st.jobs.end())
      self->send(j->second, msg::remove_task{task, reason});
  if (auto w = st.workers.find(id); w != st.workers.end()) {
    self->demonitor(w->second.handle.address());
    st.workers.erase(w);
  }
  log::info(kLog, "worker " + address + " removed (worker " + std::to_string(id) + ", " +
                    reason + ")");
}

const msg::dataset_status& dataset_facts(self_ptr self, const DatasetEntry& d);
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
  log::warning(kLog, std::string{"refused "} + what + " from node " + caf::to_string(sender->node()) +
                       ": it did not present the admission token (no client_hello)");
  return permission_denied(std::string{what} +
                           " needs an admitted client: say client_hello with the admission token "
                           "first");
}

caf::result<msg::dataset_registered> register_dataset(self_ptr self, msg::register_dataset& req) {
  auto& st = self->state;
  if (auto admitted = check_admitted_sender(self, "registering a dataset"); !admitted.ok())
    return msg::to_error(admitted);
  if (req.definition.size() > st.start.max_dataset_bytes)
    return msg::to_error(resource_exhausted(
      "the dataset definition has " + std::to_string(req.definition.size()) +
      " bytes, more than the dispatcher accepts (" + std::to_string(st.start.max_dataset_bytes) + ")"));
  auto dataset = from_binary(req.definition);
  if (!dataset.ok())
    return msg::to_error(dataset.status().with_context("decoding the dataset definition"));
  if (auto nodes = count_nodes(dataset->node()); nodes > st.start.max_dataset_nodes)
    return msg::to_error(resource_exhausted(
      "the dataset graph has " + std::to_string(nodes) + " nodes, more than the dispatcher accepts (" +
      std::to_string(st.start.max_dataset_nodes) + ")"));
  std::string fp = dataset->fingerprint();
  msg::dataset_id_t id;
  if (req.requested_id) {
    id = *req.requested_id;
    if (id.empty())
      return msg::make_error(ErrorCode::invalid_argument,
                             "the requested dataset id must not be empty");
    if (const auto* existing = st.state.dataset(id)) {
      if (existing->fingerprint == fp)
        return msg::dataset_registered{id};
      return msg::make_error(ErrorCode::already_exists,
                             "dataset id \"" + id +
                               "\" is already registered with another definition");
    }
  } else if (const auto* existing = st.state.dataset_by_fingerprint(fp)) {
    return msg::dataset_registered{existing->id};
  } else {
    id = st.state.next_dataset_id();
  }
  const auto definition_bytes = req.definition.size();
  msg::RegisterDatasetRecord record{id, fp, std::move(req.definition),
                                    static_cast<uint8_t>(req.compression), now_us(self)};
  if (auto s = apply(self, std::move(record)); !s.ok())
    return msg::to_error(s);
  (void)dataset_facts(self, *st.state.dataset(id));
  // By id and fingerprint only: the text form of a dataset holding tensors can be megabytes.
  log::info(kLog, "registered dataset " + id + " (fingerprint " + fp + ", " +
                    std::to_string(definition_bytes) + " bytes, compression " +
                    to_string(req.compression) + ")");
  return msg::dataset_registered{id};
}

caf::result<msg::job_info> get_or_create_job(self_ptr self, msg::get_or_create_job& req) {
  auto& st = self->state;
  if (auto admitted = check_admitted_sender(self, "creating a job"); !admitted.ok())
    return msg::to_error(admitted);
  const auto* dataset = st.state.dataset(req.dataset);
  if (!dataset)
    return msg::make_error(ErrorCode::not_found, "dataset id \"" + req.dataset +
                                                   "\" is not registered with this dispatcher");
  if (req.num_consumers)
    return msg::make_error(ErrorCode::unimplemented,
                           "coordinated reads (`num_consumers`) are not supported yet");
  if (req.job_name) {
    if (req.job_name->empty())
      return msg::make_error(ErrorCode::invalid_argument, "`job_name` must not be empty");
    if (const auto* job = st.state.named_job(req.dataset, *req.job_name)) {
      if (job->policy != req.policy)
        return msg::make_error(ErrorCode::failed_precondition,
                               "job \"" + *req.job_name + "\" exists with processing mode " +
                                 to_string(job->policy) + "; it cannot be read with " +
                                 to_string(req.policy));
      msg::job_info info{job->id, job->name, job->dataset, job->policy,
                         job->finished || job->released, {}};
      if (auto h = st.jobs.find(job->id); h != st.jobs.end())
        info.handle = h->second;
      return info;
    }
  }
  auto definition = from_binary(dataset->definition);
  if (!definition.ok())
    return msg::to_error(definition.status());
  if (is_static(req.policy)) {
    auto n = static_cast<int64_t>(st.start.worker_addresses.size());
    if (n == 0)
      return msg::make_error(
        ErrorCode::failed_precondition,
        std::string{"sharding policy "} + to_string(req.policy) +
          " needs a fixed list of workers: start the dispatcher with --worker-addresses "
          "HOST:PORT,... (DispatcherConfig::worker_addresses)");
    // What the rewrite can check here (a FILE policy on a source that reads no files, fewer
    // listed files than workers) fails the job now instead of every task later.
    if (auto sharded = apply_sharding(*definition, req.policy, n, 0); !sharded.ok())
      return msg::to_error(sharded.status().with_context(
        std::string{"sharding dataset "} + req.dataset + " with policy " + to_string(req.policy)));
  }
  JobStart js;
  if (req.policy == ShardingPolicy::dynamic) {
    SplitOptions options;
    options.range_split_size = st.start.range_split_size;
    auto provider = make_split_provider(*definition, options);
    if (!provider.ok())
      return msg::to_error(provider.status().with_context(
        "DYNAMIC (distributed_epoch) sharding of dataset " + req.dataset));
    js.splits = std::make_shared<SplitAssigner>(std::move(provider).value());
  }
  auto id = st.state.next_job_id();
  msg::CreateJobRecord record{id,
                              req.dataset,
                              req.job_name ? *req.job_name : std::string{},
                              static_cast<uint8_t>(req.policy),
                              -1,
                              req.target_workers,
                              now_us(self)};
  if (auto s = apply(self, std::move(record)); !s.ok())
    return msg::to_error(s);
  js.id = id;
  js.name = req.job_name ? *req.job_name : std::string{};
  js.dataset = req.dataset;
  js.definition = dataset->definition;
  js.policy = req.policy;
  js.compression = dataset->compression;
  js.dispatcher = caf::actor_cast<msg::job_report_actor>(self);
  js.request_timeout = st.start.request_timeout;
  js.gc_timeout = st.start.job_gc_timeout;
  auto job = spawn_job(self, std::move(js));
  st.jobs[id] = job;
  st.job_addrs.insert(job.address());
  log::info(kLog, "created job " + std::to_string(id) +
                    (req.job_name ? " (\"" + *req.job_name + "\")" : std::string{" (private)"}) +
                    " for dataset " + req.dataset + ", " + to_string(req.policy) + ", " +
                    std::to_string(st.workers.size()) + " worker(s)");
  for (const auto& [wid, w] : st.workers)
    create_task(self, id, wid);
  return msg::job_info{id, req.job_name ? *req.job_name : std::string{}, req.dataset,
                       req.policy, false, job};
}

caf::result<msg::worker_registered> register_worker(self_ptr self, msg::register_worker& req) {
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
  if (req.address.empty() || !req.worker)
    return msg::make_error(ErrorCode::invalid_argument,
                           "a worker must register with its address and handle");
  if (!st.start.worker_addresses.empty() && fixed_index(st, req.address) < 0) {
    std::string list;
    for (const auto& a : st.start.worker_addresses)
      list += (list.empty() ? "" : ", ") + a;
    auto why = "worker " + req.address +
               " is not in the dispatcher's fixed worker list (--worker-addresses: " + list + ")";
    log::warning(kLog, "refused " + why);
    return msg::make_error(ErrorCode::failed_precondition, why);
  }
  if (const auto* old = st.state.worker_by_address(req.address))
    remove_worker(self, old->id, "it registered again");
  auto id = st.state.next_worker_id();
  if (auto s = apply(self, msg::RegisterWorkerRecord{id, req.address, now_us(self)}); !s.ok())
    return msg::to_error(s);
  self->monitor(req.worker);
  st.workers[id] = LiveWorker{req.worker, self->clock().now()};
  log::info(kLog, "worker " + req.address + " registered (worker " + std::to_string(id) + ")");
  std::vector<msg::job_id_t> jobs;
  for (const auto* job : st.state.unfinished_jobs())
    jobs.push_back(job->id);
  for (auto job : jobs)
    create_task(self, job, id);
  return msg::worker_registered{id, st.start.protocol_version};
}

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

caf::result<msg::cluster_status> get_status(self_ptr self, const msg::get_status& req) {
  auto& st = self->state;
  auto now = self->clock().now();
  auto status = std::make_shared<msg::cluster_status>();
  status->protocol_version = st.start.protocol_version;
  status->uptime_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(now - st.started).count();
  for (const auto* w : st.state.workers()) {
    msg::worker_status ws;
    ws.id = w->id;
    ws.address = w->address;
    ws.tasks = static_cast<int64_t>(st.state.tasks_of_worker(w->id).size());
    if (auto live = st.workers.find(w->id); live != st.workers.end())
      ws.heartbeat_age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              now - live->second.last_heartbeat)
                              .count();
    status->workers.push_back(std::move(ws));
  }
  std::set<msg::dataset_id_t> listed;
  for (const auto& [id, job] : st.jobs)
    if (const auto* entry = st.state.job(id))
      listed.insert(entry->dataset);
  // Every dataset a live job reads, plus the most recent ones (bounded: a long-lived
  // dispatcher may hold many).
  constexpr std::size_t kMaxDatasets = 100;
  for (const auto& id : listed)
    if (const auto* d = st.state.dataset(id))
      (void)dataset_facts(self, *d);
  for (const auto& [id, facts] : st.dataset_facts) {
    if (status->datasets.size() >= kMaxDatasets)
      break;
    if (st.state.dataset(id))
      status->datasets.push_back(facts);
  }
  if (!req.include_jobs || st.jobs.empty())
    return *status;
  auto promise = self->make_response_promise<msg::cluster_status>();
  auto pending = std::make_shared<std::size_t>(st.jobs.size());
  auto deliver_one = [self, status, pending, promise](msg::job_status js) mutable {
    if (const auto* entry = self->state.state.job(js.id)) {
      js.name = entry->name;
      js.dataset = entry->dataset;
    }
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
              if (const auto* entry = self->state.state.job(jid)) {
                js.mode = to_string(entry->policy);
                js.finished = entry->finished;
              }
              deliver_one(std::move(js));
            });
  }
  return promise;
}

void check_heartbeats(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  std::vector<msg::worker_id_t> late;
  for (const auto& [id, w] : st.workers)
    if (now - w.last_heartbeat > st.start.worker_timeout)
      late.push_back(id);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(st.start.worker_timeout);
  for (auto id : late)
    remove_worker(self, id, "no heartbeat for " + std::to_string(ms.count()) + " ms");
}

} // namespace

dispatcher_full_actor spawn_dispatcher(caf::actor_system& sys, DispatcherStart start) {
  return sys.spawn(
    [](self_ptr self, DispatcherStart start) -> dispatcher_full_actor::behavior_type {
      self->state.start = std::move(start);
      self->state.started = self->clock().now();
      self->set_down_handler([self](caf::down_msg& down) {
        auto& st = self->state;
        for (const auto& [id, w] : st.workers)
          if (w.handle.address() == down.source) {
            remove_worker(self, id, "connection lost: " + caf::to_string(down.reason));
            return;
          }
      });
      // Job actors are linked so that they end with the dispatcher; a job that ends on its own
      // (released) must not take the dispatcher down.
      self->set_exit_handler([self](caf::exit_msg& exit) {
        if (self->state.job_addrs.erase(exit.source))
          return;
        self->quit(exit.reason);
      });
      auto period = std::max<caf::timespan>(self->state.start.worker_timeout / 4,
                                            std::chrono::milliseconds(10));
      self->delayed_send(self, period, msg::tick_atom_v);
      return {
        [self](msg::client_hello& hello) -> caf::result<msg::dispatcher_hello> {
          auto ours = self->state.start.protocol_version;
          if (hello.protocol_version != ours) {
            auto why = version_refusal(ours, hello.protocol_version, "client");
            log::warning(kLog, "refused " + (hello.client.empty() ? "a client" : hello.client) +
                                 ": " + why);
            return msg::make_error(ErrorCode::version_mismatch, why);
          }
          if (auto admitted = check_admission(self->state.start.auth_token, hello.auth_token,
                                              hello.client.empty() ? "client" : hello.client);
              !admitted.ok()) {
            log::warning(kLog, "refused " + (hello.client.empty() ? "a client" : hello.client) +
                                 ": " + admitted.message());
            return msg::to_error(admitted);
          }
          if (const auto& sender = self->current_sender())
            self->state.admitted_nodes.insert(sender->node());
          return msg::dispatcher_hello{ours};
        },
        [self](msg::register_dataset& req) { return register_dataset(self, req); },
        [self](msg::get_or_create_job& req) { return get_or_create_job(self, req); },
        [self](msg::register_worker& req) { return register_worker(self, req); },
        [self](msg::worker_heartbeat& hb) {
          auto& st = self->state;
          auto w = st.workers.find(hb.worker);
          if (w == st.workers.end())
            return msg::heartbeat_ack{false};
          w->second.last_heartbeat = self->clock().now();
          return msg::heartbeat_ack{true};
        },
        [self](msg::get_status& req) { return get_status(self, req); },
        [self](msg::task_finished& done) {
          const auto* task = self->state.state.task(done.task);
          if (task && !task->finished)
            (void)apply(self, msg::FinishTaskRecord{done.task, done.error, now_us(self)}); // logged
        },
        [self](msg::job_finished& done) {
          const auto* job = self->state.state.job(done.job);
          if (job && !job->finished)
            (void)apply(self, msg::FinishJobRecord{done.job, now_us(self)}); // logged
        },
        [self](msg::job_released& released) {
          auto& st = self->state;
          if (st.state.job(released.job))
            (void)apply(self, msg::ReleaseJobRecord{released.job, now_us(self)}); // logged
          st.jobs.erase(released.job);
        },
        [self](msg::tick_atom) {
          check_heartbeats(self);
          auto period = std::max<caf::timespan>(self->state.start.worker_timeout / 4,
                                                std::chrono::milliseconds(10));
          self->delayed_send(self, period, msg::tick_atom_v);
        },
      };
    },
    std::move(start));
}

} // namespace conveyor::actors
