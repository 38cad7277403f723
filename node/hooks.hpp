// The seam through which the simulator (library conveyor_sim, sim/) plants protocol bugs
// into the production code it runs — as FoundationDB's BUGGIFY exists only in simulation builds.
//
// Two builds of the few production files that include this header (CMakeLists.txt finds them):
// - production (conveyor_actors, the `conveyor` binary, the installed package): CONVEYOR_SIM_HOOKS
//   is not defined, kCompiledIn is false, and every call site is guarded by it
//   (`if constexpr (hooks::kCompiledIn)` or `hooks::kCompiledIn && hooks::f()`), so the objects
//   contain no hook call and no hooks:: symbol. The hooks are only declared here, never defined:
//   a call that forgets the guard fails to link `conveyor` instead of shipping a hook.
// - simulator (the object library conveyor_hooked, linked by conveyor_sim and the tests that plant
//   bugs): compiled with -DCONVEYOR_SIM_HOOKS, every call loads one atomic pointer, null unless a
//   simulation installed hooks. The planted bugs themselves live in sim/planted_bugs.{hpp,cpp}.
#pragma once

#include <cstdint>
#include <memory>

#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::actors::hooks {

// Not `inline`: each translation unit has its own copy, so the two builds of a file never
// disagree about one entity.
#ifdef CONVEYOR_SIM_HOOKS
constexpr bool kCompiledIn = true;
#else
constexpr bool kCompiledIn = false;
#endif

#ifdef CONVEYOR_SIM_HOOKS

// A job's filter over its split answers, one per job (it may keep per-job state).
class SplitAnswerFilter {
public:
  virtual ~SplitAnswerFilter() = default;
  virtual void apply(uint64_t task, Split& split, bool& end_of_splits) = 0;
};

class Hooks {
public:
  virtual ~Hooks() = default;
  // A job asks once, at its first split answer; null: answers pass unchanged.
  virtual std::unique_ptr<SplitAnswerFilter> new_split_answer_filter() { return nullptr; }
  // true: a job handing a lost task's unfinished splits out again forgets the last one.
  virtual bool forget_lost_split() { return false; }
  // true: a job restored by a restarted dispatcher forgets the last of the splits its tasks
  // held at the crash (instead of handing it out again).
  virtual bool forget_held_split() { return false; }
  // true: a consumer plans its requests with one credit more than max_outstanding.
  virtual bool credit_off_by_one() { return false; }
  // true: the coordinated-read consumer with `consumer_index` counts round `round` as planned
  // but assigns it to no task (a round-skipping off-by-one): its later rounds come out of step
  // with the other consumers'.
  virtual bool skip_round(int64_t consumer_index, int64_t round) {
    (void)consumer_index;
    (void)round;
    return false;
  }
  // The simulator's virtual cost of production (its pipelines cost no virtual time otherwise):
  // how many elements task actor `task` may make in its next step (-1: no limit). 0: none now;
  // with `wait_ns` > 0 the task steps again after that long, with 0 such a step is already due
  // (so a task never has more than one timer). `produced` charges what the step made. Asked
  // from inside the task actor, so the simulator knows the node (whose CPU its tasks share).
  virtual int64_t produce_allowance(uint64_t task, int64_t& wait_ns) {
    (void)task;
    (void)wait_ns;
    return -1;
  }
  virtual void produced(int64_t elements) { (void)elements; }
};

// The installed hooks; null unless a simulation installed some (node/hooks.cpp, compiled only
// into conveyor_hooked).
Hooks* installed() noexcept;
// Installs `hooks` (null: none) process-wide and returns the previous ones. Not owned.
Hooks* install(Hooks* hooks) noexcept;

// The job actor's side: keeps the job's filter, if hooks are installed.
class JobSplitHook {
public:
  void apply(uint64_t task, Split& split, bool& end_of_splits) {
    Hooks* h = installed();
    if (h == nullptr)
      return;
    if (!asked_) {
      filter_ = h->new_split_answer_filter();
      asked_ = true;
    }
    if (filter_)
      filter_->apply(task, split, end_of_splits);
  }

private:
  std::unique_ptr<SplitAnswerFilter> filter_;
  bool asked_ = false;
};

// The job core's side.
inline bool forget_lost_split() {
  Hooks* h = installed();
  return h != nullptr && h->forget_lost_split();
}
inline bool forget_held_split() {
  Hooks* h = installed();
  return h != nullptr && h->forget_held_split();
}

// The consumer core's side.
inline bool credit_off_by_one() {
  Hooks* h = installed();
  return h != nullptr && h->credit_off_by_one();
}

// The coordinated-read planner's side (coordinated/round_robin.cpp).
inline bool skip_round(int64_t consumer_index, int64_t round) {
  Hooks* h = installed();
  return h != nullptr && h->skip_round(consumer_index, round);
}

// The task actor's side (worker/task_actor_serve.cpp).
inline int64_t produce_allowance(uint64_t task, int64_t& wait_ns) {
  Hooks* h = installed();
  return h != nullptr ? h->produce_allowance(task, wait_ns) : -1;
}
inline void produced(int64_t elements) {
  if (Hooks* h = installed())
    h->produced(elements);
}

#else // production: declarations only, for the guarded (never evaluated) call sites

class JobSplitHook { // empty: a job's state pays nothing for it
public:
  void apply(uint64_t task, Split& split, bool& end_of_splits);
};
bool forget_lost_split();
bool forget_held_split();
bool credit_off_by_one();
bool skip_round(int64_t consumer_index, int64_t round);
int64_t produce_allowance(uint64_t task, int64_t& wait_ns);
void produced(int64_t elements);

#endif

} // namespace conveyor::actors::hooks
