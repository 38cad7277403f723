// Tensors <-> numpy for the Python functions on the workers: the one place that knows which numpy
// dtype a DType is (by tf.data's dtype name, so a DType added to the tensor type is picked up
// here when numpy spells it the same way). Every call needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "conveyor/element.hpp"
#include "conveyor/tensor.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::python {

// A numeric tensor as a read-only numpy array over its storage (no copy; `owner` keeps the
// storage alive and becomes the array's base). A string scalar becomes `bytes`, a string tensor
// an object array of `bytes` (copied: numpy cannot share them), as tf.data's as_numpy_iterator.
pybind11::object tensor_to_numpy(const Tensor& tensor, pybind11::handle owner);

// An element's components as the positional arguments of a user function (tf.data unpacks a
// tuple element into arguments). The arrays share the element's storage through one capsule.
pybind11::tuple element_to_arguments(const Element& element);

// A Python value (numpy array, scalar, bytes/str, list) as a tensor: one copy of its data.
// `what` names the value in errors ("the result of map function `f`").
Expected<Tensor> tensor_from_python(pybind11::handle value, const std::string& what);

// The arguments a function was called with (element_to_arguments) and the element they view: a
// result component that *is* one of the arguments is that component again, not a copy. Hidden,
// as pybind11's types are.
struct __attribute__((visibility("hidden"))) Arguments {
  pybind11::tuple args;
  const Element* element = nullptr;
};

// A function's result as an element: a tuple is a multi-component element, anything else one
// component. With `passed` (a map's result, which the caller holds), a new array that nothing
// else refers to is adopted as the tensor's storage instead of copied.
Expected<Element> element_from_python(pybind11::handle value, const std::string& what,
                                      const Arguments* passed = nullptr);

} // namespace conveyor::python
