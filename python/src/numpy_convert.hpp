// numpy <-> elements for the Python client: a received element's numeric tensors become
// read-only arrays over its storage (no copy), strings bytes; Python values become tensors (one
// copy). bfloat16, which numpy lacks, travels as uint16 arrays marked by dtype metadata
// (conveyor.bfloat16_dtype). Every call needs the GIL.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "pipeline/tensor/element.hpp"

namespace conveyor_python {

// The name of the capsule that owns a converted element (the arrays' base).
inline constexpr const char* kCapsuleName = "conveyor.Element";

// Element -> one array (one component) or a tuple of arrays. Takes the Element over.
pybind11::object element_to_python(conveyor::Element&& e);
// One Python value as a tensor; `what` names it in errors (invalid_argument via raise()).
conveyor::Tensor tensor_from_python(pybind11::handle value, const char* what);
// A tuple is a multi-component element; anything else one tensor (as tf.data's from_tensors).
conveyor::Element element_from_python(pybind11::handle value, const char* what);

} // namespace conveyor_python
