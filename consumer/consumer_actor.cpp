#include "consumer/consumer_actor.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "net/bulk_frame.hpp"
#include "node/home_scheduled.hpp"
#include "worker/local_workers.hpp"
#include "node/log.hpp"
#include "consumer/placement.hpp"
#include "coordinated/round_robin.hpp"
#include "consumer/wait_stats.hpp"
#include "messages/all.hpp"
#include "pipeline/tensor/buffer_pool.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "consumer";

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
  caf::reacts_to<msg::bulk_frame_atom, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t, std::vector<char>>,
  caf::reacts_to<msg::bulk_frame_atom, uint64_t, std::vector<char>>, // in-process: header + payload
  caf::reacts_to<msg::bulk_lost_atom, uint64_t, std::string>,
  caf::reacts_to<msg::bulk_lost_atom, uint64_t>>;

// After a bulk channel broke, how long to wait for the down_msg of a worker that died (its
// tasks are then lost the usual way) before calling batches still waiting for frames lost.
constexpr auto kBulkLossGrace = std::chrono::seconds(1);

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
  caf::actor_addr lost_job; // the job actor whose connection broke (same one back: a blip)
  int late_joins = 0;       // a named job ended as this consumer joined it: asked again
  // Coordinated reads only: plans rounds onto tasks and orders the elements (the core still
  // tracks tasks and connections; its credits are unused).
  std::unique_ptr<RoundRobinPlanner> planner;
  int64_t round_elements = 0;
  int64_t round_bytes = 0;
  int64_t round_messages = 0;
};

using self_ptr = consumer_full_actor::stateful_pointer<consumer_state>;

// Charges the time since the last event and notes the state the consumer is in now. The
// actor's clock, so that the simulator's virtual time keeps its runs deterministic.
void note_wait(self_ptr self) {
  auto& st = self->state;
  st.waits.advance(self->clock().now(),
                   WaitStats::classify(st.core.unacked_elements(), st.core.requests_in_flight(),
                                       st.last_reply_empty,
                                       st.core.outstanding() >= st.start.limits.max_outstanding));
}

msg::consumer_progress progress_of(self_ptr self) {
  auto& st = self->state;
  note_wait(self);
  msg::consumer_progress p;
  p.elements = st.core.elements_received() + st.round_elements;
  p.bytes = st.core.bytes_received() + st.round_bytes;
  st.waits.fill(p, self->clock().now());
  return p;
}

msg::stream_stats stats_of(self_ptr self) {
  const auto& core = self->state.core;
  const auto& st = self->state;
  msg::stream_stats s;
  s.elements = core.elements_received() + st.round_elements;
  s.bytes = core.bytes_received() + st.round_bytes;
  s.messages = core.messages_received() + st.round_messages;
  s.per_worker = core.per_worker();
  const auto p = progress_of(self);
  s.wait_worker_ns = p.wait_worker_ns;
  s.wait_network_ns = p.wait_network_ns;
  s.wait_split_ns = p.wait_split_ns;
  s.wait_credit_ns = p.wait_credit_ns;
  s.elapsed_ns = p.elapsed_ns;
  s.job = st.job_id;
  s.duplicates_dropped = core.duplicates_dropped();
  return s;
}

// The counters that go with a push of `task`'s elements to the sink.
msg::stream_stats push_stats(self_ptr self, msg::task_id_t task) {
  auto s = stats_of(self);
  s.pushed_task = task;
  s.pushed_incarnation = self->state.core.incarnation(task);
  return s;
}

void finish(self_ptr self, Status status) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  if (st.job && st.consumer_id != 0) // the final counters, for status and metrics (no reply)
    caf::anon_send(st.job, msg::get_tasks{st.consumer_id, st.core.known_version(), 0,
                                          progress_of(self)});
  if (status.code() == ErrorCode::cancelled || status.ok())
    log::debug(kLog, "job " + std::to_string(st.job_id) + ": " +
                       (status.ok() ? std::string{"end of sequence"} : status.to_string()));
  else
    log::warning(kLog, "job " + std::to_string(st.job_id) + ": stream failed: " +
                         status.to_string());
  if (st.job && st.consumer_id != 0)
    self->send(st.job, msg::leave_job{st.consumer_id, status.ok()});
  st.start.sink->finish(std::move(status));
  self->quit();
}

