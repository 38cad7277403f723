// The actor_system_config of every conveyor node (dispatcher, worker, client): the middleman
// for TCP, conveyor's message types under the same names everywhere, the "conveyor" error
// category, and connection heartbeats so a frozen peer is noticed (CAF_NOTES §5).
#pragma once

#include <memory>

#include <caf/actor_system_config.hpp>
#include <caf/fwd.hpp>

#include "conveyor/options.hpp"

namespace conveyor::actors {

// Conveyor's message types and error category, registered under the same names on every node.
// Real nodes get it through configure_actor_system; simulated nodes (sim/) call it alone
// because the simulated network replaces the middleman.
void register_conveyor_types(caf::actor_system_config& cfg);

class NodeConfig : public caf::actor_system_config {
public:
  explicit NodeConfig(const NetworkConfig& network = {});
};

// A node's actor system (a server's, a client's), built from NodeConfig, whose node ID no other
// live NodeSystem of this process has. CAF 0.17.6 makes a node ID of the host, the pid and one
// byte that counts the actor systems the process started, so the 257th system gets the first's
// ID; two live systems with one ID that talk to the same peer get each other's replies (a trainer
// that made a Client per epoch would have broken its first Client at the 256th). The system
// skips the IDs of live ones (test/unit/actors/node_identity_test.cpp).
class NodeSystem {
public:
  explicit NodeSystem(const NetworkConfig& network);
  ~NodeSystem();
  NodeSystem(const NodeSystem&) = delete;
  NodeSystem& operator=(const NodeSystem&) = delete;
  caf::actor_system& get() { return *sys_; }

private:
  std::unique_ptr<NodeConfig> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
};

// CAF 0.17.6 pins, in a thread_local, the logger of the last actor system a thread built, spawned
// an actor into or made a scoped_actor of, and ~actor_system waits until its logger's last
// reference is gone. So a system used by one application thread and destroyed by another waited
// forever for the first thread's reference (a Python iterator closed, or collected, on another
// thread than the one that opened it; a stream left to the interpreter's exit by a daemon
// thread). Entry points that touch a system on the caller's thread hold one of these: on the way
// out it drops the thread's reference to that system's logger (none other's: a CAF thread keeps
// its own). CAF's logging from the caller's thread is off meanwhile; conveyor logs through log.hpp.
class ReleaseThreadLogger {
public:
  explicit ReleaseThreadLogger(caf::actor_system& sys) : sys_(sys) {}
  ~ReleaseThreadLogger();
  ReleaseThreadLogger(const ReleaseThreadLogger&) = delete;
  ReleaseThreadLogger& operator=(const ReleaseThreadLogger&) = delete;

private:
  caf::actor_system& sys_;
};

} // namespace conveyor::actors
