#include "actors/job_actor.hpp"

#include <deque>
#include <map>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/job_tasks.hpp"
#include "actors/log.hpp"
#include "actors/hooks.hpp"
#include "messages/all.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "dispatcher";

struct HeldPoll {
  caf::typed_response_promise<msg::task_list> promise;
  uint64_t token = 0;
};

struct job_state {
  static inline const char* name = "conveyor.job";
  JobStart start;
  JobTasks tasks;
  std::map<msg::task_id_t, msg::task_actor> task_handles;
  std::map<msg::task_id_t, msg::worker_actor> workers;
  std::map<caf::actor_addr, msg::consumer_id_t> consumers;
  msg::consumer_id_t next_consumer = 1;
  std::deque<HeldPoll> polls;
  uint64_t next_token = 1;
  uint64_t gc_token = 0; // only the latest gc timer counts
  hooks::JobSplitHook planted_bug; // inert unless the simulator installs hooks (actors/hooks.hpp)
  // Observability (`conveyor status`, metrics): what consumers reported on their polls.
  std::map<msg::consumer_id_t, msg::consumer_progress> progress;
  msg::consumer_progress departed; // sums of consumers that left
  caf::actor_clock::time_point created;
  caf::actor_clock::time_point last_status;
  int64_t last_status_elements = 0;
  int64_t last_status_bytes = 0;

  std::string label() const {
    std::string l = "job " + std::to_string(start.id);
    if (!start.name.empty())
      l += " (\"" + start.name + "\")";
    return l;
  }
};

using self_ptr = job_full_actor::stateful_pointer<job_state>;

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
  s.finished = st.tasks.finished();
  s.consumers = static_cast<int64_t>(st.consumers.size());
  s.tasks = static_cast<int64_t>(st.workers.size());
  msg::consumer_progress sum = st.departed;
  for (const auto& [id, p] : st.progress)
    add_progress(sum, p);
  s.elements = sum.elements;
  s.bytes = sum.bytes;
  s.waiting = sum;
  const auto now = self->clock().now();
  s.age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - st.created).count();
  const double secs = std::chrono::duration<double>(now - st.last_status).count();
  if (secs > 0) {
    s.elements_per_s = static_cast<double>(sum.elements - st.last_status_elements) / secs;
    s.bytes_per_s = static_cast<double>(sum.bytes - st.last_status_bytes) / secs;
  }
  st.last_status = now;
  st.last_status_elements = sum.elements;
  st.last_status_bytes = sum.bytes;
  if (st.start.splits) {
    s.epoch = st.start.splits->epoch();
    s.splits_handed_out = st.start.splits->splits_handed_out();
  }
  return s;
}

msg::task_list current_list(const job_state& st) {
  msg::task_list list;
  list.version = st.tasks.version();
  list.job_finished = st.tasks.finished();
  for (const auto* t : st.tasks.listed()) {
    auto h = st.task_handles.find(t->id);
    if (h == st.task_handles.end())
      continue;
    list.tasks.push_back(msg::task_info{t->id, t->worker, t->worker_address, h->second});
  }
  return list;
}

void answer_polls(self_ptr self) {
  auto& st = self->state;
  if (st.polls.empty())
    return;
  auto list = current_list(st);
  for (auto& p : st.polls)
    p.promise.deliver(list);
  st.polls.clear();
}

void on_finished(self_ptr self) {
  auto& st = self->state;
  log::info(kLog, st.label() + " finished");
  self->send(st.start.dispatcher, msg::job_finished{st.start.id});
}

void arm_gc(self_ptr self, caf::timespan after) {
  auto token = ++self->state.gc_token;
  self->delayed_send(self, after, msg::gc_atom_v, token);
}

void release(self_ptr self) {
  auto& st = self->state;
  log::info(kLog, st.label() + " released (no consumers); stopping its " +
                    std::to_string(st.workers.size()) + " task(s)");
  for (const auto& [task, worker] : st.workers)
    self->send(worker, msg::stop_task{task});
  self->send(st.start.dispatcher, msg::job_released{st.start.id});
  answer_polls(self);
  self->quit();
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
  def.splits = caf::actor_cast<msg::split_source_actor>(self);
  def.num_workers = add.num_workers;
  def.worker_index = add.worker_index;
  st.workers[add.task] = add.handle;
  auto task = add.task;
  auto address = add.worker_address;
  self->request(add.handle, st.start.request_timeout, msg::assign_task{std::move(def)})
    .then(
      [self](msg::task_assigned& reply) {
        auto& st = self->state;
        if (!st.tasks.find(reply.task))
          return; // removed meanwhile
        st.task_handles[reply.task] = reply.handle;
        if (st.tasks.assigned(reply.task))
          on_finished(self);
        answer_polls(self);
      },
      [self, task, address](caf::error& err) {
        auto& st = self->state;
        auto status = msg::to_status(err, "assigning task " + std::to_string(task) +
                                            " to worker " + address);
        log::warning(kLog, st.label() + ": " + status.to_string());
        st.workers.erase(task);
        bool finished = st.tasks.remove(task);
        self->send(st.start.dispatcher, msg::task_finished{st.start.id, task, status.to_string()});
        if (finished)
          on_finished(self);
        answer_polls(self);
      });
}