void check_finished(self_ptr self) {
  if (!self->state.done && self->state.core.finished())
    finish(self, Status::OK());
}

void pump(self_ptr self);

// The task's worker cannot be reached (connection failed or broke). The task stays: the
// consumer reconnects with the next task-list poll; if the job drops the task meanwhile (its
// worker was removed), DYNAMIC hands its splits out again and OFF fails the read (core).
void unreachable(self_ptr self, msg::task_id_t task, const std::string& why) {
  auto& st = self->state;
  if (!st.core.knows_task(task))
    return;
  // A retired task — coordinated: it served this consumer every round; OFF: it served all it
  // will and was acknowledged — whose worker drained and left.
  const bool retired = (st.planner && st.planner->served_all(task)) || st.core.retired(task);
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

std::vector<msg::task_id_t> tasks_of(self_ptr self, const std::string& worker) {
  std::vector<msg::task_id_t> out;
  for (const auto& [task, w] : self->state.task_worker)
    if (w == worker && self->state.core.knows_task(task))
      out.push_back(task);
  return out;
}

// The link whose current bulk channel is `channel` (its worker in `worker`); nullptr once the
// stream is done or for a channel that was replaced or never known.
WorkerLink* current_channel(self_ptr self, uint64_t channel, const std::string*& worker) {
  auto& st = self->state;
  auto w = st.channel_worker.find(channel);
  if (w == st.channel_worker.end() || st.done)
    return nullptr;
  auto& link = st.workers[w->second];
  if (link.channel != channel)
    return nullptr;
  worker = &w->second;
  return &link;
}

// Opens the bulk channel to a worker whose reply named its bulk port.
void open_bulk(self_ptr self, const std::string& worker, uint16_t port) {
  auto& st = self->state;
  auto& link = st.workers[worker];
  if (link.bulk != WorkerLink::Bulk::none || port == 0)
    return;
  if (link.local) { // in-process channel: the worker's bulk server sends frames as messages
    auto server = LocalWorkers::bulk_server(worker);
    if (!server) {
      link.bulk = WorkerLink::Bulk::lost;
      return;
    }
    link.channel = ++st.next_channel;
    link.bulk = WorkerLink::Bulk::opening;
    st.channel_worker[link.channel] = worker;
    caf::anon_send(server, msg::bulk_open_atom_v, caf::actor_cast<caf::actor>(self), link.channel);
    return;
  }
  auto addr = parse_address(worker);
  if (!addr.ok())
    return;
  if (!st.bulk_client)
    st.bulk_client = st.start.transport->bulk_client(caf::actor_cast<caf::actor>(self));
  if (!st.bulk_client) { // this transport has none: stay inline
    link.bulk = WorkerLink::Bulk::lost;
    return;
  }
  link.channel = ++st.next_channel; // local: the worker assigns the id requests carry
  link.bulk = WorkerLink::Bulk::opening;
  st.channel_worker[link.channel] = worker;
  caf::anon_send(st.bulk_client, msg::bulk_open_atom_v, addr->host, port, link.channel);
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
                             why + "); the DYNAMIC splits it takes reach only its own "
                             "process's consumers");
      else
        log::info(kLog, "job " + std::to_string(st.job_id) + ": not reading task " +
                          std::to_string(t.task) + " on worker " + t.worker_address + " (" +
                          why + ")");
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
      unreachable(self, info.task, "worker " + info.worker_address +
                                     " of this process does not run task " +
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
  connect_to<msg::worker_actor>(
    self, *st.start.transport, *addr, st.start.connect_timeout, "worker",
    [self, address](Expected<msg::worker_actor> worker) {
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
  if (st.planner) {
    req.round = st.planner->next_round();
    req.round_fence = st.planner->fence();
    for (const auto& r : st.planner->lost_reports())
      req.lost_reports.push_back(msg::get_tasks::lost_report{r.task, r.rounds});
  }
  for (const auto& [task, handle] : st.tasks) // placement's choice: DYNAMIC gives splits only
    req.reading.push_back(task);               // to tasks some consumer reads
  st.refetch = false;
  self->request(st.job, st.start.request_timeout, std::move(req))
    .then(
      [self, gen](msg::task_list& list) {
        auto& st = self->state;
        if (gen != st.job_gen)
          return;
        st.polling = false;
        apply_placement(self, list);
        for (const auto& t : list.tasks)
          if (!st.tasks.count(t.task))
            st.tasks[t.task] = task_handle(self, t);
        if (st.planner && !list.rounds_recovering) {
          // First: the planner checks that a retired task that left served this consumer every
          // round it owed; then the core may forget it as ended. (A restored job that is still
          // rebuilding the rounds says nothing of them yet: read on with the schedule we have.)
          std::vector<RoundRobinPlanner::TaskEntry> entries;
          for (const auto& t : list.tasks)
            entries.push_back({t.task, t.start_round, t.end_round, false, false, -1});
          for (const auto& r : list.retired_rounds)
            entries.push_back({r.task, r.start_round, r.end_round, true, false, r.served_rounds});
          for (const auto& r : list.lost_rounds)
            entries.push_back({r.task, r.start_round, r.end_round, false, true, r.served_rounds});
          if (auto s = st.planner->on_tasks(entries, list.round_fence); !s.ok()) {
            finish(self, s.with_context("job " + std::to_string(st.job_id)));
            return;
          }
          // Gone or lost: the core forgets them as ended (the planner settles their rounds).
          for (const auto& r : list.retired_rounds)
            st.core.task_ended(r.task);
          for (const auto& r : list.lost_rounds)
            st.core.task_ended(r.task);
        }
        auto added = st.core.on_task_list(list);
        if (!st.core.error().ok()) {
          finish(self, st.core.error());
          return;
        }
        for (const auto& t : added) // new, or re-created under a known id: the listed actor
          if (auto h = st.tasks.find(t.task); h != st.tasks.end()) {
            auto handle = task_handle(self, t);
            if (h->second.address() == handle.address())
              continue;
            st.task_by_addr.erase(h->second.address());
            self->demonitor(h->second.address());
            h->second = handle;
          }
        // Reconnect to the workers of tasks we could not reach (fresh handles from this list).
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
            finish(self, Status{ErrorCode::unavailable,
                                "cannot reach worker " + worker + " (task " +
                                  std::to_string(it->first) + " of job " +
                                  std::to_string(st.job_id) + ") within " +
                                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                   st.start.request_timeout)
                                                   .count()) +
                                  " ms: " + st.unreachable_why[it->first]});
            return;
          }
          ++it;
        }
        // Tasks the job no longer lists were dropped by the core; forget their handles.
        for (auto it = st.tasks.begin(); it != st.tasks.end();) {
          if (!st.core.knows_task(it->first)) {
            st.task_by_addr.erase(it->second.address());
            self->demonitor(it->second.address());
            it = st.tasks.erase(it);
          } else {
            ++it;
          }
        }
        for (const auto& t : added)
          connect_worker(self, t);
        pump(self);
        check_finished(self);
        poll_tasks(self);
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
        finish(self, msg::to_status(err, "asking job " + std::to_string(st.job_id) +
                                           " for its tasks"));
      });
}

