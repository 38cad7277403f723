// Limits and checks shared by the graph readers (serialize.cpp: binary, serialize_json.cpp: JSON),
// which never trust their input: anything malformed becomes a data_loss Status.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "pipeline/graph/graph.hpp"
#include "pipeline/tensor/tensor.hpp"

namespace conveyor::serial {

// Deeper graphs are rejected on reading, so that neither the reader nor anything walking the
// graph afterwards can run out of stack. (The text form has the same limit.)
inline constexpr int kMaxGraphDepth = 1000;

// Thrown inside a reader and turned into a data_loss Status at its boundary (cereal throws too).
struct CorruptGraph : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Entries of a tensor of this shape; nullopt when a dimension is negative or the count would
// exceed `limit` (so a garbage shape cannot overflow or force a huge allocation).
std::optional<int64_t> entries_within(const Shape& shape, int64_t limit);

// Throws CorruptGraph unless `node` satisfies its op schema; checks bool tensors hold 0 or 1.
void check_loaded_node(const Node& node);

} // namespace conveyor::serial
