// The task actor serving its consumers (not coordinated reads: task_actor_rounds.cpp): answering
// get_elements from the pipeline's buffer or holding the request, the production steps, and the
// splits it asks for and reports (DYNAMIC).
#include <algorithm>
#include <optional>

#include "net/local_sender.hpp"
#include "net/node_key.hpp"
#include "node/hooks.hpp"
#include "worker/task_actor_state.hpp"

namespace conveyor::actors::task_detail {

void request_splits(self_ptr self);

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
  if (st.held_by_tenant()) { // backpressure: look again once consumers may have taken some
    const auto now = self->clock().now();
    if (now >= st.tenant_poll_at) {
      st.tenant_poll_at = now + kTenantPoll;
      self->delayed_send(self, kTenantPoll, msg::produce_atom_v);
    }
    return;
  }
  st.produce_scheduled = true;
  self->send(self, msg::produce_atom_v);
}

// DYNAMIC: how far the task read ahead (splits taken and not started, at most at once).
std::string read_ahead_note(TaskRunner& runner) {
  std::size_t peak = 0;
  for (const auto& f : runner.split_feeds())
    peak = std::max(peak, f->peak_buffered());
  if (runner.split_feeds().empty())
    return "";
  return "; it held at most " + std::to_string(peak) + " unstarted split(s) at once";
}

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
  // The stop flag ended it (the job was released, or the worker exits after its drain or
  // without one): that is no outcome of the task. Reported as an error it failed the whole job
  // ("task failed: cancelled") when a drained worker exited; the job learns of the exit from
  // the lost connection, where a drain, DYNAMIC's re-issue or OFF's loss rules apply.
  if (failed && st.start_error.ok() && st.runner->error().code() == ErrorCode::cancelled &&
      st.start.limits.stop && st.start.limits.stop->load()) {
    log::info(kLog, st.label() + ": pipeline stopped: " + st.runner->error().to_string());
    return;
  }
  std::string error;
  if (!st.start_error.ok())
    error = st.start_error.to_string();
  else if (failed)
    error = st.runner->error().to_string();
  if (error.empty())
    log::info(kLog, st.label() + ": pipeline ended after " + std::to_string(st.runner->produced()) +
                      " elements" + read_ahead_note(*st.runner));
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
  // them), then `retired`, which the consumer acknowledges (retired_ack) and asks no more.
  if (st.runner->retired() && !st.runner->has_pending(req.consumer)) {
    msg::element_batch reply;
    reply.retired = !st.runner->awaits_ack(req.consumer);
    if (reply.retired && req.retired_ack)
      st.retired_acked.insert(req.consumer);
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
    }
    st.update_stats();
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
    for (const auto& f : st.runner->split_feeds())
      for (auto& s : f->take_unstarted())
        up.returned.push_back(std::move(s));
  else if (st.runner->per_split() && !st.runner->cross_trainer_cache()) {
    // Splits read ahead beyond the window go back for another task to take. Per-split only:
    // the job ends such a pipeline's epoch for nobody while a split of it is owned, so a split
    // handed back is read; another pipeline's other tasks may have taken that end already.
    // Not with a cross-trainer cache: its trainers read the task's splits in the order taken.
    for (const auto& f : st.runner->split_feeds())
      for (auto& s : f->take_surplus())
        up.returned.push_back(std::move(s));
  }
  if (up.finished.empty() && up.returned.empty())
    return;
  self->send(st.start.def.splits, std::move(up));
}

