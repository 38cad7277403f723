#include "dispatcher/dispatcher_actor.hpp"

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
#include "node/log.hpp"
#include "consumer/placement.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "dispatcher";
constexpr std::size_t kMaxFinishedJobs = 100;

struct LiveWorker {
  msg::worker_actor handle; // null: restored from the journal, not registered again yet
  caf::actor_clock::time_point last_heartbeat;
  // Placement tags (register_worker). Not journaled: a restored worker sends them again when
  // it registers again, before it gets any task.
  std::vector<std::string> tags = {};
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
  // The last kMaxFinishedJobs jobs that ended, as they last reported (`conveyor status`,
  // metrics). Their state is erased; this bounded list is all that remains (not journaled).
  std::deque<msg::job_status> finished_jobs;
  // Released named jobs (kept in the state for their iteration) and since when: job GC forgets
  // them job_gc_timeout later. Not journaled: a restarted dispatcher counts from its start.
  std::map<msg::job_id_t, caf::actor_clock::time_point> released_at;
  // The journal (null = in memory only) and what waits for it: effects and replies, each
  // after the record with sequence number `first` is durable, in order.
  std::shared_ptr<JournalWriter> journal;
  uint64_t last_seq = 0;    // records appended
  uint64_t durable_seq = 0; // records the journal reported durable
  std::deque<std::pair<uint64_t, std::function<void()>>> waiting;
};

using self_ptr = dispatcher_full_actor::stateful_pointer<dispatcher_state>;

int64_t now_us(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

// Runs `fn` once every record appended so far is durable (at once when none is pending).
void after_durable(self_ptr self, std::function<void()> fn) {
  auto& st = self->state;
  if (!st.journal || st.durable_seq >= st.last_seq) {
    fn();
    return;
  }
  st.waiting.emplace_back(st.last_seq, std::move(fn));
}

// The one persist-then-apply path. Applies the record to the in-memory state (a refusal here
// is a dispatcher bug — requests are validated before their records are made — so it is logged
// and reported, never ignored), appends it to the journal, and runs `then` (the record's
// effects) once it is durable. Replies go through reply_when_durable, so nobody learns of a
// change before it is on disk.
Status persist(self_ptr self, msg::Update update, std::function<void()> then = {}) {
  auto& st = self->state;
  Status s = st.state.apply(update);
  if (!s.ok()) {
    log::error(kLog, "internal: an update record was refused: " + s.to_string());
    return s;
  }
  if (st.journal) {
    auto seq = ++st.last_seq;
    caf::weak_actor_ptr weak{self->ctrl()};
    st.journal->append(update, [weak, seq](const Status& status) {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<caf::actor>(strong), msg::synced_atom_v, seq,
                       status.ok() ? std::string{} : status.to_string());
    });
  }
  if (then)
    after_durable(self, std::move(then));
  return Status::OK();
}

void on_synced(self_ptr self, uint64_t seq, const std::string& error) {
  auto& st = self->state;
  if (!error.empty()) {
    // Memory is ahead of the disk now: acknowledging anything more could lose it on restart.
    log::error(kLog, "FATAL: the journal in " + st.journal->dir() + " failed (" + error +
                       "); stopping so that no unrecorded change is acknowledged");
    std::_Exit(74);
  }
  st.durable_seq = std::max(st.durable_seq, seq);
  while (!st.waiting.empty() && st.waiting.front().first <= st.durable_seq) {
    auto fn = std::move(st.waiting.front().second);
    st.waiting.pop_front();
    fn();
  }
}

// Answers a request once everything it may depend on is durable; `make` builds the answer
// then (so that handles created by earlier effects are in it).
template <class T>
caf::result<T> reply_when_durable(self_ptr self, std::function<caf::expected<T>()> make) {
  auto& st = self->state;
  if (!st.journal || st.durable_seq >= st.last_seq) {
    auto r = make();
    if (r)
      return std::move(*r);
    return std::move(r.error());
  }
  auto rp = self->make_response_promise<T>();
  st.waiting.emplace_back(st.last_seq, [rp, make]() mutable {
    auto r = make();
    if (r)
      rp.deliver(std::move(*r));
    else
      rp.deliver(std::move(r.error()));
  });
  return rp;
}

