// The dispatcher actor and its jobs: finding or creating one (get_or_create_job), starting its
// job actor, and creating its tasks on the live workers.
#include "dispatcher/dispatcher_actor_state.hpp"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "net/admission.hpp"
#include "worker/cross_trainer_cache.hpp"
#include "dispatcher/coordinated_resume.hpp"
#include "dispatcher/dispatcher_state.hpp"
#include "dispatcher/file_order_seed.hpp"
#include "dispatcher/job_actor.hpp"
#include "dispatcher/journal.hpp"
#include "net/local_sender.hpp"
#include "node/log.hpp"
#include "consumer/placement.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"
#include "conveyor/options.hpp"
#include "pipeline/sharding/deterministic_split.hpp"
#include "pipeline/sharding/multi_source.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/sharding/read_order.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "pipeline/runtime/tenant.hpp"
#include "dispatcher/tenant_caps.hpp"

namespace conveyor::actors::dispatcher_detail {

// Where `address` stands in the fixed worker list (static sharding), or -1. An exact entry
// first; else a "host:%port%" entry of its host (tf.data's template) that no other live worker
// holds: the live workers take those in registration (id) order, a registering one after them.
int64_t fixed_index(const dispatcher_actor_state& st, const std::string& address) {
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
  for (const auto* w : st.cluster.workers()) {
    auto index = claim(w->address);
    if (w->address == address)
      return index;
  }
  return claim(address);
}

bool is_static(ShardingPolicy p) {
  return p != ShardingPolicy::off && p != ShardingPolicy::dynamic;
}

void set_off_slot(const dispatcher_actor_state& st, msg::add_task& add) {
  if (const auto* t = st.cluster.task(add.task); t && t->off_slot >= 0)
    std::tie(add.off_slot, add.off_skip) = std::pair{t->off_slot, t->off_skip};
}

// What a job learns of its task on a live worker: the handle, the worker's tags, a resumed OFF
// read's slot and, for static sharding, the worker's place in the fixed list (registration
// admitted listed ones only).
msg::add_task task_on_worker(const dispatcher_actor_state& st, msg::task_id_t task,
                             ShardingPolicy policy, msg::worker_id_t worker,
                             const std::string& address, const LiveWorker& live) {
  msg::add_task add{task, worker, address, live.handle};
  add.worker_tags = live.tags;
  set_off_slot(st, add);
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
  const auto* job_entry = st.cluster.job(job);
  auto w = st.workers.find(worker);
  const auto* entry = st.cluster.worker(worker);
  if (!job_entry || job_entry->finished || job_entry->released || w == st.workers.end() || !entry)
    return;
  if (!w->second.handle)
    return; // restored, not back yet: it gets its tasks when it registers again
  for (const auto* t : st.cluster.tasks_of_worker(worker))
    if (t->job == job)
      return; // it has one
  if (!may_place(st.cluster, st.start.tenant_max_workers, job_entry->tenant, worker))
    return; // its tenant is at its worker cap (dispatcher/tenant_caps.hpp)
  if (job_entry->all_off_slots_taken())
    return; // a resumed OFF read: every slot has its task
  if (job_entry->awaiting_cursors())
    return; // a resumed coordinated read: its slots come with the last trainer's cursor
  auto task = st.cluster.next_task_id();
  const auto policy = job_entry->policy;
  if (!persist(self, msg::CreateTaskRecord{task, job, worker, now_us(self)}).ok())
    return;
  // (After the record: it gave the task its slot.)
  auto add = task_on_worker(st, task, policy, worker, entry->address, w->second);
  after_durable(self, [self, job, add] {
    if (auto j = self->state.jobs.find(job); j != self->state.jobs.end())
      self->send(j->second, add);
  });
}

// Every live job gets a task on `worker` (one that joins or comes back mid-job included). The
// ids are copied first: create_task changes the state that unfinished_jobs() points into.
void create_tasks_for_live_jobs(self_ptr self, msg::worker_id_t worker) {
  std::vector<msg::job_id_t> jobs;
  for (const auto* job : self->state.cluster.unfinished_jobs())
    jobs.push_back(job->id);
  for (auto job : jobs)
    create_task(self, job, worker);
}

// Jobs of tenants with a worker cap get tasks on other workers up to the cap (after one of
// theirs was removed): their other workers serve other tenants until then.
void place_capped_jobs(self_ptr self) {
  auto& st = self->state;
  if (st.start.tenant_max_workers.empty())
    return;
  std::vector<std::pair<msg::job_id_t, std::string>> jobs;
  for (const auto* job : st.cluster.unfinished_jobs())
    if (cap_of(st.start.tenant_max_workers, job->tenant) > 0)
      jobs.emplace_back(job->id, job->tenant);
  std::vector<msg::worker_id_t> live;
  for (const auto& [wid, w] : st.workers)
    live.push_back(wid);
  for (const auto& [job, tenant] : jobs)
    for (auto wid : placement_order(st.cluster, tenant, live))
      create_task(self, job, wid);
}

// What a consumer learns about a job: its handle while its actor runs.
caf::expected<msg::job_info> job_info_of(self_ptr self, msg::job_id_t id) {
  auto& st = self->state;
  const auto* job = st.cluster.job(id);
  if (!job)
    return msg::make_error(ErrorCode::not_found,
                           "job " + std::to_string(id) +
                             " is unknown to this dispatcher (did it restart without its "
                             "--work-dir state?)");
  // A job whose actor is gone ended (its consumers finished or left); it is about to be erased.
  msg::job_info info{job->id, job->name, job->dataset, job->policy, true, {}, job->repetition};
  if (const auto* dataset = st.cluster.dataset(job->dataset)) {
    info.fingerprint = dataset->fingerprint;
    if (job->policy == ShardingPolicy::dynamic) {
      info.split_size = job->split_size > 0 ? job->split_size : st.start.range_split_size;
      info.file_seed = job->file_seed;
      auto definition = from_binary(dataset->definition);
      info.per_split = definition.ok() && is_per_split(*definition);
    } else if (job->policy == ShardingPolicy::off) {
      auto definition = from_binary(dataset->definition);
      info.off_refusal =
        definition.ok() ? off_resume_refusal(*definition) : definition.status().message();
    }
  }
  if (auto h = st.jobs.find(job->id); h != st.jobs.end()) {
    info.handle = h->second;
    info.finished = job->finished || job->released;
  }
  return info;
}

// The job actor's start: definition, compression and (DYNAMIC) a split provider, restored to
// the journaled position when `entry` has one.
Expected<JobStart> job_start(self_ptr self, const JobEntry& entry,
                             std::shared_ptr<const ReadCursor> resume) {
  auto& st = self->state;
  const auto* dataset = st.cluster.dataset(entry.dataset);
  if (!dataset)
    return not_found("dataset id \"" + entry.dataset + "\" is not registered");
  auto definition = from_binary(dataset->definition);
  if (!definition.ok())
    return definition.status();
  JobStart js;
  std::vector<std::unique_ptr<SplitProvider>> providers; // one per splittable source
  if (entry.policy == ShardingPolicy::dynamic) {
    SplitOptions options;
    // The split size was decided when the job was created (journaled with it), so a restarted
    // dispatcher cuts the same splits; 0 (an older record): the configured size.
    options.range_split_size = entry.split_size > 0 ? entry.split_size : st.start.range_split_size;
    options.paths = st.start.paths.get();
    options.seed = entry.file_seed >= 0 ? entry.file_seed : kNoSeed;
    auto made = make_split_providers(*definition, options);
    if (!made.ok())
      return made.status().with_context("DYNAMIC (distributed_epoch) sharding of dataset " +
                                        entry.dataset);
    providers = std::move(made).value();
    if (resume && providers.size() != 1)
      return invalid_argument("`resume_from` needs a dataset with one splittable source (a read "
                              "cursor names the splits of one source); dataset " +
                              entry.dataset + " has " + std::to_string(providers.size()) +
                              " (zip or concatenate of sources)");
    if (resume)
      providers[0] = resuming_split_provider(std::move(providers[0]), std::move(resume));
  }
  // Several sources: per-split only as a concatenation (zip pairs elements of two splits).
  bool per_split =
    providers.size() == 1 ? is_per_split(*definition) : is_per_split_concatenation(*definition);
  const auto num_sources = static_cast<int64_t>(providers.size());
  js.core = std::make_shared<JobCore>(std::move(providers), per_split);
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
    Status s = js.core->restore_splits(
      entry.split_epoch, entry.splits_handed_out,
      SplitPosition{entry.split_provider_epoch, entry.split_next_index}, std::move(outstanding));
    for (const auto& p : entry.source_positions) {
      if (!s.ok())
        break;
      if (p.source >= num_sources)
        s = data_loss("the journal has a split position of source " + std::to_string(p.source) +
                      " but the dataset has " + std::to_string(num_sources) +
                      " splittable source(s)");
      else
        s =
          js.core->restore_source(p.source, p.epoch, SplitPosition{p.provider_epoch, p.next_index});
    }
    if (!s.ok())
      return s.with_context("restoring the split position of job " + std::to_string(entry.id));
  }
  if (entry.deterministic_window > 0) { // a restored deterministic job: its window and log
    js.core->set_deterministic(entry.deterministic_window);
    std::vector<SplitKey> log;
    for (const auto& k : entry.finished_log)
      log.emplace_back(k.source, k.epoch, k.index);
    js.core->restore_finished(log);
  }
  js.id = entry.id;
  js.name = entry.name;
  js.dataset = entry.dataset;
  js.definition = dataset->definition;
  js.policy = entry.policy;
  js.cross_trainer_cache = entry.cross_trainer_cache;
  js.tenant = entry.tenant;
  js.tenant_weight = entry.tenant_weight;
  js.tenant_max_buffer_bytes = cap_of(st.start.tenant_max_buffer_bytes, entry.tenant);
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

// The request's own options, before any lookup: coordinated reads, expected consumers, the name.
caf::error check_job_request(const msg::get_or_create_job& req) {
  if (req.num_consumers) {
    // Coordinated (round-robin) reads: coordinated/round_robin.hpp.
    if (*req.num_consumers <= 0)
      return msg::make_error(ErrorCode::invalid_argument, "`num_consumers` must be positive, got " +
                                                            std::to_string(*req.num_consumers));
    if (!req.job_name)
      return msg::make_error(ErrorCode::invalid_argument,
                             "`job_name` must be set when setting `num_consumers`. num_consumers "
                             "was set to " +
                               std::to_string(*req.num_consumers) + ".");
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
  if (req.job_name && req.job_name->empty())
    return msg::make_error(ErrorCode::invalid_argument, "`job_name` must not be empty");
  if (auto s = validate_tenant(req.tenant, req.tenant_weight); !s.ok())
    return msg::to_error(s);
  if (req.job_name && req.iteration < 0 && req.iteration != msg::kNextIteration)
    return msg::make_error(ErrorCode::invalid_argument,
                           "`iteration` must be non-negative (or kNextIteration), got " +
                             std::to_string(req.iteration));
  // A cross-trainer cache serves one endless stream to its trainers: there is no second
  // iteration of it to read (the reference refuses re-iterating a cached dataset).
  if (req.job_name && req.cross_trainer_cache != msg::CacheSharing::none && req.iteration > 0)
    return msg::make_error(ErrorCode::invalid_argument,
                           "Cross-trainer caching does not support re-iterating a dataset: job \"" +
                             *req.job_name + "\" was asked for iteration " +
                             std::to_string(req.iteration) + "; read its first iteration only");
  return {};
}

// A consumer joining a live named job must ask for the options it runs with.
caf::error check_named_job_agrees(const JobEntry& job, const msg::get_or_create_job& req) {
  auto refuse = [&](const std::string& option, const std::string& has, const std::string& asked) {
    return msg::make_error(ErrorCode::invalid_argument,
                           "job \"" + *req.job_name + "\" runs with " + option + " " + has +
                             "; a consumer asked for " + option + " " + asked +
                             " (consumers of one named job must agree on its options)");
  };
  if (job.policy != req.policy)
    return refuse("processing_mode", to_string(job.policy), to_string(req.policy));
  if (job.target_workers != req.target_workers)
    return refuse("target_workers", job.target_workers, req.target_workers);
  int64_t asked = req.num_consumers ? *req.num_consumers : -1;
  if (job.num_consumers != asked)
    return refuse("num_consumers", std::to_string(job.num_consumers), std::to_string(asked));
  if (job.expected_consumers != req.expected_consumers)
    return refuse("expected_consumers", std::to_string(job.expected_consumers),
                  std::to_string(req.expected_consumers));
  if (const auto cached = job.cross_trainer_cache; cached != req.cross_trainer_cache)
    return refuse("cross_trainer_cache", msg::to_string(cached),
                  msg::to_string(req.cross_trainer_cache));
  if (job.tenant != req.tenant)
    return refuse("tenant", "\"" + job.tenant + "\"", "\"" + req.tenant + "\"");
  if (job.tenant_weight != req.tenant_weight)
    return refuse("tenant_weight", std::to_string(job.tenant_weight),
                  std::to_string(req.tenant_weight));
  return {};
}

// A tenant has one weight: the workers' executors share their threads by it (a second weight
// for the same tenant would leave its share to whichever task started last).
caf::error check_tenant_weight(self_ptr self, const msg::get_or_create_job& req) {
  for (const auto* job : self->state.cluster.unfinished_jobs())
    if (job->tenant == req.tenant && job->tenant_weight != req.tenant_weight)
      return msg::make_error(ErrorCode::invalid_argument,
                             "tenant \"" + req.tenant + "\" runs with tenant_weight " +
                               std::to_string(job->tenant_weight) + " (job " +
                               std::to_string(job->id) + "); a consumer asked for tenant_weight " +
                               std::to_string(req.tenant_weight) +
                               " (the jobs of one tenant must agree on its weight)");
  return {};
}

// The same definition registered with another compression is another dataset (so another job
// of the same name): consumers asking one name with different compressions are refused instead
// of reading two jobs (each element twice).
caf::error check_named_job_compression(self_ptr self, const DatasetEntry& dataset,
                                       const msg::get_or_create_job& req) {
  for (const auto* job : self->state.cluster.jobs_named(*req.job_name)) {
    const auto* other =
      job->dataset == dataset.id ? nullptr : self->state.cluster.dataset(job->dataset);
    if (other && other->fingerprint == dataset.fingerprint &&
        other->compression != dataset.compression)
      return msg::make_error(
        ErrorCode::invalid_argument,
        "job \"" + *req.job_name + "\" runs with compression " + to_string(other->compression) +
          "; a consumer asked for compression " + to_string(dataset.compression) +
          " (consumers of one named job must agree on its options)");
  }
  return {};
}

// What the dataset's definition must allow: the cache sharing, coordinated reads (infinite), and
// a static sharding policy's rewrite (checked here so the job fails now, not every task later).
caf::error check_definition(self_ptr self, const msg::get_or_create_job& req,
                            const Dataset& definition) {
  auto& st = self->state;
  if (req.cross_trainer_cache != msg::CacheSharing::none) {
    std::optional<int64_t> n;
    if (req.num_consumers)
      n = *req.num_consumers;
    if (auto s =
          validate_cross_trainer_cache(static_cast<bool>(req.job_name), definition.cardinality(), n,
                                       req.cross_trainer_cache == msg::CacheSharing::whole_epoch);
        !s.ok())
      return msg::to_error(s);
  }
  if (req.num_consumers) {
    if (auto card = definition.cardinality(); card != kInfiniteCardinality)
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
    // Static sharding needs a task on every listed worker: a worker cap below the list would
    // leave shards unread for good.
    if (auto cap = cap_of(st.start.tenant_max_workers, req.tenant); cap > 0 && cap < n)
      return msg::make_error(
        ErrorCode::failed_precondition,
        std::string{"sharding policy "} + to_string(req.policy) + " needs a task on each of the " +
          std::to_string(n) + " listed workers, but tenant \"" + req.tenant +
          "\" may use at most " + std::to_string(cap) +
          " (--tenant-max-workers): use OFF or DYNAMIC sharding, or raise the cap");
    // What the rewrite can check here (a FILE policy on a source that reads no files, fewer
    // listed files than workers) fails the job now instead of every task later.
    if (auto sharded = apply_sharding(definition, req.policy, n, 0, st.start.paths.get());
        !sharded.ok())
      return msg::to_error(sharded.status().with_context(
        std::string{"sharding dataset "} + req.dataset + " with policy " + to_string(req.policy)));
  }
  return {};
}

// `resume_from` (get_or_create_job.resume_cursor): a private DYNAMIC or OFF job of the cursor's
// dataset and mode, without the cache. A DYNAMIC job's per-split pipeline is checked once it is
// made; an OFF job's pipeline must give the same output on every run.
Expected<std::shared_ptr<const ReadCursor>> check_resume(const msg::get_or_create_job& req,
                                                         const DatasetEntry& dataset) {
  if (req.resume_cursor.empty())
    return std::shared_ptr<const ReadCursor>{};
  auto cursor = ReadCursor::decode(req.resume_cursor, "`resume_from`");
  if (!cursor.ok())
    return cursor.status();
  if (auto why = resume_mode_refusal(cursor->mode(), req.policy); !why.empty())
    return invalid_argument(why);
  // (The consumer_index is checked by the client: the job request does not carry it.)
  if (auto why = coordinated_resume_refusal(*cursor, req.num_consumers ? *req.num_consumers : 0,
                                            cursor->consumer_index());
      !why.empty())
    return invalid_argument(why);
  if (req.policy == ShardingPolicy::off) {
    auto definition = from_binary(dataset.definition);
    if (!definition.ok())
      return definition.status();
    if (auto why = off_resume_refusal(*definition); !why.empty())
      return invalid_argument("`resume_from` of an OFF read needs a pipeline whose output is a "
                              "function of the dataset: " +
                              why + " (dataset " + req.dataset + ")");
  }
  if (req.job_name && !cursor->coordinated())
    return invalid_argument("`resume_from` creates a private job: `job_name` must not be set "
                            "(got \"" +
                            *req.job_name + "\")");
  if (req.cross_trainer_cache != msg::CacheSharing::none)
    return invalid_argument("`resume_from` cannot be used with the cross-trainer cache");
  if (cursor->fingerprint() != dataset.fingerprint)
    return invalid_argument("`resume_from` is a cursor of another dataset (fingerprint " +
                            cursor->fingerprint() + "); expected one of dataset " + req.dataset +
                            " (fingerprint " + dataset.fingerprint + ")");
  return std::make_shared<const ReadCursor>(std::move(cursor).value());
}

// A resumed OFF job's slots: one task per slot whose task had not ended, skipping what was
// consumed. When every slot ended, one task that produces nothing (skip all), so that the job
// has a task to end with: the read then ends at once. None for a cursor without slots.
// (A coordinated read's slots come from all N trainers' cursors: coordinated_resume.hpp.)
std::vector<msg::OffSlot> off_slots_of(const ReadCursor& cursor) {
  std::vector<msg::OffSlot> out;
  for (const auto& [slot, s] : cursor.slots())
    if (!s.ended)
      out.push_back(msg::OffSlot{slot, s.consumed});
  if (out.empty() && !cursor.slots().empty())
    out.push_back(msg::OffSlot{cursor.slots().begin()->first, ReadCursor::kSkipAll});
  return out;
}

// A coordinated resume (a named job with a coordinated cursor): the job another trainer of the
// same read made from a cursor saved in the same job (JobEntry::resumed_from, journaled), or
// nullptr (a new job is made: the first of the N trainers to ask). The job its cursors were
// saved in is not joined, even if it still runs: its schedule went on past the cursors.
const JobEntry* resumed_coordinated_job(self_ptr self, const msg::get_or_create_job& req,
                                        const ReadCursor& cursor) {
  for (const auto* job : self->state.cluster.unfinished_jobs())
    if (job->resumed_from >= 0 && job->resumed_from == cursor.job() &&
        job->dataset == req.dataset && job->name == *req.job_name)
      return job;
  return nullptr;
}

// A trainer of a resumed coordinated read brings its cursor to the job (journaled). The last of
// the N indices to bring one decides the job's slots (the least over all cursors: the trainers
// resume in any order, the ones ahead drop what they have), and its tasks are made. One that
// comes after that must not be behind the slots.
Status bring_cursor(self_ptr self, msg::job_id_t id, const ReadCursor& cursor) {
  auto& st = self->state;
  const auto* job = st.cluster.job(id);
  if (!job)
    return not_found("job " + std::to_string(id) + " is gone");
  if (!job->awaiting_cursors()) {
    if (auto why = late_join_refusal(job->off_slots, cursor); !why.empty())
      return invalid_argument(why + " (job \"" + job->name + "\")");
    return Status::OK();
  }
  CONVEYOR_RETURN_IF_ERROR(
    persist(self, msg::CoordinatedResumeRecord{id, cursor.consumer_index(),
                                               coordinated_shares(cursor), now_us(self)}));
  job = st.cluster.job(id);
  if (job->awaiting_cursors()) {
    log::info(kLog, "job " + std::to_string(id) + ": consumer_index " +
                      std::to_string(cursor.consumer_index()) + " resumes at round " +
                      std::to_string(cursor.consumed()) + "; " +
                      std::to_string(job->resume_shares.size()) + " of " +
                      std::to_string(job->num_consumers) + " trainers' cursors are here");
    return Status::OK();
  }
  std::string slots;
  for (const auto& s : job->off_slots)
    slots += " " + std::to_string(s.slot) + "@" +
             (s.skip == ReadCursor::kSkipAll ? std::string{"end"}
                                             : std::to_string(s.skip / job->num_consumers));
  log::info(kLog,
            "job " + std::to_string(id) + ": all " + std::to_string(job->num_consumers) +
              " trainers' cursors are here (the last: consumer_index " +
              std::to_string(cursor.consumer_index()) + " at round " +
              std::to_string(cursor.consumed()) + "); it starts its slots at the least " +
              "round over them (slot@round):" + (slots.empty() ? " none, a fresh read" : slots));
  std::vector<msg::worker_id_t> workers;
  for (const auto& [wid, w] : st.workers)
    workers.push_back(wid);
  const std::string tenant = job->tenant;
  for (auto wid : placement_order(st.cluster, tenant, std::move(workers)))
    create_task(self, id, wid);
  return Status::OK();
}

// `deterministic` (get_or_create_job.deterministic_window): the one consumer of a private
// DYNAMIC job of a per-split pipeline reorders its elements by split; nothing else names them.
caf::error check_deterministic(const msg::get_or_create_job& req, bool per_split) {
  if (req.deterministic_window <= 0)
    return {};
  const char* why = deterministic_refusal(req.policy, static_cast<bool>(req.job_name),
                                          static_cast<bool>(req.num_consumers),
                                          req.cross_trainer_cache != msg::CacheSharing::none);
  if (!why && !per_split)
    why = "needs a per-split pipeline of one splittable source (only map without parallelism, "
          "filter, flat_map and repeat above it, so that each element names its split): shuffle "
          "and batch in the trainer after distribute()";
  if (!why)
    return {};
  return msg::make_error(ErrorCode::invalid_argument,
                         std::string{"`deterministic` "} + why + "; dataset " + req.dataset);
}

// A deterministic read's consumer holds up to its window of splits ahead of the one it waits
// for, so its splits are sized by the element's bytes when the dataset's spec says them
// (pipeline/sharding/deterministic_split.hpp; the consumer's default hold budget: the dispatcher
// is not told the consumer's own); else at most kDeterministicDefaultSplit elements, unless the
// configured size is larger. Never above the arrival-order size `planned`.
int64_t deterministic_split_size(const Dataset& definition, int64_t window, int64_t planned,
                                 int64_t configured) {
  auto spec = definition.element_spec();
  const auto bytes = spec.ok() ? static_element_bytes(*spec) : std::nullopt;
  const int64_t cap = deterministic_split_cap(bytes, window, kDefaultDeterministicHoldBytes);
  return std::min(planned, bytes ? cap : std::max(configured, cap));
}

// The new job's entry (id, options, DYNAMIC split size), before its record is made.
JobEntry plan_job(self_ptr self, const msg::get_or_create_job& req, msg::job_id_t id,
                  const Dataset& definition) {
  auto& st = self->state;
  JobEntry planned;
  planned.id = id;
  planned.dataset = req.dataset;
  planned.name = req.job_name ? *req.job_name : std::string{};
  planned.policy = req.policy;
  planned.num_consumers = req.num_consumers ? *req.num_consumers : -1;
  planned.target_workers = req.target_workers;
  planned.cross_trainer_cache = req.cross_trainer_cache;
  planned.expected_consumers = req.expected_consumers;
  planned.tenant = req.tenant;
  planned.tenant_weight = req.tenant_weight;
  if (req.policy == ShardingPolicy::dynamic) {
    // Split size from the cardinality: about 8 splits per worker and epoch, at most 8192
    // elements (a re-issued split is read again from its start), never below the configured size.
    // With the autoscaler on, per worker it may add up to: sized for the one worker there was,
    // the job had 8 splits, and a worker added mid-epoch found most of them taken.
    planned.split_size = st.start.range_split_size;
    auto card = definition.cardinality();
    if (st.start.adaptive_split_size && card > 0) {
      int64_t workers = std::max<int64_t>(1, static_cast<int64_t>(st.workers.size()));
      if (st.autoscaler && st.start.autoscale_interval.count() > 0)
        workers = std::max(workers, st.start.autoscale.max_workers);
      planned.split_size = std::clamp<int64_t>(card / (8 * workers), st.start.range_split_size,
                                               std::max<int64_t>(st.start.range_split_size, 8192));
    }
    planned.file_seed = file_order_seed(id, now_us(self));
    if (req.deterministic_window > 0)
      planned.split_size = deterministic_split_size(definition, req.deterministic_window,
                                                    planned.split_size, st.start.range_split_size);
  }
  return planned;
}

caf::expected<msg::job_info> get_or_create_job(self_ptr self, msg::get_or_create_job& req) {
  auto& st = self->state;
  if (auto admitted = check_admitted_sender(self, "creating a job"); !admitted.ok())
    return msg::to_error(admitted);
  const auto* dataset = st.cluster.dataset(req.dataset);
  if (!dataset)
    return msg::make_error(ErrorCode::not_found, "dataset id \"" + req.dataset +
                                                   "\" is not registered with this dispatcher");
  if (auto target = parse_target_workers(req.target_workers); !target.ok())
    return msg::to_error(target.status());
  if (auto refused = check_job_request(req))
    return refused;
  if (auto refused = check_deterministic(req, true)) // (its pipeline is checked once made)
    return refused;
  // tf.data's key: (job name, the consumer's iteration index). The iteration's job, running or
  // ended (kept until job GC: a consumer arriving after its end reads end of sequence, not the
  // data again), is shared if the options agree.
  int64_t iteration = 0; // named jobs: the iteration this consumer reads
  std::shared_ptr<const ReadCursor> coordinated_resume;
  if (req.job_name && req.num_consumers && !req.resume_cursor.empty()) {
    auto checked = check_resume(req, *dataset);
    if (!checked.ok())
      return msg::to_error(checked.status());
    coordinated_resume = std::move(checked).value();
  }
  if (req.job_name) {
    const JobEntry* existing = nullptr;
    if (coordinated_resume) { // a new iteration unless a trainer of this read made it already
      existing = resumed_coordinated_job(self, req, *coordinated_resume);
      iteration = st.cluster.next_iteration(req.dataset, *req.job_name);
    } else if (req.iteration == msg::kNextIteration) {
      existing = st.cluster.live_named_job(req.dataset, *req.job_name);
      iteration = st.cluster.next_iteration(req.dataset, *req.job_name);
    } else {
      iteration = req.iteration;
      existing = st.cluster.named_job(req.dataset, *req.job_name, iteration);
    }
    if (const auto* job = existing) {
      if (auto refused = check_named_job_agrees(*job, req))
        return refused;
      const auto id = job->id;
      if (coordinated_resume)
        if (auto brought = bring_cursor(self, id, *coordinated_resume); !brought.ok())
          return msg::to_error(brought);
      return job_info_of(self, id);
    }
    if (auto refused = check_named_job_compression(self, *dataset, req))
      return refused;
  }
  if (auto refused = check_tenant_weight(self, req))
    return refused;
  auto definition = from_binary(dataset->definition);
  if (!definition.ok())
    return msg::to_error(definition.status());
  if (auto refused = check_definition(self, req, *definition))
    return refused;
  auto resume = check_resume(req, *dataset);
  if (!resume.ok())
    return msg::to_error(resume.status());
  auto id = st.cluster.next_job_id();
  JobEntry planned = plan_job(self, req, id, *definition);
  if (*resume) // the cursor names splits of its own size: the new job must cut the same ones
    planned.split_size = (*resume)->split_size();
  if (*resume && (*resume)->file_seed() >= 0) // and list the files in the same order
    planned.file_seed = (*resume)->file_seed();
  auto js = job_start(self, planned, req.policy == ShardingPolicy::off ? nullptr : *resume);
  if (!js.ok())
    return msg::to_error(js.status());
  const bool per_split = js->core->per_split();
  if (*resume && req.policy == ShardingPolicy::dynamic && !per_split)
    return msg::make_error(ErrorCode::invalid_argument,
                           "`resume_from` needs a per-split pipeline (only map without "
                           "parallelism, filter, flat_map and repeat above its source, so that "
                           "each element names its split); dataset " +
                             req.dataset +
                             " has other ops: shuffle and batch in the trainer "
                             "after distribute()");
  // A deterministic read's order and a read cursor name the splits of one source.
  if (auto refused = check_deterministic(req, per_split && js->core->num_sources() == 1))
    return refused;
  js->core->set_deterministic(req.deterministic_window);
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
                                  req.expected_consumers,
                                  req.tenant,
                                  req.tenant_weight,
                                  planned.file_seed,
                                  req.deterministic_window};
  // (A cursor without slots was saved before the read knew any task: a fresh OFF job.)
  if (*resume && req.policy == ShardingPolicy::off && !(*resume)->coordinated())
    job_record.off_slots = off_slots_of(**resume);
  if (*resume && (*resume)->coordinated()) // the key its N trainers meet by
    job_record.resumed_from = (*resume)->job();
  msg::Update record = std::move(job_record);
  if (req.job_name)
    record =
      msg::CreateNamedJobRecord{std::get<msg::CreateJobRecord>(std::move(record)), iteration};
  if (auto s = persist(
        self, std::move(record),
        [self, start = std::move(js).value()]() mutable { run_job(self, std::move(start)); });
      !s.ok())
    return msg::to_error(s);
  log::info(
    kLog,
    "created job " + std::to_string(id) +
      (req.job_name ? " (\"" + *req.job_name + "\", iteration " + std::to_string(iteration) + ")"
                    : std::string{" (private)"}) +
      " for dataset " + req.dataset + ", " + to_string(req.policy) +
      (*resume && (*resume)->coordinated()
         ? " resumed from coordinated read cursors of job " + std::to_string((*resume)->job()) +
             " (its slots once all " + std::to_string(*req.num_consumers) +
             " trainers brought theirs)"
       : *resume ? " resumed from a read cursor (" + std::to_string((*resume)->complete_splits()) +
                     " complete split(s) skipped, " + std::to_string((*resume)->partial_splits()) +
                     " partial)"
                 : std::string{}) +
      (per_split ? " (per-split: exactly-once under worker loss)" : "") + ", " +
      std::to_string(st.workers.size()) + " worker(s)");
  std::vector<msg::worker_id_t> workers;
  for (const auto& [wid, w] : st.workers)
    workers.push_back(wid);
  if (*resume && (*resume)->coordinated()) // (also without slots: the others join it)
    if (auto brought = bring_cursor(self, id, **resume); !brought.ok())
      return msg::to_error(brought);
  for (auto wid : placement_order(st.cluster, req.tenant, std::move(workers)))
    create_task(self, id, wid);
  return job_info_of(self, id);
}

// Job GC of ended named iterations: a released named job is kept so that a consumer asking for
// its iteration later reads end of sequence (tf.data keeps finished iterations until GC); after
// job_gc_timeout it is forgotten and the iteration may run again.
void forget_released_jobs(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  std::vector<msg::job_id_t> due;
  for (const auto* job : st.cluster.released_named_jobs()) {
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

} // namespace conveyor::actors::dispatcher_detail
