#include "dispatcher/job_actor.hpp"

#include "dispatcher/job_actor_state.hpp"
#include "node/log.hpp"

namespace conveyor::actors::job_detail {

// The task list's version: the core's plus the rounds' (both only grow).
uint64_t list_version(job_state& st) {
  return st.core().version() + (st.rounds ? st.rounds->version() : 0);
}

int64_t now_ns(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

void arm_gc(self_ptr self, caf::timespan after) {
  auto token = ++self->state.gc_token;
  self->state.gc_due = self->clock().now() + after;
  wake_at(self, self->state.gc_due, msg::gc_atom_v, token);
}

// The next look at the consumers' heartbeats: a quarter of the shorter timeout, so that a dead
// consumer goes within 1.25 times --client-timeout (checking once per timeout took up to twice).
void arm_heartbeat_check(self_ptr self) {
  arm_gc(self, std::min(self->state.start.gc_timeout, self->state.start.client_timeout) / 4);
}

void release(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.released)
    return;
  st.released = true;
  log::info(kLog, st.label() + " released (" + why + "); stopping its " +
                    std::to_string(st.workers.size()) + " task(s)");
  for (const auto& [task, worker] : st.workers)
    self->send(worker, msg::stop_task{task, self->state.start.auth_token});
  auto final_status = job_status_of(self);
  final_status.finished = true;
  final_status.consumers = 0;
  final_status.tasks = 0;
  final_status.elements_per_s = final_status.bytes_per_s = 0;
  self->send(st.start.dispatcher, msg::job_released{st.start.id, std::move(final_status)});
  answer_polls(self);
  for (auto& h : st.held_splits)
    h.promise.deliver(msg::splits_reply{{}, true, true});
  st.held_splits.clear();
  // A monitor stays attached to the monitored actor after the monitoring one is gone (CAF):
  // on a long-lived peer (the client's actor that created the job) that grows per job.
  if (st.start.creator)
    self->demonitor(st.start.creator);
  for (const auto& [addr, id] : st.consumer_addrs)
    self->demonitor(addr);
  self->quit();
}

// What to do once consumers changed: release when they are done.
void check_consumers(self_ptr self) {
  auto& st = self->state;
  auto& core = st.core();
  if (!core.consumers_done())
    return;
  if (core.all_finished())
    release(self, "every consumer read to the end");
  else if (st.start.name.empty())
    release(self, "its consumer left");
  else
    arm_gc(self, st.start.gc_timeout);
}

// The consumer that created the job, or a joined consumer, is gone.
void on_down(self_ptr self, caf::down_msg& down) {
  auto& st = self->state;
  if (st.start.creator && down.source == st.start.creator.address()) {
    st.start.creator = nullptr;
    if (!st.core().any_joined())
      release(self, "the consumer that created it is gone");
    return;
  }
  auto c = st.consumer_addrs.find(down.source);
  if (c == st.consumer_addrs.end())
    return;
  if (down.reason == caf::exit_reason::remote_link_unreachable) {
    // Only the connection broke (or the consumer's process died): the consumer re-joins with
    // its id if it lives; if it does not within client_timeout (its heartbeats stop), the
    // timeout drops it. Dropping it now would end a private job over a brief network blip.
    log::info(
      kLog,
      st.label() + ": lost the connection to consumer " + std::to_string(c->second) + "; it has " +
        std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(st.start.client_timeout).count()) +
        " ms to re-join");
    st.consumer_addrs.erase(c);
    return;
  }
  drop_consumer(self, c->second, false);
}

// Sets the job up: its rounds (coordinated reads), ids, and the timers and monitors it needs.
void start_job(self_ptr self, JobStart start) {
  self->state.start = std::move(start);
  self->state.created = self->clock().now();
  self->state.rate_samples.push_back({self->state.created, 0, 0});
  if (self->state.start.num_consumers > 0) {
    self->state.rounds = std::make_unique<RoundRobinJob>(self->state.start.num_consumers,
                                                         self->state.start.round_lookahead);
    // The schedule lived here and in the consumers: it is rebuilt from what they know.
    if (self->state.start.restored)
      self->state.rounds->start_recovery();
  }
  // A restored job's consumer ids: the previous incarnation counted from 1 (or from its own
  // start); the actor clock's microseconds (the host's uptime; virtual time in the simulator)
  // are beyond every id it gave.
  if (self->state.start.restored)
    self->state.core().first_consumer_id(
      static_cast<msg::consumer_id_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        self->clock().now().time_since_epoch())
                                        .count()) +
      1);
  // Never released before a first consumer joined — unless the consumer that created the job
  // is gone (its process died right after creating it).
  if (self->state.start.creator)
    self->monitor(self->state.start.creator);
  // Consumers heartbeat with their get_tasks long polls; check them now and then.
  arm_heartbeat_check(self);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
}

