#include "sim/node.hpp"

#include <algorithm>
#include <cstring>

#include <caf/abstract_actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/atom.hpp>
#include <caf/exit_reason.hpp>
#include <caf/local_actor.hpp>
#include <caf/node_id.hpp>
#include <caf/send.hpp>

#include "sim/network.hpp"

namespace conveyor::sim {

class Node::Config : public caf::actor_system_config {
public:
  explicit Config(const ConfigureNode& configure) {
    if (configure)
      configure(*this);
    // Applied last: a node of the simulation never runs on threads and never logs on its own.
    set("scheduler.policy", caf::atom("testing"));
    set("logger.file-verbosity", caf::atom("quiet"));
    set("logger.console-verbosity", caf::atom("quiet"));
    set("logger.inline-output", true);
  }
};

// The execution unit the network (de)serializes with: it names this node's proxy registry,
// so handles of other nodes' actors become this node's proxies, as in BASP.
class Node::Context : public caf::execution_unit {
public:
  Context(caf::actor_system& sys, caf::scheduler::test_coordinator& sched, caf::proxy_registry& reg)
    : caf::execution_unit(&sys), sched_(sched) {
    proxies_ = &reg;
  }
  void exec_later(caf::resumable* ptr) override { sched_.jobs.push_back(ptr); }

private:
  caf::scheduler::test_coordinator& sched_;
};

class Node::ProxyBackend : public caf::proxy_registry::backend {
public:
  ProxyBackend(Network& net, Node& home) : net_(net), home_(home) {}
  caf::strong_actor_ptr make_proxy(caf::node_id nid, caf::actor_id aid) override {
    return net_.make_proxy(home_, nid, aid);
  }
  void set_last_hop(caf::node_id*) override {}

private:
  Network& net_;
  Node& home_;
};

namespace {

// A node id that depends only on (slot, incarnation): CAF's default one hashes the MAC
// addresses and the process id, which would make traces differ between machines.
// Layout: slot (4 bytes), incarnation (4 bytes), "conveyor-sim". The varying bytes come first
// because CAF hashes a node id by its first 8 bytes (and the process id).
caf::node_id simulated_node_id(std::size_t slot, uint32_t incarnation) {
  caf::node_id::default_data::host_id_type host{};
  auto s = static_cast<uint32_t>(slot);
  for (int i = 0; i < 4; ++i) {
    host[i] = static_cast<uint8_t>(s >> (8 * i));
    host[4 + i] = static_cast<uint8_t>(incarnation >> (8 * i));
  }
  static constexpr char tag[] = "conveyor-sim";
  std::memcpy(host.data() + 8, tag, sizeof tag - 1);
  return caf::make_node_id(incarnation + 1, host);
}

} // namespace

Node::Node(Network& network, std::size_t slot, uint32_t incarnation, std::string name,
           const ConfigureNode& configure, Time now)
  : network_(network), slot_(slot), incarnation_(incarnation), name_(std::move(name)) {
  cfg_ = std::make_unique<Config>(configure);
  sys_ = std::make_unique<caf::actor_system>(*cfg_);
  sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
  // Without a middleman the system has no node id; give it one before any user actor exists
  // (the middleman does the same swap in its init()). Only CAF's hidden helper actors, which
  // never cross the network, were created with the empty id.
  const_cast<caf::node_id&>(sys_->node()) = simulated_node_id(slot, incarnation);
  backend_ = std::make_unique<ProxyBackend>(network, *this);
  proxies_ = std::make_unique<caf::proxy_registry>(*sys_, *backend_);
  ctx_ = std::make_unique<Context>(*sys_, *sched_, *proxies_);
  sched_->clock().current_time = now;
}

Node::~Node() {
  kill();
  proxies_.reset();
  ctx_.reset();
  backend_.reset();
  // Every actor is dead after kill(); if one is not (a bug worth a leak report, reported
  // by the caller), do not let ~actor_system wait for it forever.
  if (sys_->registry().running() > 0)
    sys_->await_actors_before_shutdown(false);
  sys_.reset();
}

caf::execution_unit* Node::context() { return ctx_.get(); }

void Node::note(caf::abstract_actor* actor) {
  auto id = actor->id();
  if (seen_.count(id) == 0)
    seen_.emplace(id, caf::weak_actor_ptr{actor->ctrl()});
}

void Node::run_job(std::size_t index, Time now) {
  auto& jobs = sched_->jobs;
  if (index >= jobs.size())
    return;
  // Idle nodes' clocks are not moved on every jump; a node reads the time only while it runs.
  if (now > sched_->clock().current_time)
    sched_->clock().current_time = now;
  if (index != 0)
    std::rotate(jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(index),
                jobs.begin() + static_cast<std::ptrdiff_t>(index) + 1);
  if (auto* actor = dynamic_cast<caf::abstract_actor*>(jobs.front()))
    note(actor);
  sched_->try_run_once();
}

std::size_t Node::live_actors() { return live_actor_names().size(); }

std::vector<std::string> Node::live_actor_names() {
  std::vector<std::string> names;
  for (auto i = seen_.begin(); i != seen_.end();) {
    auto strong = i->second.lock();
    if (!strong || strong->get()->getf(caf::abstract_actor::is_terminated_flag)) {
      i = seen_.erase(i);
      continue;
    }
    auto* local = dynamic_cast<caf::local_actor*>(strong->get());
    names.emplace_back(local != nullptr ? local->name() : "actor");
    ++i;
  }
  return names;
}

void Node::set_time(Time now) {
  if (!alive_)
    return;
  auto& clock = sched_->clock();
  if (now > clock.current_time)
    clock.current_time = now;
  clock.advance_time(Duration{0});
}

bool Node::next_timeout(Time& out) const {
  if (!alive_)
    return false;
  const auto& schedule = sched_->clock().schedule();
  if (schedule.empty())
    return false;
  out = schedule.begin()->first;
  return true;
}

void Node::kill() {
  if (!alive_)
    return;
  alive_ = false;
  // Connections are gone: proxies of other nodes' actors die here (the peers' side is
  // handled by Network::crash, which runs first).
  proxies_->clear();
  sched_->clock().cancel_all();
  // Kill every actor; actors spawned while the others wind down are killed in the next round.
  std::map<caf::actor_id, bool> killed;
  constexpr int kMaxRounds = 64;
  constexpr std::size_t kMaxSteps = 1000000;
  std::size_t steps = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    for (auto* job : sched_->jobs)
      if (auto* actor = dynamic_cast<caf::abstract_actor*>(job))
        note(actor);
    bool sent = false;
    for (auto& [id, weak] : seen_) {
      if (killed[id])
        continue;
      killed[id] = true;
      if (auto strong = weak.lock()) {
        caf::anon_send_exit(strong, caf::exit_reason::kill);
        sent = true;
      }
    }
    if (!sent && sched_->jobs.empty())
      break;
    while (!sched_->jobs.empty() && steps < kMaxSteps) {
      run_job(0, sched_->clock().current_time);
      ++steps;
    }
    sched_->clock().cancel_all();
  }
}

} // namespace conveyor::sim
