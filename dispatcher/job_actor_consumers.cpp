// The job actor and its consumers: joining (coordinated reads: their consumer_index), polling
// the task list (their heartbeat), leaving; and the trainers of whole-epoch cache sharing.
#include "dispatcher/job_actor_state.hpp"
#include "node/log.hpp"

namespace conveyor::actors::job_detail {

// Whole-epoch cross-trainer sharing: tells `tasks` (all listed ones when empty) of trainers that
// joined or left (msg::cache_trainers).
void tell_trainers(self_ptr self, std::vector<std::string> joined, std::vector<std::string> left,
                   std::vector<msg::task_actor> tasks) {
  auto& st = self->state;
  if (st.start.cross_trainer_cache != msg::CacheSharing::whole_epoch ||
      (joined.empty() && left.empty()))
    return;
  if (tasks.empty())
    for (const auto& [task, handle] : st.task_handles)
      tasks.push_back(handle);
  for (const auto& handle : tasks)
    caf::anon_send(caf::actor_cast<caf::actor>(handle),
                   msg::cache_trainers{joined, left, st.start.auth_token});
}

// What follows a consumer's leaving (the core already counts it gone): its progress moves to
// the departed, its tasks release what it did not acknowledge, and the job may be done.
void consumer_left(self_ptr self, msg::consumer_id_t id, bool finished) {
  auto& st = self->state;
  if (auto trainer = st.core().trainer_gone(id); !trainer.empty())
    tell_trainers(self, {}, {trainer}); // its tasks' caches no longer keep elements for it
  if (auto p = st.progress.find(id); p != st.progress.end()) {
    st.departed += p->second;
    st.progress.erase(p);
  }
  // DYNAMIC: what the tasks sent it and it did not acknowledge no longer holds splits open.
  // Coordinated reads: the others' rounds no longer wait for it to confirm them, and a dropped
  // consumer that comes back is refused by them. Sent before any list that promotes a task
  // without it goes out, so the tasks know before the others read under the new schedule.
  if (st.core().dynamic() || st.rounds)
    for (const auto& [task, handle] : st.task_handles)
      caf::anon_send(caf::actor_cast<caf::actor>(handle),
                     msg::leave_job{id, finished, st.start.auth_token});
  if (st.rounds && st.rounds->leave(id))
    answer_polls(self); // a pending task no longer waits for this consumer
  for (auto it = st.consumer_addrs.begin(); it != st.consumer_addrs.end(); ++it)
    if (it->second == id) {
      self->demonitor(it->first);
      st.consumer_addrs.erase(it);
      break;
    }
  check_consumers(self);
}

void drop_consumer(self_ptr self, msg::consumer_id_t id, bool finished) {
  if (self->state.core().leave(id, finished))
    consumer_left(self, id, finished);
}

// A consumer joins (or re-joins after a broken connection, with its id).
caf::result<msg::job_joined> on_join(self_ptr self, msg::join_job& join) {
  auto& st = self->state;
  msg::consumer_id_t id = 0;
  if (join.previous != 0 && st.core().knows_consumer(join.previous)) {
    // Back after a broken connection, before client_timeout dropped it: same id, so its
    // tasks keep what it has not acknowledged yet.
    id = join.previous;
    st.core().touch(id, now_ns(self));
    for (auto it = st.consumer_addrs.begin(); it != st.consumer_addrs.end();)
      it = it->second == id ? st.consumer_addrs.erase(it) : std::next(it);
    log::info(kLog, st.label() + ": consumer " + std::to_string(id) + " is back");
  } else {
    if (st.rounds) {
      if (join.consumer_index < 0)
        return msg::make_error(ErrorCode::invalid_argument,
                               st.label() + " is read with coordinated reads (num_consumers " +
                                 std::to_string(st.rounds->num_consumers()) +
                                 "): a consumer must give its consumer_index");
      // A consumer whose connection broke (its process died) and a new consumer with its
      // index: a restarted process; it takes the index over (it rejoins the rounds where the
      // tasks stand for the index, coordinated/round_robin.hpp). A live holder keeps it.
      if (auto old = st.rounds->holder(join.consumer_index); old != 0) {
        bool connected = false;
        for (const auto& [addr, id] : st.consumer_addrs)
          connected |= id == old;
        if (!connected) {
          log::info(kLog, st.label() + ": consumer_index " + std::to_string(join.consumer_index) +
                            " rejoins; consumer " + std::to_string(old) +
                            ", which held it, lost its connection");
          drop_consumer(self, old, false);
        }
      }
      if (auto s = st.rounds->can_join(join.consumer_index); !s.ok())
        return msg::to_error(s.with_context(st.label()));
    }
    id = st.core().join(now_ns(self));
    if (st.rounds)
      (void)st.rounds->join(id, join.consumer_index);
  }
  if (st.rounds && st.rounds->waiting_for_consumers()) {
    auto v = list_version(st);
    auto done = st.rounds->recover(id, join.known_active, join.known_gone, join.known_lost);
    if (!done.ok()) {
      log::error(kLog, st.label() + ": " + done.status().message());
      return msg::to_error(done.status().with_context(st.label()));
    }
    if (*done) {
      log::info(kLog, st.label() + ": rebuilt the coordinated rounds from what its " +
                        std::to_string(st.rounds->num_consumers()) +
                        " consumers knew; reading goes on in step");
      changed(self, v);
    }
  }
  // Whole-epoch sharing: every task hears of a new trainer before the consumer (which asks
  // its tasks only once it joined) can.
  if (!join.trainer_id.empty() && st.core().set_trainer(id, join.trainer_id))
    tell_trainers(self, {join.trainer_id}, {});
  st.consumer_addrs[join.consumer.address()] = id;
  self->monitor(join.consumer);
  ++st.gc_token; // cancels a pending gc
  arm_heartbeat_check(self);
  return msg::job_joined{id};
}

// A consumer's poll (also its heartbeat and progress report): the task list now, or held until
// it changes.
caf::result<msg::task_list> on_get_tasks(self_ptr self, msg::get_tasks& req) {
  auto& st = self->state;
  // Only from a consumer still joined: a report arriving after it left would count it
  // twice (its last report already moved into `departed`).
  if (req.consumer != 0 && st.core().knows_consumer(req.consumer)) {
    st.progress[req.consumer] = req.progress;
    sample_rate(self);
  }
  st.core().touch(req.consumer, now_ns(self));
  st.core().forget_finished(req.finished_known);
  if (req.consumer != 0 && st.core().set_reading(req.consumer, req.reading))
    serve_held_splits(self); // a task that waited for a reader may take splits now
  if (st.rounds && req.consumer != 0) {
    const auto pending = st.rounds->pending();
    std::vector<LostRoundsReport> reports;
    for (const auto& r : req.lost_reports)
      reports.push_back(LostRoundsReport{r.task, r.rounds});
    if (st.rounds->on_poll(req.consumer, req.round, req.round_fence, reports)) {
      if (pending > 0 && st.rounds->pending() == 0)
        log::info(kLog, st.label() + ": " + std::to_string(pending) +
                          " new task(s) joined the coordinated rounds");
      answer_polls(self);
    }
  }
  if (req.known_version != list_version(st) || req.hold_ns <= 0)
    return current_list(st);
  auto promise = self->make_response_promise<msg::task_list>();
  auto token = st.next_token++;
  auto due = self->clock().now() + caf::timespan{req.hold_ns};
  st.polls.push_back(HeldPoll{promise, token, due});
  wake_at(self, due, msg::expire_atom_v, token);
  return promise;
}

} // namespace conveyor::actors::job_detail
