// A base for actors that other actor systems of the same process send to (the in-process read
// path: a trainer's consumer and the task actors of its own WorkerServer, actors/local_workers.hpp).
// CAF 0.17 resumes a scheduled receiver on the *sender's* execution unit, so such an actor would
// run on the other system's threads, and anything it spawned there left that thread holding its
// own system's logger (a thread-local reference): that system's ~actor_system then waited for the
// logger forever (a client that never shut down). A message from another system is scheduled on
// the receiver's own scheduler instead, as a message without sender context is. Include only
// from the .cpp that defines such an actor.
#pragma once

#include <caf/execution_unit.hpp>
#include <caf/mailbox_element.hpp>

namespace conveyor::actors {

template <class Base>
class HomeScheduled : public Base {
public:
  using Base::Base;

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) override {
    if (host != nullptr && &host->system() != &this->home_system())
      host = nullptr; // -> this actor's own system's scheduler
    Base::enqueue(std::move(what), host);
  }
};

} // namespace conveyor::actors
