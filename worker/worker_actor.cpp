#include "worker/worker_actor.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <optional>

#include "net/admission.hpp"
#include "net/local_sender.hpp"
#include "net/node_key.hpp"
#include "dispatcher/job_core.hpp"
#include "node/node_config.hpp"
#include "worker/local_workers.hpp"
#include "worker/snapshot_streams.hpp"
#include "node/log.hpp"
#include "worker/task_actor.hpp"
#include "messages/all.hpp"
#include "pipeline/runtime/executor.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "worker";

// What the snapshot stream threads ask for their splits: the dispatcher of the moment and this
// worker's id with it (both change when the worker registers again).
struct SnapshotDispatcher {
  std::mutex mutex;
  msg::dispatcher_actor handle;
  msg::worker_id_t worker = 0;
};

FetchStreamSplits fetch_from(caf::actor_system& sys, std::shared_ptr<SnapshotDispatcher> d,
                             caf::timespan timeout, const msg::snapshot_stream_def& def) {
  // Short: a stream that is stopped waits for at most one request.
  timeout = std::min<caf::timespan>(timeout, std::chrono::seconds(2));
  return [&sys, d, timeout, path = def.path,
          stream = def.stream](int64_t seq) -> Expected<StreamSplits> {
    msg::dispatcher_actor handle;
    msg::worker_id_t worker = 0;
    {
      std::lock_guard<std::mutex> lock(d->mutex);
      handle = d->handle;
      worker = d->worker;
    }
    if (!handle)
      return unavailable("not registered with a dispatcher");
    ReleaseThreadLogger release{sys}; // declared first: it runs after ~scoped_actor
    caf::scoped_actor self{sys};
    Expected<StreamSplits> result{unavailable("no reply")};
    self->request(handle, timeout, msg::get_snapshot_splits{path, stream, seq, 4, worker})
      .receive(
        [&](msg::snapshot_splits& reply) {
          StreamSplits got;
          for (const auto& j : reply.splits)
            got.splits.push_back(from_journal(j));
          got.end = reply.end;
          result = std::move(got);
        },
        [&](caf::error& err) {
          result = msg::to_status(err, "asking the dispatcher for the snapshot's splits");
        });
    return result;
  };
}

struct worker_state {
  static inline const char* name = "conveyor.worker";
  WorkerStart start;
  std::string address; // advertised
  msg::dispatcher_actor dispatcher;
  msg::worker_id_t id = 0;
  bool started = false;
  bool registered = false;
  bool registering = false;
  bool refused = false; // the dispatcher refused us for good (version mismatch)
  bool reported_first = false;
  bool warned_unreachable = false;
  bool warned_heartbeat = false;
  std::map<msg::task_id_t, msg::task_actor> tasks;
  std::map<caf::actor_addr, msg::task_id_t> task_by_addr;
  // Each task's stop flag (TaskLimits::stop): set with its stop_task, because a task busy in a
  // pipeline that returns no element handles no message until the pipeline sees the flag.
  std::map<msg::task_id_t, std::shared_ptr<std::atomic<bool>>> stop_flags;
  // OFF tasks: the only ones that outlive a lost connection to their job (task_actor.cpp
  // on_down); every other task quits when its job's dispatcher is gone.
  std::set<msg::task_id_t> off_tasks;
  // The stop flags of tasks replaced under their id (assign_task) until they quit, for the
  // worker's end.
  std::map<caf::actor_addr, std::shared_ptr<std::atomic<bool>>> replaced_stop_flags;
  uint64_t tasks_spawned = 0; // numbers their batches apart (TaskStart::first_batch_seq)
  // What its tasks buffer per tenant, against the tenants' caps (--tenant-max-buffer-bytes).
  std::shared_ptr<TenantBuffers> tenant_buffers = std::make_shared<TenantBuffers>();
  bool draining = false;
  std::vector<caf::typed_response_promise<bool>> drain_promises;
  // Reconnection: when start() began, the next allowed attempt and its backoff.
  caf::actor_clock::time_point started_at;
  caf::actor_clock::time_point next_attempt;
  caf::timespan backoff{};
  bool ever_registered = false;
  // After registering again: tasks the dispatcher must claim (assign again) before the deadline.
  std::optional<caf::actor_clock::time_point> claim_deadline;
  std::set<msg::task_id_t> claimed;
  // Admission: assign_task and stop_task must carry the worker's token (its tasks check
  // get_elements with a copy of the same gate).
  AdmissionGate gate;
  // Distributed snapshots: the streams this worker writes (worker/snapshot_streams.hpp).
  std::shared_ptr<SnapshotDispatcher> snapshot_dispatcher = std::make_shared<SnapshotDispatcher>();
  std::unique_ptr<SnapshotStreams> snapshots;

