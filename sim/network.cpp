#include "sim/network.hpp"

#include <algorithm>
#include <cmath>

#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/detail/sync_request_bouncer.hpp>
#include <caf/exit_reason.hpp>
#include <caf/make_actor.hpp>
#include <caf/sec.hpp>

#include "sim/node.hpp"
#include "sim/proxy.hpp"
#include "sim/world.hpp"

namespace conveyor::sim {

namespace {

constexpr uint64_t kTagDeliver = 0x64656c69; // "deli"
constexpr uint64_t kTagDrop = 0x64726f70;    // "drop"
constexpr uint64_t kTagDown = 0x646f776e;    // "down"
constexpr uint64_t kTagFault = 0x666c7420;   // "flt "
constexpr uint64_t kTagPublish = 0x70756273; // "pubs"

std::string shorten(std::string s, std::size_t max) {
  if (s.size() > max) {
    s.resize(max);
    s += "...";
  }
  return s;
}

} // namespace

Network::Network(World& world) : world_(world) {}

Network::~Network() = default;

std::string Network::node_name(std::size_t slot) const {
  auto* n = world_.node(slot);
  return n != nullptr ? n->name() : world_.slot_name(slot) + "(down)";
}

const LinkConfig& Network::link_config(std::size_t a, std::size_t b) const {
  auto i = link_configs_.find(unordered(a, b));
  return i != link_configs_.end() ? i->second : default_link_;
}

void Network::set_link(std::size_t a, std::size_t b, LinkConfig config) {
  link_configs_[unordered(a, b)] = config;
}

Network::Link& Network::link(const Node& from, const Node& to) {
  auto& l = links_[Pair{from.slot(), to.slot()}];
  if (l.from_incarnation != from.incarnation() || l.to_incarnation != to.incarnation()) {
    // A link between earlier incarnations: whatever it carried died with them.
    l = Link{};
    l.from_incarnation = from.incarnation();
    l.to_incarnation = to.incarnation();
  }
  return l;
}

Duration Network::transfer_delay(const LinkConfig& cfg, std::size_t bytes) {
  double secs = cfg.bytes_per_second > 0 ? static_cast<double>(bytes) / cfg.bytes_per_second : 0.0;
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(secs));
}

// --- proxies -------------------------------------------------------------------------------

caf::strong_actor_ptr Network::make_proxy(Node& home, const caf::node_id& nid, caf::actor_id aid) {
  caf::actor_config cfg;
  auto proxy = caf::make_actor<SimProxy, caf::strong_actor_ptr>(
    aid, nid, &home.system(), cfg, *this, home.slot(), home.incarnation());
  Node* owner = world_.node_by_id(nid);
  if (owner == nullptr || owner == &home || shutting_down_) {
    // Nobody answers at that node id (it crashed or restarted): connecting fails at once.
    auto home_slot = home.slot();
    auto home_inc = home.incarnation();
    world_.after(
      link_config(home_slot, home_slot).latency,
      [this, home_slot, home_inc, nid, aid] {
        auto* h = world_.node(home_slot);
        if (h != nullptr && h->incarnation() == home_inc)
          h->proxies().erase(nid, aid, caf::exit_reason::remote_link_unreachable);
      },
      home_slot);
    return proxy;
  }
  // Remote monitoring, as BASP's monitor_message: the owner tells us when the actor exits.
  auto real = owner->system().registry().get(aid);
  auto owner_slot = owner->slot();
  auto owner_inc = owner->incarnation();
  auto home_slot = home.slot();
  auto home_inc = home.incarnation();
  if (real == nullptr) {
    actor_exited(owner_slot, owner_inc, aid, home_slot, home_inc, caf::exit_reason::unknown);
  } else {
    real->get()->attach_functor(
      [this, owner_slot, owner_inc, aid, home_slot, home_inc](const caf::error& reason) {
        actor_exited(owner_slot, owner_inc, aid, home_slot, home_inc, reason);
      });
  }
  if (partitioned(home_slot, owner_slot))
    arm_break_timer(home_slot, owner_slot);
  return proxy;
}

