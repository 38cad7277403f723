// The job actor's state and the steps its files share (dispatcher/job_actor*.cpp): internal to
// the job actor, not part of its interface (dispatcher/job_actor.hpp).
//   job_actor.cpp            the behaviour, start, timers, release, the consumers' heartbeats
//   job_actor_tasks.cpp      tasks: assigning, adding, losing, the task list and its polls
//   job_actor_consumers.cpp  consumers: joining, polling, leaving; trainers (cache sharing)
//   job_actor_splits.cpp     splits (DYNAMIC): handing out, holding, journaling
//   job_actor_status.cpp     `conveyor status`: progress and rate
// Coordinated-read logic lives in coordinated/round_robin_job.hpp (RoundRobinJob).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "coordinated/round_robin.hpp"
#include "dispatcher/job_actor.hpp"
#include "messages/all.hpp"
#include "node/hooks.hpp"

namespace conveyor::actors::job_detail {

inline constexpr const char* kLog = "dispatcher";

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
  // A resumed OFF read: each task's read-cursor slot and the elements it skips (add_task).
  std::map<msg::task_id_t, std::pair<int64_t, int64_t>> off_slots;
  std::map<caf::actor_addr, msg::consumer_id_t> consumer_addrs;
  std::deque<HeldPoll> polls;
  std::deque<HeldSplits> held_splits;
  uint64_t next_token = 1;
  uint64_t gc_token = 0; // only the latest gc timer counts
  caf::actor_clock::time_point gc_due;
  bool released = false;
  // Planted bugs: inert unless the simulator installs hooks; empty in production (node/hooks.hpp).
  hooks::JobSplitHook planted_bug;
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

// CAF 0.17's clock holds a strong reference to the receiver of a delayed message until it fires:
// a job that ended lived on until its longest timer fired (the GC timer, a minute), about 2.4 KB
// of a busy dispatcher per job. So timers fire in steps of at most kTimerStep, and the handler
// checks whether the due time came (wake_at again if not).
inline constexpr caf::timespan kTimerStep = std::chrono::seconds(1);

template <class... Ts>
void wake_at(self_ptr self, caf::actor_clock::time_point due, const Ts&... xs) {
  auto left = std::clamp<caf::timespan>(due - self->clock().now(), caf::timespan{0}, kTimerStep);
  self->delayed_send(self, left, xs...);
}

// job_actor.cpp
uint64_t list_version(job_state& st);
int64_t now_ns(self_ptr self);
void arm_heartbeat_check(self_ptr self);
void release(self_ptr self, const std::string& why);
void check_consumers(self_ptr self);

// job_actor_status.cpp
msg::job_status job_status_of(self_ptr self);
void sample_rate(self_ptr self);

// job_actor_tasks.cpp
msg::task_list current_list(job_state& st);
void answer_polls(self_ptr self);
void changed(self_ptr self, uint64_t version_before);
void on_task_done(self_ptr self, msg::task_done& done);
void on_add_task(self_ptr self, msg::add_task& add);
void on_remove_task(self_ptr self, msg::remove_task& rm);
void on_drain_task(self_ptr self, msg::drain_task& drain);

// job_actor_consumers.cpp
void tell_trainers(self_ptr self, std::vector<std::string> joined, std::vector<std::string> left,
                   std::vector<msg::task_actor> tasks = {});
void consumer_left(self_ptr self, msg::consumer_id_t id, bool finished);
void drop_consumer(self_ptr self, msg::consumer_id_t id, bool finished);
caf::result<msg::job_joined> on_join(self_ptr self, msg::join_job& join);
caf::result<msg::task_list> on_get_tasks(self_ptr self, msg::get_tasks& req);

// job_actor_splits.cpp
void serve_held_splits(self_ptr self);
caf::result<msg::splits_reply> on_get_splits(self_ptr self, msg::get_splits& req);
void on_splits_update(self_ptr self, msg::splits_update& up);

} // namespace conveyor::actors::job_detail
