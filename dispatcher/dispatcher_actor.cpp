#include "dispatcher/dispatcher_actor.hpp"

#include "dispatcher/dispatcher_actor_state.hpp"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <algorithm>
#include <set>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "net/admission.hpp"
#include "worker/cross_trainer_cache.hpp"
#include "dispatcher/dispatcher_state.hpp"
#include "dispatcher/job_actor.hpp"
#include "dispatcher/journal.hpp"
#include "net/local_sender.hpp"
#include "net/node_key.hpp"
#include "node/log.hpp"
#include "consumer/placement.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::actors::dispatcher_detail {

int64_t now_us(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

// Runs `fn` once every record appended so far is durable (at once when none is pending).
void after_durable(self_ptr self, std::function<void()> fn) {
  auto& st = self->state;
  if (!st.journal || st.durable_seq >= st.last_seq) {
    fn();
    return;
  }
  st.waiting.emplace_back(st.last_seq, std::move(fn));
}

// The one persist-then-apply path. Applies the record to the in-memory state (a refusal here
// is a dispatcher bug — requests are validated before their records are made — so it is logged
// and reported, never ignored), appends it to the journal, and runs `then` (the record's
// effects) once it is durable. Replies go through reply_when_durable, so nobody learns of a
// change before it is on disk.
Status persist(self_ptr self, msg::Update update, std::function<void()> then) {
  auto& st = self->state;
  Status s = st.cluster.apply(update);
  if (!s.ok()) {
    log::error(kLog, "internal: an update record was refused: " + s.to_string());
    return s;
  }
  if (st.journal) {
    auto seq = ++st.last_seq;
    caf::weak_actor_ptr weak{self->ctrl()};
    st.journal->append(update, [weak, seq](const Status& status) {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<caf::actor>(strong), msg::synced_atom_v, seq,
                       status.ok() ? std::string{} : status.to_string());
    });
  }
  if (then)
    after_durable(self, std::move(then));
  return Status::OK();
}

void on_synced(self_ptr self, uint64_t seq, const std::string& error) {
  auto& st = self->state;
  if (!error.empty()) {
    // Memory is ahead of the disk now: acknowledging anything more could lose it on restart.
    log::error(kLog, "FATAL: the journal in " + st.journal->dir() + " failed (" + error +
                       "); stopping so that no unrecorded change is acknowledged");
    std::_Exit(74);
  }
  st.durable_seq = std::max(st.durable_seq, seq);
  while (!st.waiting.empty() && st.waiting.front().first <= st.durable_seq) {
    auto fn = std::move(st.waiting.front().second);
    st.waiting.pop_front();
    fn();
  }
}

// Answers a request once everything it may depend on is durable; `make` builds the answer
// then (so that handles created by earlier effects are in it).
template <class T>
caf::result<T> reply_when_durable(self_ptr self, std::function<caf::expected<T>()> make) {
  auto& st = self->state;
  if (!st.journal || st.durable_seq >= st.last_seq) {
    auto r = make();
    if (r)
      return std::move(*r);
    return std::move(r.error());
  }
  auto rp = self->make_response_promise<T>();
  st.waiting.emplace_back(st.last_seq, [rp, make]() mutable {
    auto r = make();
    if (r)
      rp.deliver(std::move(*r));
    else
      rp.deliver(std::move(r.error()));
  });
  return rp;
}

// Runs `then` once everything journaled so far is durable (at once without a journal).
void when_durable(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  if (!st.journal || st.durable_seq >= st.last_seq)
    then();
  else
    st.waiting.emplace_back(st.last_seq, std::move(then));
}

std::string version_refusal(uint32_t ours, uint32_t theirs, const std::string& who) {
  return "protocol version mismatch: the dispatcher speaks version " + std::to_string(ours) +
         ", the " + who + " version " + std::to_string(theirs);
}

void check_heartbeats(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  std::vector<msg::worker_id_t> late;
  for (const auto& [id, w] : st.workers)
    if (now - w.last_heartbeat > st.start.worker_timeout)
      late.push_back(id);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(st.start.worker_timeout);
  for (auto id : late)
    remove_worker(self, id, "no heartbeat for " + std::to_string(ms.count()) + " ms");
}

// A long journal is folded into a snapshot so that a restart stays fast.
void compact_if_due(self_ptr self) {
  auto& st = self->state;
  if (!st.journal || !st.journal->should_compact())
    return;
  if (auto s = st.journal->compact(st.cluster); !s.ok())
    log::warning(kLog, "compacting the journal failed (it keeps growing; retried later): " +
                         s.to_string());
}

