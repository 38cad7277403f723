#include "pipeline/graph/external_state.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <variant>
#include <vector>

#include "pipeline/functions/python_functions.hpp"
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

namespace {

// The op with external state, and why it has it in tf.data's words where tf.data has them.
struct StatefulOp {
  std::string text;
  std::string why;
  std::string per_worker; // what running it on each worker means
};

std::optional<StatefulOp> stateful_node(const NodePtr& n) {
  if (n->op == "random")
    return StatefulOp{to_text(Dataset{n}), " depends on random seed generator resource.",
                      " Each worker runs it with its own state: a seed gives every worker the "
                      "same sequence, no seed a different one"};
  for (const auto& [key, value] : n->attrs) {
    const auto* fn = std::get_if<FunctionRef>(&value);
    if (fn == nullptr || !is_python_function(fn->name))
      continue;
    // Named by op and qualname: the text form of the node would spell out its input chain and
    // the function's pickle.
    auto qualname = fn->params.find("qualname");
    const std::string* name =
      qualname == fn->params.end() ? nullptr : std::get_if<std::string>(&qualname->second);
    return StatefulOp{"`" + n->op + "` with the Python function" +
                        (name && !name->empty() ? " `" + *name + "`" : std::string()),
                      " is stateful: a Python function is opaque to the service, which treats "
                      "it as tf.data treats py_function.",
                      " Each worker runs its own copy: what the function keeps between calls "
                      "(counters, caches, random generators) is not shared between workers"};
  }
  return std::nullopt;
}

std::optional<StatefulOp> first_stateful(const Dataset& dataset) {
  // Iterative with a visited set, as Dataset::validate: deep graphs, shared sub-graphs.
  std::vector<NodePtr> pending{dataset.node()};
  std::set<const Node*> seen;
  while (!pending.empty()) {
    NodePtr n = pending.back();
    pending.pop_back();
    if (!n || !seen.insert(n.get()).second)
      continue;
    if (auto found = stateful_node(n))
      return found;
    for (const NodePtr& in : n->inputs)
      pending.push_back(in);
  }
  return std::nullopt;
}

} // namespace

std::string first_stateful_op(const Dataset& dataset) {
  auto found = first_stateful(dataset);
  return found ? found->text : "";
}

Status check_external_state(const Dataset& dataset, ExternalStatePolicy policy,
                            std::string* warning) {
  if (policy == ExternalStatePolicy::ignore)
    return Status::OK();
  const auto found = first_stateful(dataset);
  if (!found)
    return Status::OK();
  const std::string what = found->text + found->why;
  if (policy == ExternalStatePolicy::fail)
    return failed_precondition(what +
                               " The dataset has external state, which the service's workers do "
                               "not share (external_state_policy FAIL).");
  if (warning != nullptr)
    *warning = what + found->per_worker + " (external_state_policy WARN; IGNORE silences this).";
  return Status::OK();
}

} // namespace conveyor