void Network::actor_exited(std::size_t owner_slot, uint32_t owner_inc, caf::actor_id aid,
                           std::size_t home_slot, uint32_t home_inc, const caf::error& reason) {
  if (shutting_down_)
    return;
  auto* owner = world_.node(owner_slot);
  auto* home = world_.node(home_slot);
  if (owner == nullptr || home == nullptr || owner->incarnation() != owner_inc ||
      home->incarnation() != home_inc)
    return; // a crash already killed the proxies on the other side
  Packet p;
  p.kind = PacketKind::down;
  p.dest = aid;
  p.reason = reason;
  send_packet(*owner, *home, std::move(p));
}

// --- sending -------------------------------------------------------------------------------

void Network::forward(SimProxy& proxy, caf::mailbox_element_ptr what) {
  auto* from = world_.node(proxy.home_slot());
  if (from == nullptr || from->incarnation() != proxy.home_incarnation() || shutting_down_)
    return; // the sending process is dead
  auto* to = world_.node_by_id(proxy.node());
  if (to == nullptr) {
    ++dropped_;
    world_.trace().record(world_.elapsed(), {kTagDrop, from->slot(), proxy.id()}, [&] {
      return from->name() + " -> (gone) drop message to actor " + std::to_string(proxy.id());
    });
    return;
  }
  Packet p;
  p.kind = PacketKind::message;
  p.dest = proxy.id();
  p.mid = what->mid;
  auto msg = what->move_content_to_message();
  // CAF's serializer only prints an error for an unregistered type and sends an empty message;
  // a simulation must fail loudly instead.
  auto& types = from->system().types();
  for (std::size_t i = 0; i < msg.size(); ++i) {
    auto rtti = msg.type(i);
    if (&types.portable_name(rtti) == &types.default_type_name()) {
      world_.violation("cannot serialize a message from " + from->name() + " to " + to->name() +
                       ": element " + std::to_string(i) + " has a type that is not registered (" +
                       (rtti.second != nullptr ? rtti.second->name() : "?") + ")");
      return;
    }
  }
  caf::binary_serializer sink{from->context(), p.bytes};
  if (auto err = sink(what->sender, what->stages, msg)) {
    world_.violation("cannot serialize a message from " + from->name() + " to " + to->name() +
                     ": " + from->system().render(err) +
                     " (content: " + shorten(caf::to_string(msg), 200) + ")");
    return;
  }
  send_packet(*from, *to, std::move(p));
}

void Network::send_packet(Node& from, Node& to, Packet p) {
  auto& l = link(from, to);
  const auto& cfg = link_config(from.slot(), to.slot());
  auto now = world_.now();
  auto start = std::max(now, l.busy_until);
  l.busy_until = start + transfer_delay(cfg, p.bytes.size());
  auto jitter = cfg.jitter.count() > 0
                  ? Duration{static_cast<Duration::rep>(
                      world_.network_rng().below(static_cast<uint64_t>(cfg.jitter.count()) + 1))}
                  : Duration{0};
  p.deliver_at = std::max(l.busy_until + cfg.latency + jitter, l.last_delivery);
  l.last_delivery = p.deliver_at;
  l.queue.push_back(std::move(p));
  if (!partitioned(from.slot(), to.slot()))
    schedule_delivery(from.slot(), to.slot(), l, l.queue.back());
}

void Network::schedule_delivery(std::size_t from, std::size_t to, Link& l, const Packet& p) {
  world_.at(
    p.deliver_at, [this, from, to, epoch = l.epoch] { on_delivery_due(from, to, epoch); }, to);
}

void Network::on_delivery_due(std::size_t from, std::size_t to, uint64_t epoch) {
  auto i = links_.find(Pair{from, to});
  if (i == links_.end() || i->second.epoch != epoch || i->second.queue.empty())
    return;
  auto p = std::move(i->second.queue.front());
  i->second.queue.pop_front();
  auto* f = world_.node(from);
  auto* t = world_.node(to);
  if (f == nullptr || t == nullptr)
    return;
  deliver(*f, *t, std::move(p));
}

