// The seam between the dataset graph and the iterator implementations in pipeline/kernels/:
// Dataset::make_iterator calls make_node_iterator on its output node, and each kernel calls it
// for its inputs. One kernel per op lives in pipeline/kernels/<op>.cpp.
#pragma once

#include <memory>

#include "pipeline/graph/graph.hpp"
#include "pipeline/runtime/iterator.hpp"

namespace conveyor {

// Precondition: ctx.functions is set and the graph passed Dataset::validate().
Expected<std::unique_ptr<Iterator>> make_node_iterator(const NodePtr& node, IteratorContext& ctx);

} // namespace conveyor