  // The worker ends (its tasks with it): their pipelines stop now, so that its exit does not
  // wait for a pipeline that never returns.
  ~worker_state() {
    for (auto& entry : stop_flags)
      entry.second->store(true, std::memory_order_relaxed);
    for (auto& entry : replaced_stop_flags)
      entry.second->store(true, std::memory_order_relaxed);
  }
};

using self_ptr = worker_full_actor::stateful_pointer<worker_state>;

std::string sender_of(const caf::strong_actor_ptr& sender) {
  return sender ? " from node " + caf::to_string(sender->node()) : std::string{};
}

// Refuses (and logs, without the token) a message that does not carry the admission token.
Status admit(self_ptr self, const std::string& presented, const std::string& what) {
  auto& st = self->state;
  Status s = st.gate.admit(presented, "sender of " + what);
  if (s.ok() && st.gate.enabled())
    admit_sender_node(self); // the frame guard lifts its pre-auth cap for this node
  if (!s.ok())
    log::warning(kLog, "refused " + what + sender_of(self->current_sender()) + ": " + s.message());
  return s;
}

// The worker's timers and drain steps come from this process only (net/local_sender.hpp).
Status from_own_process(self_ptr self, const char* what) {
  return check_local_sender(self, kLog, what, "the worker's own process");
}

// Asks a task to end. Not with send_exit: CAF removes the link of an actor that receives an
// exit_msg, so the task's own exit_msg would never come back and the worker would keep the
// ended task's handle, and with it the actor and its thread (one per job ever served).
// The stop flag first: the task may be deep in its pipeline and read its mailbox only after.
void stop(self_ptr self, msg::task_id_t id, const msg::task_actor& task) {
  auto& st = self->state;
  if (auto flag = st.stop_flags.find(id); flag != st.stop_flags.end())
    flag->second->store(true, std::memory_order_relaxed);
  caf::anon_send(caf::actor_cast<caf::actor>(task), msg::stop_task{id, st.start.auth_token});
}

void report_first(self_ptr self, const Status& status) {
  auto& st = self->state;
  if (st.reported_first)
    return;
  st.reported_first = true;
  if (st.start.on_first_registration)
    st.start.on_first_registration(status);
}

void registration_failed(self_ptr self, const Status& status) {
  auto& st = self->state;
  st.registering = false;
  if (status.code() == ErrorCode::version_mismatch ||
      status.code() == ErrorCode::permission_denied) { // refused: retrying cannot help
    st.refused = true;
    log::error(kLog, "the dispatcher at " + st.start.dispatcher.to_string() +
                       " refused this worker: " + status.message());
    report_first(self, status);
    return;
  }
  auto now = self->clock().now();
  if (!st.reported_first && now + st.backoff - st.started_at >= st.start.dispatcher_timeout) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(st.start.dispatcher_timeout);
    report_first(self,
                 Status{status.code(), "the dispatcher at " + st.start.dispatcher.to_string() +
                                         " did not answer within --dispatcher-timeout (" +
                                         std::to_string(ms.count()) + " ms): " + status.message()});
    return;
  }
  if (!st.warned_unreachable) {
    st.warned_unreachable = true;
    log::warning(kLog, "cannot register with the dispatcher at " + st.start.dispatcher.to_string() +
                         ": " + status.to_string() + " (retrying with backoff)");
  }
  st.next_attempt = now + st.backoff;
  st.backoff = std::min<caf::timespan>(st.backoff * 2, std::chrono::seconds(2));
}