std::string version_refusal(uint32_t ours, uint32_t theirs, const std::string& who) {
  return "protocol version mismatch: the dispatcher speaks version " + std::to_string(ours) +
         ", the " + who + " version " + std::to_string(theirs);
}

// Where `address` stands in the fixed worker list (static sharding), or -1. An exact entry
// first; else a "host:%port%" entry of its host (tf.data's template) that no other live worker
// holds: the live workers take those in registration (id) order, a registering one after them.
int64_t fixed_index(const dispatcher_state& st, const std::string& address) {
  const auto& list = st.start.worker_addresses;
  auto it = std::find(list.begin(), list.end(), address);
  if (it != list.end())
    return static_cast<int64_t>(it - list.begin());
  std::set<std::size_t> taken;
  auto claim = [&](const std::string& a) -> int64_t {
    if (std::find(list.begin(), list.end(), a) != list.end())
      return -1; // an exact entry: not one of the templates
    auto template_of = a.substr(0, a.rfind(':')) + ":%port%";
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i] == template_of && taken.insert(i).second)
        return static_cast<int64_t>(i);
    return -1;
  };
  for (const auto* w : st.state.workers()) {
    auto index = claim(w->address);
    if (w->address == address)
      return index;
  }
  return claim(address);
}

bool is_static(ShardingPolicy p) { return p != ShardingPolicy::off && p != ShardingPolicy::dynamic; }

// What a job learns of its task on a live worker: the handle, the worker's tags and, for static
// sharding, the worker's place in the fixed list (registration admitted listed ones only).
msg::add_task task_on_worker(const dispatcher_state& st, msg::task_id_t task, ShardingPolicy policy,
                             msg::worker_id_t worker, const std::string& address,
                             const LiveWorker& live) {
  msg::add_task add{task, worker, address, live.handle};
  add.worker_tags = live.tags;
  if (is_static(policy)) {
    add.num_workers = static_cast<int64_t>(st.start.worker_addresses.size());
    add.worker_index = fixed_index(st, address);
  }
  return add;
}

// Creates the task of `job` on `worker` and tells the job.
void create_task(self_ptr self, msg::job_id_t job, msg::worker_id_t worker) {
  auto& st = self->state;
  // (The job's actor may not run yet: it is spawned once the job's record is durable, before
  // this task's effect runs.)
  const auto* job_entry = st.state.job(job);
  auto w = st.workers.find(worker);
  const auto* entry = st.state.worker(worker);
  if (!job_entry || job_entry->finished || job_entry->released || w == st.workers.end() || !entry)
    return;
  if (!w->second.handle)
    return; // restored, not back yet: it gets its tasks when it registers again
  for (const auto* t : st.state.tasks_of_worker(worker))
    if (t->job == job)
      return; // it has one
  auto task = st.state.next_task_id();
  std::string address = entry->address;
  auto add = task_on_worker(st, task, job_entry->policy, worker, address, w->second);
  (void)persist(self, msg::CreateTaskRecord{task, job, worker, now_us(self)}, [self, job, add] {
    if (auto j = self->state.jobs.find(job); j != self->state.jobs.end())
      self->send(j->second, add);
  });
}

// Every live job gets a task on `worker` (one that joins or comes back mid-job included). The
// ids are copied first: create_task changes the state that unfinished_jobs() points into.
void create_tasks_for_live_jobs(self_ptr self, msg::worker_id_t worker) {
  std::vector<msg::job_id_t> jobs;
  for (const auto* job : self->state.state.unfinished_jobs())
    jobs.push_back(job->id);
  for (auto job : jobs)
    create_task(self, job, worker);
}

