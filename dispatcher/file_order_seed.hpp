// The seed of a job's or snapshot's list_files(shuffle=True) sources that were given none
// (SplitOptions::seed): mixed from what the journal keeps (the job's id, the creation time), not
// drawn, so a restarted dispatcher derives the same order and the simulator's runs replay
// (virtual time), while two jobs still get different orders.
#pragma once

#include <cstdint>

namespace conveyor::actors {

inline int64_t file_order_seed(uint64_t id, int64_t created_us) {
  const uint64_t mixed =
    (id * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(created_us) * 0xBF58476D1CE4E5B9ull);
  return static_cast<int64_t>((mixed ^ (mixed >> 31)) >> 1); // non-negative: -1 means none
}

} // namespace conveyor::actors
