// Where CAF 0.17 runs an actor that gets a message: on the sender's execution unit (its thread,
// its system), unless the actor says otherwise. Two actors of conveyor say otherwise.
//
// A base for actors that other actor systems of the same process send to (the in-process read
// path: a trainer's consumer and the task actors of its own WorkerServer, worker/local_workers.hpp).
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

// A base for actors that a broker hands heavy work (the bulk path's TLS sessions, net/bulk_tls.cpp):
// resumed on the sender's execution unit, they would run on the middleman's one I/O thread, which
// every broker of the node shares. These always run on their system's scheduler threads.
template <class Base>
class PoolScheduled : public Base {
public:
  using Base::Base;

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit*) override {
    Base::enqueue(std::move(what), nullptr);
  }
};

} // namespace conveyor::actors
