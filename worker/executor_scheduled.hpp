// Actors that run on the process's one Executor (pipeline/runtime/executor.hpp) instead of CAF's
// scheduler threads: the task actors, whose every message (pipeline steps included) may run a
// user function for as long as it likes. On CAF's scheduler, a blocked function would hold one
// of the node's few scheduler threads (heartbeats, the worker's own messages); on a detached
// thread each, a node's threads grew with its tasks. On the Executor they share one pool sized
// from the machine, which adds a thread only while its items block.
//
// How: CAF 0.17 schedules a woken actor through the execution unit passed to `enqueue` (and
// `launch`); these actors pass their own unit, whose exec_later posts the actor's `resume` to the
// Executor. An actor they send to is scheduled on its own system's scheduler, as from any thread
// outside an actor system. Include only from the .cpp that defines such an actor.
#pragma once

#include <atomic>
#include <memory>

#include <caf/execution_unit.hpp>
#include <caf/local_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/resumable.hpp>

namespace conveyor {
class ExecutorGroup; // pipeline/runtime/executor.hpp
}

namespace conveyor::actors {

// Counts a node's executor-scheduled actors until each has finished its last resume (its
// termination included), so that the node can wait for them before its actor system goes.
struct ExecutorActors {
  std::atomic<int> live{0};
};

// `group`: the actor's share of the Executor (its job's, shared with its pipeline's work).
class ExecutorUnit final : public caf::execution_unit {
public:
  ExecutorUnit(caf::actor_system& sys, caf::resumable* owner, std::shared_ptr<ExecutorActors> count,
               std::shared_ptr<ExecutorGroup> group);
  ~ExecutorUnit() override; // (an actor destroyed without a last resume leaves the count too)
  void exec_later(caf::resumable* job) override;

private:
  void run(caf::resumable* job);
  caf::resumable* owner_;
  std::shared_ptr<ExecutorActors> count_; // null once this actor left the count
  std::shared_ptr<ExecutorGroup> group_;
};

template <class Base>
class ExecutorScheduled : public Base {
public:
  template <class... Ts>
  ExecutorScheduled(caf::actor_config& cfg, std::shared_ptr<ExecutorActors> count,
                    std::shared_ptr<ExecutorGroup> group, Ts&&... xs)
    : Base(cfg, std::forward<Ts>(xs)...),
      unit_(this->home_system(), this, std::move(count), std::move(group)) {}

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit*) override {
    Base::enqueue(std::move(what), &unit_);
  }
  void launch(caf::execution_unit*, bool lazy, bool hide) override {
    Base::launch(&unit_, lazy, hide);
  }

private:
  ExecutorUnit unit_;
};

} // namespace conveyor::actors
