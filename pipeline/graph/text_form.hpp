// The text form of a dataset graph, for command lines and logs:
//     range(100).map(square).shuffle(16, seed=3).batch(8)
//     zip(range(3), from_tensor_slices(["a", "b", "c"])).map(scale(factor=2.5))
// Sources are calls, transforms are method calls on their input; arguments are positional in the
// op schema's order (pipeline/graph/ops.hpp) or keyword=value; omitted ones take their defaults.
// Literals: ints (int64), floats (float32), true/false, "strings", [nested, lists], (tuples),
// and dtype casts int32(...), float64(...), bool(...). Functions: `name` or `name(k=v, ...)`.
// SHARD_HINT and AUTOTUNE are the named constants. Parsing yields exactly the graph the C++
// builder makes; to_text prints the canonical form (defaults omitted) that parses back to it.
#pragma once

#include <string>
#include <string_view>

#include "pipeline/graph/dataset.hpp"

namespace conveyor {

std::string to_text(const Dataset& dataset);

// Syntax and argument errors are invalid_argument with "column N: ..." (1-based).
Expected<Dataset> parse_dataset(std::string_view text);
// A single element literal, e.g. `(1, "a")` or `[1, 2, 3]`.
Expected<Element> parse_element(std::string_view text);

} // namespace conveyor
