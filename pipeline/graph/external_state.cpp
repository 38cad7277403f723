#include "pipeline/graph/external_state.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include "pipeline/graph/text_form.hpp"

namespace conveyor {

Expected<ExternalStatePolicy> external_state_policy_from_string(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "WARN")
    return ExternalStatePolicy::warn;
  if (upper == "IGNORE")
    return ExternalStatePolicy::ignore;
  if (upper == "FAIL")
    return ExternalStatePolicy::fail;
  return invalid_argument("Invalid `external_state_policy` argument: \"" + std::string(name) +
                          "\". Must be one of [\"WARN\", \"IGNORE\", \"FAIL\"].");
}

std::string first_stateful_op(const Dataset& dataset) {
  // Iterative with a visited set, as Dataset::validate: deep graphs, shared sub-graphs.
  std::vector<NodePtr> pending{dataset.node()};
  std::set<const Node*> seen;
  while (!pending.empty()) {
    NodePtr n = pending.back();
    pending.pop_back();
    if (!n || !seen.insert(n.get()).second)
      continue;
    if (n->op == "random")
      return to_text(Dataset{n});
    for (const NodePtr& in : n->inputs)
      pending.push_back(in);
  }
  return "";
}

Status check_external_state(const Dataset& dataset, ExternalStatePolicy policy,
                            std::string* warning) {
  if (policy == ExternalStatePolicy::ignore)
    return Status::OK();
  const std::string op = first_stateful_op(dataset);
  if (op.empty())
    return Status::OK();
  const std::string what = op + " depends on random seed generator resource.";
  if (policy == ExternalStatePolicy::fail)
    return failed_precondition(what +
                               " The dataset has external state, which the service's workers do "
                               "not share (external_state_policy FAIL).");
  if (warning != nullptr)
    *warning = what + " Each worker runs it with its own state: a seed gives every worker the "
                      "same sequence, no seed a different one (external_state_policy WARN; "
                      "IGNORE silences this).";
  return Status::OK();
}

} // namespace conveyor
