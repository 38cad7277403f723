#include "worker/task_actor.hpp"

#include <atomic>
#include <limits>

#include "net/local_sender.hpp"
#include "net/node_key.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/runtime/executor.hpp"
#include "node/home_scheduled.hpp"
#include "worker/executor_scheduled.hpp"
#include "worker/task_actor_state.hpp"

namespace conveyor::actors::task_detail {

// The admission check of a message to this task; a refusal is logged without the token.
Status admit(self_ptr self, const std::string& presented, const std::string& what) {
  auto& st = self->state;
  Status s = st.start.gate.admit(presented, "sender of " + what);
  if (s.ok() && st.start.gate.enabled())
    admit_sender_node(self); // the frame guard lifts its pre-auth cap for this node
  if (!s.ok()) {
    const auto& sender = self->current_sender();
    log::warning(kLog, st.label() + ": refused " + what +
                         (sender ? " from node " + caf::to_string(sender->node()) : std::string{}) +
                         ": " + s.message());
  }
  return s;
}

// Its timer and drain steps come from its worker (this node) only (net/local_sender.hpp).
Status from_own_worker(self_ptr self, const char* what) {
  if (from_this_node(self)) // every production step: no string built on this path
    return Status::OK();
  return check_local_sender(self, kLog, std::string{what} + " to " + self->state.label(),
                            "its worker");
}

// A consumer or the job (its splits actor) is gone.
void on_down(self_ptr self, caf::down_msg& down) {
  auto& st = self->state;
  if (auto c = st.consumers.find(down.source); c != st.consumers.end()) {
    // (task_state::consumers) Its held requests go too: answered later, they would send it
    // batches it can never acknowledge.
    const auto gone = c->second;
    st.consumers.erase(c);
    SplitFeed* feed = st.runner ? st.runner->split_feed() : nullptr;
    if (feed && down.reason != caf::exit_reason::remote_link_unreachable)
      return; // DYNAMIC, it quit: its leave_job (through the job) says what it took
    log::debug(kLog, st.label() + ": consumer " + std::to_string(gone) + " is gone (" +
                       caf::to_string(down.reason) + "); nothing waits for its acknowledgements");
    for (auto h = st.held.begin(); h != st.held.end();)
      if (h->request.consumer == gone) {
        h->promise.deliver(msg::element_batch{});
        h = st.held.erase(h);
      } else {
        ++h;
      }
    if (feed) {
      st.runner->consumer_reconnected(gone); // its unacknowledged splits are read again
      after_step(self);                      // (reported to the job)
    } else if (st.runner) {
      st.runner->forget_unacknowledged(gone);
      st.runner->forget_consumer(gone);
      const bool may_return = down.reason == caf::exit_reason::remote_link_unreachable;
      if (st.runner->reader_left(gone, may_return)) // whole-epoch: it holds the others no more
        serve_held(self);
    }
    return;
  }
  if (!st.start.def.splits || down.source != st.start.def.splits.address())
    return;
  if (st.start.def.policy == ShardingPolicy::off &&
      down.reason == caf::exit_reason::remote_link_unreachable) {
    log::warning(kLog, st.label() + ": lost the connection to its job (dispatcher); "
                                    "serving on until the dispatcher is back");
    return;
  }
  self->quit(caf::exit_reason::user_shutdown);
}

// A resumed OFF read's task (task_def.skip): its slot's consumed prefix is not produced again;
// INT64_MAX (the slot's task had ended) produces nothing.
Dataset resumed_slot(const Dataset& dataset, int64_t skip) {
  if (skip == std::numeric_limits<int64_t>::max())
    return dataset.take(0);
  return skip > 0 ? dataset.skip(skip) : dataset;
}

// Starts the pipeline (or notes why it could not start) and watches the job.
void start_task(self_ptr self, TaskStart start) {
  auto& st = self->state;
  st.start = std::move(start);
  // A task lives only as long as its job: when the job ends, or the connection to the
  // dispatcher's process is lost (the dispatcher then drops this worker's tasks, and a
  // stop_task can no longer arrive), the task stops instead of running on unseen. The
  // simulator found such orphans (test/sim/sweep_test.cpp).
  //
  // Except OFF across a lost dispatcher connection: an OFF task needs nothing from its job to
  // go on serving, so it keeps serving its consumers while the dispatcher restarts; the
  // restarted dispatcher (with --work-dir) assigns it again (assign_task below re-attaches it),
  // and the worker stops it if that does not happen soon after it registered again.
  if (st.start.def.splits)
    self->monitor(st.start.def.splits);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  st.stats = metrics::register_task(st.start.def.job, st.start.def.task, st.start.def.dataset,
                                    st.start.def.tenant);
  if (st.start.def.num_consumers > 0) {
    st.rounds = std::make_unique<RoundRobinTaskServer>(st.start.def.num_consumers, st.label(),
                                                       st.start.def.compression);
    // Rounds hand whole elements to consumers: none is pre-encoded into a bulk frame.
    st.start.limits.bulk_min_bytes = std::numeric_limits<std::size_t>::max();
  }
  if (st.start.tenant_buffers && !st.rounds)
    st.tenant_slot =
      st.start.tenant_buffers->join(st.start.def.tenant, st.start.def.tenant_max_buffer_bytes);
  st.runner = std::make_unique<TaskRunner>(st.start.def.policy, st.start.def.compression,
                                           st.start.limits, st.start.first_batch_seq);
  auto dataset = from_binary(st.start.def.definition);
  if (!dataset.ok())
    st.start_error = dataset.status().with_context("decoding the dataset of " + st.label());
  else if (st.start.def.skip < 0 ||
           (st.start.def.skip > 0 && st.start.def.policy != ShardingPolicy::off))
    st.start_error = invalid_argument(st.label() + ": `skip` " + std::to_string(st.start.def.skip) +
                                      " is for OFF tasks and at least 0");
  else
    st.start_error = st.runner
                       ->start(resumed_slot(*dataset, st.start.def.skip), st.start.functions,
                               WorkerShard{st.start.def.num_workers, st.start.def.worker_index})
                       .with_context("starting the pipeline of " + st.label());
  if (st.start_error.ok() && st.start.def.cross_trainer_cache != msg::CacheSharing::none)
    st.start_error = st.runner
                       ->enable_cross_trainer_cache(st.start.def.cross_trainer_cache ==
                                                    msg::CacheSharing::whole_epoch)
                       .with_context(st.label());
  if (!st.start_error.ok()) {
    st.runner.reset();
    report_done(self);
  } else {
    log::info(kLog, "started " + st.label() + " (" + to_string(st.start.def.policy) + ", dataset " +
                      st.start.def.dataset + ")");
    schedule_produce(self);
  }
}

// The worker drains: DYNAMIC hands its unstarted splits back, an endless OFF task retires.
void on_drain(self_ptr self) {
  auto& st = self->state;
  if (!from_own_worker(self, "drain_atom").ok())
    return;
  SplitFeed* feed = st.runner ? st.runner->split_feed() : nullptr;
  if (!feed && st.runner && !st.rounds && st.runner->endless() && !st.runner->retired()) {
    // OFF of an infinite dataset never reaches an end to drain to: it retires instead.
    // Held requests are answered now (empty): `retired` to a consumer that acknowledged
    // everything, else its next request carries its acks.
    st.runner->retire();
    log::info(kLog, st.label() + ": draining an endless OFF task: it hands out nothing more "
                                 "and retires once its consumers acknowledged what they were "
                                 "sent and the retirement");
    for (auto& h : st.held) {
      msg::element_batch reply;
      const auto consumer = h.request.consumer;
      reply.retired = !st.runner->has_pending(consumer) && !st.runner->awaits_ack(consumer);
      h.promise.deliver(std::move(reply));
    }
    st.held.clear();
    st.update_stats();
    return;
  }
  if (!feed || feed->draining())
    return;
  st.drained_before_end = !st.runner->ended();
  std::vector<Split> unstarted;
  for (const auto& f : st.runner->split_feeds())
    for (auto& s : f->drain())
      unstarted.push_back(std::move(s));
  log::info(kLog, st.label() + ": draining; handing " + std::to_string(unstarted.size()) +
                    " unstarted split(s) back to the job");
  if (!unstarted.empty())
    self->send(st.start.def.splits,
               msg::splits_update{st.start.def.task, {}, std::move(unstarted)});
  st.waiting_for_split = false;
  after_step(self);
}

void on_end_rounds(self_ptr self, msg::end_rounds& end) {
  auto& st = self->state;
  if (!admit(self, end.auth_token, "end_rounds").ok() || !st.rounds)
    return;
  st.rounds->end(end.local_rounds);
  log::info(kLog, st.label() + ": retired from the coordinated rounds after local round " +
                    std::to_string(end.local_rounds - 1) + " (its worker drains)");
}

void on_cache_trainers(self_ptr self, msg::cache_trainers& update) {
  auto& st = self->state;
  if (!admit(self, update.auth_token, "cache_trainers").ok() || !st.runner)
    return;
  if (st.runner->cache_trainers(update.joined, update.left))
    serve_held(self); // a trainer that left holds the others no more
  if (st.runner->split_feed())
    after_step(self); // splits it held open may have finished
}

void on_leave_job(self_ptr self, msg::leave_job& left) {
  auto& st = self->state;
  if (!admit(self, left.auth_token, "leave_job").ok())
    return;
  // What it did not acknowledge is its loss: no split waits for it (DYNAMIC; the task then
  // serves it no more), no drain waits for its acknowledgements (OFF, which serves a
  // consumer the job dropped as before).
  const bool freed = st.runner && st.runner->reader_left(left.consumer); // (whole-epoch sharing)
  if (st.runner && st.runner->split_feed()) {
    st.runner->consumer_gone(left.consumer);
    after_step(self); // answers its held requests (with an error)
  } else if (st.runner && !st.rounds) {
    st.runner->forget_unacknowledged(left.consumer);
    st.retired_acked.insert(left.consumer); // it reads no more: a drain need not tell it
    if (freed)
      serve_held(self);
  }
  // Coordinated reads: one that did not finish is refused if it comes back; its index's
  // confirms no longer hold the others' rounds.
  if (st.rounds && st.rounds->consumer_left(left.consumer, left.finished))
    serve_held_rounds(self);
}

caf::result<bool> on_drained(self_ptr self) {
  // Drained: the pipeline ended and every element it produced was acknowledged.
  auto& st = self->state;
  if (auto local = from_own_worker(self, "drained_atom"); !local.ok())
    return msg::to_error(local);
  if (!st.runner)
    return true;
  // Coordinated reads: an infinite pipeline never ends; the task is drained once the job
  // gave it its last round (end_rounds) and every consumer took its elements up to there.
  if (st.rounds)
    return st.rounds->drained();
  // OFF, every consumer that asked is gone (its process died; its job may hold it until
  // --client-timeout): nobody can receive the rest, and a finite pipeline pauses with its
  // readers, so it would never end and the drain would run into --drain-timeout.
  if (!st.runner->split_feed() && st.asked && st.consumers.empty())
    return true;
  if (!(st.runner->ended() || st.runner->failed() || st.runner->retired()))
    return false;
  // Retired: every consumer still there must have acknowledged the `retired` mark. One that did
  // not would count the task as lost once the worker leaves: it was not told yet (its credits
  // went to other tasks while this one retired; it asks again as soon as it has a credit for
  // this task), or the mark is still on its way (the worker's stop would close the connection
  // under it).
  if (st.runner->retired() && !st.runner->failed())
    for (const auto& [addr, consumer] : st.consumers)
      if (!st.retired_acked.count(consumer))
        return false;
  // OFF too: a batch taken but not yet received would be lost with the worker (the
  // simulator found OFF drains ending a few elements short of the epoch).
  return st.runner->all_acknowledged();
}

void on_assign_task(self_ptr self, msg::assign_task& again) {
  auto& st = self->state;
  if (!admit(self, again.auth_token, "assign_task").ok())
    return;
  if (again.def.task != st.start.def.task || !again.def.splits ||
      again.def.splits == st.start.def.splits)
    return;
  if (st.start.def.splits)
    self->demonitor(st.start.def.splits.address());
  st.start.def.splits = again.def.splits;
  self->monitor(st.start.def.splits);
  log::info(kLog, st.label() + ": re-attached to its job after a dispatcher restart");
  if (st.reported_done) { // the old job never got it, or is gone: tell the new one
    st.reported_done = false;
    report_done(self);
  }
}

task_full_actor::behavior_type task_impl(self_ptr self, TaskStart start) {
  start_task(self, std::move(start));
  return {
    [self](msg::get_elements& req) { return on_get_elements(self, req); },
    [self](msg::drain_atom) { on_drain(self); },
    [self](msg::end_rounds& end) { on_end_rounds(self, end); },
    [self](msg::cache_trainers& update) { on_cache_trainers(self, update); },
    [self](msg::leave_job& left) { on_leave_job(self, left); },
    [self](msg::drained_atom) { return on_drained(self); },
    [self](msg::assign_task& again) { on_assign_task(self, again); },
    [self](msg::stop_task& req) {
      if (admit(self, req.auth_token, "stop_task").ok())
        self->quit(caf::exit_reason::user_shutdown);
    },
    [self](msg::produce_atom) { on_produce(self); },
  };
}

} // namespace conveyor::actors::task_detail

