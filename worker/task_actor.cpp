#include "worker/task_actor.hpp"

#include <atomic>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "worker/executor_scheduled.hpp"
#include "node/home_scheduled.hpp"
#include "net/local_sender.hpp"
#include "net/node_key.hpp"
#include "node/log.hpp"
#include "node/metrics.hpp"
#include "coordinated/round_robin.hpp"
#include "messages/all.hpp"
#include "pipeline/runtime/executor.hpp"
#include "pipeline/graph/serialize.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "worker";

// stop_task: the worker ends the task (its job was released); the task quits itself so that
// its link to the worker reports the exit (see worker_actor.cpp, stop).
// assign_task: the worker forwards a repeated assignment of this task (a restarted dispatcher's
// job claiming it) so that the task reports to the new job actor.
using task_full_actor = msg::task_actor::extend<caf::reacts_to<msg::produce_atom>,
                                                caf::reacts_to<msg::drain_atom>,
                                                caf::reacts_to<msg::leave_job>,
                                                caf::replies_to<msg::drained_atom>::with<bool>,
                                                caf::reacts_to<msg::assign_task>,
                                                caf::reacts_to<msg::stop_task>,
                                                caf::reacts_to<msg::end_rounds>,
                                                caf::reacts_to<msg::cache_trainers>>;

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
  // Coordinated reads (def.num_consumers > 0): the rounds; their held requests are in `held`.
  std::unique_ptr<RoundRobinTaskRounds> rounds;
  // Coordinated reads, a draining worker: the local rounds this task serves in all (the job's
  // end_rounds); -1 = not retired (yet).
  int64_t rounds_end = -1;
  Status rounds_error; // final: every later request gets it
  // Coordinated reads: which consumer reads each consumer_index now (from its requests); its
  // leaving (leave_job from the job) releases the index's confirms.
  std::map<int64_t, msg::consumer_id_t> round_reader;
  // Coordinated reads: consumers the job dropped (leave_job). Their rounds went to the others,
  // and the job may have changed the schedule without them (a task added behind a fence they
  // never acknowledged): one that comes back is refused, so that it hands out no round it
  // planned under the old schedule.
  std::set<msg::consumer_id_t> rounds_left;
  int64_t round_timeout_ns = 0; // the consumers' (from their requests)
  // The consumers that asked, monitored (not in coordinated reads). One whose actor or node is
  // gone never acknowledges what it was sent (a consumer that reconnects says so and starts
  // over). OFF: a draining worker stops waiting for it, also when its leave_job cannot come
  // (the job gone). DYNAMIC, its node lost: its unacknowledged splits go back to the job at
  // once, as on its reconnect, instead of holding the others' end of the epoch until the job
  // drops it (--client-timeout).
  std::map<caf::actor_addr, msg::consumer_id_t> consumers;
  bool asked = false; // some consumer asked (so `consumers` empty means: every one of them went)
  bool produce_scheduled = false;
  bool waiting_for_split = false;
  bool reported_done = false;
  // DYNAMIC: the worker's drain ended the splits before the pipeline reached its end.
  bool drained_before_end = false;
  // Observability: counters for the worker's metrics endpoint (node/metrics.hpp).
  std::shared_ptr<metrics::TaskStats> stats;
  std::chrono::steady_clock::time_point split_asked{};

  void update_stats() {
    if (!stats || !runner)
      return;
    stats->produced_elements.store(runner->produced(), std::memory_order_relaxed);
    stats->buffered_elements.store(static_cast<int64_t>(runner->buffered_elements()),
                                   std::memory_order_relaxed);
    stats->buffered_bytes.store(runner->buffered_bytes(), std::memory_order_relaxed);
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

caf::timespan hold_of(const msg::get_elements& req) {
  if (req.hold_ns <= 0)
    return std::chrono::seconds(1);
  return std::max<caf::timespan>(caf::timespan{req.hold_ns}, std::chrono::milliseconds(1));
}

void schedule_produce(self_ptr self) {
  auto& st = self->state;
  if (st.produce_scheduled || st.waiting_for_split || !st.runner || st.runner->ended() ||
      st.runner->failed() || st.runner->buffer_full() || st.runner->retired())
    return;
  st.produce_scheduled = true;
  self->send(self, msg::produce_atom_v);
}

void request_splits(self_ptr self);
void report_splits(self_ptr self);

void report_done(self_ptr self) {
  auto& st = self->state;
  if (st.reported_done)
    return;
  bool ended = st.runner && st.runner->ended();
  bool failed = !st.start_error.ok() || (st.runner && st.runner->failed());
  if (!ended && !failed)
    return;
  // DYNAMIC: done once all it produced was acknowledged (or handed back). Before that a consumer
  // that reconnects makes the task hand its splits back, and they must reach the job before it
  // counts this task's production as over: ending the job first lost them (the simulator found
  // it with a pipeline that is not per-split, whose splits all come back on a reconnect).
  if (!failed && st.runner->split_feed() && !st.runner->all_acknowledged())
    return;
  st.reported_done = true;
  std::string error;
  if (!st.start_error.ok())
    error = st.start_error.to_string();
  else if (failed)
    error = st.runner->error().to_string();
  if (error.empty())
    log::info(kLog, st.label() + ": pipeline ended after " +
                      std::to_string(st.runner->produced()) + " elements");
  else
    log::error(kLog, st.label() + ": pipeline failed: " + error);
  // (drained: a drain, not the job, ended its splits; the job's production is not over.)
  self->send(st.start.def.splits, msg::task_done{st.start.def.task, error, st.drained_before_end});
}

// Answers what can be answered now: a batch, end_of_sequence, or the task's error.
// Returns false when the request must wait.
template <class Deliver, class Fail>
bool answer(self_ptr self, const msg::get_elements& req, Deliver&& deliver, Fail&& fail) {
  auto& st = self->state;
  if (!st.start_error.ok()) {
    fail(msg::to_error(st.start_error));
    return true;
  }
  // A consumer that left gets nothing more, also on a request held from before it left:
  // elements sent there would never be acknowledged, so their splits would never finish.
  if (st.runner && st.runner->gone(req.consumer)) {
    fail(msg::make_error(ErrorCode::failed_precondition,
                         "consumer " + std::to_string(req.consumer) + " left the job"));
    return true;
  }
  // Retired (an endless OFF task of a draining worker): the rest of a chunked batch, else at
  // once: empty while the consumer still owes acknowledgements (its next request carries
  // them), then `retired`, after which it asks no more.
  if (st.runner->retired() && !st.runner->has_pending(req.consumer)) {
    msg::element_batch reply;
    reply.retired = !st.runner->awaits_ack(req.consumer);
    deliver(std::move(reply));
    return true;
  }
  const bool bulk = req.bulk_channel != 0 && st.start.bulk;
  std::vector<GatherBuffer> frames;
  auto batch = st.runner->take(req.consumer, req.max_elements, req.max_bytes,
                               bulk ? &frames : nullptr, st.start.def.task, req.trainer_id);
  if (batch) {
    // The frames go to the node's bulk server (moved: no copy) before the reply that names them.
    int64_t frame_bytes = 0;
    for (auto& f : frames) {
      frame_bytes += static_cast<int64_t>(f.size());
      caf::anon_send(st.start.bulk.actor, msg::bulk_send_atom_v, req.bulk_channel, std::move(f));
    }
    if (st.start.bulk)
      batch->bulk_port = st.start.bulk.port;
    if (st.stats) {
      if (batch->chunk_index == 0)
        st.stats->delivered_elements.fetch_add(batch->num_elements, std::memory_order_relaxed);
      st.stats->delivered_bytes.fetch_add(static_cast<int64_t>(batch->payload.size()) + frame_bytes,
                                          std::memory_order_relaxed);
      st.update_stats();
    }
    deliver(std::move(*batch));
    schedule_produce(self); // taking made room in the buffer
    return true;
  }
  if (st.runner->failed() && st.runner->buffered_elements() == 0) {
    fail(msg::to_error(st.runner->error()));
    return true;
  }
  if (Status refused = st.runner->refusal(req.consumer); !refused.ok()) {
    fail(msg::to_error(refused.with_context(st.label())));
    return true;
  }
  return false;
}

int64_t now_ns(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

// --- coordinated reads (coordinated/round_robin.hpp): rounds complete when every consumer asked.

// Completes what rounds can complete from the buffer.
void complete_rounds(self_ptr self) {
  auto& st = self->state;
  if (!st.rounds || !st.runner || !st.rounds_error.ok())
    return;
  const auto n = static_cast<std::size_t>(st.rounds->num_consumers());
  // Every round that can complete from the buffer, at once: one take, one vector.
  const auto rounds = std::min<int64_t>(st.rounds->completable(),
                                        static_cast<int64_t>(st.runner->buffered_elements() / n));
  if (rounds <= 0)
    return;
  std::vector<std::size_t> sizes;
  auto elements = st.runner->take_elements(static_cast<std::size_t>(rounds) * n, &sizes);
  st.rounds->complete_many(std::move(elements), sizes, now_ns(self));
  schedule_produce(self);
}

// A confirm: "I have every local round below round_first" (no rounds asked for); answered when
// the task's committed rounds pass what the consumer knows.
bool is_confirm(const msg::get_elements& req) {
  return req.round_count == 0 && !req.round_resume;
}

// The request asks to be answered (without elements, if need be) once the committed rounds pass
// round_committed_known: its consumer holds rounds of this task it cannot hand out before.
bool committed_past(const task_state& st, const msg::get_elements& req) {
  return req.round_committed_known >= 0 && st.rounds->committed() > req.round_committed_known;
}

// A reply without elements that says how far every consumer has this task's rounds.
msg::element_batch committed_reply(const task_state& st) {
  msg::element_batch b;
  b.round_committed = st.rounds->committed();
  return b;
}

// Answers a coordinated request now (elements or an error); false: it must wait.
template <class Deliver, class Fail>
bool answer_round(self_ptr self, const msg::get_elements& req, Deliver&& deliver, Fail&& fail) {
  auto& st = self->state;
  if (!st.rounds_error.ok()) {
    fail(msg::to_error(st.rounds_error));
    return true;
  }
  if (st.rounds->has_ready(req.consumer_index)) {
    auto elements = st.rounds->take(req.consumer_index, req.round_count, req.max_bytes);
    msg::element_batch b;
    b.num_elements = static_cast<uint32_t>(elements.size());
    b.payload = encode_round_elements(elements, st.start.def.compression);
    b.num_chunks = 1;
    b.round_committed = st.rounds->committed();
    if (st.stats) {
      st.stats->delivered_elements.fetch_add(b.num_elements, std::memory_order_relaxed);
      st.stats->delivered_bytes.fetch_add(static_cast<int64_t>(b.payload.size()),
                                          std::memory_order_relaxed);
    }
    deliver(std::move(b));
    return true;
  }
  const auto n = static_cast<std::size_t>(st.rounds->num_consumers());
  if ((st.runner->failed() || st.runner->ended()) && st.runner->buffered_elements() < n) {
    st.rounds_error = st.runner->failed()
                        ? st.runner->error()
                        : Status{ErrorCode::out_of_range,
                                 st.label() + ": the dataset ended, but coordinated reads need "
                                              "an infinite dataset (rounds would go out of step)"};
    fail(msg::to_error(st.rounds_error));
    return true;
  }
  return false;
}

void serve_held_rounds(self_ptr self) {
  auto& st = self->state;
  complete_rounds(self);
  auto now = self->clock().now();
  // A round some consumer never asks for: fail the waiting requests, naming who is missing.
  if (st.rounds_error.ok() && st.round_timeout_ns > 0) {
    if (auto why = st.rounds->stalled(now_ns(self), st.round_timeout_ns)) {
        st.rounds_error = Status{ErrorCode::failed_precondition, st.label() + ": " + *why};
        log::error(kLog, st.rounds_error.message());
      }
  }
  for (auto it = st.held.begin(); it != st.held.end();) {
    auto& h = *it;
    bool done = true;
    if (!st.rounds_error.ok())
      h.promise.deliver(msg::to_error(st.rounds_error));
    else if (!is_confirm(h.request) &&
             answer_round(
               self, h.request, [&](msg::element_batch b) { h.promise.deliver(std::move(b)); },
               [&](caf::error e) { h.promise.deliver(std::move(e)); }))
      done = true;
    else if (now >= h.deadline || committed_past(st, h.request)) // (its consumer may wait on it)
      h.promise.deliver(committed_reply(st));
    else
      done = false;
    it = done ? st.held.erase(it) : std::next(it);
  }
}

// A coordinated request that cannot be answered with elements now: answered at once without
// them when the committed rounds already passed what it knows, else held (serve_held_rounds).
caf::result<msg::element_batch> wait_for_rounds(self_ptr self, msg::get_elements& req) {
  auto& st = self->state;
  if (committed_past(st, req))
    return committed_reply(st);
  auto promise = self->make_response_promise<msg::element_batch>();
  auto deadline = self->clock().now() + hold_of(req);
  st.held.push_back(Held{promise, std::move(req), deadline, 0});
  return promise;
}

caf::result<msg::element_batch> round_request(self_ptr self, msg::get_elements& req) {
  auto& st = self->state;
  if (!st.start_error.ok())
    return msg::to_error(st.start_error);
  if (req.consumer_index < 0)
    return msg::make_error(ErrorCode::invalid_argument,
                           st.label() + " belongs to a coordinated job (num_consumers " +
                             std::to_string(st.rounds->num_consumers()) +
                             "): requests must name their consumer_index and round");
  // A consumer the job dropped (see rounds_left): refused before its request can displace a
  // new reader of its index.
  if (st.rounds_left.count(req.consumer) > 0)
    return msg::make_error(ErrorCode::failed_precondition,
                           st.label() + ": coordinated read: consumer " + std::to_string(req.consumer) +
                             " (consumer_index " + std::to_string(req.consumer_index) +
                             ") was dropped from the job (no heartbeat within its client timeout); "
                             "its rounds went to the others: a reader of that index starts again");
  // A repeated request of this consumer replaces its held one (which gets an empty answer).
  for (auto it = st.held.begin(); it != st.held.end(); ++it)
    if (it->request.consumer_index == req.consumer_index) {
      it->promise.deliver(committed_reply(st));
      st.held.erase(it);
      break;
    }
  if (req.round_timeout_ns > 0)
    st.round_timeout_ns = req.round_timeout_ns;
  st.round_reader[req.consumer_index] = req.consumer;
  if (is_confirm(req)) { // it has every round below round_first
    if (Status valid = st.rounds->check_index(req.consumer_index); !valid.ok())
      return msg::to_error(valid.with_context(st.label()));
    st.rounds->confirm(req.consumer_index, req.round_first);
    serve_held_rounds(self); // other consumers' confirms may be answered now
    if (!st.rounds_error.ok())
      return msg::to_error(st.rounds_error);
    return wait_for_rounds(self, req);
  }
  if (req.round_resume && req.round_count == 0) { // a (re)started consumer: where it stands
    if (!st.rounds_error.ok())
      return msg::to_error(st.rounds_error);
    if (Status valid = st.rounds->check_index(req.consumer_index); !valid.ok())
      return msg::to_error(valid.with_context(st.label()));
    msg::element_batch where;
    where.round_next = st.rounds->next_for(req.consumer_index);
    if (where.round_next > 0)
      log::info(kLog, st.label() + ": consumer_index " + std::to_string(req.consumer_index) +
                        " is back; it was sent local rounds up to " +
                        std::to_string(where.round_next - 1));
    return where;
  }
  if (req.round_resume && st.rounds_error.ok()) {
    Status resumed = st.rounds->resume(req.consumer_index, req.round_first, now_ns(self));
    if (!resumed.ok())
      return msg::to_error(resumed.with_context(st.label()));
  }
  if (st.rounds_error.ok()) {
    Status asked = st.rounds->ask(req.consumer_index, req.round_first, req.round_count,
                                  now_ns(self));
    if (!asked.ok())
      return msg::to_error(asked.with_context(st.label()));
  }
  serve_held_rounds(self); // completes rounds, answers others waiting for this one
  std::optional<msg::element_batch> batch;
  caf::error error;
  if (answer_round(
        self, req, [&](msg::element_batch b) { batch = std::move(b); },
        [&](caf::error e) { error = std::move(e); })) {
    if (batch)
      return std::move(*batch);
    return error;
  }
  return wait_for_rounds(self, req);
}

void serve_held(self_ptr self) {
  if (self->state.rounds) {
    serve_held_rounds(self);
    return;
  }
  auto& held = self->state.held;
  auto now = self->clock().now();
  for (auto it = held.begin(); it != held.end();) {
    auto& h = *it;
    bool done = true;
    // Past its deadline a request gets no elements: its consumer may have given up on it
    // (the hold is half the consumer's timeout), and elements sent there would be lost.
    // A consumer that owes acknowledgements is answered at once (empty): its next request
    // carries them, so the splits they finish are not held up by this request's hold.
    // (Only for a batch sent after this request came: a consumer that has nothing to
    // acknowledge would just ask again at once — a spin.)
    bool owes_ack = self->state.runner && self->state.runner->split_feed() &&
                    self->state.runner->buffered_elements() == 0 &&
                    self->state.runner->awaits_ack(h.request.consumer, h.first_seq);
    if (now >= h.deadline || owes_ack)
      h.promise.deliver(msg::element_batch{}); // nothing yet: the consumer asks again
    else
      done = answer(
        self, h.request, [&](msg::element_batch b) { h.promise.deliver(std::move(b)); },
        [&](caf::error e) { h.promise.deliver(std::move(e)); });
    it = done ? held.erase(it) : std::next(it);
  }
}

void after_step(self_ptr self) {
  self->state.update_stats();
  serve_held(self);
  report_splits(self);
  report_done(self);
  request_splits(self);
  schedule_produce(self);
}

// Finished, lost and (when the pipeline ended or drains) unstarted splits go to the job.
void report_splits(self_ptr self) {
  auto& st = self->state;
  SplitFeed* feed = st.runner ? st.runner->split_feed() : nullptr;
  if (!feed)
    return;
  msg::splits_update up;
  up.task = st.start.def.task;
  up.finished = st.runner->take_finished();
  up.returned = st.runner->take_lost();
  if (feed->draining() || st.runner->ended() || st.runner->failed())
    for (auto& s : feed->take_unstarted())
      up.returned.push_back(std::move(s));
  if (up.finished.empty() && up.returned.empty())
    return;
  self->send(st.start.def.splits, std::move(up));
}

void request_splits(self_ptr self) {
  auto& st = self->state;
  SplitFeed* feed = st.runner ? st.runner->split_feed() : nullptr;
  if (!feed || !feed->wants_splits() || st.runner->ended() || st.runner->failed())
    return;
  feed->request_sent();
  st.split_asked = std::chrono::steady_clock::now();
  // The job may hold the request while the epoch's last splits are unfinished elsewhere.
  auto hold = st.start.split_timeout / 2;
  self->request(st.start.def.splits, st.start.split_timeout,
                msg::get_splits{st.start.def.task, feed->epoch(), feed->request_max(),
                                hold.count()})
    .then(
      [self](msg::splits_reply& reply) {
        auto& st = self->state;
        if (st.stats) {
          st.stats->split_waits_total.fetch_add(1, std::memory_order_relaxed);
          st.stats->split_wait_ns.fetch_add(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                 st.split_asked)
              .count(),
            std::memory_order_relaxed);
        }
        SplitFeed* feed = st.runner->split_feed();
        feed->deliver(std::move(reply.splits), reply.end_of_splits, reply.empty_epoch);
        st.waiting_for_split = false;
        after_step(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        st.runner->split_feed()->fail(msg::to_status(
          err, "asking job " + std::to_string(st.start.def.job) + " for splits"));
        st.waiting_for_split = false;
        after_step(self);
      });
}

// The admission check of a message to this task; a refusal is logged without the token.
Status admit(self_ptr self, const std::string& presented, const std::string& what) {
  auto& st = self->state;
  Status s = st.start.gate.admit(presented, "sender of " + what);
  if (s.ok() && st.start.gate.enabled())
    admit_sender_node(self); // the frame guard lifts its pre-auth cap for this node
  if (!s.ok()) {
    const auto& sender = self->current_sender();
    log::warning(kLog, st.label() + ": refused " + what +
                         (sender ? " from node " + caf::to_string(sender->node()) : std::string{}) +
                         ": " + s.message());
  }
  return s;
}

// Its timer and drain steps come from its worker (this node) only (net/local_sender.hpp).
Status from_own_worker(self_ptr self, const char* what) {
  if (from_this_node(self)) // every production step: no string built on this path
    return Status::OK();
  return check_local_sender(self, kLog, std::string{what} + " to " + self->state.label(),
                            "its worker");
}

task_full_actor::behavior_type task_impl(self_ptr self, TaskStart start) {
  auto& st = self->state;
  st.start = std::move(start);
  // A task lives only as long as its job: when the job ends, or the connection to the
  // dispatcher's process is lost (the dispatcher then drops this worker's tasks, and a
  // stop_task can no longer arrive), the task stops instead of running on unseen. The
  // simulator found such orphans (test/sim/sweep_test.cpp).
  //
  // Except OFF across a lost dispatcher connection: an OFF task needs nothing from its job to
  // go on serving, so it keeps serving its consumers while the dispatcher restarts; the
  // restarted dispatcher (with --work-dir) assigns it again (assign_task below re-attaches it),
  // and the worker stops it if that does not happen soon after it registered again.
  if (st.start.def.splits)
    self->monitor(st.start.def.splits);
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    if (auto c = st.consumers.find(down.source); c != st.consumers.end()) {
      // (task_state::consumers) Its held requests go too: answered later, they would send it
      // batches it can never acknowledge.
      const auto gone = c->second;
      st.consumers.erase(c);
      SplitFeed* feed = st.runner ? st.runner->split_feed() : nullptr;
      if (feed && down.reason != caf::exit_reason::remote_link_unreachable)
        return; // DYNAMIC, it quit: its leave_job (through the job) says what it took
      log::debug(kLog, st.label() + ": consumer " + std::to_string(gone) + " is gone (" +
                         caf::to_string(down.reason) + "); nothing waits for its acknowledgements");
      for (auto h = st.held.begin(); h != st.held.end();)
        if (h->request.consumer == gone) {
          h->promise.deliver(msg::element_batch{});
          h = st.held.erase(h);
        } else {
          ++h;
        }
      if (feed) {
        st.runner->consumer_reconnected(gone); // its unacknowledged splits are read again
        after_step(self);                      // (reported to the job)
      } else if (st.runner) {
        st.runner->forget_unacknowledged(gone);
        st.runner->forget_consumer(gone);
        const bool may_return = down.reason == caf::exit_reason::remote_link_unreachable;
        if (st.runner->reader_left(gone, may_return)) // whole-epoch: it holds the others no more
          serve_held(self);
      }
      return;
    }
    if (!st.start.def.splits || down.source != st.start.def.splits.address())
      return;
    if (st.start.def.policy == ShardingPolicy::off &&
        down.reason == caf::exit_reason::remote_link_unreachable) {
      log::warning(kLog, st.label() + ": lost the connection to its job (dispatcher); "
                                      "serving on until the dispatcher is back");
      return;
    }
    self->quit(caf::exit_reason::user_shutdown);
  });
  st.stats = metrics::register_task(st.start.def.job,
                                    st.start.def.task, st.start.def.dataset);
  if (st.start.def.num_consumers > 0) {
    st.rounds = std::make_unique<RoundRobinTaskRounds>(st.start.def.num_consumers);
    // Rounds hand whole elements to consumers: none is pre-encoded into a bulk frame.
    st.start.limits.bulk_min_bytes = std::numeric_limits<std::size_t>::max();
  }
  st.runner = std::make_unique<TaskRunner>(st.start.def.policy, st.start.def.compression,
                                           st.start.limits, st.start.first_batch_seq);
  auto dataset = from_binary(st.start.def.definition);
  if (!dataset.ok())
    st.start_error = dataset.status().with_context("decoding the dataset of " + st.label());
  else
    st.start_error = st.runner->start(*dataset, st.start.functions,
                                             WorkerShard{st.start.def.num_workers,
                                                         st.start.def.worker_index})
                       .with_context("starting the pipeline of " + st.label());
  if (st.start_error.ok() && st.start.def.cross_trainer_cache != msg::CacheSharing::none)
    st.start_error =
      st.runner
        ->enable_cross_trainer_cache(st.start.def.cross_trainer_cache == msg::CacheSharing::whole_epoch)
        .with_context(st.label());
  if (!st.start_error.ok()) {
    st.runner.reset();
    report_done(self);
  } else {
    log::info(kLog, "started " + st.label() + " (" + to_string(st.start.def.policy) +
                      ", dataset " + st.start.def.dataset + ")");
    schedule_produce(self);
  }
  return {
    [self](msg::get_elements& req) -> caf::result<msg::element_batch> {
      if (!self->state.start.gate.accepts(req.auth_token)) // one compare per request
        return msg::to_error(
          admit(self, req.auth_token, "get_elements (consumer " + std::to_string(req.consumer) + ")"));
      if (self->state.start.gate.enabled())
        admit_sender_node(self); // cheap when this thread admitted the same node last
      if (self->state.rounds)
        return round_request(self, req);
      auto& st0 = self->state;
      if (st0.runner && st0.runner->gone(req.consumer))
        return msg::make_error(ErrorCode::failed_precondition,
                               "consumer " + std::to_string(req.consumer) + " left the job");
      if (st0.runner) // watch the consumer (task_state::consumers)
        if (const auto& sender = self->current_sender(); sender) {
          auto addr = caf::actor_cast<caf::actor_addr>(sender);
          if (st0.consumers.find(addr) == st0.consumers.end()) { // (no node built per request)
            st0.consumers.emplace(addr, req.consumer);
            st0.asked = true;
            self->monitor(sender); // the strong handle: an actor already gone still sends its down
          }
        }
      if (st0.runner) {
        // Acks first: what the consumer did receive is safe even when it says that something
        // may have been lost since (a failed request, a new connection). OFF too: a draining
        // worker waits for them.
        if (!req.acks.empty())
          st0.runner->ack(req.consumer, req.acks);
        if (req.reconnected) {
          st0.runner->consumer_reconnected(req.consumer);
          // Requests it sent before were held over the old connection: a batch answering
          // them now would be lost on the way, and never acknowledged.
          for (auto it = st0.held.begin(); it != st0.held.end();) {
            if (it->request.consumer == req.consumer) {
              it->promise.deliver(msg::element_batch{});
              it = st0.held.erase(it);
            } else {
              ++it;
            }
          }
        }
        if (st0.runner->split_feed()) {
          report_splits(self);
          report_done(self); // the last acknowledgements may complete it
        }
      }
      serve_held(self); // answers expired holds first
      std::optional<msg::element_batch> batch;
      caf::error error;
      if (answer(
            self, req, [&](msg::element_batch b) { batch = std::move(b); },
            [&](caf::error e) { error = std::move(e); })) {
        // Whole-epoch sharing: this trainer's read may be what a full cache waited for before
        // it takes the element another trainer, held at the end, needs next.
        if (batch && st0.runner && st0.runner->shares_whole_epoch() && !st0.held.empty())
          serve_held(self);
        if (batch)
          return std::move(*batch);
        return error;
      }
      auto& st = self->state;
      auto promise = self->make_response_promise<msg::element_batch>();
      auto hold = hold_of(req);
      // A short hold, and a timer that wakes this task to answer it, when:
      // - it waits for a split: nothing will come before the job answers (at an epoch's end that
      //   can take long), so the consumer's credits should go to tasks that have elements (the
      //   timer leaves produce_scheduled alone: when the job's answer comes first, production
      //   must resume at once, not when the timer fires);
      // - whole-epoch sharing paces it (the cache is full of what another trainer has not read):
      //   held long, this request's credit could be the one its consumer needs to read another
      //   task, whose cache in turn waits for that consumer's trainer (with one credit, two
      //   trainers and two tasks that is a deadlock).
      const bool paced = st.runner && st.runner->shares_whole_epoch() && st.runner->buffered_elements() > 0;
      if (st.waiting_for_split || paced) {
        hold = std::min<caf::timespan>(hold, std::chrono::milliseconds(20));
        self->delayed_send(self, hold, msg::produce_atom_v);
      }
      auto deadline = self->clock().now() + hold;
      const auto first_seq = st.runner ? st.runner->next_batch_seq() : 0;
      st.held.push_back(Held{promise, std::move(req), deadline, first_seq});
      return promise;
    },
    [self](msg::drain_atom) {
      auto& st = self->state;
      if (!from_own_worker(self, "drain_atom").ok())
        return;
      SplitFeed* feed = st.runner ? st.runner->split_feed() : nullptr;
      if (!feed && st.runner && !st.rounds && st.runner->endless() && !st.runner->retired()) {
        // OFF of an infinite dataset never reaches an end to drain to: it retires instead.
        // Held requests are answered now (empty): the next ones carry the consumers' acks.
        st.runner->retire();
        log::info(kLog, st.label() + ": draining an endless OFF task: it hands out nothing more "
                                     "and retires once its consumers acknowledged what they were sent");
        for (auto& h : st.held)
          h.promise.deliver(msg::element_batch{});
        st.held.clear();
        st.update_stats();
        return;
      }
      if (!feed || feed->draining())
        return;
      st.drained_before_end = !st.runner->ended();
      auto unstarted = feed->drain();
      log::info(kLog, st.label() + ": draining; handing " + std::to_string(unstarted.size()) +
                        " unstarted split(s) back to the job");
      if (!unstarted.empty())
        self->send(st.start.def.splits, msg::splits_update{st.start.def.task, {}, std::move(unstarted)});
      st.waiting_for_split = false;
      after_step(self);
    },
    [self](msg::end_rounds& end) {
      auto& st = self->state;
      if (!admit(self, end.auth_token, "end_rounds").ok() || !st.rounds)
        return;
      st.rounds_end = end.local_rounds;
      log::info(kLog, st.label() + ": retired from the coordinated rounds after local round " +
                        std::to_string(end.local_rounds - 1) + " (its worker drains)");
    },
    [self](msg::cache_trainers& update) {
      auto& st = self->state;
      if (!admit(self, update.auth_token, "cache_trainers").ok() || !st.runner)
        return;
      if (st.runner->cache_trainers(update.joined, update.left))
        serve_held(self); // a trainer that left holds the others no more
      if (st.runner->split_feed())
        after_step(self); // splits it held open may have finished
    },
    [self](msg::leave_job& left) {
      auto& st = self->state;
      if (!admit(self, left.auth_token, "leave_job").ok())
        return;
      // What it did not acknowledge is its loss: no split waits for it (DYNAMIC; the task then
      // serves it no more), no drain waits for its acknowledgements (OFF, which serves a
      // consumer the job dropped as before).
      const bool freed = st.runner && st.runner->reader_left(left.consumer); // (whole-epoch sharing)
      if (st.runner && st.runner->split_feed()) {
        st.runner->consumer_gone(left.consumer);
        after_step(self); // answers its held requests (with an error)
      } else if (st.runner && !st.rounds) {
        st.runner->forget_unacknowledged(left.consumer);
        if (freed)
          serve_held(self);
      }
      if (st.rounds && !left.finished)
        st.rounds_left.insert(left.consumer);
      for (auto it = st.round_reader.begin(); st.rounds && it != st.round_reader.end(); ++it)
        if (it->second == left.consumer) { // (not a new process of the index that rejoined)
          st.rounds->release(it->first); // others' rounds no longer wait for its confirms
          st.round_reader.erase(it);
          serve_held_rounds(self);
          break;
        }
    },
    [self](msg::drained_atom) -> caf::result<bool> {
      // Drained: the pipeline ended and every element it produced was acknowledged.
      auto& st = self->state;
      if (auto local = from_own_worker(self, "drained_atom"); !local.ok())
        return msg::to_error(local);
      if (!st.runner)
        return true;
      // Coordinated reads: an infinite pipeline never ends; the task is drained once the job
      // gave it its last round (end_rounds) and every consumer took its elements up to there.
      if (st.rounds)
        return st.rounds_end >= 0 && st.rounds->all_confirmed(st.rounds_end);
      // OFF, every consumer that asked is gone (its process died; its job may hold it until
      // --client-timeout): nobody can receive the rest, and a finite pipeline pauses with its
      // readers, so it would never end and the drain would run into --drain-timeout.
      if (!st.runner->split_feed() && st.asked && st.consumers.empty())
        return true;
      if (!(st.runner->ended() || st.runner->failed() || st.runner->retired()))
        return false;
      // OFF too: a batch taken but not yet received would be lost with the worker (the
      // simulator found OFF drains ending a few elements short of the epoch).
      return st.runner->all_acknowledged();
    },
    [self](msg::assign_task& again) {
      auto& st = self->state;
      if (!admit(self, again.auth_token, "assign_task").ok())
        return;
      if (again.def.task != st.start.def.task || !again.def.splits ||
          again.def.splits == st.start.def.splits)
        return;
      if (st.start.def.splits)
        self->demonitor(st.start.def.splits.address());
      st.start.def.splits = again.def.splits;
      self->monitor(st.start.def.splits);
      log::info(kLog, st.label() + ": re-attached to its job after a dispatcher restart");
      if (st.reported_done) { // the old job never got it, or is gone: tell the new one
        st.reported_done = false;
        report_done(self);
      }
    },
    [self](msg::stop_task& req) {
      if (admit(self, req.auth_token, "stop_task").ok())
        self->quit(caf::exit_reason::user_shutdown);
    },
    [self](msg::produce_atom) {
      auto& st = self->state;
      if (!from_own_worker(self, "produce_atom").ok())
        return;
      st.produce_scheduled = false;
      if (!st.runner)
        return;
      const auto start = self->clock().now();
      const auto deadline = start + st.start.step_time;
      // Asking the clock after every element cost ~4% of an 8-byte element's time: while 16 more
      // elements at the step's rate so far surely fit before the deadline, the next 15 skip it.
      int64_t elements = 0, skip = 0;
      auto step = st.runner->produce([&] {
        ++elements;
        if (skip > 0) {
          --skip;
          return false;
        }
        const auto now = self->clock().now();
        if (now >= deadline)
          return true;
        skip = (now - start) / elements * 16 < deadline - now ? 15 : 0;
        return false;
      });
      if (step == TaskRunner::Step::waiting_for_split)
        st.waiting_for_split = true;
      after_step(self);
    },
  };
}

