// The consumer actor and its job: getting and joining it, polling its task list (the poll is
// also the heartbeat), and re-joining it after the dispatcher went away.
#include <algorithm>

#include "consumer/consumer_actor_state.hpp"
#include "node/log.hpp"

namespace conveyor::actors::consumer_detail {

void get_job(self_ptr self);
void join(self_ptr self, const msg::job_info& info);
void try_rejoin(self_ptr self);

// A task list's rounds (coordinated reads): first the reader checks that a retired task that
// left served this consumer every round it owed; then the core may forget it as ended. (A
// restored job that is still rebuilding the rounds says nothing of them yet: read on with the
// schedule we have.) False: the read failed.
bool apply_rounds(self_ptr self, const msg::task_list& list) {
  auto& st = self->state;
  if (st.rounds)
    st.rounds->note_slots(list);
  if (!st.rounds || list.rounds_recovering)
    return true;
  if (auto s = st.rounds->on_task_list(list); !s.ok()) {
    finish(self, s.with_context("job " + std::to_string(st.job_id)));
    return false;
  }
  // Gone or lost: the core forgets them as ended (the reader settles their rounds).
  for (const auto& r : list.retired_rounds)
    st.core.task_ended(r.task);
  for (const auto& r : list.lost_rounds)
    st.core.task_ended(r.task);
  return true;
}

// Tasks the core added (new, or re-created under a known id): the listed actor replaces the
// handle kept for the id.
void replace_handles(self_ptr self, const std::vector<msg::task_info>& added) {
  auto& st = self->state;
  for (const auto& t : added)
    if (auto h = st.tasks.find(t.task); h != st.tasks.end()) {
      auto handle = task_handle(self, t);
      if (h->second.address() == handle.address())
        continue;
      st.task_by_addr.erase(h->second.address());
      self->demonitor(h->second.address());
      h->second = handle;
    }
}

// Reconnect to the workers of tasks we could not reach (fresh handles from this list): they
// join `added`, to be connected.
void reconnect_unreached(self_ptr self, const msg::task_list& list,
                         std::vector<msg::task_info>& added) {
  auto& st = self->state;
  for (const auto& t : list.tasks) {
    if (!st.core.knows_task(t.task) || st.core.connected(t.task) ||
        std::find_if(added.begin(), added.end(),
                     [&](const msg::task_info& a) { return a.task == t.task; }) != added.end())
      continue;
    if (auto& link = st.workers[t.worker_address]; link.connected && !link.connecting) {
      link.connected = false; // the old connection broke: open a new one
    }
    st.tasks[t.task] = task_handle(self, t);
    added.push_back(t);
  }
}

// Tasks unreachable for longer than the request timeout fail the read, naming the worker;
// those the job dropped are forgotten. False: the read failed.
bool check_unreachable(self_ptr self, const msg::task_list& list) {
  auto& st = self->state;
  for (auto it = st.unreachable.begin(); it != st.unreachable.end();) {
    if (!st.core.knows_task(it->first)) { // the job dropped it (DYNAMIC: re-issued)
      st.unreachable_why.erase(it->first);
      it = st.unreachable.erase(it);
      continue;
    }
    if (self->clock().now() - it->second > st.start.request_timeout) {
      std::string worker = "?";
      for (const auto& t : list.tasks)
        if (t.task == it->first)
          worker = t.worker_address;
      const std::string why =
        "cannot reach worker " + worker + " (task " + std::to_string(it->first) + " of job " +
        std::to_string(st.job_id) + ") within " +
        std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(st.start.request_timeout).count()) +
        " ms: " + st.unreachable_why[it->first];
      // OFF, on_worker_loss continue: read on (coordinated reads settle lost tasks by rounds).
      if (!st.rounds && st.core.give_up(it->first, why)) {
        st.unreachable_why.erase(it->first);
        it = st.unreachable.erase(it);
        continue;
      }
      finish(self, Status{ErrorCode::unavailable, why});
      return false;
    }
    ++it;
  }
  return true;
}

// Tasks the job no longer lists were dropped by the core; forget their handles.
void forget_dropped(self_ptr self) {
  auto& st = self->state;
  for (auto it = st.tasks.begin(); it != st.tasks.end();) {
    if (!st.core.knows_task(it->first)) {
      st.task_by_addr.erase(it->second.address());
      self->demonitor(it->second.address());
      it = st.tasks.erase(it);
    } else {
      ++it;
    }
  }
}

