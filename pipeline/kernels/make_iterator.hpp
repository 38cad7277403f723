// The seam between the dataset graph and the iterator implementations in pipeline/kernels/:
// Dataset::make_iterator calls make_node_iterator on its output node, and each kernel calls it
// for its inputs. One kernel per op lives in pipeline/kernels/<op>.cpp.
#pragma once

#include <memory>
#include <vector>

#include "pipeline/graph/graph.hpp"
#include "pipeline/runtime/iterator.hpp"

namespace conveyor {

// Precondition: ctx.functions is set and the graph passed Dataset::validate().
Expected<std::unique_ptr<Iterator>> make_node_iterator(const NodePtr& node, IteratorContext& ctx);

// DYNAMIC sharding of several sources: `providers[i]` feeds the i-th splittable source
// (pipeline/sharding/multi_source.hpp), one per source (invalid_argument otherwise, naming the
// counts); ctx.split_provider must be null. The providers outlive the iterator.
Expected<std::unique_ptr<Iterator>> make_split_iterator(const NodePtr& node, IteratorContext& ctx,
                                                        std::vector<SplitProvider*> providers);

} // namespace conveyor
