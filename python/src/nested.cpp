#include "nested.hpp"

#include "pipeline/io/snapshot_files.hpp"
#include "py_status.hpp"

namespace py = pybind11;
using namespace conveyor;

namespace conveyor_python {

std::shared_ptr<const Structure> structure_of(const Dataset& d) {
  auto spec = d.element_spec();
  if (!spec.ok() || !spec->structure)
    return nullptr;
  return std::make_shared<const Structure>(*spec->structure);
}

// from_tensor_slices: every leaf has a dimension 0 of the same size, named by its path.
void check_slice_lengths(const NestedElement& nested) {
  const Element& e = nested.element;
  const auto name = [&](std::size_t i) {
    return nested.paths[i].empty() ? std::string{"the tensor"} : "component " + nested.paths[i];
  };
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (e[i].rank() < 1)
      raise(invalid_argument("from_tensor_slices: " + name(i) +
                             " is a scalar; slicing needs rank >= 1"));
    if (e[i].shape()[0] != e[0].shape()[0])
      raise(invalid_argument("from_tensor_slices: all components must have the same size in "
                             "dimension 0; " +
                             name(i) + " has " + std::to_string(e[i].shape()[0]) + ", " + name(0) +
                             " has " + std::to_string(e[0].shape()[0])));
  }
}

py::object trace_sample(const Dataset& input) {
  auto spec = input.element_spec();
  if (!spec.ok() || spec->components.empty())
    return py::none();
  Element sample;
  for (const TensorSpec& c : spec->components) {
    Shape shape;
    if (!c.unknown_rank)
      for (int64_t d : c.shape)
        shape.push_back(d == kUnknownDim ? 1 : d);
    sample.components.emplace_back(c.dtype, std::move(shape));
  }
  const Structure structure = spec->structure_or_flat();
  return element_to_python(std::move(sample), &structure);
}

std::string spec_of_result(py::object result, const std::string& name) {
  const std::string what = "the result of Python function `" + name + "`";
  NestedElement nested = nested_from_python(result, what.c_str());
  ElementSpec spec = spec_of(nested.element);
  for (TensorSpec& c : spec.components) {
    c.unknown_rank = true;
    c.shape.clear();
  }
  if (!nested.structure.is_flat())
    spec.structure = nested.structure;
  return snapshot::format_spec_components(spec);
}

} // namespace conveyor_python