// --- receiving -----------------------------------------------------------------------------

void Network::deliver(Node& from, Node& to, Packet p) {
  auto& trace = world_.trace();
  if (p.kind == PacketKind::down) {
    trace.record(world_.elapsed(), {kTagDown, from.slot(), to.slot(), p.dest}, [&] {
      return from.name() + " -> " + to.name() + "  down: actor " + std::to_string(p.dest) +
             " exited (" + to.system().render(p.reason) + ")";
    });
    to.proxies().erase(from.id(), p.dest, p.reason);
    return;
  }
  auto dst = to.system().registry().get(p.dest);
  if (dst == nullptr && !p.mid.is_request()) {
    ++dropped_;
    trace.record(world_.elapsed(), {kTagDrop, from.slot(), to.slot(), p.dest}, [&] {
      return from.name() + " -> " + to.name() + "  drop: no actor " + std::to_string(p.dest);
    });
    return;
  }
  caf::strong_actor_ptr sender;
  std::vector<caf::strong_actor_ptr> stages;
  caf::message msg;
  caf::binary_deserializer source{to.context(), p.bytes};
  if (auto err = source(sender, stages, msg)) {
    world_.violation("cannot deserialize a message from " + from.name() + " on " + to.name() +
                     ": " + to.system().render(err));
    return;
  }
  ++delivered_;
  bytes_delivered_ += p.bytes.size();
  trace.record(world_.elapsed(),
               {kTagDeliver, from.slot(), to.slot(), p.dest, p.mid.integer_value(),
                Trace::hash_of(std::string_view{p.bytes.data(), p.bytes.size()})},
               [&] {
                 return from.name() + " -> " + to.name() + "  actor " + std::to_string(p.dest) +
                        (p.mid.is_request()    ? " request "
                         : p.mid.is_response() ? " response "
                                               : " ") +
                        std::to_string(p.bytes.size()) + "B  " +
                        shorten(readable(caf::to_string(msg),
                                         [this](std::size_t slot, uint32_t inc) {
                                           if (slot >= world_.node_count())
                                             return std::string{"?"};
                                           return world_.slot_name(slot) +
                                                  (inc > 0 ? "#" + std::to_string(inc) : "");
                                         }),
                                160);
               });
  if (dst == nullptr) {
    // A request to an actor that is gone: answer it with an error, as BASP does.
    caf::detail::sync_request_bouncer bounce{caf::exit_reason::remote_link_unreachable};
    bounce(sender, p.mid);
    return;
  }
  // Link requests from proxies (sender == receiver), as BASP intercepts them.
  if (msg.match_elements<caf::atom_value, caf::strong_actor_ptr>()) {
    auto atom = msg.get_as<caf::atom_value>(0);
    const auto& other = msg.get_as<caf::strong_actor_ptr>(1);
    if (atom == caf::link_atom::value || atom == caf::unlink_atom::value) {
      if (other != nullptr) {
        auto* proxy = static_cast<caf::actor_proxy*>(other->get());
        if (atom == caf::link_atom::value)
          proxy->add_link(dst->get());
        else
          proxy->remove_link(dst->get());
      }
      return;
    }
  }
  if (observer_)
    observer_(from.slot(), to.slot(), msg);
  dst->enqueue(
    caf::make_mailbox_element(std::move(sender), p.mid, std::move(stages), std::move(msg)),
    nullptr);
}

// --- transport -----------------------------------------------------------------------------

