// The task actor's state and the steps its files share (worker/task_actor*.cpp): internal to
// the task actor, not part of its interface (worker/task_actor.hpp).
//   task_actor.cpp         the behaviour: start, control messages (drain, leave, stop, ...)
//   task_actor_serve.cpp   get_elements and production: answering, holding, splits
//   task_actor_rounds.cpp  coordinated reads, over coordinated/round_robin_task_server.hpp
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "coordinated/round_robin_task_server.hpp"
#include "messages/all.hpp"
#include "node/log.hpp"
#include "node/metrics.hpp"
#include "worker/task_actor.hpp"

namespace conveyor::actors::task_detail {

inline constexpr const char* kLog = "worker";
// How often a task its tenant's buffer cap holds back looks again (task_state::tenant_poll_at).
inline constexpr auto kTenantPoll = std::chrono::milliseconds(5);

// stop_task: the worker ends the task (its job was released); the task quits itself so that
// its link to the worker reports the exit (see worker_actor.cpp, stop).
// assign_task: the worker forwards a repeated assignment of this task (a restarted dispatcher's
// job claiming it) so that the task reports to the new job actor.
using task_full_actor =
  msg::task_actor::extend<caf::reacts_to<msg::produce_atom>, caf::reacts_to<msg::drain_atom>,
                          caf::reacts_to<msg::leave_job>,
                          caf::replies_to<msg::drained_atom>::with<bool>,
                          caf::reacts_to<msg::assign_task>, caf::reacts_to<msg::stop_task>,
                          caf::reacts_to<msg::end_rounds>, caf::reacts_to<msg::cache_trainers>>;

// A request that found nothing. It is answered when elements arrive, the pipeline ends, or —
// at the next produce step or request after its deadline — with an empty batch. No timer:
// a delayed message would keep this actor alive past its exit and block the actor system's
// shutdown (CAF's clock holds a strong reference to the receiver until it fires).
struct Held {
  caf::typed_response_promise<msg::element_batch> promise;
  msg::get_elements request;
  caf::actor_clock::time_point deadline;
  uint64_t first_seq = 0; // the runner's next batch number when the request came
};

struct task_state {
  static inline const char* name = "conveyor.task";
  TaskStart start;
  std::unique_ptr<TaskRunner> runner;
  Status start_error;
  std::deque<Held> held;
  // Coordinated reads (def.num_consumers > 0): the rounds and what requests get (CAF-free);
  // their held requests are in `held`.
  std::unique_ptr<RoundRobinTaskServer> rounds;
  // The consumers that asked, monitored (not in coordinated reads). One whose actor or node is
  // gone never acknowledges what it was sent (a consumer that reconnects says so and starts
  // over). OFF: a draining worker stops waiting for it, also when its leave_job cannot come
  // (the job gone). DYNAMIC, its node lost: its unacknowledged splits go back to the job at
  // once, as on its reconnect, instead of holding the others' end of the epoch until the job
  // drops it (--client-timeout).
  std::map<caf::actor_addr, msg::consumer_id_t> consumers;
  bool asked = false; // some consumer asked (so `consumers` empty means: every one of them went)
  // A retired endless OFF task (its worker drains): the consumers that acknowledged its
  // `retired` mark (get_elements::retired_ack) or left. The drain waits for every consumer in
  // `consumers`: one that has not received the mark yet (never asked again, or the reply is
  // still on its way) would count the task as lost when the worker leaves.
  std::set<msg::consumer_id_t> retired_acked;
  bool produce_scheduled = false;
  bool waiting_for_split = false;
  bool reported_done = false;
  // DYNAMIC: the worker's drain ended the splits before the pipeline reached its end.
  bool drained_before_end = false;
  // Observability: counters for the worker's metrics endpoint (node/metrics.hpp).
  std::shared_ptr<metrics::TaskStats> stats;
  std::chrono::steady_clock::time_point split_asked{};

  // Its part of its tenant's buffered bytes on this worker (worker/tenant_buffers.hpp; null
  // for coordinated reads: a round needs every consumer's element at once, so a cap could
  // stop a round half made for good).
  std::unique_ptr<TenantBuffers::Slot> tenant_slot;
  // A task its tenant's cap holds back looks again at this time (a poll: the bytes that hold
  // it back may be taken from another task's buffer, which cannot send it a message this
  // actor would accept, see net/local_sender.hpp).
  caf::actor_clock::time_point tenant_poll_at{};
  bool held_by_tenant() const { return tenant_slot && tenant_slot->held_back(); }

  void update_stats() {
    if (tenant_slot && runner)
      tenant_slot->set(runner->buffered_bytes());
    if (!stats || !runner)
      return;
    stats->produced_elements.store(runner->produced(), std::memory_order_relaxed);
    stats->buffered_elements.store(static_cast<int64_t>(runner->buffered_elements()),
                                   std::memory_order_relaxed);
    stats->buffered_bytes.store(runner->buffered_bytes(), std::memory_order_relaxed);
    int64_t ahead = 0;
    for (const auto& f : runner->split_feeds())
      ahead += static_cast<int64_t>(f->buffered());
    stats->splits_ahead.store(ahead, std::memory_order_relaxed);
    const bool full = runner->buffer_full() && !runner->ended();
    if (full && !buffer_was_full) // the pipeline pauses: consumers have no credit left
      stats->buffer_full_total.fetch_add(1, std::memory_order_relaxed);
    buffer_was_full = full;
  }
  bool buffer_was_full = false;

  std::string label() const {
    return "task " + std::to_string(start.def.task) + " (job " + std::to_string(start.def.job) +
           ")";
  }

  ~task_state() {
    if (stats)
      stats->ended = true;
    if (runner)
      log::debug(kLog, label() + " exited");
  }
};

using self_ptr = task_full_actor::stateful_pointer<task_state>;

// task_actor_serve.cpp
caf::timespan hold_of(const msg::get_elements& req);
int64_t now_ns(self_ptr self);
void schedule_produce(self_ptr self);
void report_done(self_ptr self);
void report_splits(self_ptr self);
void serve_held(self_ptr self);
void after_step(self_ptr self);
caf::result<msg::element_batch> on_get_elements(self_ptr self, msg::get_elements& req);
void on_produce(self_ptr self);

// task_actor_rounds.cpp
void serve_held_rounds(self_ptr self);
caf::result<msg::element_batch> round_request(self_ptr self, msg::get_elements& req);

// task_actor.cpp
Status admit(self_ptr self, const std::string& presented, const std::string& what);
Status from_own_worker(self_ptr self, const char* what);

} // namespace conveyor::actors::task_detail
