// The dispatch from a graph node to its kernel (one kernel per op, in kernels/<op>.cpp).
#include "pipeline/kernels/make_iterator.hpp"

#include <unordered_map>

#include "pipeline/kernels/kernel.hpp"
#include "pipeline/graph/ops.hpp"
#include "pipeline/sharding/multi_source.hpp"

namespace conveyor {

namespace kernels {

MakeResult make_kernel(const NodePtr& node, const KernelContext& kctx) {
  if (!node)
    return invalid_argument("cannot iterate a null dataset node");
  // Kernels read attributes without re-checking their kinds: the schema check makes that safe
  // even for graphs that never went through Dataset::validate().
  CONVEYOR_RETURN_IF_ERROR(check_node_schema(*node));

  using Factory = MakeResult (*)(const NodePtr&, const KernelContext&);
  static const std::unordered_map<std::string, Factory> factories = {
    {"range", make_range},
    {"from_tensors", make_from_tensors},
    {"from_tensor_slices", make_from_tensor_slices},
    {"list_files", make_list_files},
    {"text_lines", make_text_lines},
    {"tfrecord", make_tfrecord},
    {"load", make_load},
    {"csv", make_csv},
    {"webdataset", make_webdataset},
    {"source", make_source},
    {"map", make_map},
    {"filter", make_filter},
    {"flat_map", make_flat_map},
    {"interleave", make_interleave},
    {"batch", make_batch},
    {"unbatch", make_unbatch},
    {"shuffle", make_shuffle},
    {"repeat", make_repeat},
    {"take", make_take},
    {"skip", make_skip},
    {"shard", make_shard},
    {"enumerate", make_enumerate},
    {"zip", make_zip},
    {"concatenate", make_concatenate},
    {"random", make_random},
    {"prefetch", make_prefetch},
    {"cache", make_cache},
    {"padded_batch", make_padded_batch},
    {"parse_example", make_parse_example},
    {"ignore_errors", make_ignore_errors},
  };
  auto it = factories.find(node->op);
  if (it == factories.end())
    return unimplemented("no iterator for dataset op `" + node->op + "`");
  return it->second(node, kctx);
}

} // namespace kernels

namespace {

// Checks that every splittable source has its own provider: one left to another source would
// hand it that source's splits (indices of a range read as positions in a file list).
Status check_split_providers(const Node& node, const std::vector<SplitProvider*>& providers) {
  for (std::size_t i = 0; i < providers.size(); ++i)
    if (providers[i] == nullptr)
      return invalid_argument("split provider " + std::to_string(i) + " is null");
  const int64_t sources = splittable_source_count(node);
  const auto given = static_cast<int64_t>(providers.size());
  if (given != sources)
    return invalid_argument(std::to_string(given) + " split provider(s) for a dataset with " +
                            std::to_string(sources) +
                            " splittable source(s); DYNAMIC sharding needs one per source");
  return Status::OK();
}

kernels::KernelContext root_context(IteratorContext& ctx) {
  kernels::KernelContext kctx;
  kctx.ctx = ctx;
  if (kctx.ctx.functions == nullptr)
    kctx.ctx.functions = &FunctionRegistry::global();
  kctx.tree = std::make_shared<kernels::TreeState>();
  // A lone provider feeds the one splittable source (or nothing, in a pipeline without one).
  if (kctx.ctx.split_provider != nullptr)
    kctx.split_providers = {kctx.ctx.split_provider};
  return kctx;
}

} // namespace

Expected<std::unique_ptr<Iterator>> make_node_iterator(const NodePtr& node, IteratorContext& ctx) {
  if (ctx.split_provider != nullptr && node && splittable_source_count(*node) > 1)
    CONVEYOR_RETURN_IF_ERROR(check_split_providers(*node, {ctx.split_provider}));
  return kernels::make_kernel(node, root_context(ctx));
}

Expected<std::unique_ptr<Iterator>> make_split_iterator(const NodePtr& node, IteratorContext& ctx,
                                                        std::vector<SplitProvider*> providers) {
  if (!node)
    return invalid_argument("cannot iterate a null dataset node");
  if (ctx.split_provider != nullptr)
    return invalid_argument("make_split_iterator: the providers replace "
                            "IteratorContext::split_provider, which must be null");
  CONVEYOR_RETURN_IF_ERROR(check_split_providers(*node, providers));
  kernels::KernelContext kctx = root_context(ctx);
  kctx.split_providers = std::move(providers);
  return kernels::make_kernel(node, kctx);
}

} // namespace conveyor
