#include "actors/sim/planted_bugs.hpp"

namespace conveyor::sim {

const char* to_string(PlantedBug bug) {
  switch (bug) {
    case PlantedBug::none: return "none";
    case PlantedBug::duplicate_split: return "duplicate-split";
    case PlantedBug::forget_lost_split: return "forget-lost-split";
  }
  return "?";
}

std::optional<PlantedBug> planted_bug_from_string(std::string_view name) {
  for (auto b : {PlantedBug::none, PlantedBug::duplicate_split, PlantedBug::forget_lost_split})
    if (name == to_string(b))
      return b;
  return std::nullopt;
}

} // namespace conveyor::sim