// The task actor, on the scheduling `Scheduled` gives it:
// - ExecutorScheduled (production): on the process's Executor (worker/executor_scheduled.hpp);
// - HomeScheduled (the simulator): on its actor system's scheduler. A consumer of this process
//   (an in-process read) sends to it from another actor system: HomeScheduled keeps it on its own.
using task_base = caf::stateful_actor<task_state, task_full_actor::base>;

std::atomic<int> task_actor_count{0};

template <class Scheduled>
class TaskActor : public Scheduled {
public:
  template <class... Ts>
  TaskActor(caf::actor_config& cfg, TaskStart start, Ts&&... xs)
      : Scheduled(cfg, std::forward<Ts>(xs)...), start_(std::move(start)) {
    task_actor_count.fetch_add(1, std::memory_order_relaxed);
  }
  ~TaskActor() override { task_actor_count.fetch_sub(1, std::memory_order_relaxed); }

  typename Scheduled::behavior_type make_behavior() override {
    return task_impl(this, std::move(start_));
  }

private:
  TaskStart start_;
};

} // namespace

int task_actor_objects() { return task_actor_count.load(std::memory_order_relaxed); }

msg::task_actor spawn_task(caf::local_actor* parent, TaskStart start,
                           const std::shared_ptr<ExecutorActors>& executor) {
  if (executor) { // its job's share of the Executor: the actor's resumes and its pipeline's work
    auto group = Executor::shared().make_group();
    start.limits.executor_group = group;
    return parent->spawn<TaskActor<ExecutorScheduled<task_base>>, caf::linked>(
      std::move(start), executor, std::move(group));
  }
  return parent->spawn<TaskActor<HomeScheduled<task_base>>, caf::linked>(std::move(start));
}

} // namespace conveyor::actors
