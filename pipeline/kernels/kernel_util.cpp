// Shared kernel helpers: the per-tree state, function lookup and seed derivation.
#include "pipeline/kernels/kernel.hpp"

#include <algorithm>

#include "pipeline/sharding/multi_source.hpp"

namespace conveyor::kernels {

int64_t TreeState::take_iteration(const Node* node) {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_[node].iterations++;
}

uint64_t TreeState::random_seed(const Node* node) {
  std::lock_guard<std::mutex> lock(mu_);
  PerNode& state = nodes_[node];
  if (!state.has_seed) {
    std::random_device device;
    state.seed = (static_cast<uint64_t>(device()) << 32) ^ device();
    state.has_seed = true;
  }
  return state.seed;
}

std::shared_ptr<MemoryCache> TreeState::memory_cache(const Node* node) {
  std::lock_guard<std::mutex> lock(mu_);
  PerNode& state = nodes_[node];
  if (!state.cache)
    state.cache = std::make_shared<MemoryCache>();
  return state.cache;
}

KernelContext KernelContext::for_inner_dataset() const {
  KernelContext inner;
  inner.ctx.functions = ctx.functions;
  inner.ctx.split_provider = nullptr;
  inner.ctx.paths = ctx.paths;                   // a function's dataset is confined like its parent
  inner.ctx.memory = ctx.memory;                 // and counts against the same budget
  inner.ctx.executor_group = ctx.executor_group; // and the same share of the executor
  inner.ctx.stop = ctx.stop;                     // and stops with it
  inner.tree = std::make_shared<TreeState>();
  return inner;
}

KernelContext KernelContext::for_input(const Node& node, std::size_t i) const {
  KernelContext input = *this;
  if (split_providers.empty())
    return input;
  std::size_t first = 0;
  for (std::size_t j = 0; j < i; ++j)
    if (node.inputs[j])
      first += static_cast<std::size_t>(splittable_source_count(*node.inputs[j]));
  const std::size_t count =
    node.inputs[i] ? static_cast<std::size_t>(splittable_source_count(*node.inputs[i])) : 0;
  // The root checked that there is one provider per source, so the slice is in range; the
  // clamp keeps a broken caller from reading past the vector.
  first = std::min(first, split_providers.size());
  const auto begin = split_providers.begin() + static_cast<std::ptrdiff_t>(first);
  input.split_providers.assign(
    begin, begin + static_cast<std::ptrdiff_t>(std::min(count, split_providers.size() - first)));
  return input;
}

MakeResult make_input(const NodePtr& node, const KernelContext& kctx) {
  return make_kernel(node->inputs.at(0), kctx);
}

Expected<const FunctionDef*> find_function(const std::string& op, const FunctionRef& ref,
                                           FunctionKind kind, const KernelContext& kctx) {
  Status checked = kctx.functions().check(ref, kind);
  if (!checked.ok())
    return checked.with_context("`" + op + "`");
  const FunctionDef* def = kctx.functions().find(ref.name);
  if (def == nullptr) // check() passed, so only a concurrent change could get here
    return not_found("`" + op + "`: unknown function `" + ref.name + "`");
  return def;
}

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t mix_seed(uint64_t seed, uint64_t iteration) {
  auto splitmix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  return splitmix(seed ^ splitmix(iteration));
}

uint64_t iteration_seed(const Node* node, int64_t seed, bool reshuffle_each_iteration,
                        const KernelContext& kctx) {
  const int64_t iteration = kctx.tree->take_iteration(node);
  const uint64_t base =
    seed == kNoSeed ? kctx.tree->random_seed(node) : static_cast<uint64_t>(seed);
  return mix_seed(base, reshuffle_each_iteration ? static_cast<uint64_t>(iteration) : 0);
}

} // namespace conveyor::kernels