// Start-up from the journal's replayed state: job actors for the unfinished jobs, and every
// known worker counted as freshly heartbeated until it registers again (or times out).
void restore(self_ptr self) {
  auto& st = self->state;
  if (!st.start.restored)
    return;
  st.cluster = *st.start.restored;
  st.start.restored.reset();
  auto now = self->clock().now();
  for (const auto* w : st.cluster.workers())
    st.workers[w->id] = LiveWorker{msg::worker_actor{}, now};
  std::vector<const JobEntry*> jobs = st.cluster.unfinished_jobs();
  int running = 0;
  for (const auto* job : jobs) {
    auto js = job_start(self, *job);
    if (!js.ok()) {
      log::error(kLog, "cannot restart job " + std::to_string(job->id) + ": " +
                         js.status().to_string() + "; releasing it");
      (void)persist(self, msg::ReleaseJobRecord{job->id, now_us(self)});
      continue;
    }
    js->restored = true;
    auto id = js->id;
    run_job(self, std::move(js).value());
    // The job knows its tasks at once, also those whose workers are not back yet: until they
    // come back or are removed after worker_timeout, its production is not over.
    if (auto j = st.jobs.find(id); j != st.jobs.end())
      for (const auto* t : st.cluster.tasks_of_job(id))
        if (const auto* w = st.cluster.worker(t->worker)) {
          msg::add_task add{t->id, t->worker, w->address, {}};
          set_off_slot(st, add); // a resumed OFF read's slot (journal format 15)
          self->send(j->second, add);
        }
    ++running;
  }
  restore_snapshots(self);
  auto snapshot = st.cluster.snapshot();
  // `conveyor status` lists datasets from these facts, computed at registration: without them
  // a restored dispatcher listed 0 datasets (issue 33 item 6).
  for (const auto& d : snapshot.datasets)
    if (const auto* entry = st.cluster.dataset(d.id))
      (void)dataset_facts(self, *entry);
  log::info(kLog, "restored from the journal: " + std::to_string(snapshot.datasets.size()) +
                    " dataset(s), " + std::to_string(snapshot.jobs.size()) + " job(s) (" +
                    std::to_string(running) + " running again), " +
                    std::to_string(st.workers.size()) + " worker(s) expected to register again");
}
} // namespace conveyor::actors::dispatcher_detail

