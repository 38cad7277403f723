// Calling a DatasetFn (flat_map, interleave) and iterating the dataset it returns.
#pragma once

#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

class DatasetFunction {
public:
  // Looks up `ref` as a dataset function for `op`.
  static Expected<DatasetFunction> find(const std::string& op, const FunctionRef& ref,
                                        const KernelContext& kctx);

  // An iterator over fn(element), with the same functions but no split provider. `index` (the
  // element's place in the op's input, counted from 0; -1: not counted) goes into errors.
  MakeResult make_iterator(const Element& element, int64_t index = -1) const;

private:
  DatasetFunction(std::string op, std::string name, DatasetFn fn, Params params,
                  KernelContext inner)
    : op_(std::move(op)), name_(std::move(name)), fn_(std::move(fn)), params_(std::move(params)),
      inner_(std::move(inner)) {}

  std::string op_;
  std::string name_;
  DatasetFn fn_;
  Params params_;
  KernelContext inner_;
};

} // namespace conveyor::kernels