void request_batch(self_ptr self, const ConsumerCore::Request& r) {
  auto& st = self->state;
  auto handle = st.tasks.find(r.task);
  if (handle == st.tasks.end()) {
    st.core.on_request_failed(r);
    return;
  }
  msg::get_elements req{st.consumer_id, r.max_elements, r.max_bytes,
                        (st.start.request_timeout / 2).count(), r.acks, r.reconnected};
  req.trainer_id = st.start.trainer_id;
  req.auth_token = st.start.auth_token; // a worker with a token refuses requests without it
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
        if (s.ok() && !elements.empty())
          s = st.start.sink->push(std::move(elements), push_stats(self, r.task));
        if (!s.ok()) {
          finish(self, s);
          return;
        }
        pump(self);
        note_wait(self);
        check_finished(self);
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
        std::string where = "reading task " + std::to_string(r.task) + " of job " +
                            std::to_string(st.job_id);
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
  auto ready = st.planner->take_ready();
  if (ready.empty())
    return;
  st.round_elements += static_cast<int64_t>(ready.size());
  ReadyElements elements;
  elements.add(std::move(ready));
  if (auto s = st.start.sink->push(std::move(elements), push_stats(self, task)); !s.ok())
    finish(self, s);
}

// Coordinated reads: one request per task for this consumer's planned local rounds.
void request_rounds(self_ptr self, const RoundRobinPlanner::Request& r) {
  auto& st = self->state;
  auto handle = st.tasks.find(r.task);
  if (handle == st.tasks.end()) {
    st.planner->on_request_failed(r);
    return;
  }
  msg::get_elements req{st.consumer_id, r.count, st.start.limits.max_bytes_per_request,
                        (st.start.request_timeout / 2).count(), {}, false};
  req.round_first = r.first;
  req.round_count = r.probe ? 0 : r.count;
  req.consumer_index = st.start.consumer_index;
  req.round_timeout_ns = st.start.round_timeout.count();
  req.round_resume = r.probe || r.resume;
  req.round_committed_known = r.committed_known;
  req.auth_token = st.start.auth_token;
  auto gen = st.job_gen;
  self->request(handle->second, st.start.request_timeout, std::move(req))
    .then(
      [self, r](msg::element_batch& batch) {
        auto& st = self->state;
        if (st.done)
          return;
        if (r.probe) { // where this consumer_index stands on the task (coordinated/round_robin.hpp)
          if (auto s = st.planner->on_probe(r, batch.round_next); !s.ok()) {
            finish(self, s.with_context("job " + std::to_string(st.job_id)));
            return;
          }
          if (!st.planner->resuming() && st.planner->next_round() > 0)
            log::info(kLog, "job " + std::to_string(st.job_id) + ": consumer_index " +
                              std::to_string(st.start.consumer_index) + " rejoins at round " +
                              std::to_string(st.planner->next_round()));
          pump(self);
          return;
        }
        if (!r.confirm)
          st.last_reply_empty = batch.num_elements == 0;
        std::vector<Element> elements;
        if (batch.num_elements > 0) {
          if (auto s = decode_round_elements(batch.payload, batch.num_elements, elements);
              !s.ok()) {
            finish(self, s.with_context("reading task " + std::to_string(r.task)));
            return;
          }
          ++st.round_messages;
          st.round_bytes += static_cast<int64_t>(batch.payload.size());
        }
        if (auto s = st.planner->on_reply(r, std::move(elements), batch.round_committed);
            !s.ok()) {
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
        st.planner->on_request_failed(r);
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
  if (st.done)
    return;
  if (st.planner) {
    auto ready = [&](msg::task_id_t task) {
      return st.core.connected(task) && st.tasks.count(task) > 0;
    };
    // Rounds a lost task will never serve are skipped (RoundRobinPlanner::plan): past them
    // before and after planning, since no reply may come to move on.
    deliver_rounds(self, 0);
    if (st.done) // (a sink that failed)
      return;
    for (const auto& r : st.planner->next_requests(
           ready, st.start.limits.max_elements_per_request,
           static_cast<int64_t>(st.start.limits.max_bytes_per_request)))
      request_rounds(self, r);
    deliver_rounds(self, 0);
    return;
  }
  for (const auto& r : st.core.next_requests())
    request_batch(self, r);
}

void get_job(self_ptr self);

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
  st.start.sink->joined(info.job);
  st.core.set_policy(info.policy);
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
  if (st.start.job_request.num_consumers && !st.planner) {
    // The planner's window: the consumer's element credit, at most 8192 rounds ahead (a new
    // worker joins a little beyond the rounds the consumers planned: keep that near), and its
    // byte budget (max_buffered_bytes).
    st.planner = std::make_unique<RoundRobinPlanner>(
      st.start.consumer_index, *st.start.job_request.num_consumers,
      std::min<int64_t>(st.start.limits.max_outstanding, 8192), st.start.limits.max_bytes);
    // It may be a restarted process of an index that read this job before: it asks the tasks
    // where its index stands before it plans a round.
    st.planner->start_resuming();
  }
  msg::join_job req{caf::actor_cast<caf::actor>(self), st.consumer_id, st.start.consumer_index};
  if (st.planner) { // a restarted dispatcher's job rebuilds the rounds from what we know
    auto known = st.planner->known_schedule();
    req.known_active = std::move(known.active);
    req.known_gone = std::move(known.gone);
    req.known_lost = std::move(known.lost);
  }
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

void try_rejoin(self_ptr self);

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
  st.rejoin_deadline = self->clock().now() + st.start.dispatcher_reconnect_timeout;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
    st.start.dispatcher_reconnect_timeout);
  log::warning(kLog, "job " + std::to_string(st.job_id) + ": lost the dispatcher (" + why +
                       "); reading on from the workers and re-joining the job once the "
                       "dispatcher at " + st.start.dispatcher_address + " is back (up to " +
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
  finish(self, Status{why.code() == ErrorCode::not_found ? ErrorCode::not_found
                                                         : ErrorCode::unavailable,
                      "job " + std::to_string(st.job_id) +
                        ": the dispatcher did not come back with the job (" + why.message() +
                        "); elements may be missing"});
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
  auto left = std::max<caf::timespan>(st.rejoin_deadline - self->clock().now(),
                                      std::chrono::milliseconds(1));
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
      self->request(st.dispatcher, st.start.connect_timeout,
                    msg::client_hello{st.start.protocol_version, "consumer", st.start.auth_token})
        .then(
          [self](msg::dispatcher_hello&) { register_then_get_job(self); },
          [self](caf::error& err) {
            finish(self, msg::to_status(err, "handshake with the dispatcher"));
          });
    });
}