namespace conveyor::actors {

using namespace dispatcher_detail;

dispatcher_full_actor spawn_dispatcher(caf::actor_system& sys, DispatcherStart start) {
  return sys.spawn(
    [](self_ptr self, DispatcherStart start) -> dispatcher_full_actor::behavior_type {
      self->state.start = std::move(start);
      self->state.started = self->clock().now();
      self->state.journal = self->state.start.journal;
      restore(self);
      start_autoscaler(self);
      self->set_down_handler([self](caf::down_msg& down) {
        auto& st = self->state;
        for (const auto& [id, w] : st.workers)
          if (w.handle.address() == down.source) {
            remove_worker(self, id, "connection lost: " + caf::to_string(down.reason));
            return;
          }
      });
      // Job actors are linked so that they end with the dispatcher; a job that ends on its own
      // (released) must not take the dispatcher down.
      self->set_exit_handler([self](caf::exit_msg& exit) {
        if (self->state.job_addrs.erase(exit.source))
          return;
        self->quit(exit.reason);
      });
      auto period = std::max<caf::timespan>(self->state.start.worker_timeout / 4,
                                            std::chrono::milliseconds(10));
      self->delayed_send(self, period, msg::tick_atom_v);
      return {
        [self](msg::client_hello& hello) -> caf::result<msg::dispatcher_hello> {
          auto ours = self->state.start.protocol_version;
          if (hello.protocol_version != ours) {
            auto why = version_refusal(ours, hello.protocol_version, "client");
            log::warning(kLog, "refused " + (hello.client.empty() ? "a client" : hello.client) +
                                 ": " + why);
            return msg::make_error(ErrorCode::version_mismatch, why);
          }
          if (auto admitted = check_admission(self->state.start.auth_token, hello.auth_token,
                                              hello.client.empty() ? "client" : hello.client);
              !admitted.ok()) {
            log::warning(kLog, "refused " + (hello.client.empty() ? "a client" : hello.client) +
                                 ": " + admitted.message());
            return msg::to_error(admitted);
          }
          const auto& sender = self->current_sender();
          if (!sender) { // CAF lost the connection's route: the answer cannot reach the client
            log::warning(kLog, "a client_hello arrived without a sender (the middleman lost its "
                               "connection's route); that client will time out");
            return msg::make_error(ErrorCode::unavailable, "no sender");
          }
          self->state.admitted_nodes.insert(sender->node());
          if (!self->state.start.auth_token.empty())
            admit_sender_node(self); // and the frame guard lifts its pre-auth cap
          return msg::dispatcher_hello{ours};
        },
        [self](msg::register_dataset& req) -> caf::result<msg::dataset_registered> {
          auto r = register_dataset(self, req);
          return reply_when_durable<msg::dataset_registered>(self, [r] { return r; });
        },
        [self](msg::get_or_create_job& req) -> caf::result<msg::job_info> {
          auto r = get_or_create_job(self, req);
          if (!r)
            return reply_when_durable<msg::job_info>(self, [r] { return r; });
          auto id = r->job;
          return reply_when_durable<msg::job_info>(self,
                                                   [self, id] { return job_info_of(self, id); });
        },
        [self](msg::get_element_spec& req) -> caf::result<msg::element_spec_reply> {
          auto r = element_spec_of(self, req.dataset);
          if (!r.ok())
            return msg::to_error(r.status());
          return *r;
        },
        [self](msg::rejoin_job& req) -> caf::result<msg::job_info> {
          auto id = req.job;
          return reply_when_durable<msg::job_info>(self,
                                                   [self, id] { return job_info_of(self, id); });
        },
        [self](msg::register_worker& req) -> caf::result<msg::worker_registered> {
          auto r = register_worker(self, req);
          // A nudge is heeded only once the worker holds its registration reply, so it follows
          // the reply (delivered first, in order on the same connection).
          auto rp = self->make_response_promise<msg::worker_registered>();
          when_durable(self, [self, rp, r, worker = req.worker]() mutable {
            if (!r) {
              rp.deliver(r.error());
              return;
            }
            rp.deliver(*r);
            nudge_if_snapshots_wait(self, worker);
          });
          return rp;
        },
        [self](msg::persist_splits& req) -> caf::result<caf::ok_atom> {
          auto job = req.record.job;
          Status s = Status::OK();
          if (!self->state.cluster.job(job))
            s = not_found("job " + std::to_string(job) + " does not exist");
          else
            s = persist(self, req.record);
          return reply_when_durable<caf::ok_atom>(self, [s]() -> caf::expected<caf::ok_atom> {
            if (!s.ok())
              return msg::to_error(s);
            return caf::ok_atom_v;
          });
        },
        [self](msg::synced_atom, uint64_t seq, std::string& error) { on_synced(self, seq, error); },
        [self](msg::start_snapshot& req) -> caf::result<msg::snapshot_started> {
          auto r = start_snapshot(self, req);
          return reply_when_durable<msg::snapshot_started>(self, [r] { return r; });
        },
        [self](msg::get_snapshot_splits& req) -> caf::result<msg::snapshot_splits> {
          auto r = snapshot_splits_for(self, req);
          return reply_when_durable<msg::snapshot_splits>(self, [r] { return r; });
        },
        [self](msg::worker_heartbeat& hb) -> caf::result<msg::heartbeat_ack> {
          auto& st = self->state;
          auto w = st.workers.find(hb.worker);
          if (w == st.workers.end() || !w->second.handle) // unknown, or restored: register again
            return msg::heartbeat_ack{false};
          w->second.last_heartbeat = self->clock().now();
          w->second.tenants = std::move(hb.tenants);
          if (hb.draining) // repeated with every heartbeat; the jobs ignore what they know
            for (const auto* t : st.cluster.tasks_of_worker(hb.worker))
              if (auto j = st.jobs.find(t->job); j != st.jobs.end())
                self->send(j->second, msg::drain_task{t->id});
          msg::heartbeat_ack ack{true};
          ack.snapshot_streams = snapshot_heartbeat(self, hb.worker, hb.snapshot_streams,
                                                    hb.max_snapshot_streams, hb.draining);
          // New streams are journaled before their worker learns of them.
          return reply_when_durable<msg::heartbeat_ack>(
            self, [ack]() -> caf::expected<msg::heartbeat_ack> { return ack; });
        },
        [self](msg::get_status& req) { return get_status(self, req); },
        [self](msg::task_finished& done) {
          const auto* task = self->state.cluster.task(done.task);
          if (task && !task->finished)
            (void)persist(self,
                          msg::FinishTaskRecord{done.task, done.error, now_us(self)}); // logged
        },
        [self](msg::job_finished&) {
          // Jobs end with their consumers (job_released); kept for the interface.
        },
        [self](msg::job_released& released) {
          auto& st = self->state;
          if (const auto* entry = st.cluster.job(released.job)) {
            auto js = std::move(released.final_status);
            js.id = released.job;
            js.name = entry->name;
            js.dataset = entry->dataset;
            js.mode = to_string(entry->policy);
            js.finished = true;
            js.tenant = entry->tenant;
            js.tenant_weight = entry->tenant_weight;
            st.finished_jobs.push_back(std::move(js));
            while (st.finished_jobs.size() > kMaxFinishedJobs)
              st.finished_jobs.pop_front();
          }
          if (const auto* entry = st.cluster.job(released.job); entry && !entry->released) {
            (void)persist(self, msg::ReleaseJobRecord{released.job, now_us(self)}); // logged
            if (const auto* kept = st.cluster.job(released.job); kept && kept->released)
              st.released_at[released.job] = self->clock().now(); // a named job: until GC
          }
          st.jobs.erase(released.job);
        },
        [self](msg::tick_atom) {
          // Its own timer only: from a peer it would drive journal compaction at will.
          if (!check_local_sender(self, kLog, "tick_atom", "the dispatcher itself").ok())
            return;
          check_heartbeats(self);
          check_snapshots(self);
          forget_released_jobs(self);
          compact_if_due(self);
          estimate_if_due(self);
          auto period = std::max<caf::timespan>(self->state.start.worker_timeout / 4,
                                                std::chrono::milliseconds(10));
          self->delayed_send(self, period, msg::tick_atom_v);
        },
      };
    },
    std::move(start));
}

} // namespace conveyor::actors
