// numpy <-> elements for the Python client: a received element's numeric tensors become
// read-only arrays over its storage (no copy), strings bytes; Python values become tensors (one
// copy). bfloat16, which numpy lacks, travels as uint16 arrays marked by dtype metadata
// (conveyor.bfloat16_dtype). Every call needs the GIL.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "pipeline/tensor/element.hpp"

namespace conveyor_python {

// The type of the object that owns a converted element (the base of its arrays).
PyTypeObject* element_owner_type();

// Element -> one array (one component) or a tuple of arrays; with a structure, nested as it says
// (tuples as tuples, dicts as dicts). Takes the Element over.
pybind11::object element_to_python(conveyor::Element&& e,
                                   const conveyor::Structure* structure = nullptr);

// A Python value flattened as tf.nest does: its leaves (flatten order) and how they nest, with
// each leaf's path (`["image"][1]`, "" for a lone tensor) for error messages.
struct NestedElement {
  conveyor::Element element;
  conveyor::Structure structure;
  std::vector<std::string> paths;
};
// A tuple is a structure, a dict (string keys: else ValueError naming the path) a structure in
// sorted key order, anything else one tensor (a list is a tensor, as numpy and tf.data read it).
// `share_received`: an array that is a whole tensor of a received element (its base the
// element's owner) becomes that tensor, sharing its storage (a trainer-side map's result);
// otherwise every leaf is copied.
NestedElement nested_from_python(pybind11::handle value, const char* what,
                                 bool share_received = false);
// One Python value as a tensor; `what` names it in errors (invalid_argument via raise()).
conveyor::Tensor tensor_from_python(pybind11::handle value, const char* what);
// A tuple is a multi-component element; anything else one tensor (as tf.data's from_tensors).
conveyor::Element element_from_python(pybind11::handle value, const char* what);

} // namespace conveyor_python