job_full_actor::behavior_type job_impl(self_ptr self, JobStart start) {
  self->state.start = std::move(start);
  self->state.created = self->state.last_status = self->clock().now();
  // A job nobody joins (its client died right after creating it) is released like any other.
  arm_gc(self, self->state.start.gc_timeout);
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    if (auto c = st.consumers.find(down.source); c != st.consumers.end()) {
      if (auto p = st.progress.find(c->second); p != st.progress.end()) {
        add_progress(st.departed, p->second);
        st.progress.erase(p);
      }
    }
    if (!st.consumers.erase(down.source) || !st.consumers.empty())
      return;
    if (st.start.name.empty())
      release(self); // a private job: nobody else can read it
    else
      arm_gc(self, st.start.gc_timeout);
  });
  return {
    [self](msg::get_split& req) -> caf::result<msg::split_reply> {
      auto& st = self->state;
      if (!st.start.splits)
        return msg::make_error(ErrorCode::failed_precondition,
                               st.label() + " is not DYNAMIC; it hands out no splits");
      if (!st.tasks.find(req.task))
        return msg::make_error(ErrorCode::failed_precondition,
                               "task " + std::to_string(req.task) + " is not part of " +
                                 st.label());
      msg::split_reply reply;
      Status s = st.start.splits->next(req.epoch, reply.split, reply.end_of_splits);
      if (!s.ok())
        return msg::to_error(s.with_context(st.label()));
      st.planted_bug.apply(req.task, reply.split, reply.end_of_splits);
      if (!st.start.journal_splits)
        return reply;
      // Journal hook: the position after this hand-out is durable before the split leaves.
      auto pos = st.start.splits->position();
      msg::SplitPositionRecord record{
        st.start.id, st.start.splits->epoch(), pos.epoch, pos.next_index,
        st.start.splits->splits_handed_out(),
        std::chrono::duration_cast<std::chrono::microseconds>(
          self->clock().now().time_since_epoch())
          .count()};
      auto rp = self->make_response_promise<msg::split_reply>();
      self->request(st.start.dispatcher, st.start.request_timeout, msg::persist_splits{record})
        .then([rp, reply](caf::ok_atom) mutable { rp.deliver(std::move(reply)); },
              [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [self](msg::task_done& done) {
      auto& st = self->state;
      self->send(st.start.dispatcher, msg::task_finished{st.start.id, done.task, done.error});
      if (st.tasks.done(done.task, done.error))
        on_finished(self);
      answer_polls(self);
    },
    [self](msg::join_job& join) -> msg::job_joined {
      auto& st = self->state;
      auto id = st.next_consumer++;
      st.consumers[join.consumer.address()] = id;
      self->monitor(join.consumer);
      ++st.gc_token; // cancels a pending gc
      return msg::job_joined{id};
    },
    [self](msg::get_tasks& req) -> caf::result<msg::task_list> {
      auto& st = self->state;
      // Only from a consumer still joined: a report arriving after its down_msg would count
      // it twice (its last report already moved into `departed`).
      if (req.consumer != 0)
        for (const auto& [addr, id] : st.consumers)
          if (id == req.consumer) {
            st.progress[req.consumer] = req.progress;
            break;
          }
      if (req.known_version != st.tasks.version() || req.hold_ns <= 0)
        return current_list(st);
      auto promise = self->make_response_promise<msg::task_list>();
      auto token = st.next_token++;
      st.polls.push_back(HeldPoll{promise, token});
      self->delayed_send(self, caf::timespan{req.hold_ns}, msg::expire_atom_v, token);
      return promise;
    },
    [self](msg::add_task& add) {
      auto& st = self->state;
      if (!st.tasks.add(add.task, add.worker, add.worker_address)) {
        // Finished meanwhile: the task never runs.
        self->send(st.start.dispatcher,
                   msg::task_finished{st.start.id, add.task, "the job had finished"});
        return;
      }
      assign(self, add);
    },
    [self](msg::remove_task& rm) {
      auto& st = self->state;
      st.task_handles.erase(rm.task);
      st.workers.erase(rm.task);
      if (st.tasks.remove(rm.task))
        on_finished(self);
      answer_polls(self);
    },
    [self](msg::get_job_status&) { return job_status_of(self); },
    [self](msg::expire_atom, uint64_t token) {
      auto& polls = self->state.polls;
      for (auto it = polls.begin(); it != polls.end(); ++it) {
        if (it->token == token) {
          it->promise.deliver(current_list(self->state));
          polls.erase(it);
          return;
        }
      }
    },
    [self](msg::gc_atom, uint64_t token) {
      auto& st = self->state;
      if (token == st.gc_token && st.consumers.empty())
        release(self);
    },
  };
}

} // namespace

job_full_actor spawn_job(caf::local_actor* parent, JobStart start) {
  return parent->spawn<caf::linked>(job_impl, std::move(start));
}

} // namespace conveyor::actors
