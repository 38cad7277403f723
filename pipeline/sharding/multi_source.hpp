// DYNAMIC sharding of a dataset with several splittable sources (zip, concatenate): tf.data gives
// each source its own split provider. Index i belongs to the i-th source of a depth-first walk of
// the dataset's inputs, first input first (zip(a, b): a's sources, then b's) — the walk of
// split_provider.cpp, which stops at a source and does not enter functions (flat_map's datasets
// are not part of the graph). make_split_iterator (pipeline/kernels/make_iterator.hpp) takes them
// in that order. Each provider hands out each split of each of its source's epochs once, as the
// single-source provider does. A DYNAMIC job of the service keeps them all (dispatcher/job_core.hpp)
// and its tasks ask per source (get_splits.source).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/sharding/split_provider.hpp"

namespace conveyor {

// One provider per splittable source; invalid_argument when the dataset has none, or naming the
// source whose splits cannot be listed.
Expected<std::vector<std::unique_ptr<SplitProvider>>>
make_split_providers(const Dataset& dataset, const SplitOptions& options = {});

// How many splittable sources the walk finds under `node` (a node reachable twice, as in
// zip(d, d), is iterated twice and counts twice). The kernels give each input of zip and
// concatenate its own slice of the providers by it.
int64_t splittable_source_count(const Node& node);

// num_epochs for each source, in the order of make_split_providers.
std::vector<int64_t> num_epochs_per_source(const Dataset& dataset);

} // namespace conveyor
