// The seam through which the simulator (library conveyor_sim, sim/) plants protocol bugs
// into the production code it runs — as FoundationDB's BUGGIFY exists only in simulation builds.
// Production code only calls the hooks below; nothing in the production libraries installs one,
// so every call is one atomic load of a null pointer. The planted bugs themselves live in
// sim/planted_bugs.{hpp,cpp}.
#pragma once

#include <cstdint>
#include <memory>

#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::actors::hooks {

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
  // true: the consumer drops a batch (of `num_chunks` chunks) that arrived after it learned
  // that the job finished.
  virtual bool consumer_drops_batch(bool job_finished, uint32_t num_chunks) {
    (void)job_finished;
    (void)num_chunks;
    return false;
  }
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
};

// The installed hooks; null unless a simulation installed some.
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

// The consumer's side.
inline bool consumer_drops_batch(bool job_finished, uint32_t num_chunks) {
  Hooks* h = installed();
  return h != nullptr && h->consumer_drops_batch(job_finished, num_chunks);
}

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

} // namespace conveyor::actors::hooks
