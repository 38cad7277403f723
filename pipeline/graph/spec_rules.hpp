// Element-spec rules that both Dataset::validate and Dataset::element_spec apply.
#pragma once

#include "conveyor/element.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

// The spec of a.concatenate(b), as tf.data's most specific compatible type: the same component
// count and dtypes are required ("Incompatible dataset elements" otherwise, tf.data's wording);
// dimensions that differ become unknown, and ranks that differ an unknown rank. An unknown spec
// (no components) on either side makes the result unknown.
Expected<ElementSpec> concatenate_spec(const ElementSpec& a, const ElementSpec& b);

} // namespace conveyor
