// What the simulator's sweep tests share: the seed count from the environment and the readable
// list of failed runs with their replay commands.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>

#include "sim/sim.hpp"

namespace conveyor::sim_test {

// An integer from the environment (CONVEYOR_SIM_SEEDS, ...), or `fallback` when unset or empty.
inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// A fixed sweep's seed count, capped by CONVEYOR_SIM_SEEDS: the sanitizer build sets it low,
// since the simulator runs ~30x slower there and a memory error shows in any seed; the normal
// build runs the full count.
inline int capped_seeds(int runs) { return std::min(runs, env_int("CONVEYOR_SIM_SEEDS", runs)); }

// Each failed run's summary and the command that replays it.
inline std::string failures_of(const SweepResult& s) {
  std::string out;
  for (const auto& r : s.failures)
    out += r.summary() + "\n  replay: " + r.replay_command + "\n";
  return out;
}

} // namespace conveyor::sim_test
