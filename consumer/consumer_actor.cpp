#include "consumer/consumer_actor.hpp"

#include <caf/event_based_actor.hpp>

#include "consumer/consumer_actor_state.hpp"
#include "node/home_scheduled.hpp"
#include "node/log.hpp"
#include "worker/local_workers.hpp"

namespace conveyor::actors::consumer_detail {

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
  p.elements = st.core.elements_received() + st.round_elements();
  p.bytes = st.core.bytes_received() + st.round_bytes();
  p.lost_tasks = st.core.lost_tasks();
  st.waits.fill(p, self->clock().now());
  return p;
}

msg::stream_stats stats_of(self_ptr self) {
  const auto& core = self->state.core;
  const auto& st = self->state;
  msg::stream_stats s;
  static_cast<ReadProgress&>(s) = progress_of(self);
  s.messages = core.messages_received() + st.round_messages();
  s.per_worker = core.per_worker();
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
  log_losses(self);
  if (st.job && st.consumer_id != 0) // the final counters, for status and metrics (no reply)
    caf::anon_send(st.job,
                   msg::get_tasks{st.consumer_id, st.core.known_version(), 0, progress_of(self)});
  if (status.code() == ErrorCode::cancelled || status.ok())
    log::debug(kLog, "job " + std::to_string(st.job_id) + ": " +
                       (status.ok() ? std::string{"end of sequence"} : status.to_string()));
  else
    log::warning(kLog,
                 "job " + std::to_string(st.job_id) + ": stream failed: " + status.to_string());
  if (st.job && st.consumer_id != 0)
    self->send(st.job, msg::leave_job{st.consumer_id, status.ok()});
  st.start.sink->final_stats(stats_of(self));
  st.start.sink->finish(std::move(status));
  self->quit();
}

void deliver(self_ptr self, Status s, ReadyElements& elements, msg::task_id_t task) {
  if (s.ok() && (!elements.empty() || elements.has_split_ends()))
    s = self->state.start.sink->push(std::move(elements), push_stats(self, task));
  if (s.ok()) // (after the elements: the stream ends a slot once it consumed them)
    for (const auto& [slot, end] : self->state.core.take_ended_slots())
      self->state.start.sink->task_slot_end(slot, end);
  if (!s.ok()) {
    finish(self, s);
    return;
  }
  pump(self);
  note_wait(self);
  check_finished(self);
}

void log_losses(self_ptr self) {
  for (const auto& w : self->state.core.take_warnings())
    log::warning(kLog, "job " + std::to_string(self->state.job_id) + ": " + w);
}

void check_finished(self_ptr self) {
  if (!self->state.done && self->state.core.finished())
    finish(self, Status::OK());
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
        finish(self, Status{ErrorCode::unavailable, "lost job " + std::to_string(st.job_id) +
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
  Status placement =
    target.ok()
      ? check_target_workers(*target, !LocalWorkers::empty(), st0.start.job_request.policy,
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
      if (self->state.rounds)
        self->state.rounds->planner().on_ack(static_cast<int64_t>(n));
      else
        self->state.core.on_ack(n);
      pump(self);
      note_wait(self);
    },
    [self](msg::stats_atom) { return stats_of(self); },
    [self](msg::bulk_ready_atom, uint64_t channel, uint64_t server_channel) {
      on_bulk_ready(self, channel, server_channel);
    },
    [self](msg::bulk_frame_atom, uint64_t channel, std::vector<char>& frame) {
      on_local_frame(self, channel, frame);
    },
    [self](msg::bulk_frame_atom, uint64_t channel, uint64_t task, uint64_t batch_seq,
           uint32_t index, uint32_t count, std::vector<char>& bytes) {
      on_frame(self, channel, task, batch_seq, index, count, bytes);
    },
    [self](msg::bulk_lost_atom, uint64_t channel, std::string& why) {
      on_bulk_lost(self, channel, why);
    },
    [self](msg::bulk_lost_atom, uint64_t channel) { // the grace period after a loss is over
      on_bulk_grace_over(self, channel);
    },
    [self](msg::cancel_atom) {
      auto& st = self->state;
      // Batches are acknowledged as they arrive (so that no reader's end waits on another's
      // pace), so what this reader received and its application never took is gone for the
      // job's other readers too: say so instead of losing it in silence.
      if (!st.done && st.start.job_request.job_name && !st.rounds && st.core.unacked_elements() > 0)
        log::warning(kLog, "job " + std::to_string(st.job_id) + " (\"" +
                             *st.start.job_request.job_name + "\"): this consumer leaves with " +
                             std::to_string(st.core.unacked_elements()) +
                             " element(s) it received but its application did not take; the "
                             "job's other consumers do not get them");
      finish(self, Status{ErrorCode::cancelled, "the stream was cancelled"});
    },
  };
}
} // namespace conveyor::actors::consumer_detail

namespace conveyor::actors {

namespace {

using namespace consumer_detail;

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
                             std::chrono::milliseconds connect_timeout, uint32_t protocol_version) {
  ConsumerStart start;
  start.transport = std::move(transport);
  start.limits.max_outstanding = options.max_outstanding_requests.value_or(65536);
  start.limits.max_bytes = options.max_buffered_bytes;
  start.limits.fail_on_worker_loss = fail_on_worker_loss(options);
  start.bulk_channels = uses_bulk_channel(options);
  start.request_timeout = caf::timespan{options.request_timeout};
  start.task_refresh = caf::timespan{options.task_refresh_interval};
  start.connect_timeout = caf::timespan{connect_timeout};
  start.protocol_version = protocol_version == 0 ? msg::kProtocolVersion : protocol_version;
  start.compression = options.compression == "NONE" ? Compression::none : Compression::automatic;
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
  start.job_request.tenant = options.tenant;
  start.job_request.tenant_weight = options.tenant_weight;
  if (options.num_consumers) {
    start.job_request.num_consumers = *options.num_consumers;
    start.consumer_index = options.consumer_index.value_or(-1);
  }
  start.round_timeout = caf::timespan{options.round_timeout};
  if (options.job_name)
    start.job_request.job_name = *options.job_name;
  if (options.resume_from)
    start.job_request.resume_cursor = *options.resume_from;
  if (options.deterministic)
    start.job_request.deterministic_window = kDeterministicWindow;
  return start;
}

msg::stream_actor spawn_consumer(caf::actor_system& sys, ConsumerStart start) {
  return caf::actor_cast<msg::stream_actor>(sys.spawn<ConsumerActor>(std::move(start)));
}

} // namespace conveyor::actors