// The random stream of a random image op for one element: seeded by (seed, op name, a 64-bit
// hash of every component's dtype, shape and bytes), so that an element gets the same crop or
// flip whichever worker maps it and in whatever order (DYNAMIC sharding on 1 or 3 workers gives
// identical outputs). The flip side: equal elements get equal draws, in every epoch.
#pragma once

#include <cstdint>
#include <string_view>

#include "conveyor/element.hpp"

namespace conveyor::image {

uint64_t element_hash(const Element& e);

class ElementRandom {
public:
  ElementRandom(int64_t seed, std::string_view op, const Element& e);
  uint64_t next();
  double uniform(double lo, double hi);    // [lo, hi)
  int64_t integer(int64_t lo, int64_t hi); // [lo, hi], lo <= hi

private:
  uint64_t state_;
};

} // namespace conveyor::image