// Each feed (one per splittable source) that wants splits asks the job for its source's.
void request_splits(self_ptr self) {
  auto& st = self->state;
  if (!st.runner || st.runner->ended() || st.runner->failed())
    return;
  for (const auto& f : st.runner->split_feeds()) {
    SplitFeed* feed = f.get();
    if (!feed->wants_splits())
      continue;
    feed->request_sent();
    st.split_asked = std::chrono::steady_clock::now();
    // The job may hold the request while the epoch's last splits are unfinished elsewhere.
    auto hold = st.start.split_timeout / 2;
    self
      ->request(st.start.def.splits, st.start.split_timeout,
                msg::get_splits{st.start.def.task, feed->epoch(), feed->request_max(), hold.count(),
                                feed->source()})
      .then(
        [self, source = feed->source()](msg::splits_reply& reply) {
          auto& st = self->state;
          SplitFeed* feed = st.runner->split_feeds()[static_cast<std::size_t>(source)].get();
          if (st.stats) {
            st.stats->split_waits_total.fetch_add(1, std::memory_order_relaxed);
            st.stats->split_wait_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now() - st.split_asked)
                                                .count(),
                                              std::memory_order_relaxed);
          }
          feed->deliver(std::move(reply.splits), reply.end_of_splits, reply.empty_epoch);
          st.waiting_for_split = false;
          after_step(self);
        },
        [self, source = feed->source()](caf::error& err) {
          auto& st = self->state;
          SplitFeed* feed = st.runner->split_feeds()[static_cast<std::size_t>(source)].get();
          feed->fail(
            msg::to_status(err, "asking job " + std::to_string(st.start.def.job) + " for splits"));
          st.waiting_for_split = false;
          after_step(self);
        });
  }
}

// get_elements: coordinated reads go to round_request; otherwise acks and reconnections are
// taken first, then the request is answered from the buffer or held.
caf::result<msg::element_batch> on_get_elements(self_ptr self, msg::get_elements& req) {
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
  const bool paced =
    st.runner && st.runner->shares_whole_epoch() && st.runner->buffered_elements() > 0;
  if (st.waiting_for_split || paced) {
    hold = std::min<caf::timespan>(hold, std::chrono::milliseconds(20));
    self->delayed_send(self, hold, msg::produce_atom_v);
  }
  auto deadline = self->clock().now() + hold;
  const auto first_seq = st.runner ? st.runner->next_batch_seq() : 0;
  st.held.push_back(Held{promise, std::move(req), deadline, first_seq});
  return promise;
}

// One production step, up to the step time.
void on_produce(self_ptr self) {
  auto& st = self->state;
  if (!from_own_worker(self, "produce_atom").ok())
    return;
  st.produce_scheduled = false;
  if (!st.runner)
    return;
  if (st.held_by_tenant()) {
    schedule_produce(self); // (the poll)
    return;
  }
  // A capped tenant's task stops within the step as soon as its tenant reaches the cap.
  TenantBuffers::Slot* capped =
    st.tenant_slot && st.tenant_slot->capped() ? st.tenant_slot.get() : nullptr;
  // The simulator's virtual cost per element (node/hooks.hpp; compiled out of production).
  int64_t allowance = -1;
  if constexpr (hooks::kCompiledIn) {
    int64_t wait_ns = 0;
    allowance = hooks::produce_allowance(self->id(), wait_ns);
    if (allowance == 0) {
      st.produce_scheduled = true; // the timer's step is due: no other one meanwhile
      if (wait_ns > 0)
        self->delayed_send(self, caf::timespan{wait_ns}, msg::produce_atom_v);
      return;
    }
  }
  const auto start = self->clock().now();
  const auto deadline = start + st.start.step_time;
  // Asking the clock after every element cost ~4% of an 8-byte element's time: while 16 more
  // elements at the step's rate so far surely fit before the deadline, the next 15 skip it.
  int64_t elements = 0, skip = 0;
  auto step = st.runner->produce([&] {
    ++elements;
    if (allowance > 0 && elements >= allowance)
      return true;
    if (capped) {
      capped->set(st.runner->buffered_bytes());
      if (capped->held_back())
        return true;
    }
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
  if constexpr (hooks::kCompiledIn)
    if (allowance > 0)
      hooks::produced(elements);
  if (step == TaskRunner::Step::waiting_for_split)
    st.waiting_for_split = true;
  after_step(self);
}

} // namespace conveyor::actors::task_detail
