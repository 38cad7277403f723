// The simulated network between nodes, modelled on what TCP + CAF's BASP can do:
//   - messages between two nodes are serialized with CAF's own serializers (so a type that
//     could not cross a real connection cannot cross this one) and delivered in send order
//     per direction, after a per-link latency plus transmission time (size / bandwidth);
//   - handles of another node's actors become proxies (SimProxy); a proxy dies — and its
//     monitors get down_msg with the remote exit reason — when the remote actor exits, after
//     the messages it sent before;
//   - a partition holds messages (TCP retransmits them when it heals); one that lasts longer
//     than the connection timeout (CAF's middleman heartbeats) breaks the connection: queued
//     messages are lost and every proxy of the peer dies with remote_link_unreachable;
//   - a crashed node's connections break at once, as the peer OS resets them.
// No reordering within a connection, no duplicates, no corruption: TCP + CAF never show them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_control_block.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/message_id.hpp>
#include <caf/node_id.hpp>

#include "sim/trace.hpp"

namespace conveyor::sim {

class Node;
class SimProxy;
class World;

struct LinkConfig {
  Duration latency = std::chrono::microseconds(200); // one way
  Duration jitter = std::chrono::microseconds(100); // extra delay per message, drawn in [0, jitter]
  double bytes_per_second = 1.25e9;                 // 10 Gbit/s
};

class Network {
public:
  explicit Network(World& world);
  ~Network();

  World& world() { return world_; }

  // --- used by nodes and proxies
  caf::strong_actor_ptr make_proxy(Node& home, const caf::node_id& nid, caf::actor_id aid);
  void forward(SimProxy& proxy, caf::mailbox_element_ptr what);

  // --- the transport: named endpoints ("worker-2:6000") instead of host:port
  // Makes `actor` (an actor of `node`, with the typed interface `ifs`) reachable at `address`.
  // cannot_open_port if a live node holds that address.
  caf::error publish(Node& node, const std::string& address, caf::strong_actor_ptr actor,
                     std::set<std::string> ifs);
  // Removes what `node` published at `address` (if it was `actor`).
  void unpublish(Node& node, const std::string& address, const caf::actor_addr& actor);

  struct Connected {
    caf::node_id node;
    caf::strong_actor_ptr actor; // a proxy on the connecting node
    std::set<std::string> ifs;
  };
  // Connects `from` to the actor published at `address`; `done` gets a proxy after a round trip,
  // or cannot_connect_to_node (nothing there: after one round trip). Across a partition it
  // answers connection_timeout after the connection timeout, as CAF's middleman ends a
  // handshake whose SYN was lost. `done` runs from the event loop, outside any actor: it must
  // only send messages. Returns false when no answer will ever come.
  bool connect(Node& from, const std::string& address,
               std::function<void(caf::expected<Connected>)> done);

  // --- faults between two nodes (slots) and of one node
  void partition(std::size_t a, std::size_t b); // both directions
  void heal(std::size_t a, std::size_t b);
  bool partitioned(std::size_t a, std::size_t b) const;
  // Breaks the connection now (both sides see down_msg for every proxy of the other).
  void disconnect(std::size_t a, std::size_t b);
  // The node at `slot` died: its connections break and its published addresses vanish.
  void crash(std::size_t slot);

  // Per-pair link settings (both directions); default for pairs not set.
  void set_link(std::size_t a, std::size_t b, LinkConfig config);
  void set_default_link(LinkConfig config) { default_link_ = config; }
  const LinkConfig& link_config(std::size_t a, std::size_t b) const;
  void set_connection_timeout(Duration d) { connection_timeout_ = d; }

  // Counters for the run summary.
  uint64_t messages_delivered() const { return delivered_; }
  uint64_t messages_dropped() const { return dropped_; }
  uint64_t bytes_delivered() const { return bytes_delivered_; }

  // After this, exits of actors no longer produce network traffic (world teardown).
  // Drops the endpoints' handles too, so no node's actor outlives its actor system.
  void shut_down() {
    shutting_down_ = true;
    endpoints_.clear();
    links_.clear();
  }

  // Observes every message delivered to a node, after it crossed the wire (for invariants that
  // count what consumers received). Arguments: source slot, destination slot, content.
  using Observer = std::function<void(std::size_t, std::size_t, const caf::message&)>;
  void set_observer(Observer f) { observer_ = std::move(f); }

private:
  enum class PacketKind : uint8_t { message, down };
  struct Packet {
    PacketKind kind = PacketKind::message;
    caf::actor_id dest = 0; // receiver (message) or the actor that exited (down)
    caf::message_id mid;
    std::vector<char> bytes; // sender, forwarding stages, content
    caf::error reason;       // down
    Time deliver_at;
  };
  struct Link { // one direction between two node incarnations
    uint32_t from_incarnation = 0;
    uint32_t to_incarnation = 0;
    std::deque<Packet> queue; // in flight, in send order
    uint64_t epoch = 0;       // bumped to cancel scheduled deliveries
    Time busy_until{};
    Time last_delivery{};
  };
  struct PartitionState {
    uint64_t id = 0;
    Time since{};
    bool break_pending = false;
  };
  using Pair = std::pair<std::size_t, std::size_t>;
  static Pair unordered(std::size_t a, std::size_t b) { return a < b ? Pair{a, b} : Pair{b, a}; }

  Link& link(const Node& from, const Node& to);
  void send_packet(Node& from, Node& to, Packet p);
  void schedule_delivery(std::size_t from, std::size_t to, Link& l, const Packet& p);
  void on_delivery_due(std::size_t from, std::size_t to, uint64_t epoch);
  void deliver(Node& from, Node& to, Packet p);
  void break_connection(std::size_t a, std::size_t b, const char* why);
  void arm_break_timer(std::size_t a, std::size_t b);
  void actor_exited(std::size_t owner_slot, uint32_t owner_inc, caf::actor_id aid,
                    std::size_t home_slot, uint32_t home_inc, const caf::error& reason);
  Duration transfer_delay(const LinkConfig& cfg, std::size_t bytes);
  std::string node_name(std::size_t slot) const;

  World& world_;
  std::map<Pair, Link> links_; // directed (from slot, to slot)
  std::map<Pair, PartitionState> partitions_;
  std::map<Pair, LinkConfig> link_configs_;
  LinkConfig default_link_;
  Duration connection_timeout_ = std::chrono::seconds(5);
  struct Endpoint {
    std::size_t slot;
    uint32_t incarnation;
    caf::strong_actor_ptr actor;
    std::set<std::string> ifs;
  };
  std::map<std::string, Endpoint> endpoints_;
  uint64_t next_partition_id_ = 1;
  uint64_t delivered_ = 0;
  uint64_t dropped_ = 0;
  uint64_t bytes_delivered_ = 0;
  bool shutting_down_ = false;
  Observer observer_;
};

} // namespace conveyor::sim
