#include "dispatcher/job_actor.hpp"

#include <algorithm>
#include <deque>
#include <map>

#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "consumer/placement.hpp"
#include "node/log.hpp"
#include "node/hooks.hpp"
#include "coordinated/round_robin.hpp"
#include "messages/all.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "dispatcher";

struct HeldPoll {
  caf::typed_response_promise<msg::task_list> promise;
  uint64_t token = 0;
  caf::actor_clock::time_point due;
};

struct HeldSplits {
  caf::typed_response_promise<msg::splits_reply> promise;
  msg::get_splits request;
  uint64_t token = 0;
  caf::actor_clock::time_point due;
};

// Handles and timers only: every fact about tasks, consumers and splits is in st.start.core.
struct job_state {
  static inline const char* name = "conveyor.job";
  JobStart start;
  std::map<msg::task_id_t, msg::task_actor> task_handles;
  std::map<msg::task_id_t, msg::worker_actor> workers;
  std::map<msg::task_id_t, std::vector<std::string>> worker_tags; // placement: per task
  std::map<caf::actor_addr, msg::consumer_id_t> consumer_addrs;
  std::deque<HeldPoll> polls;
  std::deque<HeldSplits> held_splits;
  uint64_t next_token = 1;
  uint64_t gc_token = 0; // only the latest gc timer counts
  caf::actor_clock::time_point gc_due;
  bool released = false;
  hooks::JobSplitHook planted_bug; // inert unless the simulator installs hooks (node/hooks.hpp)
  // Observability (`conveyor status`, metrics): what consumers reported on their polls.
  std::map<msg::consumer_id_t, msg::consumer_progress> progress;
  msg::consumer_progress departed; // sums of consumers that left
  caf::actor_clock::time_point created;
  // Delivered totals sampled as the consumers report (at most one a second, the last ~10 s):
  // the rate status shows is over that window, whoever asks and however seldom, and falls to 0
  // once no consumer reads.
  struct RateSample {
    caf::actor_clock::time_point at;
    int64_t elements = 0;
    int64_t bytes = 0;
  };
  std::deque<RateSample> rate_samples;

  // Coordinated reads only (start.num_consumers > 0): start rounds, fence, consumer indices.
  std::unique_ptr<RoundRobinJob> rounds;

  JobCore& core() { return *start.core; }
  std::string label() const {
    std::string l = "job " + std::to_string(start.id);
    if (!start.name.empty())
      l += " (\"" + start.name + "\")";
    return l;
  }
};

using self_ptr = job_full_actor::stateful_pointer<job_state>;

// The task list's version: the core's plus the rounds' (both only grow).
uint64_t list_version(job_state& st) {
  return st.core().version() + (st.rounds ? st.rounds->version() : 0);
}

void add_progress(msg::consumer_progress& sum, const msg::consumer_progress& p) {
  sum.elements += p.elements;
  sum.bytes += p.bytes;
  sum.wait_worker_ns += p.wait_worker_ns;
  sum.wait_network_ns += p.wait_network_ns;
  sum.wait_split_ns += p.wait_split_ns;
  sum.wait_credit_ns += p.wait_credit_ns;
  sum.elapsed_ns += p.elapsed_ns;
}

msg::job_status job_status_of(self_ptr self) {
  auto& st = self->state;
  msg::job_status s;
  s.id = st.start.id;
  s.name = st.start.name;
  s.dataset = st.start.dataset;
  s.mode = to_string(st.start.policy);
  s.finished = st.core().production_ended();
  s.waiting_for = st.core().waiting_for();
  s.consumers = static_cast<int64_t>(st.core().live_consumers());
  s.tasks = static_cast<int64_t>(st.workers.size());
  msg::consumer_progress sum = st.departed;
  for (const auto& [id, p] : st.progress)
    add_progress(sum, p);
  s.elements = sum.elements;
  s.bytes = sum.bytes;
  s.waiting = sum;
  const auto now = self->clock().now();
  s.age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - st.created).count();
  if (!st.rate_samples.empty()) {
    // The base: the newest sample at least 10 s old now (the oldest while the job is younger).
    const auto* base = &st.rate_samples.front();
    for (const auto& sample : st.rate_samples)
      if (now - sample.at >= std::chrono::seconds(10))
        base = &sample;
    const double secs = std::chrono::duration<double>(now - base->at).count();
    if (secs > 0) {
      s.elements_per_s = static_cast<double>(sum.elements - base->elements) / secs;
      s.bytes_per_s = static_cast<double>(sum.bytes - base->bytes) / secs;
    }
  }
  if (st.core().dynamic()) {
    s.epoch = st.core().epoch();
    s.splits_handed_out = st.core().splits_handed_out();
  }
  return s;
}

