// tf.data's ExternalStatePolicy for a dataset registered with the service: what to do when the
// definition holds an op whose state lives outside the graph, so the workers cannot reproduce
// it (tf.data: a random seed generator resource). In conveyor those ops are `random` (each
// worker's iterator draws its own seed when none is given, and even with a seed every worker
// produces the same sequence independently of the others) and any op calling a Python function
// (map/filter/flat_map with `python*`): its code is opaque, so it counts as stateful, as tf.data
// counts py_function.
#pragma once

#include <string>
#include <string_view>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

enum class ExternalStatePolicy { warn, ignore, fail };

// "WARN", "IGNORE" or "FAIL" (tf.data's names, any case); invalid_argument naming them otherwise.
Expected<ExternalStatePolicy> external_state_policy_from_string(std::string_view name);

// The text of the first op with external state in `dataset` ("" when none).
std::string first_stateful_op(const Dataset& dataset);

// OK when the dataset has no op with external state or the policy is IGNORE; under WARN also
// OK, with the warning text in `*warning`; under FAIL failed_precondition, in tf.data's words
// where it has them ("... depends on random seed generator resource."). The first such op found
// is named.
Status check_external_state(const Dataset& dataset, ExternalStatePolicy policy,
                            std::string* warning);

} // namespace conveyor