// The job's answer to a poll: its tasks, step by step; then the next poll.
void on_task_list(self_ptr self, msg::task_list& list) {
  auto& st = self->state;
  if (list.finished_next > 0) { // deterministic reads: after the elements pushed already
    st.start.sink->splits_finished(list.finished_splits);
    st.finished_known = list.finished_next;
  }
  st.lowest_split_tasks = list.lowest_split_tasks;
  apply_placement(self, list);
  for (const auto& t : list.tasks)
    if (!st.tasks.count(t.task))
      st.tasks[t.task] = task_handle(self, t);
  if (!apply_rounds(self, list))
    return;
  auto added = st.core.on_task_list(list);
  for (const auto& t : added)
    st.start.sink->task_slot(t.off_slot >= 0 ? t.off_slot : static_cast<int64_t>(t.task),
                             t.off_skip);
  if (!st.core.error().ok()) {
    finish(self, st.core.error());
    return;
  }
  replace_handles(self, added);
  reconnect_unreached(self, list, added);
  if (!check_unreachable(self, list))
    return;
  forget_dropped(self);
  for (const auto& t : added)
    connect_worker(self, t);
  pump(self);
  check_finished(self);
  poll_tasks(self);
}

void poll_tasks(self_ptr self) {
  auto& st = self->state;
  // Polls go on after the job's production ended: the poll is also the consumer's heartbeat to
  // the job (client_timeout), and a task added later (a worker joining) ends "finished" again.
  if (st.polling || st.done || st.rejoining || !st.job)
    return;
  st.polling = true;
  auto gen = st.job_gen;
  auto hold = std::min<caf::timespan>(st.start.task_refresh, st.start.request_timeout / 2);
  msg::get_tasks req{st.consumer_id, st.refetch ? 0 : st.core.known_version(), hold.count(),
                     progress_of(self)};
  if (st.rounds)
    st.rounds->fill_poll(req);
  for (const auto& [task, handle] : st.tasks) // placement's choice: DYNAMIC gives splits only
    req.reading.push_back(task);              // to tasks some consumer reads
  req.finished_known = st.finished_known;
  st.refetch = false;
  self->request(st.job, st.start.request_timeout, std::move(req))
    .then(
      [self, gen](msg::task_list& list) {
        auto& st = self->state;
        if (gen != st.job_gen)
          return;
        st.polling = false;
        on_task_list(self, list);
      },
      [self, gen](caf::error& err) {
        auto& st = self->state;
        if (gen != st.job_gen)
          return;
        st.polling = false;
        if (err == caf::sec::request_timeout) { // the job is slow, not gone: ask again
          poll_tasks(self);
          return;
        }
        finish(self,
               msg::to_status(err, "asking job " + std::to_string(st.job_id) + " for its tasks"));
      });
}

// A named job can end (its consumers read to the end) between the dispatcher naming it to this
// consumer and the consumer's join: the dispatcher, asked again, says the iteration ended (end
// of sequence; with kNextIteration: the name's next iteration). True when it asks the
// dispatcher again (a few times at most).
bool ask_again_for_named_job(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.consumer_id != 0 || !st.start.job_request.job_name || st.late_joins >= 3 || st.done)
    return false;
  ++st.late_joins;
  log::info(kLog, "job " + std::to_string(st.job_id) + " ended as this consumer joined it (" + why +
                    "); asking the dispatcher again");
  ++st.job_gen;
  if (st.job)
    self->demonitor(st.job.address());
  st.job = nullptr;
  get_job(self);
  return true;
}