// Job GC of ended named iterations: a released named job is kept so that a consumer asking for
// its iteration later reads end of sequence (tf.data keeps finished iterations until GC); after
// job_gc_timeout it is forgotten and the iteration may run again.
void forget_released_jobs(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  std::vector<msg::job_id_t> due;
  for (const auto* job : st.state.released_named_jobs()) {
    auto [at, fresh] = st.released_at.emplace(job->id, now); // restored ones: from now
    if (!fresh && now - at->second >= st.start.job_gc_timeout)
      due.push_back(job->id);
  }
  for (auto id : due) {
    st.released_at.erase(id);
    if (persist(self, msg::ForgetJobRecord{id, now_us(self)}).ok())
      log::debug(kLog, "job " + std::to_string(id) + ": its ended iteration is forgotten (job GC)");
  }
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

caf::expected<msg::dataset_registered> register_dataset(self_ptr self,
                                                        msg::register_dataset& req) {
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
  if (auto s = persist(self, std::move(record)); !s.ok())
    return msg::to_error(s);
  (void)dataset_facts(self, *st.state.dataset(id));
  // By id and fingerprint only: the text form of a dataset holding tensors can be megabytes.
  log::info(kLog, "registered dataset " + id + " (fingerprint " + fp + ", " +
                    std::to_string(definition_bytes) + " bytes, compression " +
                    to_string(req.compression) + ")");
  return msg::dataset_registered{id};
}

// What a consumer learns about a job: its handle while its actor runs.
caf::expected<msg::job_info> job_info_of(self_ptr self, msg::job_id_t id) {
  auto& st = self->state;
  const auto* job = st.state.job(id);
  if (!job)
    return msg::make_error(ErrorCode::not_found,
                           "job " + std::to_string(id) +
                             " is unknown to this dispatcher (did it restart without its "
                             "--work-dir state?)");
  // A job whose actor is gone ended (its consumers finished or left); it is about to be erased.
  msg::job_info info{job->id, job->name, job->dataset, job->policy, true, {}, job->repetition};
  if (auto h = st.jobs.find(job->id); h != st.jobs.end()) {
    info.handle = h->second;
    info.finished = job->finished || job->released;
  }
  return info;
}

// The job actor's start: definition, compression and (DYNAMIC) a split provider, restored to
// the journaled position when `entry` has one.
Expected<JobStart> job_start(self_ptr self, const JobEntry& entry) {
  auto& st = self->state;
  const auto* dataset = st.state.dataset(entry.dataset);
  if (!dataset)
    return not_found("dataset id \"" + entry.dataset + "\" is not registered");
  auto definition = from_binary(dataset->definition);
  if (!definition.ok())
    return definition.status();
  JobStart js;
  std::unique_ptr<SplitProvider> provider;
  if (entry.policy == ShardingPolicy::dynamic) {
    SplitOptions options;
    // The split size was decided when the job was created (journaled with it), so a restarted
    // dispatcher cuts the same splits; 0 (an older record): the configured size.
    options.range_split_size = entry.split_size > 0 ? entry.split_size : st.start.range_split_size;
    options.paths = st.start.paths.get();
    auto made = make_split_provider(*definition, options);
    if (!made.ok())
      return made.status().with_context("DYNAMIC (distributed_epoch) sharding of dataset " +
                                        entry.dataset);
    provider = std::move(made).value();
  }
  bool per_split = provider && is_per_split(*definition);
  js.core = std::make_shared<JobCore>(std::move(provider), per_split);
  if (is_static(entry.policy))
    js.core->require_shards(st.start.worker_addresses);
  js.core->expect_consumers(entry.expected_consumers);
  if (entry.has_split_position) {
    std::vector<Split> outstanding;
    for (const auto& s : entry.outstanding_splits)
      outstanding.push_back(from_journal(s));
    if (!outstanding.empty())
      log::info(kLog, "job " + std::to_string(entry.id) + ": handing out again the " +
                        std::to_string(outstanding.size()) +
                        " split(s) its tasks held when the dispatcher went down");
    Status s = js.core->restore_splits(entry.split_epoch, entry.splits_handed_out,
                                       SplitPosition{entry.split_provider_epoch,
                                                     entry.split_next_index},
                                       std::move(outstanding));
    if (!s.ok())
      return s.with_context("restoring the split position of job " + std::to_string(entry.id));
  }
  js.id = entry.id;
  js.name = entry.name;
  js.dataset = entry.dataset;
  js.definition = dataset->definition;
  js.policy = entry.policy;
  js.cross_trainer_cache = entry.cross_trainer_cache;
  js.compression = dataset->compression;
  js.dispatcher = caf::actor_cast<msg::job_report_actor>(self);
  js.request_timeout = st.start.request_timeout;
  js.gc_timeout = st.start.job_gc_timeout;
  js.client_timeout = st.start.client_timeout;
  js.journal_splits = st.journal != nullptr;
  js.num_consumers = entry.num_consumers;
  js.target_workers = entry.target_workers;
  js.round_lookahead = st.start.round_lookahead;
  js.auth_token = st.start.auth_token;
  return js;
}

void run_job(self_ptr self, JobStart js) {
  auto& st = self->state;
  auto id = js.id;
  auto job = spawn_job(self, std::move(js));
  st.jobs[id] = job;
  st.job_addrs.insert(job.address());
}

caf::expected<msg::job_info> get_or_create_job(self_ptr self, msg::get_or_create_job& req) {
  auto& st = self->state;
  if (auto admitted = check_admitted_sender(self, "creating a job"); !admitted.ok())
    return msg::to_error(admitted);
  const auto* dataset = st.state.dataset(req.dataset);
  if (!dataset)
    return msg::make_error(ErrorCode::not_found, "dataset id \"" + req.dataset +
                                                   "\" is not registered with this dispatcher");
  if (auto target = parse_target_workers(req.target_workers); !target.ok())
    return msg::to_error(target.status());
  if (req.num_consumers) {
    // Coordinated (round-robin) reads: coordinated/round_robin.hpp.
    if (*req.num_consumers <= 0)
      return msg::make_error(ErrorCode::invalid_argument,
                             "`num_consumers` must be positive, got " +
                               std::to_string(*req.num_consumers));
    if (!req.job_name)
      return msg::make_error(ErrorCode::invalid_argument,
                             "`job_name` must be set when setting `num_consumers`. num_consumers "
                             "was set to " + std::to_string(*req.num_consumers) + ".");
    if (req.target_workers == "LOCAL")
      return msg::make_error(ErrorCode::invalid_argument,
                             "Coordinated reads require non-local workers, but `target_workers` "
                             "is \"LOCAL\".");
    if (req.policy == ShardingPolicy::dynamic)
      return msg::make_error(ErrorCode::invalid_argument,
                             "coordinated reads (`num_consumers`) need every worker to produce "
                             "whole rounds of an infinite dataset: use processing_mode OFF or a "
                             "static sharding policy, not DYNAMIC");
  }
  if (req.expected_consumers <= 0)
    return msg::make_error(ErrorCode::invalid_argument,
                           "`expected_consumers` must be positive, got " +
                             std::to_string(req.expected_consumers));
  if (req.expected_consumers > 1 && (!req.job_name || req.num_consumers))
    return msg::make_error(ErrorCode::invalid_argument,
                           "`expected_consumers` needs a `job_name` and no `num_consumers`");
  int64_t iteration = 0; // named jobs: the iteration this consumer reads
  if (req.job_name) {
    if (req.job_name->empty())
      return msg::make_error(ErrorCode::invalid_argument, "`job_name` must not be empty");
    if (req.iteration < 0 && req.iteration != msg::kNextIteration)
      return msg::make_error(ErrorCode::invalid_argument,
                             "`iteration` must be non-negative (or kNextIteration), got " +
                               std::to_string(req.iteration));
    // A cross-trainer cache serves one endless stream to its trainers: there is no second
    // iteration of it to read (the reference refuses re-iterating a cached dataset).
    if (req.cross_trainer_cache != msg::CacheSharing::none && req.iteration > 0)
      return msg::make_error(ErrorCode::invalid_argument,
                             "Cross-trainer caching does not support re-iterating a dataset: job \"" +
                               *req.job_name + "\" was asked for iteration " +
                               std::to_string(req.iteration) + "; read its first iteration only");
    // tf.data's key: (job name, the consumer's iteration index). The iteration's job, running
    // or ended (kept until job GC: a consumer arriving after its end reads end of sequence, not
    // the data again), is shared if the options agree.
    const JobEntry* existing = nullptr;
    if (req.iteration == msg::kNextIteration) {
      existing = st.state.live_named_job(req.dataset, *req.job_name);
      iteration = st.state.next_iteration(req.dataset, *req.job_name);
    } else {
      iteration = req.iteration;
      existing = st.state.named_job(req.dataset, *req.job_name, iteration);
    }
    if (const auto* job = existing) {
      auto refuse = [&](const std::string& option, const std::string& has,
                        const std::string& asked) {
        return msg::make_error(ErrorCode::invalid_argument,
                               "job \"" + *req.job_name + "\" runs with " + option + " " + has +
                                 "; a consumer asked for " + option + " " + asked +
                                 " (consumers of one named job must agree on its options)");
      };
      if (job->policy != req.policy)
        return refuse("processing_mode", to_string(job->policy), to_string(req.policy));
      if (job->target_workers != req.target_workers)
        return refuse("target_workers", job->target_workers, req.target_workers);
      int64_t asked = req.num_consumers ? *req.num_consumers : -1;
      if (job->num_consumers != asked)
        return refuse("num_consumers", std::to_string(job->num_consumers), std::to_string(asked));
      if (job->expected_consumers != req.expected_consumers)
        return refuse("expected_consumers", std::to_string(job->expected_consumers),
                      std::to_string(req.expected_consumers));
      if (const auto cached = job->cross_trainer_cache; cached != req.cross_trainer_cache)
        return refuse("cross_trainer_cache", msg::to_string(cached),
                      msg::to_string(req.cross_trainer_cache));
      return job_info_of(self, job->id);
    }
  }
  auto definition = from_binary(dataset->definition);
  if (!definition.ok())
    return msg::to_error(definition.status());
  if (req.cross_trainer_cache != msg::CacheSharing::none) {
    std::optional<int64_t> n;
    if (req.num_consumers)
      n = *req.num_consumers;
    if (auto s = validate_cross_trainer_cache(static_cast<bool>(req.job_name),
                                              definition->cardinality(), n,
                                              req.cross_trainer_cache ==
                                                msg::CacheSharing::whole_epoch);
        !s.ok())
      return msg::to_error(s);
  }
  if (req.num_consumers) {
    if (auto card = definition->cardinality(); card != kInfiniteCardinality)
      return msg::make_error(
        ErrorCode::invalid_argument,
        "coordinated reads (`num_consumers` = " + std::to_string(*req.num_consumers) +
          ") require an infinite dataset, but dataset " + req.dataset + " has cardinality " +
          (card == kUnknownCardinality ? std::string{"unknown"} : std::to_string(card)) +
          ": add .repeat() at the end of its definition (a finite task would run out of data "
          "early and the consumers would go out of step)");
  }
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
    if (auto sharded = apply_sharding(*definition, req.policy, n, 0, st.start.paths.get());
        !sharded.ok())
      return msg::to_error(sharded.status().with_context(
        std::string{"sharding dataset "} + req.dataset + " with policy " + to_string(req.policy)));
  }
  auto id = st.state.next_job_id();
  JobEntry planned;
  planned.id = id;
  planned.dataset = req.dataset;
  planned.name = req.job_name ? *req.job_name : std::string{};
  planned.policy = req.policy;
  planned.num_consumers = req.num_consumers ? *req.num_consumers : -1;
  planned.target_workers = req.target_workers;
  planned.cross_trainer_cache = req.cross_trainer_cache;
  planned.expected_consumers = req.expected_consumers;
  if (req.policy == ShardingPolicy::dynamic) {
    // Split size from the cardinality: about 8 splits per worker and epoch, at most 8192
    // elements (a re-issued split is read again from its start), never below the configured size.
    planned.split_size = st.start.range_split_size;
    auto card = definition->cardinality();
    if (st.start.adaptive_split_size && card > 0) {
      int64_t workers = std::max<int64_t>(1, static_cast<int64_t>(st.workers.size()));
      planned.split_size =
        std::clamp<int64_t>(card / (8 * workers), st.start.range_split_size,
                            std::max<int64_t>(st.start.range_split_size, 8192));
    }
  }
  auto js = job_start(self, planned); // checked before the record is made
  if (!js.ok())
    return msg::to_error(js.status());
  const bool per_split = js->core->per_split();
  if (auto sender = self->current_sender())
    js->creator = caf::actor_cast<caf::actor>(sender);
  msg::CreateJobRecord job_record{id,
                              req.dataset,
                              req.job_name ? *req.job_name : std::string{},
                              static_cast<uint8_t>(req.policy),
                              req.num_consumers ? *req.num_consumers : -1,
                              req.target_workers,
                              now_us(self),
                              planned.split_size,
                              static_cast<uint8_t>(req.cross_trainer_cache),
                              req.expected_consumers};
  msg::Update record = std::move(job_record);
  if (req.job_name)
    record = msg::CreateNamedJobRecord{std::get<msg::CreateJobRecord>(std::move(record)), iteration};
  if (auto s = persist(self, std::move(record),
                       [self, start = std::move(js).value()]() mutable {
                         run_job(self, std::move(start));
                       });
      !s.ok())
    return msg::to_error(s);
  log::info(kLog, "created job " + std::to_string(id) +
                    (req.job_name ? " (\"" + *req.job_name + "\", iteration " +
                                      std::to_string(iteration) + ")"
                                  : std::string{" (private)"}) +
                    " for dataset " + req.dataset + ", " + to_string(req.policy) +
                    (per_split ? " (per-split: exactly-once under worker loss)" : "") + ", " +
                    std::to_string(st.workers.size()) + " worker(s)");
  std::vector<msg::worker_id_t> workers;
  for (const auto& [wid, w] : st.workers)
    workers.push_back(wid);
  for (auto wid : workers)
    create_task(self, id, wid);
  return job_info_of(self, id);
}

