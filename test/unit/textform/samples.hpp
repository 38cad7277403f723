// Datasets covering every op and every attribute kind, each built with the C++ builder and
// paired with the canonical text form it must print as (and parse from).
#pragma once

#include <string>
#include <vector>

#include "pipeline/graph/dataset.hpp"

namespace conveyor::textform_test {

struct Sample {
  std::string text; // canonical text form
  Dataset built;    // the same dataset from the builder
};

const std::vector<Sample>& samples();

} // namespace conveyor::textform_test