consumer_full_actor::behavior_type consumer_impl(self_ptr self) {
  self->state.start.sink->attach(caf::actor_cast<msg::stream_actor>(self));
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    if (st.job && down.source == st.job.address()) {
      if (down.reason != caf::exit_reason::remote_link_unreachable &&
          ask_again_for_named_job(self, caf::to_string(down.reason)))
        return;
      // A job lives until its consumers are done (production ending is not enough): losing it
      // before this consumer finished means re-joining it, or failing loudly.
      if (st.core.finished()) {
        check_finished(self);
        return;
      }
      if (!st.start.dispatcher_address.empty() &&
          down.reason == caf::exit_reason::remote_link_unreachable) {
        start_rejoin(self, caf::to_string(down.reason));
        return;
      }
      if (!st.core.finished())
        finish(self, Status{ErrorCode::unavailable,
                            "lost job " + std::to_string(st.job_id) +
                              " (the dispatcher is gone or unreachable: " +
                              caf::to_string(down.reason) + ")"});
      return;
    }
    if (auto t = st.task_by_addr.find(down.source); t != st.task_by_addr.end()) {
      unreachable(self, t->second, "connection lost: " + caf::to_string(down.reason));
      if (!st.core.error().ok()) {
        Status err = st.core.error();
        if (st.rejoining) // the likelier cause than the worker: say so
          err = Status{err.code(), err.message() +
                                     "; the job's dispatcher was gone at the time, and a "
                                     "dispatcher that restarts without its --work-dir state "
                                     "stops the tasks of jobs it does not know"};
        finish(self, err);
        return;
      }
      pump(self);
      check_finished(self);
    }
  });
  // Placement: the reference checks target_workers when the reader starts (a LOCAL reader
  // needs a worker in this process).
  auto& st0 = self->state;
  auto target = parse_target_workers(st0.start.job_request.target_workers);
  Status placement = target.ok() ? check_target_workers(*target, !LocalWorkers::empty(),
                                                        st0.start.job_request.policy,
                                                        static_cast<bool>(st0.start.job_request.num_consumers))
                                 : target.status();
  if (!placement.ok())
    finish(self, placement);
  else {
    st0.target = *target;
    bootstrap(self);
  }
  return {
    [self](msg::ack_atom, uint64_t n) {
      if (self->state.planner)
        self->state.planner->on_ack(static_cast<int64_t>(n));
      else
        self->state.core.on_ack(n);
      pump(self);
      note_wait(self);
    },
    [self](msg::stats_atom) { return stats_of(self); },
    [self](msg::bulk_ready_atom, uint64_t channel, uint64_t server_channel) {
      auto& st = self->state;
      const std::string* worker = nullptr;
      WorkerLink* link = current_channel(self, channel, worker);
      if (!link)
        return;
      link->bulk = WorkerLink::Bulk::ready;
      link->server_channel = server_channel;
      for (auto task : tasks_of(self, *worker))
        st.core.set_bulk(task, true);
      log::debug(kLog, "bulk channel " + std::to_string(channel) + " to worker " + *worker + " open");
      pump(self);
    },
    // An in-process channel's frame (target_workers LOCAL): the task's encoded buffer itself,
    // header first; it becomes the elements' storage as a received one does (no copy).
    [self](msg::bulk_frame_atom, uint64_t channel, std::vector<char>& frame) {
      auto& st = self->state;
      if (st.done || !st.channel_worker.count(channel))
        return;
      bulk::FrameHeader h;
      auto bad = frame.size() < bulk::kFrameHeaderBytes
                   ? std::optional<std::string>{"a frame shorter than its header"}
                   : bulk::read_frame_header(frame.data(), bulk::kFrameHeaderBytes, h);
      if (!bad && h.length != frame.size() - bulk::kFrameHeaderBytes)
        bad = "a frame whose header and size disagree";
      if (bad) {
        finish(self, Status{ErrorCode::data_loss, "in-process bulk channel to worker " +
                                                    st.channel_worker[channel] + ": " + *bad});
        return;
      }
      LocalWorkers::note_frame();
      const std::size_t size = frame.size();
      const char* data = nullptr;
      StorageOwner buf = pooled_storage(std::move(frame), &data);
      std::string_view view{data + bulk::kFrameHeaderBytes, size - bulk::kFrameHeaderBytes};
      ReadyElements elements;
      Status s = st.core.on_frame(h.task, h.batch_seq, h.index, h.count, std::move(buf), view,
                                  elements);
      if (s.ok() && !elements.empty())
        s = st.start.sink->push(std::move(elements), push_stats(self, h.task));
      if (!s.ok()) {
        finish(self, s);
        return;
      }
      pump(self);
      note_wait(self);
      check_finished(self);
    },
    [self](msg::bulk_frame_atom, uint64_t channel, uint64_t task, uint64_t batch_seq, uint32_t index,
           uint32_t count, std::vector<char>& bytes) {
      auto& st = self->state;
      if (st.done || !st.channel_worker.count(channel))
        return;
      // The received buffer becomes the storage of the element(s) it holds: no copy. It goes
      // back to the buffer pool (pipeline/tensor/buffer_pool.hpp) when the last tensor viewing it is gone.
      const std::size_t size = bytes.size();
      const char* data = nullptr;
      StorageOwner buf = pooled_storage(std::move(bytes), &data);
      std::string_view view{data, size};
      ReadyElements elements;
      Status s = st.core.on_frame(task, batch_seq, index, count, std::move(buf), view, elements);
      if (s.ok() && !elements.empty())
        s = st.start.sink->push(std::move(elements), push_stats(self, task));
      if (!s.ok()) {
        finish(self, s);
        return;
      }
      pump(self);
      note_wait(self);
      check_finished(self);
    },
    [self](msg::bulk_lost_atom, uint64_t channel, std::string& why) {
      auto& st = self->state;
      const std::string* worker = nullptr;
      WorkerLink* link = current_channel(self, channel, worker);
      if (!link || link->bulk == WorkerLink::Bulk::lost) // (each connection of a channel reports it)
        return;
      link->bulk = WorkerLink::Bulk::lost; // stays inline from now on
      bool all_retired = true;
      for (auto task : tasks_of(self, *worker)) {
        st.core.set_bulk(task, false);
        all_retired = all_retired && st.core.retired(task);
      }
      if (!all_retired) // (a drained worker that left closes it too)
        log::warning(kLog, "bulk channel to worker " + *worker + " lost: " + why);
      self->delayed_send(self, kBulkLossGrace, msg::bulk_lost_atom_v, channel);
      pump(self);
    },
    [self](msg::bulk_lost_atom, uint64_t channel) { // the grace period after a loss is over
      auto& st = self->state;
      auto w = st.channel_worker.find(channel);
      if (w == st.channel_worker.end() || st.done)
        return;
      Status s = st.core.on_bulk_lost(tasks_of(self, w->second),
                                      "frames announced on it never arrived");
      if (!s.ok())
        finish(self, s);
    },
    [self](msg::cancel_atom) {
      auto& st = self->state;
      // Batches are acknowledged as they arrive (so that no reader's end waits on another's
      // pace), so what this reader received and its application never took is gone for the
      // job's other readers too: say so instead of losing it in silence.
      if (!st.done && st.start.job_request.job_name && !st.planner &&
          st.core.unacked_elements() > 0)
        log::warning(kLog, "job " + std::to_string(st.job_id) + " (\"" +
                             *st.start.job_request.job_name + "\"): this consumer leaves with " +
                             std::to_string(st.core.unacked_elements()) +
                             " element(s) it received but its application did not take; the "
                             "job's other consumers do not get them");
      finish(self, Status{ErrorCode::cancelled, "the stream was cancelled"});
    },
  };
}