// A worker the restarted dispatcher knows from its journal registers again: it keeps its id and
// its tasks (its task actors kept serving; each job learns the task again and the worker
// answers with the running task), and gets a task for every unfinished job it lacks.
caf::expected<msg::worker_registered> adopt_worker(self_ptr self, msg::worker_id_t id,
                                                   msg::worker_actor handle,
                                                   std::vector<std::string> tags) {
  auto& st = self->state;
  const auto* entry = st.state.worker(id);
  auto& live = st.workers[id];
  live.handle = handle;
  live.tags = std::move(tags);
  live.last_heartbeat = self->clock().now();
  self->monitor(handle);
  std::string address = entry->address;
  std::vector<msg::job_id_t> has;
  for (const auto* t : st.state.tasks_of_worker(id)) {
    has.push_back(t->job);
    // Finished ones too: a task whose pipeline ended may still hold elements its consumers
    // have not read; the job must list it again, or the worker stops it as unclaimed.
    const auto* job = st.state.job(t->job);
    if (auto j = st.jobs.find(t->job); j != st.jobs.end() && job)
      self->send(j->second, task_on_worker(st, t->id, job->policy, id, address, live));
  }
  log::info(kLog, "worker " + address + " is back (worker " + std::to_string(id) + ", " +
                    std::to_string(has.size()) + " task(s) kept)");
  create_tasks_for_live_jobs(self, id);
  return msg::worker_registered{id, st.start.protocol_version};
}

