// The dispatcher actor's state and the steps its files share (dispatcher/dispatcher_actor*.cpp):
// internal to the dispatcher actor, not part of its interface (dispatcher/dispatcher_actor.hpp).
//   dispatcher_actor.cpp          the behaviour, durability (journal), restore, heartbeats
//   dispatcher_actor_jobs.cpp     jobs: creating or finding one, its tasks, starting its actor
//   dispatcher_actor_workers.cpp  workers and datasets: registering, adopting, removing
//   dispatcher_actor_status.cpp   `conveyor status`: the cluster's state
//   dispatcher_actor_autoscale.cpp  the worker estimate and the autoscaler, every interval
//   dispatcher_actor_snapshots.cpp  distributed snapshots: streams for workers, their splits
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "dispatcher/dispatcher_actor.hpp"
#include "dispatcher/scale_command.hpp"
#include "dispatcher/worker_estimate.hpp"
#include "dispatcher/dispatcher_state.hpp"
#include "dispatcher/job_actor.hpp"
#include "dispatcher/journal.hpp"
#include "messages/all.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::actors::dispatcher_detail {

inline constexpr const char* kLog = "dispatcher";
inline constexpr std::size_t kMaxFinishedJobs = 100;

struct LiveWorker {
  msg::worker_actor handle; // null: restored from the journal, not registered again yet
  caf::actor_clock::time_point last_heartbeat;
  // Placement tags (register_worker). Not journaled: a restored worker sends them again when
  // it registers again, before it gets any task.
  std::vector<std::string> tags = {};
  std::vector<msg::tenant_usage> tenants = {}; // its executor's, as of its last heartbeat
};

// A distributed snapshot as the dispatcher runs it (its journaled part is in `cluster`).
struct LiveSnapshot {
  std::shared_ptr<SplitProvider> provider;                 // null once finished
  std::map<int64_t, msg::worker_id_t> owners;              // stream -> the worker writing it
  std::map<int64_t, msg::snapshot_stream_report> progress; // as its writers last reported
  caf::actor_clock::time_point started;
  // Restored from the journal: the streams' old writers get this long to report before their
  // streams go to other workers.
  caf::actor_clock::time_point assign_after;
  std::optional<caf::actor_clock::time_point> finished_at; // freezes its rate in status
};

struct dispatcher_actor_state {
  static inline const char* name = "conveyor.dispatcher";
  DispatcherStart start;
  DispatcherState cluster; // datasets, workers, jobs, tasks: what the journal records
  std::map<msg::worker_id_t, LiveWorker> workers;
  std::map<msg::job_id_t, job_full_actor> jobs; // running job actors
  std::set<caf::actor_addr> job_addrs;          // job actors not yet exited
  // Observability: dataset facts computed once for `conveyor status`, and the start time.
  std::map<msg::dataset_id_t, msg::dataset_status> dataset_facts;
  caf::actor_clock::time_point started;
  std::set<caf::node_id> admitted_nodes; // passed client_hello with the token
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
  // The worker estimate and, with --scale-command, the autoscaler and its actuator.
  WorkerEstimator estimator;
  std::optional<AutoscalePolicy> autoscaler;
  std::shared_ptr<ScaleCommand> scale_command;
  caf::actor_clock::time_point last_estimate{};
  bool estimating = false; // the jobs' status was asked for and not all have answered
  std::map<std::string, LiveSnapshot> snapshots; // by directory
};

using self_ptr = dispatcher_full_actor::stateful_pointer<dispatcher_actor_state>;

// dispatcher_actor.cpp
int64_t now_us(self_ptr self);
Status persist(self_ptr self, msg::Update update, std::function<void()> then = {});
// Runs `fn` once every record persisted so far is durable.
void after_durable(self_ptr self, std::function<void()> fn);
std::string version_refusal(uint32_t ours, uint32_t theirs, const std::string& who);
void restore(self_ptr self);
void check_heartbeats(self_ptr self);
void compact_if_due(self_ptr self);

// dispatcher_actor_jobs.cpp
void create_tasks_for_live_jobs(self_ptr self, msg::worker_id_t worker);
void place_capped_jobs(self_ptr self);
// A resumed OFF read's task: the slot its record gave it (TaskEntry::off_slot), if any.
void set_off_slot(const dispatcher_actor_state& st, msg::add_task& add);
msg::add_task task_on_worker(const dispatcher_actor_state& st, msg::task_id_t task,
                             ShardingPolicy policy, msg::worker_id_t worker,
                             const std::string& address, const LiveWorker& live);
int64_t fixed_index(const dispatcher_actor_state& st, const std::string& address);
// Job GC of ended named iterations (dispatcher_actor_jobs.cpp).
void forget_released_jobs(self_ptr self);
caf::expected<msg::job_info> job_info_of(self_ptr self, msg::job_id_t id);
// `resume`: a job resumed from a read cursor (get_or_create_job.resume_cursor); not journaled.
Expected<JobStart> job_start(self_ptr self, const JobEntry& entry,
                             std::shared_ptr<const ReadCursor> resume = nullptr);
void run_job(self_ptr self, JobStart js);
caf::expected<msg::job_info> get_or_create_job(self_ptr self, msg::get_or_create_job& req);

// dispatcher_actor_workers.cpp
void remove_worker(self_ptr self, msg::worker_id_t id, const std::string& reason);
Status check_admitted_sender(self_ptr self, const char* what);
caf::expected<msg::dataset_registered> register_dataset(self_ptr self, msg::register_dataset& req);
caf::expected<msg::worker_registered> register_worker(self_ptr self, msg::register_worker& req);

// dispatcher_actor_autoscale.cpp
void start_autoscaler(self_ptr self);
void estimate_if_due(self_ptr self);
void add_estimates(const dispatcher_actor_state& st, msg::cluster_status& status);
void add_estimate(const dispatcher_actor_state& st, msg::job_status& job);

// dispatcher_actor_snapshots.cpp: distributed snapshots written by the workers
caf::expected<msg::snapshot_started> start_snapshot(self_ptr self, msg::start_snapshot& req);
caf::expected<msg::snapshot_splits> snapshot_splits_for(self_ptr self,
                                                        const msg::get_snapshot_splits& req);
std::vector<msg::snapshot_stream_def>
snapshot_heartbeat(self_ptr self, msg::worker_id_t worker,
                   const std::vector<msg::snapshot_stream_report>& reports, int64_t max_streams,
                   bool draining);
void release_snapshot_streams(self_ptr self, msg::worker_id_t worker);
// A worker that just registered heartbeats now when an unfinished snapshot may have a stream
// for it, instead of at its first periodic heartbeat.
void nudge_if_snapshots_wait(self_ptr self, const msg::worker_actor& worker);
void restore_snapshots(self_ptr self);
void check_snapshots(self_ptr self);
void add_snapshot_status(self_ptr self, msg::cluster_status& status);

// dispatcher_actor_status.cpp
const msg::dataset_status& dataset_facts(self_ptr self, const DatasetEntry& d);
// get_element_spec: the registered dataset's spec in format_spec_components form.
Expected<msg::element_spec_reply> element_spec_of(self_ptr self, const msg::dataset_id_t& id);
caf::result<msg::cluster_status> get_status(self_ptr self, const msg::get_status& req);

} // namespace conveyor::actors::dispatcher_detail
