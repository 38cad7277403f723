#include "pipeline/kernels/dataset_function.hpp"

namespace conveyor::kernels {

Expected<DatasetFunction> DatasetFunction::find(const std::string& op, const FunctionRef& ref,
                                                const KernelContext& kctx) {
  auto def = find_function(op, ref, FunctionKind::dataset, kctx);
  if (!def.ok())
    return def.status();
  if (!(*def)->dataset)
    return internal_error("dataset function `" + ref.name + "` has no implementation");
  return DatasetFunction(op, ref.name, (*def)->dataset, kctx.functions().resolve_params(ref),
                         kctx.for_inner_dataset());
}

MakeResult DatasetFunction::make_iterator(const Element& element) const {
  auto dataset = fn_(element, params_);
  if (!dataset.ok())
    return dataset.status().with_context(op_ + " function `" + name_ + "`");
  KernelContext fresh = inner_;
  fresh.tree = std::make_shared<TreeState>(); // every returned dataset is new
  auto it = make_kernel(dataset->node(), fresh);
  if (!it.ok())
    return it.status().with_context("dataset returned by " + op_ + " function `" + name_ + "`");
  return it;
}

} // namespace conveyor::kernels
