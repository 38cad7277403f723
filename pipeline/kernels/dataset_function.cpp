#include "pipeline/kernels/dataset_function.hpp"

#include "pipeline/functions/file_source_functions.hpp"

namespace conveyor::kernels {

Expected<DatasetFunction> DatasetFunction::find(const std::string& op, const FunctionRef& ref,
                                                const KernelContext& kctx) {
  if (is_file_source_function(ref.name)) { // a source op, not a registered function
    CONVEYOR_RETURN_IF_ERROR(check_file_source_function("`" + op + "`", ref));
    DatasetFn fn = [ref](const Element& element, const Params&) {
      return file_source_dataset(ref, element);
    };
    return DatasetFunction(op, ref.name, std::move(fn), ref.params, kctx.for_inner_dataset());
  }
  auto def = find_function(op, ref, FunctionKind::dataset, kctx);
  if (!def.ok())
    return def.status();
  if (!(*def)->dataset)
    return internal_error("dataset function `" + ref.name + "` has no implementation");
  return DatasetFunction(op, ref.name, (*def)->dataset, kctx.functions().resolve_params(ref),
                         kctx.for_inner_dataset());
}

MakeResult DatasetFunction::make_iterator(const Element& element, int64_t index) const {
  auto dataset = fn_(element, params_);
  if (!dataset.ok())
    return dataset.status().with_context(
      op_ + " function `" + name_ + "`" +
      (index >= 0 ? " on element " + std::to_string(index) : std::string{}));
  KernelContext fresh = inner_;
  fresh.tree = std::make_shared<TreeState>(); // every returned dataset is new
  auto it = make_kernel(dataset->node(), fresh);
  if (!it.ok())
    return it.status().with_context("dataset returned by " + op_ + " function `" + name_ + "`");
  return it;
}

} // namespace conveyor::kernels
