// The Dataset ops whose Python arguments need more than a plain conversion: the file sources'
// compression_type, interleave's tf.data options, ignore_errors, and private helpers
// `_padded_batch` / `_parse_example` that the package's dataset_ops.py calls after checking
// tf.data's argument forms.
#pragma once

#include <pybind11/pybind11.h>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor_python {

// Errors are raised as py_status.hpp's StatusError (the module's exception classes).
void bind_dataset_ops(pybind11::class_<conveyor::Dataset>& ds);

} // namespace conveyor_python
