// The consumer actor and its tasks: connecting to their workers, placement, and the requests
// for elements (plain reads through ConsumerCore, coordinated reads through RoundRobinReader).
#include <algorithm>

#include "consumer/consumer_actor_state.hpp"
#include "node/log.hpp"
#include "worker/local_workers.hpp"

namespace conveyor::actors::consumer_detail {

// The task's worker cannot be reached (connection failed or broke). The task stays: the
// consumer reconnects with the next task-list poll; if the job drops the task meanwhile (its
// worker was removed), DYNAMIC hands its splits out again and OFF fails the read (core).
void unreachable(self_ptr self, msg::task_id_t task, const std::string& why) {
  auto& st = self->state;
  if (!st.core.knows_task(task))
    return;
  // A retired task — coordinated: it served this consumer every round; OFF: it served all it
  // will and was acknowledged — whose worker drained and left.
  const bool retired =
    (st.rounds && st.rounds->planner().served_all(task)) || st.core.retired(task);
  if (!st.unreachable.count(task) && !retired) {
    log::warning(kLog, "job " + std::to_string(st.job_id) + ": cannot reach task " +
                         std::to_string(task) + " (" + why + "); retrying");
    st.unreachable[task] = self->clock().now();
  }
  st.unreachable_why[task] = why;
  st.core.on_disconnected(task);
  if (auto h = st.tasks.find(task); h != st.tasks.end()) {
    st.task_by_addr.erase(h->second.address());
    self->demonitor(h->second.address());
    st.tasks.erase(h);
  }
  st.refetch = true;
}

void activate(self_ptr self, msg::task_id_t task) {
  auto& st = self->state;
  auto h = st.tasks.find(task);
  if (h == st.tasks.end() || !st.core.knows_task(task))
    return;
  self->monitor(h->second);
  st.task_by_addr[h->second.address()] = task;
  st.core.on_connected(task);
  st.unreachable.erase(task);
  st.unreachable_why.erase(task);
  if (auto w = st.task_worker.find(task); w != st.task_worker.end())
    st.core.set_bulk(task, st.workers[w->second].bulk == WorkerLink::Bulk::ready);
}

bool in_process(self_ptr self, const std::string& worker_address) {
  return reads_in_process(self->state.target, LocalWorkers::contains(worker_address));
}

// The handle requests to a task go to: the task actor itself for an in-process read (no
// socket, no serialization), else the job's handle (a proxy to the worker node).
msg::task_actor task_handle(self_ptr self, const msg::task_info& t) {
  if (in_process(self, t.worker_address))
    return caf::actor_cast<msg::task_actor>(LocalWorkers::task(t.worker_address, t.task));
  return t.handle;
}

// Drops the tasks this consumer does not read (placement), logging each once.
void apply_placement(self_ptr self, msg::task_list& list) {
  auto& st = self->state;
  const bool coordinated = static_cast<bool>(st.start.job_request.num_consumers);
  auto keep = [&](const msg::task_info& t) {
    if (should_read_from_task(st.target, coordinated, LocalWorkers::contains(t.worker_address),
                              t.worker_tags))
      return true;
    if (st.skipped.insert(t.task).second) {
      std::string why = st.target == TargetWorkers::local
                          ? "target_workers LOCAL: the worker does not run in this process"
                          : "target_workers AUTO: a COLOCATED worker of another process";
      if (st.start.job_request.policy == ShardingPolicy::dynamic)
        log::warning(kLog, "job " + std::to_string(st.job_id) + ": not reading task " +
                             std::to_string(t.task) + " on worker " + t.worker_address + " (" +
                             why +
                             "); the DYNAMIC splits it takes reach only its own "
                             "process's consumers");
      else
        log::info(kLog, "job " + std::to_string(st.job_id) + ": not reading task " +
                          std::to_string(t.task) + " on worker " + t.worker_address + " (" + why +
                          ")");
    }
    return false;
  };
  list.tasks.erase(std::remove_if(list.tasks.begin(), list.tasks.end(),
                                  [&](const msg::task_info& t) { return !keep(t); }),
                   list.tasks.end());
}

// Opens (once) the connection to a worker, so that requests to its tasks go to it directly.
void connect_worker(self_ptr self, const msg::task_info& info) {
  auto& st = self->state;
  st.task_worker[info.task] = info.worker_address;
  auto& link = st.workers[info.worker_address];
  if (!link.connected && in_process(self, info.worker_address)) {
    link.local = true; // nothing to connect: the worker's actors are in this process
    link.connected = true;
  }
  if (link.connected) {
    auto h = st.tasks.find(info.task);
    if (link.local && (h == st.tasks.end() || !h->second)) {
      link.connected = false; // looked up again on the next poll
      unreachable(self, info.task,
                  "worker " + info.worker_address + " of this process does not run task " +
                    std::to_string(info.task) + " (any more)");
      return;
    }
    activate(self, info.task);
    return;
  }
  link.waiting.push_back(info.task);
  if (link.connecting)
    return;
  auto addr = parse_address(info.worker_address);
  if (!addr.ok()) {
    link.waiting.clear();
    unreachable(self, info.task, addr.status().message());
    return;
  }
  link.connecting = true;
  std::string address = info.worker_address;
  connect_to<msg::worker_actor>(self, *st.start.transport, *addr, st.start.connect_timeout,
                                "worker", [self, address](Expected<msg::worker_actor> worker) {
                                  auto& st = self->state;
                                  auto& link = st.workers[address];
                                  link.connecting = false;
                                  auto waiting = std::move(link.waiting);
                                  link.waiting.clear();
                                  if (!worker.ok()) {
                                    for (auto task : waiting)
                                      unreachable(self, task, worker.status().to_string());
                                  } else {
                                    link.connected = true;
                                    for (auto task : waiting)
                                      activate(self, task);
                                  }
                                  pump(self);
                                  check_finished(self);
                                });
}

void request_batch(self_ptr self, const ConsumerCore::Request& r) {
  auto& st = self->state;
  auto handle = st.tasks.find(r.task);
  if (handle == st.tasks.end()) {
    st.core.on_request_failed(r);
    return;
  }
  msg::get_elements req{st.consumer_id, r.max_elements,
                        r.max_bytes,    (st.start.request_timeout / 2).count(),
                        r.acks,         r.reconnected};
  req.trainer_id = st.start.trainer_id;
  req.auth_token = st.start.auth_token; // a worker with a token refuses requests without it
  req.retired_ack = r.retired_ack;
  std::string worker;
  uint64_t channel = 0; // the link's local id when the request goes on its bulk channel
  if (auto w = st.task_worker.find(r.task); w != st.task_worker.end()) {
    worker = w->second;
    auto& link = st.workers[worker];
    if (link.bulk == WorkerLink::Bulk::ready) {
      req.bulk_channel = link.server_channel;
      channel = link.channel;
    }
  }
  self->request(handle->second, st.start.request_timeout, std::move(req))
    .then(
      [self, r, worker, channel](msg::element_batch& batch) {
        auto& st = self->state;
        if (st.done)
          return;
        st.last_reply_empty = batch.num_elements == 0 && !batch.end_of_sequence;
        if (batch.bulk_port != 0 && !worker.empty())
          open_bulk(self, worker, batch.bulk_port);
        // Frames announced on a channel that broke meanwhile may never come: check after the
        // grace period (a dead worker's tasks are lost by then, the usual way).
        if (batch.bulk_frames > 0 && channel != 0 &&
            st.workers[worker].bulk == WorkerLink::Bulk::lost)
          self->delayed_send(self, kBulkLossGrace, msg::bulk_lost_atom_v, channel);
        ReadyElements elements;
        Status s = st.core.on_reply(r, std::move(batch), elements);
        deliver(self, std::move(s), elements, r.task);
      },
      [self, r](caf::error& err) {
        auto& st = self->state;
        if (st.done)
          return;
        if (!st.core.in_flight(r)) { // the task was lost meanwhile
          st.core.on_request_failed(r);
          return;
        }
        st.core.on_request_failed(r);
        std::string where =
          "reading task " + std::to_string(r.task) + " of job " + std::to_string(st.job_id);
        if (err.category() == msg::error_category()) { // the task's own error: final
          finish(self, msg::to_status(err, where));
          return;
        }
        if (err != caf::sec::request_timeout) // e.g. request_receiver_down: the task is gone
          unreachable(self, r.task, msg::to_status(err).message());
        // A timeout: the worker is alive (its connection is monitored) but slow: ask again.
        pump(self);
        check_finished(self);
      });
}

// Coordinated reads: hands the elements of consecutive rounds that are complete to the reader
// (`task`: the one whose reply completed them, for the stats; 0 = none).
void deliver_rounds(self_ptr self, msg::task_id_t task) {
  auto& st = self->state;
  std::vector<std::pair<int64_t, int64_t>> rounds; // (slot, round): for the read cursor
  auto ready = st.rounds->take_ready(&rounds);
  if (ready.empty())
    return;
  ReadyElements elements;
  for (std::size_t k = 0; k < ready.size(); ++k)
    elements.add(std::move(ready[k]), DeliveredOrigin{0, rounds[k].first, rounds[k].second, false});
  if (auto s = st.start.sink->push(std::move(elements), push_stats(self, task)); !s.ok())
    finish(self, s);
}

// Coordinated reads: one request per task for this consumer's planned local rounds.
void request_rounds(self_ptr self, const RoundRobinPlanner::Request& r) {
  auto& st = self->state;
  auto handle = st.tasks.find(r.task);
  if (handle == st.tasks.end()) {
    st.rounds->planner().on_request_failed(r);
    return;
  }
  msg::get_elements req{st.consumer_id,
                        r.count,
                        st.start.limits.max_bytes_per_request,
                        (st.start.request_timeout / 2).count(),
                        {},
                        false};
  st.rounds->fill_request(r, st.start.consumer_index, st.start.round_timeout.count(), req);
  req.auth_token = st.start.auth_token;
  auto gen = st.job_gen;
  self->request(handle->second, st.start.request_timeout, std::move(req))
    .then(
      [self, r](msg::element_batch& batch) {
        auto& st = self->state;
        if (st.done)
          return;
        if (r.probe) { // where this consumer_index stands on the task (coordinated/round_robin.hpp)
          auto& planner = st.rounds->planner();
          if (auto s = planner.on_probe(r, batch.round_next); !s.ok()) {
            finish(self, s.with_context("job " + std::to_string(st.job_id)));
            return;
          }
          if (!planner.resuming() && planner.next_round() > 0)
            log::info(kLog, "job " + std::to_string(st.job_id) + ": consumer_index " +
                              std::to_string(st.start.consumer_index) + " rejoins at round " +
                              std::to_string(planner.next_round()));
          pump(self);
          return;
        }
        if (!r.confirm)
          st.last_reply_empty = batch.num_elements == 0;
        if (auto s = st.rounds->on_batch(r, batch); !s.ok()) {
          finish(self, s);
          return;
        }
        deliver_rounds(self, r.task);
        pump(self);
        note_wait(self);
      },
      [self, r, gen](caf::error& err) {
        auto& st = self->state;
        if (st.done)
          return;
        st.rounds->planner().on_request_failed(r);
        if (err.category() == msg::error_category()) { // the task's own error: final
          finish(self, msg::to_status(err, "reading task " + std::to_string(r.task) + " of job " +
                                             std::to_string(st.job_id)));
          return;
        }
        if (err != caf::sec::request_timeout && gen == st.job_gen)
          unreachable(self, r.task, msg::to_status(err).message());
        pump(self);
      });
}

void pump(self_ptr self) {
  auto& st = self->state;
  log_losses(self);
  if (st.done)
    return;
  if (st.rounds) {
    auto ready = [&](msg::task_id_t task) {
      return st.core.connected(task) && st.tasks.count(task) > 0;
    };
    // Rounds a lost task will never serve are skipped (RoundRobinPlanner::plan): past them
    // before and after planning, since no reply may come to move on.
    deliver_rounds(self, 0);
    if (st.done) // (a sink that failed)
      return;
    for (const auto& r : st.rounds->planner().next_requests(
           ready, st.start.limits.max_elements_per_request,
           static_cast<int64_t>(st.start.limits.max_bytes_per_request)))
      request_rounds(self, r);
    deliver_rounds(self, 0);
    return;
  }
  // A deterministic reader over its hold budget waits for the lowest unfinished split: only its
  // task is asked, so the others stop filling the hold (they still get their acknowledgements).
  if (st.start.sink->hold_full())
    st.core.focus_on(st.lowest_split_tasks, st.start.sink->hold_waits_for());
  else
    st.core.focus_on({});
  for (const auto& r : st.core.next_requests())
    request_batch(self, r);
}

} // namespace conveyor::actors::consumer_detail
