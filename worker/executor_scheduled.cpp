#include "worker/executor_scheduled.hpp"

#include <caf/actor_system.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include "pipeline/runtime/executor.hpp"

namespace conveyor::actors {

namespace {
// Messages one resume handles before the actor goes to the back of the Executor's line.
constexpr std::size_t kThroughput = 16;
} // namespace

ExecutorUnit::ExecutorUnit(caf::actor_system& sys, caf::resumable* owner,
                           std::shared_ptr<ExecutorActors> count,
                           std::shared_ptr<ExecutorGroup> group)
  : caf::execution_unit(&sys), owner_(owner), count_(std::move(count)), group_(std::move(group)) {
  count_->live.fetch_add(1);
}

ExecutorUnit::~ExecutorUnit() {
  if (count_)
    count_->live.fetch_sub(1);
}

void ExecutorUnit::exec_later(caf::resumable* job) {
  if (job != owner_) { // an actor this one sent to: scheduled where it lives
    if (auto* actor = dynamic_cast<caf::scheduled_actor*>(job))
      actor->home_system().scheduler().enqueue(job);
    else
      system().scheduler().enqueue(job);
    return;
  }
  // (CAF took a reference for the scheduling: `job` outlives this item.)
  Executor::shared().post([this, job] { run(job); }, group_);
}

void ExecutorUnit::run(caf::resumable* job) {
  switch (job->resume(this, kThroughput)) {
    case caf::resumable::resume_later: exec_later(job); return;
    case caf::resumable::done: {
      // Terminated: the reference CAF took may be the last, and this unit goes with the actor.
      auto count = std::move(count_);
      intrusive_ptr_release(job);
      count->live.fetch_sub(1);
      return;
    }
    default: // awaiting_message: the next enqueue schedules it again
      intrusive_ptr_release(job);
      return;
  }
}

} // namespace conveyor::actors