// One more sample of the delivered totals for the status rate (job_state::rate_samples): kept
// are the newest sample at least 10 s old (the window's base) and the ones after it.
void sample_rate(self_ptr self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  if (!st.rate_samples.empty() && now - st.rate_samples.back().at < std::chrono::seconds(1))
    return;
  msg::consumer_progress sum = st.departed;
  for (const auto& [id, p] : st.progress)
    add_progress(sum, p);
  st.rate_samples.push_back({now, sum.elements, sum.bytes});
  while (st.rate_samples.size() > 1 && now - st.rate_samples[1].at >= std::chrono::seconds(10))
    st.rate_samples.pop_front();
}

int64_t now_ns(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

msg::task_list current_list(job_state& st) {
  msg::task_list list;
  list.version = list_version(st);
  list.job_finished = st.core().production_ended();
  list.error = st.core().error();
  for (const auto* t : st.core().listed()) {
    auto h = st.task_handles.find(t->id);
    if (h == st.task_handles.end())
      continue;
    list.tasks.push_back(msg::task_info{t->id, t->worker, t->worker_address, h->second});
    if (auto tags = st.worker_tags.find(t->id); tags != st.worker_tags.end())
      list.tasks.back().worker_tags = tags->second;
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

// CAF 0.17's clock holds a strong reference to the receiver of a delayed message until it fires:
// a job that ended lived on until its longest timer fired (the GC timer, a minute), about 2.4 KB
// of a busy dispatcher per job. So timers fire in steps of at most kTimerStep, and the handler
// checks whether the due time came (wake_at again if not).
constexpr caf::timespan kTimerStep = std::chrono::seconds(1);

template <class... Ts>
void wake_at(self_ptr self, caf::actor_clock::time_point due, const Ts&... xs) {
  auto left = std::clamp<caf::timespan>(due - self->clock().now(), caf::timespan{0}, kTimerStep);
  self->delayed_send(self, left, xs...);
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

// Answers a get_splits now, or returns false when it must wait.
bool try_splits(self_ptr self, const msg::get_splits& req,
                caf::typed_response_promise<msg::splits_reply>& promise) {
  auto& st = self->state;
  auto answer = st.core().get_splits(req.task, req.epoch, req.max);
  if (!answer.ok()) {
    promise.deliver(msg::to_error(answer.status().with_context(st.label())));
    return true;
  }
  if (answer->hold)
    return false;
  msg::splits_reply reply{std::move(answer->splits), answer->end_of_splits, answer->empty_epoch};
  if (reply.end_of_splits) {
    Split extra;
    bool end = true;
    st.planted_bug.apply(req.task, extra, end);
    if (!end) {
      reply.end_of_splits = false;
      reply.splits.push_back(extra);
    }
  } else {
    bool end = false;
    st.planted_bug.apply(req.task, reply.splits.back(), end);
  }
  if (!st.start.journal_splits || reply.splits.empty()) {
    promise.deliver(std::move(reply));
    return true;
  }
  // Journal hook: the hand-out position after this answer is durable before its splits leave
  // (a restarted dispatcher resumes the job's split provider there).
  auto& core = st.core();
  auto pos = core.position();
  msg::SplitPositionRecord record{st.start.id,        core.epoch(),
                                  pos.epoch,          pos.next_index,
                                  core.splits_handed_out(),
                                  std::chrono::duration_cast<std::chrono::microseconds>(
                                    self->clock().now().time_since_epoch())
                                    .count(),
                                  {},
                                  {}};
  for (const auto& s : reply.splits)
    record.handed.push_back(to_journal(s));
  self->request(st.start.dispatcher, st.start.request_timeout, msg::persist_splits{record})
    .then([promise, reply](caf::ok_atom) mutable { promise.deliver(std::move(reply)); },
          [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
  return true;
}

// Journal hook: splits finished (every element acknowledged) are no longer handed out again
// after a dispatcher restart. Nothing waits for this record: if it is lost in a crash, the
// restarted job hands those splits out again and the consumer drops the repeats.
void journal_finished(self_ptr self, const std::vector<SplitKey>& finished) {
  auto& st = self->state;
  msg::SplitPositionRecord record;
  record.job = st.start.id;
  record.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                     self->clock().now().time_since_epoch())
                     .count();
  for (const auto& [epoch, index] : finished)
    record.finished.push_back(msg::JournalSplitKey{epoch, index});
  self->request(st.start.dispatcher, st.start.request_timeout, msg::persist_splits{record})
    .then([](caf::ok_atom) {},
          [self](caf::error& err) {
            log::warning(kLog, self->state.label() + ": could not journal finished splits (" +
                                 caf::to_string(err) +
                                 "); after a dispatcher restart they are read again");
          });
}

void serve_held_splits(self_ptr self) {
  auto& held = self->state.held_splits;
  for (auto it = held.begin(); it != held.end();)
    it = try_splits(self, it->request, it->promise) ? held.erase(it) : std::next(it);
}

// Whole-epoch cross-trainer sharing: tells `tasks` (all listed ones when empty) of trainers that
// joined or left (msg::cache_trainers).
void tell_trainers(self_ptr self, std::vector<std::string> joined, std::vector<std::string> left,
                   std::vector<msg::task_actor> tasks = {}) {
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
  def.splits = caf::actor_cast<msg::split_source_actor>(self);
  def.num_workers = add.num_workers;
  def.worker_index = add.worker_index;
  def.num_consumers = st.start.num_consumers;
  st.workers[add.task] = add.handle;
  auto task = add.task;
  auto address = add.worker_address;
  self->request(add.handle, st.start.request_timeout, msg::assign_task{std::move(def), st.start.auth_token})
    .then(
      [self](msg::task_assigned& reply) {
        auto& st = self->state;
        if (!st.core().task(reply.task))
          return; // removed meanwhile
        auto v = list_version(st);
        st.task_handles[reply.task] = reply.handle;
        st.core().task_assigned(reply.task);
        tell_trainers(self, st.core().trainers(), {}, {reply.handle}); // before any consumer asks it
        if (st.rounds && st.rounds->add_task(reply.task) && st.rounds->pending() > 0)
          log::info(kLog, st.label() + ": task " + std::to_string(reply.task) +
                            " joins the coordinated rounds from round " +
                            std::to_string(st.rounds->fence()) + " once every consumer is there");
        changed(self, v);
      },
      [self, task, address](caf::error& err) {
        auto& st = self->state;
        auto status = msg::to_status(err, "assigning task " + std::to_string(task) +
                                            " to worker " + address);
        log::warning(kLog, st.label() + ": " + status.to_string());
        st.workers.erase(task);
        auto v = list_version(st);
        st.core().task_lost(task, status.to_string());
        rounds_task_lost(self, task, status.to_string());
        self->send(st.start.dispatcher, msg::task_finished{st.start.id, task, status.to_string()});
        changed(self, v);
      });
}

// What follows a consumer's leaving (the core already counts it gone): its progress moves to
// the departed, its tasks release what it did not acknowledge, and the job may be done.
void consumer_left(self_ptr self, msg::consumer_id_t id, bool finished) {
  auto& st = self->state;
  if (auto trainer = st.core().trainer_gone(id); !trainer.empty())
    tell_trainers(self, {}, {trainer}); // its tasks' caches no longer keep elements for it
  if (auto p = st.progress.find(id); p != st.progress.end()) {
    add_progress(st.departed, p->second);
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

job_full_actor::behavior_type job_impl(self_ptr self, JobStart start) {
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
    self->state.core().first_consumer_id(static_cast<msg::consumer_id_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
        self->clock().now().time_since_epoch())
        .count()) + 1);
  // Never released before a first consumer joined — unless the consumer that created the job
  // is gone (its process died right after creating it).
  if (self->state.start.creator)
    self->monitor(self->state.start.creator);
  // Consumers heartbeat with their get_tasks long polls; check them now and then.
  arm_heartbeat_check(self);
  self->set_down_handler([self](caf::down_msg& down) {
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
      log::info(kLog, st.label() + ": lost the connection to consumer " +
                        std::to_string(c->second) + "; it has " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         st.start.client_timeout)
                                         .count()) +
                        " ms to re-join");
      st.consumer_addrs.erase(c);
      return;
    }
    drop_consumer(self, c->second, false);
  });
  return {
    [self](msg::get_splits& req) -> caf::result<msg::splits_reply> {
      auto& st = self->state;
      auto promise = self->make_response_promise<msg::splits_reply>();
      if (!try_splits(self, req, promise)) {
        auto token = st.next_token++;
        auto hold = caf::timespan{std::max<int64_t>(req.hold_ns, 1000000)};
        auto due = self->clock().now() + hold;
        st.held_splits.push_back(HeldSplits{promise, req, token, due});
        wake_at(self, due, msg::expire_atom_v, token);
      }
      return promise;
    },
    [self](msg::splits_update& up) {
      auto& st = self->state;
      auto v = list_version(st);
      std::vector<SplitKey> finished(up.finished.begin(), up.finished.end());
      std::vector<SplitKey> accepted;
      if (st.core().splits_update(up.task, finished, up.returned, &accepted))
        changed(self, v);
      if (st.start.journal_splits && !accepted.empty())
        journal_finished(self, accepted);
    },
    [self](msg::task_done& done) {
      auto& st = self->state;
      self->send(st.start.dispatcher, msg::task_finished{st.start.id, done.task, done.error});
      auto v = list_version(st);
      st.core().task_done(done.task, done.error, done.drained);
      if (st.core().production_ended())
        log::info(kLog, st.label() + ": every task ended");
      else if (auto waiting = st.core().waiting_for(); !waiting.empty())
        log::warning(kLog, st.label() + ": " + waiting);
      changed(self, v);
    },
    [self](msg::join_job& join) -> caf::result<msg::job_joined> {
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
              log::info(kLog, st.label() + ": consumer_index " +
                                std::to_string(join.consumer_index) + " rejoins; consumer " +
                                std::to_string(old) + ", which held it, lost its connection");
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
    },
    [self](msg::leave_job& leave) { drop_consumer(self, leave.consumer, leave.finished); },
    [self](msg::get_tasks& req) -> caf::result<msg::task_list> {
      auto& st = self->state;
      // Only from a consumer still joined: a report arriving after it left would count it
      // twice (its last report already moved into `departed`).
      if (req.consumer != 0 && st.core().knows_consumer(req.consumer)) {
        st.progress[req.consumer] = req.progress;
        sample_rate(self);
      }
      st.core().touch(req.consumer, now_ns(self));
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
    },
    [self](msg::add_task& add) {
      auto& st = self->state;
      auto v = list_version(st);
      bool added = st.core().add_task(add.task, add.worker, add.worker_address,
                                      add.num_workers > 0 ? add.worker_index : -1);
      const auto* task = st.core().task(add.task);
      if (added && st.rounds)
        st.rounds->expect(add.task);
      if (!add.worker_tags.empty())
        st.worker_tags[add.task] = add.worker_tags;
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
    },
    [self](msg::remove_task& rm) {
      auto& st = self->state;
      st.task_handles.erase(rm.task);
      st.workers.erase(rm.task);
      st.worker_tags.erase(rm.task);
      auto v = list_version(st);
      auto before = st.core().splits_reissued();
      if (!st.core().task_lost(rm.task, rm.reason))
        return;
      rounds_task_lost(self, rm.task, rm.reason);
      if (auto n = st.core().splits_reissued() - before; n > 0)
        log::info(kLog, st.label() + ": task " + std::to_string(rm.task) + " lost (" + rm.reason +
                          "); handing its " + std::to_string(n) + " unfinished split(s) out again");
      changed(self, v);
    },
    [self](msg::drain_task& drain) {
      auto& st = self->state;
      if (!st.rounds)
        return; // other jobs: the draining task hands its splits back itself
      auto v = list_version(st);
      if (st.rounds->retire(drain.task))
        log::info(kLog, st.label() + ": task " + std::to_string(drain.task) +
                          " leaves the coordinated rounds (its worker drains) at a round every "
                          "consumer agrees on");
      changed(self, v);
    },
    [self](msg::get_job_status&) { return job_status_of(self); },
    [self](msg::expire_atom, uint64_t token) {
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
    },
    [self](msg::gc_atom, uint64_t token) {
      auto& st = self->state;
      if (token != st.gc_token)
        return;
      if (self->clock().now() < st.gc_due) {
        wake_at(self, st.gc_due, msg::gc_atom_v, token);
        return;
      }
      auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(st.start.client_timeout);
      for (auto id : st.core().expire(now_ns(self), timeout.count())) {
        log::warning(kLog, st.label() + ": consumer " + std::to_string(id) +
                             " sent no heartbeat for " +
                             std::to_string(timeout.count() / 1000000) + " ms; dropping it");
        consumer_left(self, id, false);
        if (st.released)
          return;
      }
      auto& core = st.core();
      if (st.rounds && st.rounds->waiting_for_consumers() &&
          self->clock().now() - st.created >= st.start.client_timeout) {
        log::warning(kLog, st.label() + ": not every consumer_index joined again within " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              st.start.client_timeout)
                                              .count()) +
                             " ms of the dispatcher's restart; the coordinated rounds go on "
                             "from what the others knew");
        auto v = list_version(st);
        st.rounds->finish_recovery();
        changed(self, v);
      }
      if (st.start.restored && !core.any_joined() &&
          self->clock().now() - st.created >= st.start.client_timeout) {
        release(self, "no consumer re-joined it within " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         st.start.client_timeout)
                                         .count()) +
                        " ms of the dispatcher's restart");
        return;
      }
      if (core.consumers_done()) {
        if (core.all_finished() || st.start.name.empty()) {
          check_consumers(self);
          return;
        }
        // Named, every consumer left: released once nobody came back for job_gc_timeout.
        release(self, "no consumer for the job's GC timeout");
        return;
      }
      arm_heartbeat_check(self);
    },
  };
}

} // namespace

job_full_actor spawn_job(caf::local_actor* parent, JobStart start) {
  return parent->spawn<caf::linked>(job_impl, std::move(start));
}

} // namespace conveyor::actors