caf::error Network::publish(Node& node, const std::string& address, caf::strong_actor_ptr actor,
                            std::set<std::string> ifs) {
  auto i = endpoints_.find(address);
  if (i != endpoints_.end()) {
    auto* owner = world_.node(i->second.slot);
    if (owner != nullptr && owner->incarnation() == i->second.incarnation)
      return caf::make_error(caf::sec::cannot_open_port, "address already in use", address);
  }
  // Like middleman::publish: the actor becomes reachable by id from other nodes.
  node.system().registry().put(actor->id(), actor);
  world_.trace().record(world_.elapsed(), {kTagPublish, node.slot(), actor->id()}, [&] {
    return node.name() + " publishes actor " + std::to_string(actor->id()) + " at " + address;
  });
  endpoints_[address] = Endpoint{node.slot(), node.incarnation(), std::move(actor), std::move(ifs)};
  return caf::none;
}

void Network::unpublish(Node& node, const std::string& address, const caf::actor_addr& actor) {
  auto i = endpoints_.find(address);
  if (i != endpoints_.end() && i->second.slot == node.slot() &&
      i->second.incarnation == node.incarnation() && i->second.actor &&
      i->second.actor->address() == actor)
    endpoints_.erase(i);
}

bool Network::connect(Node& from, const std::string& address,
                      std::function<void(caf::expected<Connected>)> done) {
  auto from_slot = from.slot();
  auto from_inc = from.incarnation();
  auto i = endpoints_.find(address);
  Node* target = nullptr;
  if (i != endpoints_.end()) {
    target = world_.node(i->second.slot);
    if (target != nullptr && target->incarnation() != i->second.incarnation)
      target = nullptr;
  }
  if (target == nullptr || target == &from) {
    // Connection refused: nothing listens there (any more).
    world_.after(
      2 * link_config(from_slot, from_slot).latency,
      [this, from_slot, from_inc, address, done = std::move(done)]() mutable {
        auto* f = world_.node(from_slot);
        if (f != nullptr && f->incarnation() == from_inc)
          done(caf::make_error(caf::sec::cannot_connect_to_node, "no node listens at", address));
      },
      from_slot);
    return true;
  }
  if (partitioned(from_slot, target->slot())) {
    world_.trace().record(world_.elapsed(), {kTagDrop, from_slot, target->slot(), 0}, [&] {
      return from.name() + " -> " + target->name() + "  connect to " + address +
             " lost in partition";
    });
    // SYN lost: as CAF's middleman does, the handshake ends after the connection timeout (or
    // the caller's own timeout, if shorter), and the caller may try again.
    world_.after(
      connection_timeout_,
      [this, from_slot, from_inc, address, done = std::move(done)]() mutable {
        auto* f = world_.node(from_slot);
        if (f != nullptr && f->incarnation() == from_inc)
          done(caf::make_error(caf::sec::connection_timeout, "no answer from", address));
      },
      from_slot);
    return true;
  }
  // The handshake is a round trip; the handle becomes a proxy on `from`, as in BASP.
  auto target_slot = target->slot();
  auto target_inc = target->incarnation();
  auto aid = i->second.actor->id();
  auto nid = target->id();
  auto ifs = i->second.ifs;
  world_.after(
    2 * link_config(from_slot, target_slot).latency,
    [this, from_slot, from_inc, target_slot, target_inc, aid, nid, ifs = std::move(ifs),
     done = std::move(done)]() mutable {
      auto* f = world_.node(from_slot);
      if (f == nullptr || f->incarnation() != from_inc)
        return;
      auto* t = world_.node(target_slot);
      if (t == nullptr || t->incarnation() != target_inc) {
        done(caf::make_error(caf::sec::cannot_connect_to_node, "peer died during the handshake"));
        return;
      }
      done(Connected{nid, f->proxies().get_or_put(nid, aid), std::move(ifs)});
    },
    from_slot);
  return true;
}

// --- faults --------------------------------------------------------------------------------

bool Network::partitioned(std::size_t a, std::size_t b) const {
  return partitions_.count(unordered(a, b)) > 0;
}

