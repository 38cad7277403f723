#include "sim/reference.hpp"

#include <set>
#include <string>

#include "dispatcher/job_core.hpp"
#include "pipeline/graph/graph.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::sim {

namespace {

bool split_transparent(const Dataset& dataset) {
  static const std::set<std::string> per_element = {
    "map", "filter", "flat_map", "interleave", "unbatch", "shuffle", "prefetch", "repeat", "cache"};
  const conveyor::Node* n = dataset.node().get();
  while (n != nullptr) {
    if (n->inputs.empty())
      return true; // the source
    if (n->inputs.size() != 1 || per_element.count(n->op) == 0)
      return false;
    n = n->inputs[0].get();
  }
  return true;
}

bool has_take(const conveyor::Node& n) {
  if (n.op == "take")
    return true;
  for (const auto& in : n.inputs)
    if (has_take(*in))
      return true;
  return false;
}

} // namespace

int64_t count_splits(const Dataset& dataset, int64_t split_size) {
  if (has_take(*dataset.node()))
    return -1;
  SplitOptions options;
  options.range_split_size = split_size;
  auto provider = make_split_provider(dataset, options);
  auto epochs = num_epochs(dataset);
  if (!provider.ok() || epochs < 0)
    return -1;
  int64_t n = 0;
  for (int64_t e = 0; e < epochs; ++e) {
    for (int64_t guard = 0; guard < 100000000; ++guard) {
      Split split;
      bool end = false;
      if (!(*provider)->get_next(split, end).ok())
        return -1;
      if (end)
        break;
      ++n;
    }
  }
  return n;
}

Expected<Reference> make_reference(const Dataset& dataset) {
  constexpr int64_t kMaxElements = 1000000;
  if (dataset.cardinality() == kInfiniteCardinality)
    return invalid_argument("the simulator needs a finite dataset; this one repeats forever");
  auto first = dataset.collect(kMaxElements + 1);
  if (!first.ok())
    return first.status().with_context("running the dataset locally for the simulator's reference");
  if (static_cast<int64_t>(first->size()) > kMaxElements)
    return invalid_argument("the simulator needs a finite dataset of at most " +
                            std::to_string(kMaxElements) + " elements");
  Reference ref;
  ref.split_transparent = split_transparent(dataset);
  ref.per_split = actors::is_per_split(dataset);
  auto second = dataset.collect(kMaxElements + 1);
  ref.ordered = second.ok() && *second == *first;
  ref.elements = std::move(*first);
  return ref;
}

} // namespace conveyor::sim
