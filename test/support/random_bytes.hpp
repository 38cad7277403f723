// `n` pseudo-random bytes from `seed` (incompressible payloads, reproducible per seed).
#pragma once

#include <cstddef>
#include <random>
#include <string>

namespace conveyor::testing {

inline std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng{seed};
  std::string s(n, '\0');
  for (auto& c : s)
    c = static_cast<char>(rng());
  return s;
}

} // namespace conveyor::testing
