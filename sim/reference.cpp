#include "sim/reference.hpp"

#include <set>
#include <string>

#include "dispatcher/job_core.hpp"
#include "pipeline/graph/graph.hpp"
#include "pipeline/sharding/multi_source.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::sim {

namespace {

// `concatenation`: below a `concatenate` (several sources), whose inputs each must reach a
// splittable source (an input without one is read whole by every task).
bool split_transparent_from(const conveyor::Node* n, bool concatenation) {
  static const std::set<std::string> per_element = {
    "map", "filter", "flat_map", "interleave", "unbatch", "shuffle", "prefetch", "repeat", "cache"};
  while (n != nullptr) {
    if (n->inputs.empty())
      return !concatenation || splittable_source_count(*n) == 1;
    if (n->op == "concatenate") { // each element of each input once: the multisets add up
      for (const auto& input : n->inputs)
        if (!split_transparent_from(input.get(), true))
          return false;
      return true;
    }
    if (n->inputs.size() != 1 || per_element.count(n->op) == 0)
      return false;
    n = n->inputs[0].get();
  }
  return true;
}

bool split_transparent(const Dataset& dataset) {
  return dataset.node() &&
         split_transparent_from(dataset.node().get(), splittable_source_count(*dataset.node()) > 1);
}

bool has_take(const conveyor::Node& n) {
  if (n.op == "take")
    return true;
  for (const auto& in : n.inputs)
    if (has_take(*in))
      return true;
  return false;
}

// Splits a provider hands out over `epochs` epochs; -1 on an error.
int64_t count_epochs(SplitProvider* provider, int64_t epochs) {
  int64_t n = 0;
  for (int64_t e = 0; e < epochs; ++e) {
    for (int64_t guard = 0; guard < 100000000; ++guard) {
      Split split;
      bool end = false;
      if (!provider->get_next(split, end).ok())
        return -1;
      if (end)
        break;
      ++n;
    }
  }
  return n;
}

} // namespace

int64_t count_splits(const Dataset& dataset, int64_t split_size) {
  if (has_take(*dataset.node()))
    return -1;
  SplitOptions options;
  options.range_split_size = split_size;
  if (splittable_source_count(*dataset.node()) > 1) {
    // A concatenation reads every split of every source; so does a zip of sources with as many
    // splits each (its tasks ask each source in turn), but not the longer input's surplus.
    const bool concatenation = actors::is_per_split_concatenation(dataset);
    auto providers = make_split_providers(dataset, options);
    auto epochs = num_epochs_per_source(dataset);
    if (!providers.ok() || epochs.size() != providers->size())
      return -1;
    int64_t total = 0;
    std::set<int64_t> sizes;
    for (std::size_t i = 0; i < epochs.size(); ++i) {
      int64_t n = epochs[i] < 0 ? -1 : count_epochs((*providers)[i].get(), epochs[i]);
      if (n < 0)
        return -1;
      total += n;
      sizes.insert(n);
    }
    return concatenation || sizes.size() == 1 ? total : -1;
  }
  auto provider = make_split_provider(dataset, options);
  auto epochs = num_epochs(dataset);
  if (!provider.ok() || epochs < 0)
    return -1;
  return count_epochs(provider->get(), epochs);
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
  ref.per_split = actors::is_per_split(dataset) || actors::is_per_split_concatenation(dataset);
  auto second = dataset.collect(kMaxElements + 1);
  ref.ordered = second.ok() && *second == *first;
  ref.elements = std::move(*first);
  return ref;
}

} // namespace conveyor::sim
