// One simulated process: its own caf::actor_system on CAF's deterministic test_coordinator,
// with a node id derived from (slot, incarnation) — the same on every machine — and a proxy
// registry whose proxies carry messages over the simulated network instead of BASP.
//
// Production code runs unchanged inside it: actors spawned here see a normal actor system;
// handles of other nodes' actors arrive as proxies (caf::actor_proxy), exactly as over TCP.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/execution_unit.hpp>
#include <caf/proxy_registry.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "sim/trace.hpp"

namespace conveyor::sim {

class Network;

// Called on every node's configuration before its actor system starts (message types...).
using ConfigureNode = std::function<void(caf::actor_system_config&)>;

class Node {
public:
  Node(Network& network, std::size_t slot, uint32_t incarnation, std::string name,
       const ConfigureNode& configure, Time now);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  std::size_t slot() const { return slot_; }
  uint32_t incarnation() const { return incarnation_; }
  // "worker-2", or "worker-2#1" after its first restart.
  const std::string& name() const { return name_; }
  const caf::node_id& id() const { return sys_->node(); }
  bool alive() const { return alive_; }

  caf::actor_system& system() { return *sys_; }
  caf::scheduler::test_coordinator& scheduler() { return *sched_; }
  caf::proxy_registry& proxies() { return *proxies_; }
  // Execution context for (de)serializing and enqueueing from outside any actor.
  caf::execution_unit* context();

  // Runs the job at `index` of the scheduler's queue for one message, with the clock at `now`.
  // Notes the actor so a crash can kill it and the leak check can count it.
  void run_job(std::size_t index, Time now);
  std::size_t pending_jobs() const { return sched_->jobs.size(); }

  // Actors of this node that have run and are still alive (non-hidden, not proxies).
  std::size_t live_actors();
  // Their names ("conveyor::...::dispatcher_actor" etc. are not known to CAF 0.17; the
  // actor's `name()`), for leak reports.
  std::vector<std::string> live_actor_names();

  // Sets the virtual clock and fires the timeouts that are due.
  void set_time(Time now);
  // The earliest pending timeout of this node, if any.
  bool next_timeout(Time& out) const;

  // The process dies: every actor is killed (nothing it does reaches the network any more,
  // see Network::crash), timers are dropped, and the node stops running. Idempotent.
  void kill();

private:
  class Config;
  class Context;
  class ProxyBackend;

  void note(caf::abstract_actor* actor);

  Network& network_;
  std::size_t slot_;
  uint32_t incarnation_;
  std::string name_;
  bool alive_ = true;
  std::unique_ptr<Config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  std::unique_ptr<ProxyBackend> backend_;
  std::unique_ptr<caf::proxy_registry> proxies_;
  std::unique_ptr<Context> ctx_;
  // Every actor seen running on this node, by id (weak: does not keep it alive).
  std::map<caf::actor_id, caf::weak_actor_ptr> seen_;
};

} // namespace conveyor::sim
