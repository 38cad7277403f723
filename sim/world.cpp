#include "sim/world.hpp"

#include <algorithm>

namespace conveyor::sim {

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::done: return "done";
    case StopReason::quiescent: return "quiescent";
    case StopReason::deadline: return "deadline";
    case StopReason::step_limit: return "step_limit";
  }
  return "?";
}

namespace {
// Virtual time starts at a fixed, non-zero point (CAF gives the zero time point a meaning).
const Time kStart = Time{} + std::chrono::hours(1);
} // namespace

World::World(WorldOptions options)
  : options_(std::move(options)), sched_rng_(options_.seed), network_rng_(sched_rng_.fork(1)),
    fault_rng_(sched_rng_.fork(2)), user_rng_(sched_rng_.fork(3)), trace_(options_.keep_trace),
    start_(kStart), now_(kStart) {
  network_ = std::make_unique<Network>(*this);
  network_->set_default_link(options_.link);
  network_->set_connection_timeout(options_.connection_timeout);
}

void World::shut_down() {
  // Exits during teardown are not traffic.
  network_->shut_down();
  for (auto i = slots_.rbegin(); i != slots_.rend(); ++i)
    if (i->current)
      i->current->kill();
}

World::~World() {
  shut_down();
  events_.clear();
  for (auto i = slots_.rbegin(); i != slots_.rend(); ++i)
    i->current.reset();
  dead_.clear();
  network_.reset();
}

std::unique_ptr<Node> World::make_node(std::size_t slot) {
  auto& s = slots_[slot];
  auto incarnation = s.incarnations++;
  auto name = incarnation == 0 ? s.name : s.name + "#" + std::to_string(incarnation);
  auto n = std::make_unique<Node>(*network_, slot, incarnation, std::move(name),
                                  options_.configure_node, now_);
  slot_by_id_[n->id()] = slot;
  return n;
}

std::size_t World::add_node(std::string name) {
  slots_.push_back(Slot{std::move(name), 0, nullptr});
  timer_of_.emplace_back();
  auto slot = slots_.size() - 1;
  slots_[slot].current = make_node(slot);
  refresh(slot);
  trace_.record(elapsed(), {0x6e6f6465 /* node */, slot, 0},
                [&] { return "start " + slots_[slot].current->name(); });
  return slot;
}

Node* World::node(std::size_t slot) {
  if (slot >= slots_.size())
    return nullptr;
  auto* n = slots_[slot].current.get();
  return n != nullptr && n->alive() ? n : nullptr;
}

Node* World::node_by_id(const caf::node_id& id) {
  auto i = slot_by_id_.find(id);
  if (i == slot_by_id_.end())
    return nullptr;
  auto* n = node(i->second);
  return n != nullptr && n->id() == id ? n : nullptr;
}

void World::crash(std::size_t slot) {
  auto* n = node(slot);
  if (n == nullptr)
    return;
  trace_.record(elapsed(), {0x63726173 /* cras */, slot, n->incarnation()},
                [&] { return "CRASH " + n->name(); });
  network_->crash(slot);
  current_ = n; // what its actors log while they die is theirs
  n->kill();
  current_ = nullptr;
  dead_.push_back(std::move(slots_[slot].current));
  refresh(slot);
}

Node& World::restart(std::size_t slot) {
  crash(slot);
  slots_.at(slot).current = make_node(slot);
  refresh(slot);
  auto& n = *slots_[slot].current;
  trace_.record(elapsed(), {0x72657374 /* rest */, slot, n.incarnation()},
                [&] { return "restart " + n.name(); });
  return n;
}

void World::at(Time t, std::function<void()> fn, std::size_t touches) {
  events_.emplace(std::make_pair(std::max(t, now_), next_event_seq_++),
                  Event{std::move(fn), touches});
}

void World::refresh(std::size_t slot) {
  auto* n = node(slot);
  auto jobs = n != nullptr ? n->pending_jobs() : 0;
  auto r = runnable_.find(slot);
  if (r != runnable_.end()) {
    runnable_total_ -= r->second;
    if (jobs == 0)
      runnable_.erase(r);
    else
      r->second = jobs;
  } else if (jobs > 0) {
    runnable_.emplace(slot, jobs);
  }
  runnable_total_ += jobs;
  auto& entry = timer_of_[slot];
  Time t;
  bool has = n != nullptr && n->next_timeout(t);
  if (entry && (!has || *entry != t)) {
    timers_.erase({*entry, slot});
    entry.reset();
  }
  if (has && !entry) {
    timers_.emplace(t, slot);
    entry = t;
  }
}

void World::refresh_all() {
  for (std::size_t s = 0; s < slots_.size(); ++s)
    refresh(s);
}

void World::violation(std::string what) {
  trace_.record(elapsed(), {0x76696f6c /* viol */, violations_.size()},
                [&] { return "VIOLATION " + what; });
  violations_.push_back(std::move(what));
}

bool World::next_event_time(Time& out) {
  bool found = false;
  if (!events_.empty()) {
    out = events_.begin()->first.first;
    found = true;
  }
  if (!timers_.empty() && (!found || timers_.begin()->first < out)) {
    out = timers_.begin()->first;
    found = true;
  }
  return found;
}

void World::fire_due() {
  while (!events_.empty() && events_.begin()->first.first <= now_) {
    auto event = std::move(events_.begin()->second);
    events_.erase(events_.begin());
    event.fn();
    if (event.touches == kAllSlots)
      refresh_all();
    else if (event.touches < slots_.size())
      refresh(event.touches);
  }
  while (!timers_.empty() && timers_.begin()->first <= now_) {
    auto slot = timers_.begin()->second;
    if (auto* n = node(slot))
      n->set_time(now_);
    refresh(slot);
    if (timer_of_[slot] && *timer_of_[slot] <= now_)
      break; // a timeout that did not fire (cannot happen): never spin
  }
}

StopReason World::run_until(const std::function<bool()>& done, Time deadline) {
  uint64_t budget = options_.max_steps;
  refresh_all(); // the harness may have sent messages since the last call
  for (uint64_t local = 0;;) {
    if (done && done())
      return StopReason::done;
    if (runnable_total_ > 0) {
      if (local++ >= budget)
        return StopReason::step_limit;
      ++steps_;
      // A seeded pick among all runnable actors of all nodes (slot order, then queue order).
      auto pick = static_cast<std::size_t>(sched_rng_.below(runnable_total_));
      for (auto [slot, count] : runnable_) {
        if (pick < count) {
          auto* n = slots_[slot].current.get();
          current_ = n;
          n->run_job(pick, now_);
          current_ = nullptr;
          refresh(slot);
          break;
        }
        pick -= count;
      }
      continue;
    }
    Time next;
    if (!next_event_time(next))
      return StopReason::quiescent;
    if (next > deadline) {
      if (deadline > now_)
        now_ = deadline;
      return StopReason::deadline;
    }
    if (next > now_) {
      now_ = next;
      trace_.mix(static_cast<uint64_t>((now_ - start_).count()));
    }
    fire_due();
  }
}

} // namespace conveyor::sim
