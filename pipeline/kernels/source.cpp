// source(fn): the iterator a registered source function returns.
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

MakeResult make_source(const NodePtr& node, const KernelContext& kctx) {
  const FunctionRef& ref = node->function_attr("fn");
  auto def = find_function("source", ref, FunctionKind::source, kctx);
  if (!def.ok())
    return def.status();
  if (!(*def)->source)
    return internal_error("source function `" + ref.name + "` has no implementation");
  auto it = (*def)->source(kctx.functions().resolve_params(ref));
  if (!it.ok())
    return it.status().with_context("source function `" + ref.name + "`");
  if (!*it)
    return internal_error("source function `" + ref.name + "` returned no iterator");
  return std::move(*it);
}

} // namespace conveyor::kernels