caf::expected<msg::worker_registered> register_worker(self_ptr self,
                                                      msg::register_worker& req) {
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
  if (const auto* old = st.state.worker_by_address(req.address)) {
    auto w = st.workers.find(old->id);
    if (w != st.workers.end() && !w->second.handle)
      return adopt_worker(self, old->id, req.worker, req.worker_tags);
    remove_worker(self, old->id, "it registered again");
  }
  auto id = st.state.next_worker_id();
  if (auto s = persist(self, msg::RegisterWorkerRecord{id, req.address, now_us(self)}); !s.ok())
    return msg::to_error(s);
  self->monitor(req.worker);
  st.workers[id] = LiveWorker{req.worker, self->clock().now(), req.worker_tags};
  std::string tags;
  for (const auto& t : req.worker_tags)
    tags += (tags.empty() ? ", tags " : ",") + t;
  log::info(kLog, "worker " + req.address + " registered (worker " + std::to_string(id) + tags +
                    ")");
  create_tasks_for_live_jobs(self, id);
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
  // What the dispatcher holds (worker addresses, datasets, jobs) is for admitted peers only.
  if (auto admitted = check_admission(st.start.auth_token, req.auth_token, "status client");
      !admitted.ok()) {
    log::warning(kLog, "refused a status request: " + admitted.message());
    return msg::to_error(admitted);
  }
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
    if (auto live = st.workers.find(w->id); live != st.workers.end()) {
      ws.heartbeat_age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              now - live->second.last_heartbeat)
                              .count();
      ws.tags = live->second.tags;
    }
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
  if (req.include_jobs)
    for (const auto& js : st.finished_jobs)
      status->jobs.push_back(js);
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

