#include "sim/scale_actuator.hpp"

#include "sim/world.hpp"

namespace conveyor::sim {

ScaleActuator::ScaleActuator(World& world, Nodes nodes, int first_index, Duration register_min,
                             Duration register_max, uint64_t seed)
  : world_(world), nodes_(std::move(nodes)), register_min_(register_min),
    register_max_(register_max), rng_(seed), next_(first_index) {
  for (int i = 0; i < first_index; ++i)
    running_.push_back(i);
}

void ScaleActuator::request(int64_t target) {
  targets_.push_back({std::chrono::duration<double>(world_.elapsed()).count(), target});
  world_.after(Duration{0}, [this, target] { apply(target); });
}

void ScaleActuator::apply(int64_t target) {
  while (static_cast<int64_t>(running_.size()) < target) {
    const int index = next_++;
    running_.push_back(index);
    ++started_;
    nodes_.add(index);
    const auto delay =
      register_min_ + Duration{static_cast<int64_t>(rng_.below(
                        static_cast<uint64_t>((register_max_ - register_min_).count()) + 1))};
    world_.after(delay, [this, index] { nodes_.start(index); });
  }
  while (static_cast<int64_t>(running_.size()) > target && !running_.empty()) {
    const int index = running_.back();
    running_.pop_back();
    ++stopped_;
    nodes_.stop(index);
  }
}

} // namespace conveyor::sim