// A held poll's or held get_splits' timer step.
void on_expire(self_ptr self, uint64_t token) {
  auto& st = self->state;
  const auto now = self->clock().now();
  for (auto it = st.polls.begin(); it != st.polls.end(); ++it)
    if (it->token == token) {
      if (now < it->due) {
        wake_at(self, it->due, msg::expire_atom_v, token);
        return;
      }
      it->promise.deliver(current_list(st));
      st.polls.erase(it);
      return;
    }
  for (auto it = st.held_splits.begin(); it != st.held_splits.end(); ++it)
    if (it->token == token) {
      if (now < it->due) {
        wake_at(self, it->due, msg::expire_atom_v, token);
        return;
      }
      it->promise.deliver(msg::splits_reply{}); // nothing yet: ask again
      st.held_splits.erase(it);
      return;
    }
}

// The consumers' heartbeat check and the job's GC.
void on_gc(self_ptr self, uint64_t token) {
  auto& st = self->state;
  if (token != st.gc_token)
    return;
  if (self->clock().now() < st.gc_due) {
    wake_at(self, st.gc_due, msg::gc_atom_v, token);
    return;
  }
  auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(st.start.client_timeout);
  for (auto id : st.core().expire(now_ns(self), timeout.count())) {
    log::warning(kLog, st.label() + ": consumer " + std::to_string(id) + " sent no heartbeat for " +
                         std::to_string(timeout.count() / 1000000) + " ms; dropping it");
    consumer_left(self, id, false);
    if (st.released)
      return;
  }
  auto& core = st.core();
  if (st.rounds && st.rounds->waiting_for_consumers() &&
      self->clock().now() - st.created >= st.start.client_timeout) {
    log::warning(
      kLog,
      st.label() + ": not every consumer_index joined again within " +
        std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(st.start.client_timeout).count()) +
        " ms of the dispatcher's restart; the coordinated rounds go on "
        "from what the others knew");
    auto v = list_version(st);
    st.rounds->finish_recovery();
    changed(self, v);
  }
  if (st.start.restored && !core.any_joined() &&
      self->clock().now() - st.created >= st.start.client_timeout) {
    release(
      self,
      "no consumer re-joined it within " +
        std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(st.start.client_timeout).count()) +
        " ms of the dispatcher's restart");
    return;
  }
  if (core.consumers_done()) {
    if (core.all_finished() || st.start.name.empty()) {
      check_consumers(self);
      return;
    }
    // Named, every consumer left: released once nobody came back for job_gc_timeout, counted
    // from when the last one went (tf.data: jobs with no clients for that long). When this very
    // check dropped the last one for its heartbeats, check_consumers just armed that timer.
    if (token != st.gc_token)
      return;
    release(self, "no consumer for the job's GC timeout");
    return;
  }
  arm_heartbeat_check(self);
}

job_full_actor::behavior_type job_impl(self_ptr self, JobStart start) {
  start_job(self, std::move(start));
  return {
    [self](msg::get_splits& req) { return on_get_splits(self, req); },
    [self](msg::splits_update& up) { on_splits_update(self, up); },
    [self](msg::task_done& done) { on_task_done(self, done); },
    [self](msg::join_job& join) { return on_join(self, join); },
    [self](msg::leave_job& leave) { drop_consumer(self, leave.consumer, leave.finished); },
    [self](msg::get_tasks& req) { return on_get_tasks(self, req); },
    [self](msg::add_task& add) { on_add_task(self, add); },
    [self](msg::remove_task& rm) { on_remove_task(self, rm); },
    [self](msg::drain_task& drain) { on_drain_task(self, drain); },
    [self](msg::get_job_status&) { return job_status_of(self); },
    [self](msg::expire_atom, uint64_t token) { on_expire(self, token); },
    [self](msg::gc_atom, uint64_t token) { on_gc(self, token); },
  };
}

} // namespace conveyor::actors::job_detail

namespace conveyor::actors {

job_full_actor spawn_job(caf::local_actor* parent, JobStart start) {
  return parent->spawn<caf::linked>(job_detail::job_impl, std::move(start));
}

} // namespace conveyor::actors