namespace conveyor::actors {

namespace {

using namespace task_detail;

// The task actor, on the scheduling `Scheduled` gives it:
// - ExecutorScheduled (production): on the process's Executor (worker/executor_scheduled.hpp);
// - HomeScheduled (the simulator): on its actor system's scheduler. A consumer of this process
//   (an in-process read) sends to it from another actor system: HomeScheduled keeps it on its own.
using task_base = caf::stateful_actor<task_state, task_full_actor::base>;

std::atomic<int> task_actor_count{0};

template <class Scheduled>
class TaskActor : public Scheduled {
public:
  template <class... Ts>
  TaskActor(caf::actor_config& cfg, TaskStart start, Ts&&... xs)
    : Scheduled(cfg, std::forward<Ts>(xs)...), start_(std::move(start)) {
    task_actor_count.fetch_add(1, std::memory_order_relaxed);
  }
  ~TaskActor() override { task_actor_count.fetch_sub(1, std::memory_order_relaxed); }

  typename Scheduled::behavior_type make_behavior() override {
    return task_impl(this, std::move(start_));
  }

private:
  TaskStart start_;
};

} // namespace

int task_actor_objects() { return task_actor_count.load(std::memory_order_relaxed); }

msg::task_actor spawn_task(caf::local_actor* parent, TaskStart start,
                           const std::shared_ptr<ExecutorActors>& executor) {
  if (executor) { // its job's share of the Executor: the actor's resumes and its pipeline's work
    // (The dispatcher checked the tenant and its weight: validate_tenant.)
    auto group = Executor::shared().make_group(start.def.tenant,
                                               std::max<int64_t>(1, start.def.tenant_weight));
    start.limits.executor_group = group;
    return parent->spawn<TaskActor<ExecutorScheduled<task_base>>, caf::linked>(
      std::move(start), executor, std::move(group));
  }
  return parent->spawn<TaskActor<HomeScheduled<task_base>>, caf::linked>(std::move(start));
}

} // namespace conveyor::actors