void Network::partition(std::size_t a, std::size_t b) {
  auto key = unordered(a, b);
  if (partitions_.count(key) > 0 || a == b)
    return;
  auto& st = partitions_[key];
  st.id = next_partition_id_++;
  st.since = world_.now();
  world_.trace().record(world_.elapsed(), {kTagFault, 1, a, b},
                        [&] { return "PARTITION " + node_name(a) + " <-> " + node_name(b); });
  // Stop the deliveries in flight; they wait in the queues for the heal.
  for (auto dir : {Pair{a, b}, Pair{b, a}}) {
    auto i = links_.find(dir);
    if (i != links_.end())
      ++i->second.epoch;
  }
  arm_break_timer(a, b);
}

void Network::arm_break_timer(std::size_t a, std::size_t b) {
  auto key = unordered(a, b);
  auto i = partitions_.find(key);
  if (i == partitions_.end() || i->second.break_pending)
    return;
  i->second.break_pending = true;
  auto id = i->second.id;
  world_.after(connection_timeout_, [this, key, id] {
    auto j = partitions_.find(key);
    if (j == partitions_.end() || j->second.id != id)
      return; // healed in time
    j->second.break_pending = false;
    break_connection(key.first, key.second, "connection timeout during partition");
  });
}

void Network::heal(std::size_t a, std::size_t b) {
  auto key = unordered(a, b);
  if (partitions_.erase(key) == 0)
    return;
  world_.trace().record(world_.elapsed(), {kTagFault, 2, a, b},
                        [&] { return "HEAL " + node_name(a) + " <-> " + node_name(b); });
  // TCP retransmits what waited: in order, one latency after the heal at the earliest.
  for (auto dir : {Pair{a, b}, Pair{b, a}}) {
    auto i = links_.find(dir);
    if (i == links_.end())
      continue;
    auto& l = i->second;
    ++l.epoch;
    const auto& cfg = link_config(a, b);
    Time last = world_.now();
    for (auto& p : l.queue) {
      p.deliver_at = std::max({p.deliver_at, world_.now() + cfg.latency, last});
      last = p.deliver_at;
      schedule_delivery(dir.first, dir.second, l, p);
    }
    l.last_delivery = std::max(l.last_delivery, last);
  }
}

void Network::disconnect(std::size_t a, std::size_t b) {
  break_connection(a, b, "connection reset");
}

void Network::break_connection(std::size_t a, std::size_t b, const char* why) {
  auto* na = world_.node(a);
  auto* nb = world_.node(b);
  world_.trace().record(world_.elapsed(), {kTagFault, 3, a, b}, [&] {
    return std::string{"DISCONNECT "} + node_name(a) + " <-> " + node_name(b) + " (" + why + ")";
  });
  for (auto dir : {Pair{a, b}, Pair{b, a}}) {
    auto i = links_.find(dir);
    if (i != links_.end()) {
      dropped_ += i->second.queue.size();
      i->second.queue.clear();
      ++i->second.epoch;
    }
  }
  if (na != nullptr && nb != nullptr) {
    na->proxies().erase(nb->id());
    nb->proxies().erase(na->id());
  }
}

void Network::crash(std::size_t slot) {
  auto* dead = world_.node(slot);
  if (dead == nullptr)
    return;
  for (auto i = links_.begin(); i != links_.end(); ++i) {
    if (i->first.first == slot || i->first.second == slot) {
      dropped_ += i->second.queue.size();
      i->second.queue.clear();
      ++i->second.epoch;
    }
  }
  // The peers' OS resets the connections one latency later: then their proxies of the dead
  // node's actors die (monitors get remote_link_unreachable).
  auto dead_id = dead->id();
  for (std::size_t s = 0; s < world_.node_count(); ++s) {
    auto* peer = world_.node(s);
    if (s == slot || peer == nullptr)
      continue;
    auto inc = peer->incarnation();
    world_.after(
      link_config(s, slot).latency,
      [this, s, inc, dead_id] {
        auto* p = world_.node(s);
        if (p != nullptr && p->incarnation() == inc)
          p->proxies().erase(dead_id);
      },
      s);
  }
  for (auto i = endpoints_.begin(); i != endpoints_.end();) {
    if (i->second.slot == slot)
      i = endpoints_.erase(i);
    else
      ++i;
  }
}

} // namespace conveyor::sim