void send_registration(self_ptr self) {
  auto& st = self->state;
  msg::register_worker req{st.start.protocol_version, st.address,
                           caf::actor_cast<msg::worker_actor>(self), st.start.auth_token,
                           st.start.tags};
  self->request(st.dispatcher, st.start.request_timeout, std::move(req))
    .then(
      [self](msg::worker_registered& reply) {
        auto& st = self->state;
        st.registering = false;
        st.registered = true;
        st.warned_unreachable = false;
        st.backoff = st.start.heartbeat_interval;
        const auto old_id = st.id;
        st.id = reply.worker;
        {
          std::lock_guard<std::mutex> lock(st.snapshot_dispatcher->mutex);
          st.snapshot_dispatcher->handle = st.dispatcher;
          st.snapshot_dispatcher->worker = reply.worker;
        }
        if (st.ever_registered && old_id != reply.worker && !st.tasks.empty()) {
          // Registered as a new worker: the dispatcher removed this one meanwhile, with its
          // tasks (DYNAMIC: their unfinished splits went to other tasks). Nobody will claim them.
          log::warning(kLog, "registered again as a new worker (was worker " +
                               std::to_string(old_id) + "): stopping its " +
                               std::to_string(st.tasks.size()) + " old task(s)");
          for (const auto& [id, task] : st.tasks)
            stop(self, id, task);
        } else if (st.ever_registered && !st.tasks.empty()) {
          // A restarted dispatcher claims the tasks it journaled by assigning them again (a
          // claim may arrive before this reply: `claimed` was cleared when the dispatcher was
          // lost, not here).
          st.claim_deadline =
            self->clock().now() +
            std::max<caf::timespan>(10 * st.start.heartbeat_interval, std::chrono::seconds(2));
        }
        st.ever_registered = true;
        log::info(kLog, "registered with dispatcher " + st.start.dispatcher.to_string() +
                          " as worker " + std::to_string(reply.worker) + " (advertising " +
                          st.address + ")");
        report_first(self, Status::OK());
      },
      [self](caf::error& err) {
        registration_failed(self, msg::to_status(err, "registering with the dispatcher"));
      });
}

void register_now(self_ptr self) {
  auto& st = self->state;
  if (st.registering || st.registered || st.refused || self->clock().now() < st.next_attempt)
    return;
  st.registering = true;
  if (st.dispatcher) {
    send_registration(self);
    return;
  }
  auto limit = st.start.connect_timeout;
  if (!st.reported_first) // start() waits: stay within dispatcher_timeout
    limit = std::max<caf::timespan>(
      std::min<caf::timespan>(limit,
                              st.started_at + st.start.dispatcher_timeout - self->clock().now()),
      std::chrono::milliseconds(10));
  connect_to<msg::dispatcher_actor>(self, *st.start.transport, st.start.dispatcher, limit,
                                    "the dispatcher", [self](Expected<msg::dispatcher_actor> d) {
                                      if (!d.ok()) {
                                        registration_failed(self, d.status());
                                        return;
                                      }
                                      self->state.dispatcher = *d;
                                      self->monitor(self->state.dispatcher);
                                      send_registration(self);
                                    });
}

// Drops a task that ended (its exit_msg came: tasks are linked to the worker); false when `addr`
// is no task of this worker.
bool forget_task(self_ptr self, const caf::actor_addr& addr) {
  auto& st = self->state;
  auto t = st.task_by_addr.find(addr);
  if (t == st.task_by_addr.end())
    return false;
  // A task replaced under its id (a restored job assigned it again while it was quitting,
  // assign_task below) leaves its successor in place.
  if (auto cur = st.tasks.find(t->second); cur != st.tasks.end() && cur->second.address() == addr) {
    if (st.start.local_registry)
      LocalWorkers::remove_task(st.address, t->second);
    st.tasks.erase(cur);
    st.stop_flags.erase(t->second);
    st.off_tasks.erase(t->second);
  }
  st.replaced_stop_flags.erase(addr);
  st.task_by_addr.erase(t);
  return true;
}