// The consumer actor. A worker of this process (read in-process: LOCAL, AUTO) sends to it from
// another actor system: HomeScheduled keeps it on its own system's threads (test: "AUTO reads
// this process's worker in-process and another over TCP" in test/unit/actors/placement_test.cpp).
class ConsumerActor
  : public HomeScheduled<caf::stateful_actor<consumer_state, consumer_full_actor::base>> {
public:
  using super = HomeScheduled<caf::stateful_actor<consumer_state, consumer_full_actor::base>>;

  ConsumerActor(caf::actor_config& cfg, ConsumerStart start) : super(cfg) {
    state.start = std::move(start);
    state.core = ConsumerCore{state.start.limits};
  }

  behavior_type make_behavior() override { return consumer_impl(this); }
};

} // namespace

ConsumerStart consumer_start(const DistributeOptions& options, std::shared_ptr<Transport> transport,
                             std::chrono::milliseconds connect_timeout,
                             uint32_t protocol_version) {
  ConsumerStart start;
  start.transport = std::move(transport);
  start.limits.max_outstanding = options.max_outstanding_requests.value_or(65536);
  start.limits.max_bytes = options.max_buffered_bytes;
  start.request_timeout = caf::timespan{options.request_timeout};
  start.task_refresh = caf::timespan{options.task_refresh_interval};
  start.connect_timeout = caf::timespan{connect_timeout};
  start.protocol_version = protocol_version == 0 ? msg::kProtocolVersion : protocol_version;
  start.compression =
    options.compression == "NONE" ? Compression::none : Compression::automatic;
  start.job_request.policy = options.policy;
  start.job_request.target_workers = options.target_workers;
  if (options.cross_trainer_cache) {
    start.job_request.cross_trainer_cache = options.cross_trainer_cache->finite_epoch
                                              ? msg::CacheSharing::whole_epoch
                                              : msg::CacheSharing::window;
    start.limits.greet_tasks = options.cross_trainer_cache->finite_epoch;
    start.trainer_id = options.cross_trainer_cache->trainer_id;
  }
  start.job_request.expected_consumers = options.expected_consumers.value_or(1);
  static_assert(kNextIteration == msg::kNextIteration);
  start.job_request.iteration = options.iteration;
  if (options.num_consumers) {
    start.job_request.num_consumers = *options.num_consumers;
    start.consumer_index = options.consumer_index.value_or(-1);
  }
  start.round_timeout = caf::timespan{options.round_timeout};
  if (options.job_name)
    start.job_request.job_name = *options.job_name;
  return start;
}

msg::stream_actor spawn_consumer(caf::actor_system& sys, ConsumerStart start) {
  return caf::actor_cast<msg::stream_actor>(sys.spawn<ConsumerActor>(std::move(start)));
}

} // namespace conveyor::actors