// A long journal is folded into a snapshot so that a restart stays fast.
void compact_if_due(self_ptr self) {
  auto& st = self->state;
  if (!st.journal || !st.journal->should_compact())
    return;
  if (auto s = st.journal->compact(st.state); !s.ok())
    log::warning(kLog, "compacting the journal failed (it keeps growing; retried later): " +
                         s.to_string());
}

// Start-up from the journal's replayed state: job actors for the unfinished jobs, and every
// known worker counted as freshly heartbeated until it registers again (or times out).
void restore(self_ptr self) {
  auto& st = self->state;
  if (!st.start.restored)
    return;
  st.state = *st.start.restored;
  st.start.restored.reset();
  auto now = self->clock().now();
  for (const auto* w : st.state.workers())
    st.workers[w->id] = LiveWorker{msg::worker_actor{}, now};
  std::vector<const JobEntry*> jobs = st.state.unfinished_jobs();
  int running = 0;
  for (const auto* job : jobs) {
    auto js = job_start(self, *job);
    if (!js.ok()) {
      log::error(kLog, "cannot restart job " + std::to_string(job->id) + ": " +
                         js.status().to_string() + "; releasing it");
      (void)persist(self, msg::ReleaseJobRecord{job->id, now_us(self)});
      continue;
    }
    js->restored = true;
    auto id = js->id;
    run_job(self, std::move(js).value());
    // The job knows its tasks at once, also those whose workers are not back yet: until they
    // come back or are removed after worker_timeout, its production is not over.
    if (auto j = st.jobs.find(id); j != st.jobs.end())
      for (const auto* t : st.state.tasks_of_job(id))
        if (const auto* w = st.state.worker(t->worker))
          self->send(j->second, msg::add_task{t->id, t->worker, w->address, {}});
    ++running;
  }
  auto snapshot = st.state.snapshot();
  log::info(kLog, "restored from the journal: " + std::to_string(snapshot.datasets.size()) +
                    " dataset(s), " + std::to_string(snapshot.jobs.size()) + " job(s) (" +
                    std::to_string(running) + " running again), " +
                    std::to_string(st.workers.size()) +
                    " worker(s) expected to register again");
}

} // namespace