// Stops the tasks a restarted dispatcher did not claim: it forgot their job.
void check_claims(self_ptr self) {
  auto& st = self->state;
  if (!st.claim_deadline || self->clock().now() < *st.claim_deadline)
    return;
  st.claim_deadline.reset();
  for (const auto& [id, task] : st.tasks)
    if (!st.claimed.count(id)) {
      log::warning(kLog, "task " + std::to_string(id) +
                           " was not assigned again by the restarted dispatcher (its job is "
                           "gone); stopping it");
      stop(self, id, task);
    }
}

// The executor's thread time per tenant, when the tasks run on it (not in the simulator), and
// what the tenants' tasks here buffer against their caps.
std::vector<msg::tenant_usage> tenant_usage(const worker_state& st) {
  std::vector<msg::tenant_usage> out;
  if (st.start.task_executor)
    for (const auto& u : Executor::shared().tenant_usage())
      out.push_back(msg::tenant_usage{u.tenant, u.weight, u.thread_seconds});
  for (const auto& b : st.tenant_buffers->usage()) {
    auto it =
      std::find_if(out.begin(), out.end(), [&](const auto& u) { return u.tenant == b.tenant; });
    if (it == out.end())
      it = out.insert(out.end(), msg::tenant_usage{b.tenant, 1, 0});
    it->buffered_bytes = b.bytes;
    it->max_buffer_bytes = b.cap;
  }
  return out;
}

void heartbeat(self_ptr self) {
  auto& st = self->state;
  check_claims(self);
  if (!st.registered) {
    register_now(self);
    return;
  }
  msg::worker_heartbeat hb{st.id, st.tasks.size(), st.draining, tenant_usage(st)};
  if (st.snapshots)
    hb.snapshot_streams = st.snapshots->reports();
  hb.max_snapshot_streams = st.start.max_snapshot_streams;
  self->request(st.dispatcher, st.start.request_timeout, std::move(hb))
    .then(
      [self](msg::heartbeat_ack& ack) {
        auto& st = self->state;
        st.warned_heartbeat = false;
        if (ack.known && st.snapshots)
          st.snapshots->assign(ack.snapshot_streams);
        if (!ack.known && st.registered) {
          log::warning(kLog, "the dispatcher no longer knows worker " + std::to_string(st.id) +
                               "; registering again");
          st.registered = false;
          register_now(self);
        }
      },
      [self](caf::error& err) {
        auto& st = self->state;
        if (st.warned_heartbeat)
          return; // once until a heartbeat goes through again
        st.warned_heartbeat = true;
        log::warning(kLog,
                     "heartbeat to the dispatcher failed: " + msg::to_status(err).to_string());
      });
}

// Asks every task whether it drained; answers the drain once all did.
void check_drained(self_ptr self) {
  auto& st = self->state;
  if (st.drain_promises.empty())
    return;
  auto pending = std::make_shared<std::size_t>(st.tasks.size());
  auto all = std::make_shared<bool>(true);
  auto done = [self, pending, all] {
    auto& st = self->state;
    if (*all) {
      log::info(kLog, "drained: every task's output was delivered");
      for (auto& p : st.drain_promises)
        p.deliver(true);
      st.drain_promises.clear();
    } else {
      self->delayed_send(self, std::chrono::milliseconds(20), msg::drained_atom_v);
    }
  };
  if (st.tasks.empty()) {
    done();
    return;
  }
  for (const auto& [id, t] : st.tasks) {
    auto handle = caf::actor_cast<caf::actor>(t);
    self->request(handle, std::chrono::seconds(5), msg::drained_atom_v)
      .then(
        [pending, all, done](bool drained) {
          *all = *all && drained;
          if (--*pending == 0)
            done();
        },
        [pending, all, done](caf::error&) { // the task is gone: nothing left to deliver
          if (--*pending == 0)
            done();
        });
  }
}

} // namespace

