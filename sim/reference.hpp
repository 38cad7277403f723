// What the dataset yields, computed once per sweep by running the pipeline locally: the
// invariants compare what the simulated consumers received against it.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/tensor/element.hpp"

namespace conveyor::sim {

struct Reference {
  std::vector<Element> elements;
  bool ordered = true;           // two local runs gave the same order
  bool split_transparent = true; // see Observation::split_transparent (invariants.hpp)
  bool per_split = false;        // see Observation::per_split
};

// invalid_argument for an infinite dataset or one of more than a million elements.
Expected<Reference> make_reference(const Dataset& dataset);

// How many splits a DYNAMIC job of `dataset` hands out over all its epochs with this split
// size; -1 when unknown (a take stops each worker's pipeline early: it asks for fewer).
int64_t count_splits(const Dataset& dataset, int64_t split_size);

} // namespace conveyor::sim
