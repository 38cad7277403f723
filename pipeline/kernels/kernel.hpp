// Private to pipeline/kernels/: what every kernel shares. One factory per op (defined in
// kernels/<op>.cpp), the context kernels pass down to their inputs, and small helpers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/graph.hpp"
#include "conveyor/iterator_state.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/runtime/memory_budget.hpp"
#include "pipeline/runtime/stop_flag.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::kernels {

// A memory cache shared by every iterator of one `cache("")` node within one iterator tree.
struct MemoryCache {
  std::mutex mu;
  bool complete = false;         // set once, after a full pass; `elements` is immutable after that
  std::vector<Element> elements; // the recorded pass
  std::unique_ptr<MemoryCharge> charge; // `elements` against the job's budget (released with it)
};

// State that outlives a single iterator but belongs to one top-level iterator (the tree that
// Dataset::make_iterator builds): how many times each node's iterator was created (a `repeat`
// re-creates its input; shuffle derives its per-iteration seed from that count), the random seed
// for unseeded nodes, and memory caches. Keyed by node: the tree keeps its nodes alive.
class TreeState {
public:
  // 0 for the first iterator of `node` in this tree, then 1, 2, ...
  int64_t take_iteration(const Node* node);
  // A random seed drawn once per node and tree (used when the op has no seed).
  uint64_t random_seed(const Node* node);
  std::shared_ptr<MemoryCache> memory_cache(const Node* node);

private:
  struct PerNode {
    int64_t iterations = 0;
    bool has_seed = false;
    uint64_t seed = 0;
    std::shared_ptr<MemoryCache> cache;
  };
  std::mutex mu_;
  std::map<const Node*, PerNode> nodes_;
};

struct KernelContext {
  IteratorContext ctx;
  std::shared_ptr<TreeState> tree;

  const FunctionRegistry& functions() const { return *ctx.functions; }
  // The providers of this subtree's splittable sources, in depth-first order
  // (pipeline/sharding/multi_source.hpp); the root moves a lone ctx.split_provider here. A
  // source's subtree has exactly one, or none.
  std::vector<SplitProvider*> split_providers;
  SplitProvider* split_provider() const {
    return split_providers.empty() ? nullptr : split_providers.front();
  }
  // The context for input `i` of a multi-input node (zip, concatenate): its own slice of the
  // split providers, in the depth-first order of split_provider.hpp.
  KernelContext for_input(const Node& node, std::size_t i) const;
  const PathPolicy* paths() const { return ctx.paths; }
  MemoryBudget* memory() const { return ctx.memory; }
  StopCheck stop() const { return StopCheck{ctx.stop}; }
  const std::shared_ptr<ExecutorGroup>& executor_group() const { return ctx.executor_group; }
  // The context for a dataset a function returned (flat_map, interleave): same functions, no split
  // provider, and a fresh tree (each such dataset is new, as in tf.data).
  KernelContext for_inner_dataset() const;
};

using IteratorPtr = std::unique_ptr<Iterator>;
using MakeResult = Expected<IteratorPtr>;

// Checks the node's schema, then dispatches on node->op.
MakeResult make_kernel(const NodePtr& node, const KernelContext& kctx);

// --- one factory per op
MakeResult make_range(const NodePtr& node, const KernelContext& kctx);
MakeResult make_from_tensors(const NodePtr& node, const KernelContext& kctx);
MakeResult make_from_tensor_slices(const NodePtr& node, const KernelContext& kctx);
MakeResult make_list_files(const NodePtr& node, const KernelContext& kctx);
MakeResult make_text_lines(const NodePtr& node, const KernelContext& kctx);
MakeResult make_tfrecord(const NodePtr& node, const KernelContext& kctx);
MakeResult make_load(const NodePtr& node, const KernelContext& kctx);
MakeResult make_csv(const NodePtr& node, const KernelContext& kctx);
MakeResult make_webdataset(const NodePtr& node, const KernelContext& kctx);
MakeResult make_source(const NodePtr& node, const KernelContext& kctx);
MakeResult make_map(const NodePtr& node, const KernelContext& kctx);
MakeResult make_filter(const NodePtr& node, const KernelContext& kctx);
MakeResult make_flat_map(const NodePtr& node, const KernelContext& kctx);
MakeResult make_interleave(const NodePtr& node, const KernelContext& kctx);
MakeResult make_batch(const NodePtr& node, const KernelContext& kctx);
MakeResult make_unbatch(const NodePtr& node, const KernelContext& kctx);
MakeResult make_shuffle(const NodePtr& node, const KernelContext& kctx);
MakeResult make_repeat(const NodePtr& node, const KernelContext& kctx);
MakeResult make_take(const NodePtr& node, const KernelContext& kctx);
MakeResult make_skip(const NodePtr& node, const KernelContext& kctx);
MakeResult make_shard(const NodePtr& node, const KernelContext& kctx);
MakeResult make_enumerate(const NodePtr& node, const KernelContext& kctx);
MakeResult make_zip(const NodePtr& node, const KernelContext& kctx);
MakeResult make_concatenate(const NodePtr& node, const KernelContext& kctx);
MakeResult make_random(const NodePtr& node, const KernelContext& kctx);
MakeResult make_prefetch(const NodePtr& node, const KernelContext& kctx);
MakeResult make_cache(const NodePtr& node, const KernelContext& kctx);
MakeResult make_padded_batch(const NodePtr& node, const KernelContext& kctx);
MakeResult make_parse_example(const NodePtr& node, const KernelContext& kctx);
MakeResult make_ignore_errors(const NodePtr& node, const KernelContext& kctx);

// --- helpers

// The iterator of the node's only input.
MakeResult make_input(const NodePtr& node, const KernelContext& kctx);

// The function `ref` names, checked to be of `kind` (errors name the op and the function).
Expected<const FunctionDef*> find_function(const std::string& op, const FunctionRef& ref,
                                           FunctionKind kind, const KernelContext& kctx);

// "[2, 3]" (for error messages).
std::string shape_string(const Shape& shape);

// Mixes a seed and an iteration number into a well-spread 64-bit seed (splitmix64).
uint64_t mix_seed(uint64_t seed, uint64_t iteration);

// The seed a shuffling iterator of `node` uses for this creation: `seed` (or a per-tree random one
// when kNoSeed) mixed with the iteration number when `reshuffle_each_iteration`, else fixed.
uint64_t iteration_seed(const Node* node, int64_t seed, bool reshuffle_each_iteration,
                        const KernelContext& kctx);

// A uniform integer in [0, n) from a 64-bit engine, identical on every platform (the standard
// distributions are not).
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n; // reject the biased tail
  uint64_t v = rng();
  while (v >= limit)
    v = rng();
  return v % n;
}

} // namespace conveyor::kernels