worker_full_actor spawn_worker(caf::actor_system& sys, WorkerStart start) {
  return sys.spawn(
    [](self_ptr self, WorkerStart start) -> worker_full_actor::behavior_type {
      self->state.start = std::move(start);
      self->state.gate = AdmissionGate{self->state.start.auth_token, "worker"};
      self->state.snapshots = std::make_unique<SnapshotStreams>(
        [sys = &self->system(), d = self->state.snapshot_dispatcher,
         timeout = self->state.start.request_timeout](const msg::snapshot_stream_def& def) {
          return fetch_from(*sys, d, timeout, def);
        },
        self->state.start.task_limits.paths,
        // A stream that ended is reported by a heartbeat now, sent as the worker itself (only
        // its own node may drive its heartbeats); weak: the streams never keep the worker alive.
        [weak = caf::weak_actor_ptr{self->ctrl()}] {
          if (auto strong = weak.lock()) {
            auto worker = caf::actor_cast<caf::actor>(strong);
            caf::send_as(worker, worker, msg::tick_atom_v, true);
          }
        });
      if (auto bulk = self->state.start.bulk.actor) // the bulk server ends with its worker
        self->attach_functor(
          [bulk] { caf::anon_send_exit(bulk, caf::exit_reason::user_shutdown); });
      self->set_down_handler([self](caf::down_msg& down) {
        auto& st = self->state;
        if (st.dispatcher && down.source == st.dispatcher.address()) {
          log::warning(kLog, "lost the dispatcher at " + st.start.dispatcher.to_string() + " (" +
                               caf::to_string(down.reason) + "); reconnecting");
          st.dispatcher = nullptr;
          st.registered = false;
          st.registering = false;
          {
            std::lock_guard<std::mutex> lock(st.snapshot_dispatcher->mutex);
            st.snapshot_dispatcher->handle = nullptr;
          }
          // Claims are asked of the next dispatcher once registered with it (its deadline starts
          // then): a deadline left from the last one would stop the tasks while none is up.
          st.claimed.clear();
          st.claim_deadline.reset();
        }
      });
      // Tasks are linked to the worker so that they end with it; a task that ends on its own
      // (failed) must not take the worker down: forget it.
      self->set_exit_handler([self](caf::exit_msg& exit) {
        if (!forget_task(self, exit.source))
          self->quit(exit.reason);
      });
      return {
        [self](caf::connect_atom, std::string advertised) {
          auto& st = self->state;
          if (!from_own_process(self, "connect_atom").ok() || st.started)
            return;
          st.started = true;
          st.address = std::move(advertised);
          st.started_at = self->clock().now();
          st.next_attempt = st.started_at;
          st.backoff = st.start.heartbeat_interval;
          register_now(self);
          self->delayed_send(self, st.start.heartbeat_interval, msg::tick_atom_v);
        },
        [self](msg::tick_atom) {
          if (!from_own_process(self, "tick_atom").ok())
            return;
          heartbeat(self);
          self->delayed_send(self, self->state.start.heartbeat_interval, msg::tick_atom_v);
        },
        [self](msg::tick_atom, bool) { // a heartbeat now (a snapshot stream ended), no timer
          if (!from_own_process(self, "tick_atom").ok())
            return;
          if (self->state.registered)
            heartbeat(self);
        },
        [self](msg::drain_atom) -> caf::result<bool> {
          auto& st = self->state;
          // Only this process (its SIGTERM handling) drains the worker.
          if (auto local = from_own_process(self, "drain_atom"); !local.ok())
            return msg::to_error(local);
          auto promise = self->make_response_promise<bool>();
          st.drain_promises.push_back(promise);
          if (!st.draining) {
            st.draining = true;
            log::info(kLog, "draining " + std::to_string(st.tasks.size()) +
                              " task(s): no new splits or tasks; delivering what was started");
            for (const auto& [id, t] : st.tasks)
              caf::send_as(caf::actor_cast<caf::actor>(self), caf::actor_cast<caf::actor>(t),
                           msg::drain_atom_v); // with a sender on this node (the task checks)
            // Now, not at the next tick: coordinated jobs retire this worker's tasks at a round
            // every consumer agrees on, which takes a round trip through every consumer.
            if (st.registered)
              heartbeat(self);
            check_drained(self);
          }
          return promise;
        },
        [self](msg::drained_atom) {
          if (from_own_process(self, "drained_atom").ok())
            check_drained(self);
        },
        [self](msg::assign_task& req) -> caf::result<msg::task_assigned> {
          auto& st = self->state;
          if (auto admitted = admit(self, req.auth_token,
                                    "assign_task (task " + std::to_string(req.def.task) + ")");
              !admitted.ok())
            return msg::to_error(admitted);
          auto id = req.def.task;
          if (auto t = st.tasks.find(id); t != st.tasks.end() && st.off_tasks.count(id)) {
            // Assigned again (by a restarted dispatcher's job): the running OFF task re-attaches
            // to the job actor in the definition, also while the worker drains (its consumers
            // still read it, and the restored job must know it).
            st.claimed.insert(id);
            caf::anon_send(caf::actor_cast<caf::actor>(t->second), std::move(req));
            return msg::task_assigned{id, t->second};
          } else if (t != st.tasks.end()) {
            // Any other task quits when its old job's dispatcher is gone, but it may not have
            // seen that yet: one busy in its pipeline (e.g. dropping a resumed split's consumed
            // prefix, which returns no element for seconds) reads its mailbox late. Handing the
            // restored job that handle would leave it a task that is about to vanish unnoticed
            // (its consumers retried it forever): a fresh one, under the same id, takes its
            // place (the restored job hands the old one's journaled splits out again). The old
            // one is not stopped: a stopped task answers its reader's held request with the
            // cancellation, which fails the read; it quits on its own as it reads its mailbox,
            // which its reader retries.
            if (auto flag = st.stop_flags.find(id); flag != st.stop_flags.end())
              st.replaced_stop_flags[t->second.address()] = flag->second;
            st.tasks.erase(t);
          }
          if (st.draining)
            return msg::make_error(ErrorCode::unavailable,
                                   "worker " + st.address + " is draining; it takes no new task");
          st.claimed.insert(id);
          TaskStart ts;
          ts.def = std::move(req.def);
          ts.limits = st.start.task_limits;
          ts.split_timeout = st.start.request_timeout;
          ts.worker_address = st.address;
          ts.bulk = st.start.bulk;
          ts.gate = st.gate;
          ts.first_batch_seq = (++st.tasks_spawned << 40) + 1;
          ts.tenant_buffers = st.tenant_buffers;
          ts.limits.stop = std::make_shared<std::atomic<bool>>(false);
          st.stop_flags[id] = ts.limits.stop;
          if (ts.def.policy == ShardingPolicy::off)
            st.off_tasks.insert(id);
          auto handle = spawn_task(self, std::move(ts), st.start.task_executor);
          st.tasks[id] = handle;
          st.task_by_addr[handle.address()] = id;
          if (st.start.local_registry) // before the job (and so any consumer) learns of it
            LocalWorkers::add_task(st.address, id, caf::actor_cast<caf::actor>(handle));
          return msg::task_assigned{id, handle};
        },
        [self](msg::end_rounds& req) {
          auto& st = self->state;
          if (!admit(self, req.auth_token, "end_rounds (task " + std::to_string(req.task) + ")")
                 .ok())
            return;
          if (auto t = st.tasks.find(req.task); t != st.tasks.end())
            caf::anon_send(caf::actor_cast<caf::actor>(t->second),
                           msg::end_rounds{req.task, req.local_rounds, st.start.auth_token});
        },
        [self](msg::snapshot_nudge& req) {
          // Snapshot streams may wait for this worker: ask for them now rather than at the next
          // heartbeat (the periodic heartbeat stays the fallback when a nudge is lost).
          if (!admit(self, req.auth_token, "snapshot_nudge").ok())
            return;
          if (self->state.registered)
            heartbeat(self);
        },
        [self](msg::stop_task& req) {
          auto& st = self->state;
          if (!admit(self, req.auth_token, "stop_task (task " + std::to_string(req.task) + ")")
                 .ok())
            return;
          if (auto t = st.tasks.find(req.task); t != st.tasks.end()) {
            log::info(kLog, "stopping task " + std::to_string(req.task));
            stop(self, req.task, t->second);
          }
        },
      };
    },
    std::move(start));
}

} // namespace conveyor::actors