void join(self_ptr self, const msg::job_info& info) {
  auto& st = self->state;
  if (!info.handle && st.start.job_request.iteration == msg::kNextIteration &&
      ask_again_for_named_job(self, "it was over"))
    return;
  st.job_id = info.job;
  st.start.sink->job_details(info);
  st.start.sink->joined(info.job);
  st.core.set_policy(info.policy);
  if (!st.start.job_request.resume_cursor.empty()) {
    // (the dispatcher accepted it: it decodes)
    auto cursor = ReadCursor::decode(st.start.job_request.resume_cursor, "`resume_from`");
    if (cursor.ok() && cursor->mode() == ShardingPolicy::dynamic) // (OFF: its tasks skip)
      st.core.resume_from(std::make_shared<const ReadCursor>(std::move(cursor).value()));
  }
  if (st.consumer_id == 0 && (!info.handle || info.finished) && !info.job_name.empty()) {
    // tf.data: a consumer whose iteration of a named job already ended reads end of sequence
    // (its elements went to the consumers that read it), not the data again. (`finished`, not
    // only the handle: a null handle need not come back null from every transport.) Only on a
    // first join: a consumer that read the job before and finds it ended after a dispatcher
    // restart may have lost elements, and must not end as if it had read everything.
    log::info(kLog, "job " + std::to_string(info.job) + " (\"" + info.job_name + "\", iteration " +
                      std::to_string(info.repetition) +
                      ") ended before this consumer joined it: end of sequence");
    finish(self, Status::OK());
    return;
  }
  if (!info.handle) { // ended before we could join: say so, never "0 elements, OK"
    finish(self, Status{ErrorCode::failed_precondition,
                        "job " + std::to_string(info.job) +
                          (info.job_name.empty() ? std::string{} : " (\"" + info.job_name + "\")") +
                          " ended before this consumer could join it"});
    return;
  }
  st.job = info.handle;
  self->monitor(st.job);
  auto gen = st.job_gen;
  if (st.start.job_request.num_consumers && !st.rounds) // (it starts resuming: the reader)
    st.rounds = std::make_unique<RoundRobinReader>(
      st.start.consumer_index, *st.start.job_request.num_consumers, st.start.limits.max_outstanding,
      st.start.limits.max_bytes);
  msg::join_job req{caf::actor_cast<caf::actor>(self), st.consumer_id, st.start.consumer_index};
  if (st.rounds) // a restarted dispatcher's job rebuilds the rounds from what we know
    st.rounds->fill_join(req);
  if (st.start.job_request.cross_trainer_cache == msg::CacheSharing::whole_epoch)
    req.trainer_id = st.start.trainer_id; // the job registers it at every task
  self->request(st.job, st.start.request_timeout, std::move(req))
    .then(
      [self, gen](msg::job_joined& joined) {
        if (gen != self->state.job_gen)
          return;
        self->state.consumer_id = joined.consumer;
        log::debug(kLog, "joined job " + std::to_string(self->state.job_id) + " as consumer " +
                           std::to_string(joined.consumer));
        poll_tasks(self);
      },
      [self, gen](caf::error& err) {
        if (gen != self->state.job_gen)
          return;
        if (err == caf::sec::request_receiver_down &&
            ask_again_for_named_job(self, self->system().render(err)))
          return;
        finish(self, msg::to_status(err, "joining job " + std::to_string(self->state.job_id)));
      });
}

// The job actor is gone with its dispatcher: read on from the known tasks, and find the job
// again once the dispatcher is back.
void start_rejoin(self_ptr self, const std::string& why) {
  auto& st = self->state;
  ++st.job_gen;
  st.rejoining = true;
  st.polling = false;
  if (st.job)
    st.lost_job = st.job.address();
  st.job = nullptr;
  st.dispatcher = nullptr;
  st.rejoin_started = self->clock().now();
  st.rejoin_deadline = st.rejoin_started + st.start.dispatcher_reconnect_timeout;
  st.rejoin_attempts = 0;
  auto ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(st.start.dispatcher_reconnect_timeout);
  log::warning(kLog, "job " + std::to_string(st.job_id) + ": lost the dispatcher (" + why +
                       "); reading on from the workers and re-joining the job once the "
                       "dispatcher at " +
                       st.start.dispatcher_address + " is back (up to " +
                       std::to_string(ms.count()) + " ms)");
  try_rejoin(self);
}

void rejoin_failed(self_ptr self, const Status& why) {
  auto& st = self->state;
  auto left = st.rejoin_deadline - self->clock().now();
  if (left > caf::timespan{0} && why.code() != ErrorCode::not_found &&
      why.code() != ErrorCode::version_mismatch) {
    try_rejoin(self);
    return;
  }
  const auto waited =
    std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now() - st.rejoin_started);
  finish(self,
         Status{why.code() == ErrorCode::not_found ? ErrorCode::not_found : ErrorCode::unavailable,
                "job " + std::to_string(st.job_id) + ": the dispatcher at " +
                  st.start.dispatcher_address + " did not come back with the job within " +
                  std::to_string(waited.count()) + " ms (" + std::to_string(st.rejoin_attempts) +
                  " attempt(s) to rejoin; last: " + why.message() + "); elements may be missing"});
}

