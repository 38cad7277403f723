// The job actor and its tasks: assigning them to workers, adding and losing them (coordinated
// reads: their start and end rounds), and the task list its consumers poll.
#include "dispatcher/job_actor_state.hpp"
#include "consumer/placement.hpp"
#include "node/log.hpp"

namespace conveyor::actors::job_detail {

msg::task_list current_list(job_state& st) {
  msg::task_list list;
  list.version = list_version(st);
  list.job_finished = st.core().production_ended();
  list.error = st.core().error();
  list.error_code = static_cast<uint8_t>(st.core().error_code());
  if (st.core().deterministic_window() > 0) { // (its one consumer took the entries before)
    list.finished_splits = st.core().finished_since(0);
    list.finished_next = st.core().finished_next();
    list.lowest_split_tasks = st.core().lowest_split_owners();
  }
  for (const auto* t : st.core().listed()) {
    auto h = st.task_handles.find(t->id);
    if (h == st.task_handles.end())
      continue;
    list.tasks.push_back(msg::task_info{t->id, t->worker, t->worker_address, h->second});
    if (auto tags = st.worker_tags.find(t->id); tags != st.worker_tags.end())
      list.tasks.back().worker_tags = tags->second;
    if (auto slot = st.off_slots.find(t->id); slot != st.off_slots.end())
      std::tie(list.tasks.back().off_slot, list.tasks.back().off_skip) = slot->second;
    if (st.rounds) {
      list.tasks.back().start_round = st.rounds->start_round(t->id);
      list.tasks.back().end_round = st.rounds->end_round(t->id);
    }
  }
  if (st.rounds) {
    list.rounds_recovering = st.rounds->recovering();
    list.round_fence = st.rounds->fence();
    list.retired_rounds = st.rounds->retired();
    list.lost_rounds = st.rounds->lost();
    st.rounds->published();
  }
  return list;
}

// Coordinated reads: tasks that just got their end round learn how many rounds they serve.
// A task whose worker has not registered again since a dispatcher restart learns it once the
// worker is back (add_task with its handle); a task lost meanwhile needs it no more.
void send_round_ends(self_ptr self) {
  auto& st = self->state;
  if (!st.rounds)
    return;
  for (const auto& [task, rounds] : st.rounds->take_ended()) {
    auto w = st.workers.find(task);
    if (w == st.workers.end()) {
      if (st.core().task(task) != nullptr)
        st.rounds->end_later(task, rounds);
      continue;
    }
    log::info(kLog, st.label() + ": task " + std::to_string(task) + " serves its last round at " +
                      std::to_string(st.rounds->end_round(task) - 1) + " (" +
                      std::to_string(rounds) + " round(s) in all); its worker drains");
    self->send(w->second, msg::end_rounds{task, rounds, st.start.auth_token});
  }
}

// Coordinated reads: a task serving rounds was lost; the job settles it (coordinated/round_robin.hpp).
void rounds_task_lost(self_ptr self, msg::task_id_t task, const std::string& reason) {
  auto& st = self->state;
  if (!st.rounds)
    return;
  const bool serving = st.rounds->start_round(task) >= 0;
  const bool retired = st.rounds->end_round(task) >= 0;
  if (!st.rounds->task_lost(task) || !serving)
    return;
  if (retired) // drained (or lost while draining): the consumers confirm what they received
    log::info(kLog, st.label() + ": retired task " + std::to_string(task) + " left (" + reason +
                      "); settling the rounds each consumer received of it");
  else
    log::warning(kLog, st.label() + ": task " + std::to_string(task) + " was lost (" + reason +
                         "); it leaves the coordinated rounds at a round every consumer agrees "
                         "on, and what it produced that not every consumer received is skipped "
                         "by all");
}

void answer_polls(self_ptr self) {
  auto& st = self->state;
  send_round_ends(self);
  if (st.polls.empty())
    return;
  auto list = current_list(st);
  for (auto& p : st.polls)
    p.promise.deliver(list);
  st.polls.clear();
}

// After any change of tasks or splits: wake whoever waits on it.
void changed(self_ptr self, uint64_t version_before) {
  auto& st = self->state;
  serve_held_splits(self);
  if (list_version(st) != version_before)
    answer_polls(self);
}

void assign(self_ptr self, const msg::add_task& add) {
  auto& st = self->state;
  msg::task_def def;
  def.task = add.task;
  def.job = st.start.id;
  def.dataset = st.start.dataset;
  def.definition = st.start.definition;
  def.policy = st.start.policy;
  def.compression = st.start.compression;
  def.cross_trainer_cache = st.start.cross_trainer_cache;
  def.tenant = st.start.tenant;
  def.tenant_weight = st.start.tenant_weight;
  def.tenant_max_buffer_bytes = st.start.tenant_max_buffer_bytes;
  def.splits = caf::actor_cast<msg::split_source_actor>(self);
  def.num_workers = add.num_workers;
  def.worker_index = add.worker_index;
  def.num_consumers = st.start.num_consumers;
  if (auto slot = st.off_slots.find(add.task); slot != st.off_slots.end())
    def.skip = slot->second.second;
  st.workers[add.task] = add.handle;
  auto task = add.task;
  auto address = add.worker_address;
  self
    ->request(add.handle, st.start.request_timeout,
              msg::assign_task{std::move(def), st.start.auth_token})
    .then(
      [self](msg::task_assigned& reply) {
        auto& st = self->state;
        if (!st.core().task(reply.task))
          return; // removed meanwhile
        auto v = list_version(st);
        st.task_handles[reply.task] = reply.handle;
        st.core().task_assigned(reply.task);
        tell_trainers(self, st.core().trainers(), {},
                      {reply.handle}); // before any consumer asks it
        if (st.rounds && st.rounds->add_task(reply.task) && st.rounds->pending() > 0)
          log::info(kLog, st.label() + ": task " + std::to_string(reply.task) +
                            " joins the coordinated rounds from round " +
                            std::to_string(st.rounds->fence()) + " once every consumer is there");
        changed(self, v);
      },
      [self, task, address](caf::error& err) {
        auto& st = self->state;
        auto status =
          msg::to_status(err, "assigning task " + std::to_string(task) + " to worker " + address);
        log::warning(kLog, st.label() + ": " + status.to_string());
        st.workers.erase(task);
        auto v = list_version(st);
        st.core().task_lost(task, status.to_string());
        rounds_task_lost(self, task, status.to_string());
        self->send(st.start.dispatcher, msg::task_finished{st.start.id, task, status.to_string()});
        changed(self, v);
      });
}

void on_task_done(self_ptr self, msg::task_done& done) {
  auto& st = self->state;
  self->send(st.start.dispatcher, msg::task_finished{st.start.id, done.task, done.error});
  auto v = list_version(st);
  st.core().task_done(done.task, done.error, done.drained);
  if (st.core().production_ended())
    log::info(kLog, st.label() + ": every task ended");
  else if (auto waiting = st.core().waiting_for(); !waiting.empty())
    log::warning(kLog, st.label() + ": " + waiting);
  changed(self, v);
}

void on_add_task(self_ptr self, msg::add_task& add) {
  auto& st = self->state;
  auto v = list_version(st);
  bool added = st.core().add_task(add.task, add.worker, add.worker_address,
                                  add.num_workers > 0 ? add.worker_index : -1);
  const auto* task = st.core().task(add.task);
  if (added && st.rounds)
    st.rounds->expect(add.task);
  if (!add.worker_tags.empty())
    st.worker_tags[add.task] = add.worker_tags;
  if (add.off_slot >= 0)
    st.off_slots[add.task] = {add.off_slot, add.off_skip};
  if (added && st.core().dynamic() && reader_may_skip(st.start.target_workers, add.worker_tags))
    st.core().require_reader(add.task);
  // Without a handle: a task a restarted dispatcher knows from its journal, whose worker
  // has not registered again; the job counts it (production is not over) until the worker
  // comes back (add_task again, with its handle) or is removed (remove_task).
  if (add.handle && task && !task->assigned && !st.workers.count(add.task)) {
    assign(self, add);
    send_round_ends(self); // after assign_task: the worker sees them in that order
  }
  if (added)
    changed(self, v);
}

void on_remove_task(self_ptr self, msg::remove_task& rm) {
  auto& st = self->state;
  st.task_handles.erase(rm.task);
  st.workers.erase(rm.task);
  st.worker_tags.erase(rm.task);
  st.off_slots.erase(rm.task);
  auto v = list_version(st);
  auto before = st.core().splits_reissued();
  if (!st.core().task_lost(rm.task, rm.reason))
    return;
  rounds_task_lost(self, rm.task, rm.reason);
  if (auto n = st.core().splits_reissued() - before; n > 0)
    log::info(kLog, st.label() + ": task " + std::to_string(rm.task) + " lost (" + rm.reason +
                      "); handing its " + std::to_string(n) + " unfinished split(s) out again");
  changed(self, v);
}

void on_drain_task(self_ptr self, msg::drain_task& drain) {
  auto& st = self->state;
  if (!st.rounds)
    return; // other jobs: the draining task hands its splits back itself
  auto v = list_version(st);
  if (st.rounds->retire(drain.task))
    log::info(kLog, st.label() + ": task " + std::to_string(drain.task) +
                      " leaves the coordinated rounds (its worker drains) at a round every "
                      "consumer agrees on");
  changed(self, v);
}

} // namespace conveyor::actors::job_detail