dispatcher_full_actor spawn_dispatcher(caf::actor_system& sys, DispatcherStart start) {
  return sys.spawn(
    [](self_ptr self, DispatcherStart start) -> dispatcher_full_actor::behavior_type {
      self->state.start = std::move(start);
      self->state.started = self->clock().now();
      self->state.journal = self->state.start.journal;
      restore(self);
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
          const auto& sender = self->current_sender();
          if (!sender) { // CAF lost the connection's route: the answer cannot reach the client
            log::warning(kLog, "a client_hello arrived without a sender (the middleman lost its "
                               "connection's route); that client will time out");
            return msg::make_error(ErrorCode::unavailable, "no sender");
          }
          self->state.admitted_nodes.insert(sender->node());
          return msg::dispatcher_hello{ours};
        },
        [self](msg::register_dataset& req) -> caf::result<msg::dataset_registered> {
          auto r = register_dataset(self, req);
          return reply_when_durable<msg::dataset_registered>(self, [r] { return r; });
        },
        [self](msg::get_or_create_job& req) -> caf::result<msg::job_info> {
          auto r = get_or_create_job(self, req);
          if (!r)
            return reply_when_durable<msg::job_info>(self, [r] { return r; });
          auto id = r->job;
          return reply_when_durable<msg::job_info>(self, [self, id] { return job_info_of(self, id); });
        },
        [self](msg::rejoin_job& req) -> caf::result<msg::job_info> {
          auto id = req.job;
          return reply_when_durable<msg::job_info>(self, [self, id] { return job_info_of(self, id); });
        },
        [self](msg::register_worker& req) -> caf::result<msg::worker_registered> {
          auto r = register_worker(self, req);
          return reply_when_durable<msg::worker_registered>(self, [r] { return r; });
        },
        [self](msg::persist_splits& req) -> caf::result<caf::ok_atom> {
          auto job = req.record.job;
          Status s = Status::OK();
          if (!self->state.state.job(job))
            s = not_found("job " + std::to_string(job) + " does not exist");
          else
            s = persist(self, req.record);
          return reply_when_durable<caf::ok_atom>(self, [s]() -> caf::expected<caf::ok_atom> {
            if (!s.ok())
              return msg::to_error(s);
            return caf::ok_atom_v;
          });
        },
        [self](msg::synced_atom, uint64_t seq, std::string& error) { on_synced(self, seq, error); },
        [self](msg::worker_heartbeat& hb) {
          auto& st = self->state;
          auto w = st.workers.find(hb.worker);
          if (w == st.workers.end() || !w->second.handle) // unknown, or restored: register again
            return msg::heartbeat_ack{false};
          w->second.last_heartbeat = self->clock().now();
          if (hb.draining) // repeated with every heartbeat; the jobs ignore what they know
            for (const auto* t : st.state.tasks_of_worker(hb.worker))
              if (auto j = st.jobs.find(t->job); j != st.jobs.end())
                self->send(j->second, msg::drain_task{t->id});
          return msg::heartbeat_ack{true};
        },
        [self](msg::get_status& req) { return get_status(self, req); },
        [self](msg::task_finished& done) {
          const auto* task = self->state.state.task(done.task);
          if (task && !task->finished)
            (void)persist(self, msg::FinishTaskRecord{done.task, done.error, now_us(self)}); // logged
        },
        [self](msg::job_finished&) {
          // Jobs end with their consumers (job_released); kept for the interface.
        },
        [self](msg::job_released& released) {
          auto& st = self->state;
          if (const auto* entry = st.state.job(released.job)) {
            auto js = std::move(released.final_status);
            js.id = released.job;
            js.name = entry->name;
            js.dataset = entry->dataset;
            js.mode = to_string(entry->policy);
            js.finished = true;
            st.finished_jobs.push_back(std::move(js));
            while (st.finished_jobs.size() > kMaxFinishedJobs)
              st.finished_jobs.pop_front();
          }
          if (const auto* entry = st.state.job(released.job); entry && !entry->released) {
            (void)persist(self, msg::ReleaseJobRecord{released.job, now_us(self)}); // logged
            if (const auto* kept = st.state.job(released.job); kept && kept->released)
              st.released_at[released.job] = self->clock().now(); // a named job: until GC
          }
          st.jobs.erase(released.job);
        },
        [self](msg::tick_atom) {
          // Its own timer only: from a peer it would drive journal compaction at will.
          if (!check_local_sender(self, kLog, "tick_atom", "the dispatcher itself").ok())
            return;
          check_heartbeats(self);
          forget_released_jobs(self);
          compact_if_due(self);
          auto period = std::max<caf::timespan>(self->state.start.worker_timeout / 4,
                                                std::chrono::milliseconds(10));
          self->delayed_send(self, period, msg::tick_atom_v);
        },
      };
    },
    std::move(start));
}

} // namespace conveyor::actors