void try_rejoin(self_ptr self) {
  auto& st = self->state;
  if (st.done)
    return;
  auto addr = parse_address(st.start.dispatcher_address);
  if (!addr.ok()) {
    finish(self, addr.status().with_context("dispatcher address"));
    return;
  }
  auto left =
    std::max<caf::timespan>(st.rejoin_deadline - self->clock().now(), std::chrono::milliseconds(1));
  ++st.rejoin_attempts;
  connect_to<msg::dispatcher_actor>(
    self, *st.start.transport, *addr, left, "the dispatcher",
    [self](Expected<msg::dispatcher_actor> d) {
      auto& st = self->state;
      if (st.done)
        return;
      if (!d.ok()) {
        rejoin_failed(self, d.status());
        return;
      }
      st.dispatcher = *d;
      self->request(st.dispatcher, st.start.request_timeout, msg::rejoin_job{st.job_id})
        .then(
          [self](msg::job_info& info) {
            auto& st = self->state;
            if (st.done)
              return;
            st.rejoining = false;
            if (!info.handle) {
              // The job ended while the dispatcher was away; what the known tasks still hold
              // is read to their end, nothing more comes.
              if (st.core.finished() || st.tasks.empty()) {
                finish(self, Status::OK());
                return;
              }
              finish(self, Status{ErrorCode::data_loss,
                                  "job " + std::to_string(st.job_id) +
                                    " ended while its dispatcher was away; elements may be "
                                    "missing"});
              return;
            }
            const bool restarted = info.handle.address() != st.lost_job;
            log::info(kLog, "job " + std::to_string(st.job_id) + ": re-joined it" +
                              (restarted ? " at the restarted dispatcher" : ""));
            st.core.on_job_rejoined(restarted);
            if (restarted) // a new job actor: its finished-split log starts over
              st.finished_known = 0;
            join(self, info);
          },
          [self](caf::error& err) {
            rejoin_failed(self, msg::to_status(err, "asking the dispatcher for the job again"));
          });
    });
}

void get_job(self_ptr self) {
  auto& st = self->state;
  self->request(st.dispatcher, st.start.request_timeout, st.start.job_request)
    .then([self](msg::job_info& info) { join(self, info); },
          [self](caf::error& err) {
            finish(self, msg::to_status(err, "creating a job for dataset " +
                                               self->state.start.job_request.dataset));
          });
}

// Registers the dataset (when given one), then gets the job.
void register_then_get_job(self_ptr self) {
  auto& st = self->state;
  if (!st.start.definition) {
    get_job(self);
    return;
  }
  msg::register_dataset reg{*st.start.definition, st.start.compression, caf::none};
  self->request(st.dispatcher, st.start.request_timeout, std::move(reg))
    .then(
      [self](msg::dataset_registered& r) {
        self->state.start.job_request.dataset = r.dataset;
        get_job(self);
      },
      [self](caf::error& err) { finish(self, msg::to_status(err, "registering the dataset")); });
}

// Connects to the dispatcher and greets it, unless the caller did both already.
void bootstrap(self_ptr self) {
  auto& st = self->state;
  if (st.start.dispatcher) {
    st.dispatcher = st.start.dispatcher;
    register_then_get_job(self);
    return;
  }
  auto addr = parse_address(st.start.dispatcher_address);
  if (!addr.ok()) {
    finish(self, addr.status().with_context("dispatcher address"));
    return;
  }
  connect_to<msg::dispatcher_actor>(
    self, *st.start.transport, *addr, st.start.connect_timeout, "the dispatcher",
    [self](Expected<msg::dispatcher_actor> d) {
      if (!d.ok()) {
        finish(self, d.status());
        return;
      }
      auto& st = self->state;
      st.dispatcher = *d;
      self
        ->request(st.dispatcher, st.start.connect_timeout,
                  msg::client_hello{st.start.protocol_version, "consumer", st.start.auth_token})
        .then([self](msg::dispatcher_hello&) { register_then_get_job(self); },
              [self](caf::error& err) {
                finish(self, msg::to_status(err, "handshake with the dispatcher"));
              });
    });
}
} // namespace conveyor::actors::consumer_detail
