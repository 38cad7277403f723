// The simulated world: nodes (each its own actor system on a deterministic scheduler), the
// network between them, one virtual clock, one seed. It runs as a discrete-event loop:
//   1. while any node has a runnable actor, run one message of an actor the seeded scheduler
//      picks among all runnable actors of all nodes (CAF keeps each mailbox FIFO; which
//      actor runs next is exactly what a multi-threaded scheduler leaves open);
//   2. otherwise jump the virtual clock to the next event — a network delivery, a world event
//      (faults, the harness's own timers) or a node's CAF timeout (delayed_send, request
//      timeouts, after()) — and fire everything due.
// No real time passes and no thread is started: the same seed replays the same run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/network.hpp"
#include "sim/node.hpp"
#include "sim/rng.hpp"
#include "sim/trace.hpp"

namespace conveyor::sim {

struct WorldOptions {
  uint64_t seed = 1;
  bool keep_trace = false; // keep readable trace lines (the hash is always computed)
  Duration connection_timeout = std::chrono::seconds(5);
  LinkConfig link;               // default for every pair of nodes
  ConfigureNode configure_node;  // e.g. registers the message types on every node
  uint64_t max_steps = 20000000; // bound on messages processed per run_until call
};

enum class StopReason { done, quiescent, deadline, step_limit };
const char* to_string(StopReason r);

class World {
public:
  explicit World(WorldOptions options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Starts a new node; returns its slot (stable across restarts).
  std::size_t add_node(std::string name);
  // The live incarnation at `slot`, or null while it is down.
  Node* node(std::size_t slot);
  Node* node_by_id(const caf::node_id& id);
  std::size_t node_count() const { return slots_.size(); }
  const std::string& slot_name(std::size_t slot) const { return slots_.at(slot).name; }

  // Kills every node (newest first); nothing runs afterwards. The destructor does it too;
  // harnesses call it first when their own objects are used by the nodes' actors.
  void shut_down();

  // The node dies (see Network::crash and Node::kill). No-op if already down.
  void crash(std::size_t slot);
  // A fresh process at `slot` (new node id, empty memory). Crashes the old one first.
  Node& restart(std::size_t slot);

  Time now() const { return now_; }
  Duration elapsed() const { return now_ - start_; }
  Time start_time() const { return start_; }

  // Schedules `fn` at virtual time `t` (not before now). Events at the same time run in the
  // order they were scheduled. `touches`: the one node whose actors `fn` may give work (a
  // network delivery), or kAllSlots — the loop then rechecks only that node.
  static constexpr std::size_t kAllSlots = static_cast<std::size_t>(-1);
  void at(Time t, std::function<void()> fn, std::size_t touches = kAllSlots);
  void after(Duration d, std::function<void()> fn, std::size_t touches = kAllSlots) {
    at(now_ + d, std::move(fn), touches);
  }

  // Runs until `done()` holds, nothing is left to do, the virtual `deadline` passes or the
  // step budget is spent.
  StopReason run_until(const std::function<bool()>& done, Time deadline);

  Network& network() { return *network_; }
  Trace& trace() { return trace_; }
  uint64_t seed() const { return options_.seed; }
  // Independent seeded streams; `network_rng` draws latencies, `fault_rng` is for fault plans.
  Rng& network_rng() { return network_rng_; }
  Rng& fault_rng() { return fault_rng_; }
  Rng& user_rng() { return user_rng_; }

  // Problems the simulator itself detects (a message that cannot be serialized, a run that
  // exceeds its step budget...). Harnesses report them as invariant failures.
  void violation(std::string what);
  const std::vector<std::string>& violations() const { return violations_; }

  uint64_t steps() const { return steps_; }
  // The node whose actor is running right now (null between messages): log lines name it.
  const Node* current_node() const { return current_; }

private:
  struct Slot {
    std::string name;
    uint32_t incarnations = 0;
    std::unique_ptr<Node> current;
  };
  struct Event {
    std::function<void()> fn;
    std::size_t touches;
  };
  std::unique_ptr<Node> make_node(std::size_t slot);
  bool next_event_time(Time& out);
  void fire_due();
  // Re-reads a node's runnable jobs and earliest timeout into the indexes below. Only the node
  // that ran, or that an event touched, can have changed: the loop stays O(log nodes) per step.
  void refresh(std::size_t slot);
  void refresh_all();

  WorldOptions options_;
  Rng sched_rng_;
  Rng network_rng_;
  Rng fault_rng_;
  Rng user_rng_;
  Trace trace_;
  Time start_;
  Time now_;
  std::unique_ptr<Network> network_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Node>> dead_; // kept until the end: the harness may hold handles
  std::unordered_map<caf::node_id, std::size_t> slot_by_id_;
  std::map<std::pair<Time, uint64_t>, Event> events_;
  std::map<std::size_t, std::size_t> runnable_; // slot -> pending jobs (> 0 only)
  std::size_t runnable_total_ = 0;
  std::set<std::pair<Time, std::size_t>> timers_; // (earliest timeout, slot)
  std::vector<std::optional<Time>> timer_of_;     // by slot: its entry in timers_
  uint64_t next_event_seq_ = 0;
  uint64_t steps_ = 0;
  const Node* current_ = nullptr;
  std::vector<std::string> violations_;
};

} // namespace conveyor::sim
