#include "sim/production_cost.hpp"

#include <algorithm>
#include <cmath>

#include "sim/world.hpp"

namespace conveyor::sim {

ProductionCost::ProductionCost(World& world, double rate, double noise, uint64_t seed)
  : world_(world),
    cost_(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(1.0 / rate))),
    noise_(noise), rng_(seed), previous_(actors::hooks::install(this)) {}

ProductionCost::~ProductionCost() { actors::hooks::install(previous_); }

bool ProductionCost::current_worker(std::pair<std::size_t, uint32_t>& key) const {
  const Node* n = world_.current_node();
  if (n == nullptr || n->name().rfind("worker-", 0) != 0)
    return false;
  key = {n->slot(), n->incarnation()};
  return true;
}

int64_t ProductionCost::produce_allowance(uint64_t task, int64_t& wait_ns) {
  std::pair<std::size_t, uint32_t> node;
  if (!current_worker(node))
    return -1;
  const auto now = world_.now();
  auto busy = busy_until_.find(node);
  const std::tuple<std::size_t, uint32_t, uint64_t> key{node.first, node.second, task};
  if (busy == busy_until_.end() || busy->second <= now) {
    armed_.erase(key);
    return 1; // one element per step: each is charged before the next one starts
  }
  // Busy: the task steps again when the CPU is free; a timer already set for then is enough.
  auto armed = armed_.find(key);
  if (armed != armed_.end() && armed->second == busy->second) {
    wait_ns = 0;
    return 0;
  }
  armed_[key] = busy->second;
  wait_ns = std::max<int64_t>(1, (busy->second - now).count());
  return 0;
}

void ProductionCost::produced(int64_t elements) {
  std::pair<std::size_t, uint32_t> node;
  if (elements <= 0 || !current_worker(node))
    return;
  auto& busy = busy_until_[node];
  busy = std::max(busy, world_.now()); // idle time is not banked: at most `rate` per second
  for (int64_t i = 0; i < elements; ++i) {
    const double f = 1 + noise_ * (2 * rng_.unit() - 1);
    busy += std::chrono::duration_cast<Duration>(cost_ * f);
  }
}

std::unique_ptr<actors::hooks::SplitAnswerFilter> ProductionCost::new_split_answer_filter() {
  return previous_ != nullptr ? previous_->new_split_answer_filter() : nullptr;
}
bool ProductionCost::forget_lost_split() {
  return previous_ != nullptr && previous_->forget_lost_split();
}
bool ProductionCost::forget_held_split() {
  return previous_ != nullptr && previous_->forget_held_split();
}
bool ProductionCost::credit_off_by_one() {
  return previous_ != nullptr && previous_->credit_off_by_one();
}
bool ProductionCost::skip_round(int64_t consumer_index, int64_t round) {
  return previous_ != nullptr && previous_->skip_round(consumer_index, round);
}

} // namespace conveyor::sim
