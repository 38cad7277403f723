// The consumer actor's state and the steps its files share (consumer/consumer_actor*.cpp):
// internal to the consumer actor, not part of its interface (consumer/consumer_actor.hpp).
//   consumer_actor.cpp        the behaviour, finishing, stats, spawning
//   consumer_actor_job.cpp    the job: getting, joining, polling its task list, re-joining
//   consumer_actor_read.cpp   the tasks: connecting to workers, requests (plain and rounds)
//   consumer_actor_bulk.cpp   the bulk channels to the workers
// Coordinated-read logic lives in coordinated/round_robin_reader.hpp; these files only send.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "consumer/consumer_actor.hpp"
#include "consumer/placement.hpp"
#include "consumer/wait_stats.hpp"
#include "coordinated/round_robin_reader.hpp"
#include "messages/all.hpp"

namespace conveyor::actors::consumer_detail {

inline constexpr const char* kLog = "consumer";

struct WorkerLink {
  bool connected = false;
  bool connecting = false;
  // A worker of this process read with target_workers LOCAL: its task actors are reached
  // directly (worker/local_workers.hpp), its frames come as in-process messages.
  bool local = false;
  std::vector<msg::task_id_t> waiting; // tasks to activate once connected
  // The bulk channel to this worker (net/bulk.hpp): opened after the first reply names the
  // worker's bulk port; requests carry its id once the worker acknowledged it.
  enum class Bulk { none, opening, ready, lost } bulk = Bulk::none;
  uint64_t channel = 0;        // this consumer's id for the link (bulk client <-> consumer)
  uint64_t server_channel = 0; // the worker's id for it (in get_elements)
};

// The consumer's full interface: the public stream interface plus the bulk client's messages.
using consumer_full_actor = msg::stream_actor::extend<
  caf::reacts_to<msg::bulk_ready_atom, uint64_t, uint64_t>,
  caf::reacts_to<msg::bulk_frame_atom, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t,
                 std::vector<char>>,
  caf::reacts_to<msg::bulk_frame_atom, uint64_t, std::vector<char>>, // in-process: header + payload
  caf::reacts_to<msg::bulk_lost_atom, uint64_t, std::string>,
  caf::reacts_to<msg::bulk_lost_atom, uint64_t>>;

// After a bulk channel broke, how long to wait for the down_msg of a worker that died (its
// tasks are then lost the usual way) before calling batches still waiting for frames lost.
inline constexpr auto kBulkLossGrace = std::chrono::seconds(1);

struct consumer_state {
  static inline const char* name = "conveyor.consumer";

  ConsumerStart start;
  ConsumerCore core{ConsumerLimits{}};
  msg::dispatcher_actor dispatcher;
  msg::job_actor job;
  msg::job_id_t job_id = 0;
  msg::consumer_id_t consumer_id = 0;
  std::map<msg::task_id_t, msg::task_actor> tasks;
  std::map<caf::actor_addr, msg::task_id_t> task_by_addr;
  std::map<std::string, WorkerLink> workers; // by advertised address
  // Tasks whose worker cannot be reached right now, since when: retried with every task-list
  // poll; past the request timeout the read fails naming the worker.
  std::map<msg::task_id_t, caf::actor_clock::time_point> unreachable;
  std::map<msg::task_id_t, std::string> unreachable_why;
  std::map<msg::task_id_t, std::string> task_worker;
  std::map<uint64_t, std::string> channel_worker;
  caf::actor bulk_client; // spawned on first use; null when the transport has no bulk path
  uint64_t next_channel = 0;
  bool polling = false;
  bool refetch = false; // ask for the task list at once (fresh handles after a reconnection)
  bool done = false;
  // Placement (consumer/placement.hpp): which of the job's tasks this consumer reads.
  TargetWorkers target = TargetWorkers::automatic;
  std::set<msg::task_id_t> skipped; // tasks left to other consumers (logged once each)
  // Observability: where the reader's waiting went, and whether the last reply was empty.
  WaitStats waits;
  bool last_reply_empty = true;
  // Rejoining after the dispatcher went away: replies meant for an earlier job actor carry an
  // older generation and are ignored.
  uint64_t job_gen = 0;
  bool rejoining = false;
  caf::actor_clock::time_point rejoin_deadline;
  caf::actor_clock::time_point rejoin_started; // what a final error reports: the whole wait,
  int rejoin_attempts = 0;                     // not the last attempt's remaining milliseconds
  caf::actor_addr lost_job; // the job actor whose connection broke (same one back: a blip)
  int late_joins = 0;       // a named job ended as this consumer joined it: asked again
  // Deterministic reads: the entries of the job's finished-split log this consumer has
  // (task_list::finished_next), handed to the sink.
  int64_t finished_known = 0;
  // ... and the task of the job's lowest unfinished split (task_list::lowest_split_tasks): the
  // only one asked for elements while the reader's reorder is over its byte budget.
  std::vector<msg::task_id_t> lowest_split_tasks;
  // Coordinated reads only: plans rounds onto tasks and orders the elements (the core still
  // tracks tasks and connections; its credits are unused).
  std::unique_ptr<RoundRobinReader> rounds;
  // What coordinated reads received (0 without them), added to the core's counters.
  int64_t round_elements() const { return rounds ? rounds->elements() : 0; }
  int64_t round_bytes() const { return rounds ? rounds->bytes() : 0; }
  int64_t round_messages() const { return rounds ? rounds->messages() : 0; }
};

using self_ptr = consumer_full_actor::stateful_pointer<consumer_state>;

// consumer_actor.cpp
void note_wait(self_ptr self);
msg::stream_stats stats_of(self_ptr self);
msg::consumer_progress progress_of(self_ptr self);
msg::stream_stats push_stats(self_ptr self, msg::task_id_t task);
void finish(self_ptr self, Status status);
// After a reply or frame was taken in (`s`: how that went): hands `elements` to the sink, then
// moves the read on — or ends it on an error.
void deliver(self_ptr self, Status s, ReadyElements& elements, msg::task_id_t task);
// OFF tasks lost with on_worker_loss "continue" (ConsumerCore::lose): logged, never silent.
void log_losses(self_ptr self);
void check_finished(self_ptr self);

// consumer_actor_job.cpp
void bootstrap(self_ptr self);
void poll_tasks(self_ptr self);
bool ask_again_for_named_job(self_ptr self, const std::string& why);
void start_rejoin(self_ptr self, const std::string& why);

// consumer_actor_read.cpp
void pump(self_ptr self);
void unreachable(self_ptr self, msg::task_id_t task, const std::string& why);
msg::task_actor task_handle(self_ptr self, const msg::task_info& t);
void apply_placement(self_ptr self, msg::task_list& list);
void connect_worker(self_ptr self, const msg::task_info& info);

// consumer_actor_bulk.cpp
std::vector<msg::task_id_t> tasks_of(self_ptr self, const std::string& worker);
void open_bulk(self_ptr self, const std::string& worker, uint16_t port);
void on_bulk_ready(self_ptr self, uint64_t channel, uint64_t server_channel);
void on_local_frame(self_ptr self, uint64_t channel, std::vector<char>& frame);
void on_frame(self_ptr self, uint64_t channel, uint64_t task, uint64_t batch_seq, uint32_t index,
              uint32_t count, std::vector<char>& bytes);
void on_bulk_lost(self_ptr self, uint64_t channel, const std::string& why);
void on_bulk_grace_over(self_ptr self, uint64_t channel);

} // namespace conveyor::actors::consumer_detail
