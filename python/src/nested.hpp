// Nested elements in the Python client: the structure a dataset's elements nest by (its
// element_spec), the checks from_tensor_slices makes with paths, and the sample element and
// result spec with which a Python map function is traced once in the client.
#pragma once

#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include "conveyor/dataset.hpp"
#include "numpy_convert.hpp"

namespace conveyor_python {

// How a dataset's elements nest, from its element_spec; null (flat) when they are flat or the
// spec cannot be computed here (e.g. a function only the workers load).
std::shared_ptr<const conveyor::Structure> structure_of(const conveyor::Dataset& d);

// from_tensor_slices: every leaf has a dimension 0 of the same size; errors name the paths.
void check_slice_lengths(const NestedElement& nested);

// A sample element of `input`: zeros (empty strings) of its element spec, unknown dimensions 1
// and unknown ranks scalars, nested as the spec says; None when the spec is unknown.
pybind11::object trace_sample(const conveyor::Dataset& input);

// A traced function's result as the `spec` parameter of the `python` map function: its dtypes
// (ranks unknown: the trace ran on a sample) and its structure, in snapshot_files.hpp's text.
std::string spec_of_result(pybind11::object result, const std::string& name);

} // namespace conveyor_python
