// Which numpy dtype each DType is, and back: the one table for the Python client and the Python
// functions on the workers. bfloat16 has no numpy dtype: its tensors are uint16 arrays of the bit
// patterns whose dtype carries the metadata {"conveyor_dtype": "bfloat16"}
// (conveyor.bfloat16_dtype); ml_dtypes' bfloat16 is read as bfloat16 too. Every call needs the GIL.
#pragma once

#include <pybind11/numpy.h>

#include <optional>
#include <string>

#include "conveyor/tensor.hpp"

namespace conveyor::python {

// The numpy dtype of `d` (object for strings); made once per DType.
const pybind11::dtype& numpy_dtype(DType d);
// The DType of a numpy dtype; nullopt for one conveyor has no dtype for (strings are not
// numpy dtypes here: object/bytes/str arrays are the callers' to convert).
std::optional<DType> dtype_of_numpy(const pybind11::dtype& dt);

// An object/bytes/str array (dtype kind O, S or U) as a string tensor of its shape: bytes as
// they are, str as UTF-8; any other item is invalid_argument naming `what` and the item's type.
Expected<Tensor> string_tensor_from_numpy(const pybind11::array& arr, const std::string& what);

} // namespace conveyor::python
