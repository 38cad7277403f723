// Element sizes and ElementSpec printing/matching (Element::to_string lives in tensor_format.cpp).
#include "pipeline/tensor/element.hpp"

namespace conveyor {

std::size_t Element::byte_size() const {
  std::size_t n = 0;
  for (const Tensor& t : components)
    n += t.byte_size();
  return n;
}

std::string TensorSpec::to_string() const {
  std::string shape_text;
  if (unknown_rank) {
    shape_text = "<unknown>";
  } else {
    shape_text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (i > 0)
        shape_text += ", ";
      shape_text += shape[i] == kUnknownDim ? std::string{"None"} : std::to_string(shape[i]);
    }
    if (shape.size() == 1)
      shape_text += ",";
    shape_text += ")";
  }
  return "TensorSpec(shape=" + shape_text + ", dtype=" + dtype_name(dtype) + ")";
}

std::string ElementSpec::to_string() const {
  if (!structure || structure->flat_size() != components.size())
    return tuple_to_string(components);
  std::vector<std::string> leaves;
  leaves.reserve(components.size());
  for (const TensorSpec& c : components)
    leaves.push_back(c.to_string());
  return structure->format(leaves, '\'');
}

std::string to_string(const Element& e, const Structure& structure) {
  if (structure.flat_size() != e.size())
    return e.to_string();
  std::vector<std::string> leaves;
  leaves.reserve(e.size());
  for (const Tensor& t : e.components)
    leaves.push_back(t.to_string());
  return structure.format(leaves);
}

bool ElementSpec::is_compatible(const Element& e) const {
  if (e.size() != components.size())
    return false;
  for (std::size_t i = 0; i < components.size(); ++i) {
    const TensorSpec& spec = components[i];
    const Tensor& t = e[i];
    if (t.dtype() != spec.dtype)
      return false;
    if (spec.unknown_rank)
      continue;
    if (static_cast<std::size_t>(t.rank()) != spec.shape.size())
      return false;
    for (std::size_t d = 0; d < spec.shape.size(); ++d)
      if (spec.shape[d] != kUnknownDim && spec.shape[d] != t.shape()[d])
        return false;
  }
  return true;
}

ElementSpec spec_of(const Element& e) {
  ElementSpec spec;
  spec.components.reserve(e.size());
  for (const Tensor& t : e.components)
    spec.components.push_back(TensorSpec{t.dtype(), t.shape(), false});
  return spec;
}

} // namespace conveyor
