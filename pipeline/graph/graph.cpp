#include "pipeline/graph/graph.hpp"

namespace conveyor {

bool graphs_equal(const Node& a, const Node& b) {
  // Shared sub-graphs (zip of the same input twice, or a dataset compared with itself) are
  // equal without walking them again.
  if (&a == &b)
    return true;
  if (a.op != b.op || a.attrs != b.attrs || a.inputs.size() != b.inputs.size())
    return false;
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    const NodePtr& x = a.inputs[i];
    const NodePtr& y = b.inputs[i];
    if (!x || !y) {
      if (x != y)
        return false;
      continue;
    }
    if (!graphs_equal(*x, *y))
      return false;
  }
  return true;
}

} // namespace conveyor
